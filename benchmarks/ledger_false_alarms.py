"""How often the ledger's drift test raises a false alarm, and how often it finds a real fall.

Each simulated history is one pair and content kind: a baseline of BASELINE_DRAFTS drafts,
then more, in replies of 20 to 150 drafts. A reply's acceptance varies with its prompt: it is
drawn from a beta distribution around the pair's acceptance (standard deviation --spread),
then each draft is kept with that chance. A stable history keeps its acceptance for 3,000
drafts after the baseline; a falling one drops by FALL right after it. Either comes with a
change of setup right after the baseline (a target's file changed, say) or with none (only
the prompts changed). The test is engine.ledger.drift's own DriftTest, run reply by reply as
the ledger runs it; a history raises the warning if it stands after any reply.

    PYTHONPATH=. python benchmarks/ledger_false_alarms.py [--histories 1000] [--seed 1] [--spread 0.03]
"""

from __future__ import annotations

import argparse

import numpy as np

from engine.ledger import drift
from engine.ledger.drift import DriftTest, Tally

AFTER_DRAFTS = 3000


def reply(rng: np.random.Generator, p: float, spread: float) -> Tally:
    n = int(rng.integers(20, 151))
    if spread <= 0:
        return Tally(n, int(rng.binomial(n, p)))
    k = (1 - p) * p / spread**2 - 1  # beta concentration giving that spread
    return Tally(n, int(rng.binomial(n, rng.beta(p * k, (1 - p) * k))))


def history(rng: np.random.Generator, p: float, fall: float, within: int, spread: float, change: bool) -> bool:
    """Whether the warning stands after any reply within `within` drafts after the baseline."""
    baseline: list[Tally] = []
    while sum(t.drafted for t in baseline) < drift.BASELINE_DRAFTS:
        baseline.append(reply(rng, p, spread))
    test, seen = DriftTest(baseline), 0
    while seen < within:
        r = reply(rng, p - fall, spread)
        seen += r.drafted
        test.add(r, new_setup=change)
        statistic, threshold, _ = test.verdict()
        if statistic >= threshold:
            return True
    return False


def rate(rng: np.random.Generator, runs: int, *args) -> float:
    return sum(history(rng, *args) for _ in range(runs)) / runs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--histories", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--spread", type=float, default=0.03, help="prompt-to-prompt standard deviation of acceptance")
    ap.add_argument("--acceptance", type=float, nargs="+", default=[0.5, 0.7, 0.86])
    for name in ("BASELINE_DRAFTS", "THRESHOLD", "CHANGE_THRESHOLD", "WINDOW_DRAFTS", "REPLY_CAP"):
        ap.add_argument(f"--{name.lower().replace('_', '-')}", type=float, help=f"try another {name}")
    args = ap.parse_args()
    for name in ("BASELINE_DRAFTS", "THRESHOLD", "CHANGE_THRESHOLD", "WINDOW_DRAFTS", "REPLY_CAP"):
        if (value := getattr(args, name.lower())) is not None:
            setattr(drift, name, int(value) if name.endswith("DRAFTS") else value)
    rng = np.random.default_rng(args.seed)
    print(
        f"baseline {drift.BASELINE_DRAFTS} drafts, window {drift.WINDOW_DRAFTS}, thresholds {drift.THRESHOLD} "
        f"(latest replies) and {drift.CHANGE_THRESHOLD} (since a change), reply cap {drift.REPLY_CAP}, "
        f"reply spread {args.spread:.2f}, {args.histories} histories each, stated rate {drift.FALSE_ALARM_RATE:.0%}"
    )
    print("acceptance | false alarms in 3,000 drafts: no change / a change | a 10-point fall found: "
          "at a change within 300 / 600 | with no change within 300 / 600")  # fmt: skip
    n, s = args.histories, args.spread
    for p in args.acceptance:
        stable = [rate(rng, n, p, 0.0, AFTER_DRAFTS, s, change) for change in (False, True)]
        found = [rate(rng, n, p, drift.FALL, w, s, change) for change in (True, False) for w in (300, 600)]
        print(f"{p:.0%} | {stable[0]:.1%} / {stable[1]:.1%} | {found[0]:.1%} / {found[1]:.1%} | "
              f"{found[2]:.1%} / {found[3]:.1%}")  # fmt: skip


if __name__ == "__main__":
    main()
