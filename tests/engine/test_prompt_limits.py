"""A prompt meets the context before it is tokenized whole, a small context takes a long
prompt, a Stop ends a prefill mid-batch, and a character cut at max-tokens reads the same
in the tokens as in the reply's text."""

from __future__ import annotations

import pytest

from engine import Engine, RuntimeOptions
from engine.chat import Message, tokenize_prompt
from engine.errors import ChatTemplateError, ContextFullError
from engine.events import FinishReason, RunStats, TokenEvent
from engine.speculative import GenerationConfig
from tests.fuzz.bounded import run_bounded

LONG = "Summarize: " + "the mill on the river turned for a century and stood empty. " * 8


@pytest.fixture(scope="module")
def smol(smollm_path):
    engine = Engine.load(smollm_path, "none", RuntimeOptions(n_ctx=512))
    yield engine
    engine.close()


def test_text_that_cannot_fit_is_refused_before_it_is_tokenized(smol, monkeypatch):
    model = smol.target
    cap = smol.ctx.n_ctx * model.longest_piece
    assert model.longest_piece == 81  # SmolLM2's longest token, special ones included
    monkeypatch.setattr(model, "tokenize", lambda *a, **k: pytest.fail("tokenized text that cannot fit"))
    with pytest.raises(ContextFullError) as caught:
        smol.tokenize_prompt("x" * (cap + 1))
    assert str(caught.value) == (
        f"The conversation is {cap + 1:,} bytes of text, more than 512 tokens can spell (no token of "
        f"{model.name} is longer than 81 bytes): start a new conversation, shorten the message, "
        "or raise the context size."
    )


def test_a_message_that_cannot_fit_is_refused_before_the_template_runs(smol, monkeypatch):
    size = smol.ctx.n_ctx * smol.target.longest_piece + 1
    monkeypatch.setattr(smol.template, "render", lambda *a, **k: pytest.fail("rendered a message that cannot fit"))
    with pytest.raises(ContextFullError, match=f"The conversation is {size:,} characters of text, more than 512"):
        smol.render([Message("user", "x" * size)])


def test_a_template_that_renders_nothing_is_a_sentence(smol):
    assert not smol.target.add_bos  # with a BOS to add, an empty render is still a prompt
    with pytest.raises(ChatTemplateError, match="rendered the conversation as no text at all"):
        tokenize_prompt(smol.target, "")


def test_a_stop_ends_the_prefill_in_the_middle_of_its_batch(smol):
    config = GenerationConfig(max_tokens=4, depth=0)
    prompt = smol.prompt_ids([Message("user", LONG)])
    assert 64 < len(prompt) < smol.ctx.capacity  # one batch: only llama.cpp's abort callback can stop it
    smol.forget()
    reference = [e.token_id for e in smol.stream(prompt, config) if isinstance(e, TokenEvent)]
    smol.forget()
    asked = []

    def cancelled() -> bool:  # the engine asks once before the batch; the second ask is llama.cpp's
        asked.append(1)
        return len(asked) >= 2

    events = list(smol.stream(prompt, config, cancelled))
    assert len(asked) >= 2
    assert len(events) == 1 and isinstance(events[0], RunStats)
    stats = events[0]
    assert (stats.finish_reason, stats.prompt_tokens, stats.generated_tokens) == (FinishReason.CANCELLED, 0, 0)
    assert stats.message == "Stopped."
    assert smol.ctx.n_past == 0  # the cancelled batch left nothing in the cache
    again = [e.token_id for e in smol.stream(prompt, config) if isinstance(e, TokenEvent)]
    assert again == reference


def test_a_character_cut_at_max_tokens_reads_the_same_in_tokens_and_text(smol):
    smol.forget()
    events = list(smol.session().send("Reply with three party popper emojis.", GenerationConfig(max_tokens=2, depth=0)))
    tokens = [e for e in events if isinstance(e, TokenEvent)]
    stats = events[-1]
    assert isinstance(stats, RunStats) and stats.finish_reason is FinishReason.MAX_TOKENS
    assert b"".join(smol.target.piece(e.token_id) for e in tokens) == "🌟".encode()[:-1]  # the emoji, cut
    assert stats.text == "".join(e.text for e in tokens) == "\ufffd"


PREFILL_AT_SMALL_CTX = """
import sys
from engine.chat import Message
from engine import Engine, RuntimeOptions
from engine.speculative import GenerationConfig
engine = Engine.load(sys.argv[1], "none", RuntimeOptions(n_ctx=int(sys.argv[2])))
prompt = engine.tokenize_prompt(engine.render([Message("user", sys.argv[3])]))
list(engine.stream(prompt, GenerationConfig(max_tokens=2, depth=0)))
print(len(prompt), engine.ctx.n_ctx, engine.ctx.capacity)
"""


@pytest.mark.parametrize("n_ctx", [64])
def test_a_context_below_512_takes_a_prompt_longer_than_itself_asked(smollm_path, n_ctx):
    # llama.cpp pads the context to 256 but kept the batch at the size asked: an assert, exit 134
    outcome = run_bounded(["-c", PREFILL_AT_SMALL_CTX, str(smollm_path), str(n_ctx), LONG], timeout_s=120)
    assert outcome.problems() == []
    assert outcome.returncode == 0, outcome.stderr
    prompt_tokens, padded, capacity = map(int, outcome.stdout.split())
    assert n_ctx < prompt_tokens < padded == 256 == capacity
