"""Conversations: follow-ups reuse the cache, a full context and a cancel end cleanly."""

from __future__ import annotations

import pytest

from engine import (
    ChatTemplateError,
    ContextFullError,
    Engine,
    FinishReason,
    GenerationConfig,
    Message,
    RoundEvent,
    RunStats,
    RuntimeOptions,
    TokenEvent,
)
from engine.chat import ChatTemplate

FIRST = "Write a bubble sort in C++."
FOLLOW_UP = "What is its time complexity? One sentence."


def reply(events) -> RunStats:
    events = list(events)
    assert isinstance(events[-1], RunStats)
    assert sum(isinstance(e, RunStats) for e in events) == 1
    return events[-1]


# ---- the default pair ---------------------------------------------------------------


def test_a_follow_up_prefills_only_what_is_new(engine):
    config = GenerationConfig(max_tokens=8, depth=2)
    session = engine.session()
    first_prompt = engine.prompt_ids([Message("user", FIRST)])
    first = reply(session.send(FIRST, config))
    assert session.messages == [Message("user", FIRST), Message("assistant", first.text)]

    second = reply(session.send(FOLLOW_UP, config))
    assert session.messages[-1] == Message("assistant", second.text)
    full = engine.tokenize_prompt(engine.render(session.messages[:-1]))
    # the rendered conversation starts with what the caches hold: the first prompt and reply
    held = [*first_prompt, *first.token_ids]
    assert full[: len(held)] == held
    # the target's cache held all of that but the reply's last token, which is prefilled again
    assert second.prompt_tokens == len(full) - len(held) + 1
    assert second.prompt_tokens < len(full) / 2

    # the same conversation from cold caches gives the same reply, token for token
    engine.ctx.clear()
    engine.drafter.reset()
    cold = reply(engine.stream(full, config))
    assert cold.prompt_tokens == len(full)
    assert cold.token_ids == second.token_ids
    assert cold.text == second.text
    assert second.token_ids != first.token_ids  # the model read the follow-up


@pytest.mark.parametrize("depth", [0, 3])
def test_cancelling_stops_within_one_round_and_keeps_the_partial_reply(engine, depth):
    after = 4
    session = engine.session()
    events, tokens = [], []
    for e in session.send(FIRST, GenerationConfig(max_tokens=40, depth=depth), cancelled=lambda: len(tokens) >= after):
        events.append(e)
        if isinstance(e, TokenEvent):
            tokens.append(e)
    stats = events[-1]
    assert isinstance(stats, RunStats)
    assert stats.finish_reason is FinishReason.CANCELLED
    assert stats.message == "Stopped."
    rounds = [e for e in events if isinstance(e, RoundEvent)]
    per_round = [sum(t.round_index == r.round_index for t in tokens) for r in rounds]
    # the cancel is seen between rounds: every round but the last ended short of it
    assert sum(per_round[:-1]) < after <= sum(per_round) == len(tokens) == stats.generated_tokens
    if depth == 0:
        assert len(tokens) == after
    assert stats.text == "".join(t.text for t in tokens)
    assert stats.text.startswith("Certainly! Below is")
    assert session.messages == [Message("user", FIRST), Message("assistant", stats.text)]
    assert session.last_stats is stats


def test_cancelled_before_the_first_round_gives_an_empty_reply(engine):
    session = engine.session()
    stats = reply(session.send(FIRST, GenerationConfig(max_tokens=8, depth=2), cancelled=lambda: True))
    assert stats.finish_reason is FinishReason.CANCELLED
    assert (stats.generated_tokens, stats.rounds, stats.text) == (0, 0, "")
    assert session.messages == [Message("user", FIRST), Message("assistant", "")]


def test_a_reply_abandoned_midway_leaves_the_conversation_as_it_was(engine):
    session = engine.session(system="Be brief.")
    before = list(session.messages)
    stream = session.send(FIRST, GenerationConfig(max_tokens=40, depth=2))
    first = next(stream)
    assert isinstance(first, TokenEvent)
    stream.close()  # the consumer walked away: no reply came, the message can be sent again
    assert session.messages == before
    assert session.last_stats is None


