"""How often the ledger's drift test raises a false alarm, and how often it finds a real fall.

Each simulated history is one pair and content kind: a baseline of BASELINE_DRAFTS drafts,
then 3,000 more, in replies of 20 to 150 drafts. A reply's acceptance varies with its prompt:
it is drawn from a beta distribution around the pair's acceptance (standard deviation
--spread), then each draft is kept with that chance. A stable history keeps its acceptance; a
falling one drops by 10 points after the baseline. The test is engine.ledger.drift's own
(cusum_step, THRESHOLD, REPLY_CAP), run reply by reply as the ledger runs it.

    python benchmarks/ledger_false_alarms.py [--histories 1000] [--seed 1]
"""

from __future__ import annotations

import argparse

import numpy as np

from engine.ledger.drift import BASELINE_DRAFTS, FALL, FALSE_ALARM_RATE, THRESHOLD, Tally, cusum_step, reply_correlation

AFTER_DRAFTS = 3000


def reply(rng: np.random.Generator, p: float, spread: float) -> tuple[int, int]:
    n = int(rng.integers(20, 151))
    if spread <= 0:
        return n, int(rng.binomial(n, p))
    k = (1 - p) * p / spread**2 - 1  # beta concentration giving that spread
    q = rng.beta(p * k, (1 - p) * k)
    return n, int(rng.binomial(n, q))


def history(rng: np.random.Generator, p: float, fall: float, within: int, spread: float) -> bool:
    """Whether the test raises the warning: within `within` drafts after the baseline."""
    baseline: list[Tally] = []
    while sum(t.drafted for t in baseline) < BASELINE_DRAFTS:
        baseline.append(Tally(*reply(rng, p, spread)))
    p0 = sum(t.accepted for t in baseline) / sum(t.drafted for t in baseline)
    rho = reply_correlation(baseline)
    statistic, seen = 0.0, 0
    while seen < within:
        n, a = reply(rng, p - fall, spread)
        seen += n
        statistic = cusum_step(statistic, n, a, p0, rho)
        if statistic >= THRESHOLD:
            return True
    return False


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--histories", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--spread", type=float, default=0.03, help="prompt-to-prompt standard deviation of acceptance")
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    print(f"baseline {BASELINE_DRAFTS} drafts, threshold {THRESHOLD}, reply spread {args.spread:.2f}")
    for p in (0.5, 0.7, 0.86):
        false = sum(history(rng, p, 0.0, AFTER_DRAFTS, args.spread) for _ in range(args.histories)) / args.histories
        found = {
            w: sum(history(rng, p, FALL, w, args.spread) for _ in range(args.histories)) / args.histories
            for w in (300, 600)
        }
        print(
            f"acceptance {p:.0%}: false alarms {false:.1%} of {args.histories} stable histories of {AFTER_DRAFTS:,} drafts "
            f"(stated at most {FALSE_ALARM_RATE:.0%}); a {FALL:.0%} fall found within 300 drafts {found[300]:.1%}, "
            f"within 600 {found[600]:.1%}"
        )


if __name__ == "__main__":
    main()
