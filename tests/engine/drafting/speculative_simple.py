"""llama.cpp's own speculative loop as the oracle for a drafter kind: its drafts, round by round.

`llama-speculative-simple -v` logs every draft candidate and each round's verdict; ours runs
the same flow (the prompt but its last token decoded, then rounds from it) through our round.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from engine import GenerationConfig, RoundEvent, TokenEvent
from engine.depth import FixedDepth
from engine.rounds import Prefill
from engine.ruler.oracle_build import SPECULATIVE_SIMPLE, find_oracle
from engine.speculative import generate

RUNS = 8
Round = tuple[list[int], int, int]  # drafts, how many the target kept, the target's own last token


def theirs(model: Path, spec_type: str, depth: int, prompt: str, n_predict: int, threads: int, draft=None):
    build = find_oracle()
    if build is None:
        pytest.skip("stock llama.cpp is not built: run `make oracle` (draftlight oracle build) first")
    command = [
        str(build.binary(SPECULATIVE_SIMPLE)), "-m", str(model), "--spec-type", spec_type,
        "--spec-draft-n-max", str(depth), "-p", prompt, "-n", str(n_predict), "--temp", "0",
        "-c", "256", "-b", "256", "-ub", "256", "-t", str(threads),
        "-ctk", "q8_0", "-ctv", "q8_0", "-ctkd", "q8_0", "-ctvd", "q8_0",
        "--no-spec-draft-backend-sampling", "-v",
    ]  # fmt: skip
    if draft is not None:
        command += ["-md", str(draft)]
    # llama.cpp logs from a thread of its own, which now and then loses its tail at exit (on a
    # loaded 2-core box three runs in a row have lost it): a run whose summary line came through
    # logged every round before it.
    for _ in range(RUNS):
        log = subprocess.run(command, capture_output=True, text=True, errors="replace", timeout=300)
        assert log.returncode == 0, log.stderr[-2000:]
        if "n_drafted = " in log.stdout + log.stderr:
            break
    else:
        pytest.fail(f"llama-speculative-simple's log lost its end {RUNS} times running")
    rounds: list[Round] = []
    drafts: list[int] = []
    for line in (log.stdout + log.stderr).splitlines():
        if m := re.search(r"draft candidate +0, pos +\d+: +(\d+)", line):
            drafts.append(int(m.group(1)))
        elif m := re.search(r"accepted (\d+)/(\d+) draft tokens, the last target token is: \((\d+)\)", line):
            accepted, n_draft, last = map(int, m.groups())
            rounds.append((drafts[:n_draft], accepted, last))
            drafts = []
    return rounds


def ours(engine, depth: int, prompt: str, n_predict: int) -> list[Round]:
    ids = engine.target.tokenize(prompt, add_special=True)
    engine.forget()
    engine.ctx.decode(ids[:-1], all_logits=False)  # the drafter reads this batch too
    config = GenerationConfig(max_tokens=n_predict + 8, depth=depth, ignore_eog=True)
    events = list(generate(engine.ctx, engine.drafter, FixedDepth(depth), list(ids), config, prefill=Prefill()))
    rounds = []
    for r in (e for e in events if isinstance(e, RoundEvent)):
        emitted = [e.token_id for e in events if isinstance(e, TokenEvent) and e.round_index == r.round_index]
        rounds.append((list(r.draft_tokens), r.accepted, emitted[-1]))
    return rounds


def before_the_end(rounds: list[Round], depth: int, n_predict: int) -> list[Round]:
    """llama.cpp shortens its last drafts to what -n leaves: the rounds before that."""
    full, emitted = [], 0
    for r in rounds:
        if emitted + depth + 1 >= n_predict:
            break
        full.append(r)
        emitted += r[1] + 1
    return full