def test_a_template_error_leaves_the_conversation_as_it_was(engine):
    session = engine.session()
    session.messages = [Message("user", "hi"), Message("assistant", "hello")]
    before = list(session.messages)
    saved = engine.template
    engine.template = ChatTemplate("{{ raise_exception('Only one turn, please.') }}")
    try:
        with pytest.raises(ChatTemplateError, match=r"Only one turn, please\."):
            list(session.send("again", GenerationConfig(max_tokens=4)))
    finally:
        engine.template = saved
    assert session.messages == before


def test_a_sessions_thinking_setting_reaches_the_template(engine):
    saved = engine.template
    engine.template = ChatTemplate(
        "{% if enable_thinking %}{{ raise_exception('thinking was asked for') }}{% endif %}"
        "{% for m in messages %}{{ m['content'] }}{% endfor %}"
    )
    try:
        with pytest.raises(ChatTemplateError, match="thinking was asked for"):
            list(engine.session(thinking=True).send("hi", GenerationConfig(max_tokens=4)))
        assert engine.render([Message("user", "hi")], thinking=False) == "hi"
    finally:
        engine.template = saved


def test_reset_keeps_only_the_system_prompt(engine):
    session = engine.session(system="Be brief.")
    session.messages += [Message("user", "hi"), Message("assistant", "hello")]
    session.reset()
    assert session.messages == [Message("system", "Be brief.")]


# ---- a small context on a small model -----------------------------------------------

N_CTX = 256
COUNTING = "Repeat after me: " + "one two three four five six seven eight nine ten, " * 19


@pytest.fixture(scope="module", params=["none", "ngram", "smollm2"])
def small(request, smollm_path):
    """SmolLM2 with a 256-token context: alone, with n-grams, and drafting for itself."""
    drafter = smollm_path if request.param == "smollm2" else request.param
    eng = Engine.load(smollm_path, drafter, RuntimeOptions(n_ctx=N_CTX))
    yield eng
    eng.close()


def test_a_message_longer_than_the_context_is_refused(small):
    session = small.session()
    long_message = "word " * 300
    n = len(small.prompt_ids([Message("user", long_message)]))
    assert n > N_CTX
    with pytest.raises(ContextFullError) as caught:
        list(session.send(long_message, GenerationConfig(max_tokens=4)))
    assert str(caught.value) == (
        f"The conversation is {n:,} tokens and the context holds {N_CTX}: start a new conversation, "
        "shorten the message, or raise the context size."
    )
    assert session.messages == []
    stats = reply(session.send("Hi", GenerationConfig(max_tokens=4)))
    assert stats.generated_tokens == 4
    assert session.messages == [Message("user", "Hi"), Message("assistant", stats.text)]


def test_a_reply_that_fills_the_context_finishes_with_a_message(small):
    session = small.session()
    prompt = small.prompt_ids([Message("user", COUNTING)])
    assert N_CTX - 20 < len(prompt) < N_CTX - 8
    config = GenerationConfig(max_tokens=200, depth=3, ignore_eog=True)
    stats = reply(session.send(COUNTING, config))
    assert stats.finish_reason is FinishReason.CONTEXT_FULL
    assert stats.message == f"The reply filled the context window ({N_CTX} tokens); start a new conversation."
    # every position the cache has was used: the prompt and the reply but its last token
    assert len(prompt) + stats.generated_tokens == N_CTX + 1
    assert small.ctx.n_past == N_CTX
    if small.drafter is not None:
        assert stats.drafted > 0  # drafting went on right up to the end of the context
    assert session.messages[-1] == Message("assistant", stats.text)

    # the full conversation cannot take another message, and is left as it was
    before = list(session.messages)
    with pytest.raises(ContextFullError, match="start a new conversation"):
        list(session.send("And again?", GenerationConfig(max_tokens=4)))
    assert session.messages == before
    session.reset()
    assert reply(session.send("Hi", GenerationConfig(max_tokens=4))).generated_tokens == 4
