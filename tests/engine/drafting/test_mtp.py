"""The target's own MTP head as the drafter, on a hybrid target, against llama.cpp's draft-mtp driver.

The model is a tiny random-weight qwen35 with one NextN block, written at test time
(tests/engine/synthetic.py). Random weights accept few drafts, which is why the oracle
comparison looks at every draft token, round by round, not only at the text.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from engine import (
    Engine,
    FixedDepth,
    GenerationConfig,
    IncompatibleDrafter,
    Prefill,
    RoundEvent,
    RuntimeOptions,
    TokenEvent,
    TokenKind,
    generate,
)
from engine.ruler.oracle_build import SPECULATIVE_SIMPLE, find_oracle

pytest.importorskip("gguf")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from synthetic import hybrid_qwen35

OPTIONS = RuntimeOptions(n_ctx=256, n_batch=256)
# With these weights (seed 42) the head's drafts are accepted now and then on this prompt,
# so the comparison covers the head resuming from a kept draft, not only from rejections.
PROMPT = "the mill on the river turned; the mill on the river"
N_PREDICT = 24


@pytest.fixture(scope="module")
def mtp_path(tmp_path_factory) -> Path:
    return hybrid_qwen35(tmp_path_factory.mktemp("models") / "hybrid-mtp.gguf", nextn=True)


@pytest.fixture(scope="module")
def mtp_engine(mtp_path):
    eng = Engine.load(mtp_path, "mtp", OPTIONS)
    yield eng
    eng.close()


def test_the_head_is_found_in_the_target_file(mtp_engine):
    assert mtp_engine.drafter.kind == "mtp" and mtp_engine.drafter.head.n_heads == 1
    assert mtp_engine.drafter.name == "draftlight test hybrid with MTP MTP head"
    assert mtp_engine.can_speculate and mtp_engine.notice == ""


def test_a_target_without_heads_is_refused_in_a_sentence(tmp_path):
    plain = hybrid_qwen35(tmp_path / "no-heads.gguf")
    with pytest.raises(IncompatibleDrafter, match="has no multi-token-prediction \\(NextN\\) heads"):
        Engine.load(plain, "mtp", OPTIONS)


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_mtp_drafts_write_the_plain_text(mtp_engine, depth):
    ids = mtp_engine.target.tokenize(PROMPT, add_special=True)
    plain = list(mtp_engine.stream(ids, GenerationConfig(max_tokens=32, depth=0, ignore_eog=True)))[-1]
    events = list(mtp_engine.stream(ids, GenerationConfig(max_tokens=32, depth=depth, ignore_eog=True)))
    stats = events[-1]
    assert stats.token_ids == plain.token_ids
    assert stats.drafted > 0 and stats.depth == depth
    rounds = [e for e in events if isinstance(e, RoundEvent) and not e.from_prefill]
    assert all(r.drafted == min(depth, 32 - 1 - i) or r.drafted <= depth for i, r in enumerate(rounds))
    kinds = [e.kind for e in events if isinstance(e, TokenEvent)]
    assert kinds[0] is TokenKind.PLAIN and TokenKind.REPLACED in kinds


def ours_round_by_round(engine, depth: int) -> list[tuple[list[int], int, int]]:
    """llama-speculative-simple's flow: the prompt but its last token decoded, then rounds from it."""
    ids = engine.target.tokenize(PROMPT, add_special=True)
    engine.forget()
    engine.ctx.decode(ids[:-1], all_logits=False)  # the head catches up on the same batch
    config = GenerationConfig(max_tokens=N_PREDICT + 8, depth=depth, ignore_eog=True)
    events = list(generate(engine.ctx, engine.drafter, FixedDepth(depth), list(ids), config, prefill=Prefill()))
    rounds = []
    for r in (e for e in events if isinstance(e, RoundEvent)):
        emitted = [e.token_id for e in events if isinstance(e, TokenEvent) and e.round_index == r.round_index]
        rounds.append((list(r.draft_tokens), r.accepted, emitted[-1]))
    return rounds


def llama_cpps_round_by_round(model: Path, depth: int) -> list[tuple[list[int], int, int]]:
    build = find_oracle()
    if build is None:
        pytest.skip("stock llama.cpp is not built: run `make oracle` (draftlight oracle build) first")
    command = [
        str(build.binary(SPECULATIVE_SIMPLE)), "-m", str(model), "--spec-type", "draft-mtp",
        "--spec-draft-n-max", str(depth), "-p", PROMPT, "-n", str(N_PREDICT), "--temp", "0",
        "-c", "256", "-b", "256", "-ub", "256", "-t", str(OPTIONS.threads),
        "-ctk", "q8_0", "-ctv", "q8_0", "-ctkd", "q8_0", "-ctvd", "q8_0",
        "--no-spec-draft-backend-sampling", "-v",
    ]  # fmt: skip
    log = subprocess.run(command, capture_output=True, text=True, errors="replace", timeout=300)
    assert log.returncode == 0, log.stderr[-2000:]
    rounds, drafts = [], []
    for line in (log.stdout + log.stderr).splitlines():
        if m := re.search(r"draft candidate +0, pos +\d+: +(\d+)", line):
            drafts.append(int(m.group(1)))
        elif m := re.search(r"accepted (\d+)/(\d+) draft tokens, the last target token is: \((\d+)\)", line):
            accepted, n_draft, last = map(int, m.groups())
            rounds.append((drafts[:n_draft], accepted, last))
            drafts = []
    return rounds


@pytest.mark.oracle
@pytest.mark.parametrize("depth", [1, 2, 3])
def test_mtp_drafts_equal_llama_cpps_round_by_round(mtp_engine, mtp_path, depth):
    theirs = llama_cpps_round_by_round(mtp_path, depth)
    ours = ours_round_by_round(mtp_engine, depth)
    # llama.cpp shortens its last drafts to what -n leaves; compare the rounds before that.
    full, emitted = [], 0
    for r in theirs:
        if emitted + depth + 1 >= N_PREDICT:
            break
        full.append(r)
        emitted += r[1] + 1
    assert len(full) >= 8 and sum(accepted for _, accepted, _ in full) >= 1
    assert ours[: len(full)] == full
