"""A conversation that outgrew the context goes on with its oldest turns left out of the
prompt; a message that cannot fit even alone is refused with the figures."""

from __future__ import annotations

import pytest

from engine import Engine, FittedConversation, MessageTooLong, RuntimeOptions, fit_conversation, reply_room
from engine.chat import Message

PARAGRAPH = "The mill on the river turned for a century, stood empty for thirty years, and was rebuilt. "


@pytest.fixture(scope="module")
def smol(smollm_path):
    engine = Engine.load(smollm_path, "none", RuntimeOptions(n_ctx=512))
    yield engine
    engine.close()


def conversation(turns: int) -> list[Message]:
    messages = [Message("system", "You are brief.")]
    for i in range(turns):
        messages += [Message("user", f"Question {i}: {PARAGRAPH * 3}"), Message("assistant", f"Answer {i}.")]
    return [*messages, Message("user", "And now?")]


def test_the_reply_keeps_a_quarter_of_the_context_at_most():
    assert reply_room(4096, 512) == 512
    assert reply_room(512, 512) == 128
    assert reply_room(512, 0) == 128


def test_a_conversation_that_fits_is_sent_whole(smol):
    messages = conversation(1)
    fitted = fit_conversation(smol, messages, smol.ctx.n_ctx, 128)
    assert fitted.messages == tuple(messages) and fitted.left_out == 0 and fitted.note() == ""
    assert fitted.prompt_tokens == len(smol.prompt_ids(messages))


def test_an_outgrown_conversation_leaves_its_oldest_turns_out(smol):
    messages = conversation(8)
    assert len(smol.prompt_ids(messages)) > 512
    fitted = fit_conversation(smol, messages, 512, 128)
    kept = fitted.messages
    assert kept[0] == messages[0] and kept[-1] == messages[-1]  # the system prompt and the newest message
    assert kept[1:] == tuple(messages[1 + fitted.left_out :])
    assert kept[1].role == "user" and fitted.left_out % 2 == 0
    assert fitted.prompt_tokens == len(smol.prompt_ids(list(kept))) <= 512 - 128
    one_turn_more = [messages[0], *messages[1 + fitted.left_out - 2 :]]
    assert len(smol.prompt_ids(one_turn_more)) > 512 - 128  # no more left out than needed
    assert fitted.note() == (
        f"The {fitted.left_out} oldest messages were left out of the prompt to fit the context (512 tokens)."
    )
    assert FittedConversation(kept, 0, 1, 4096).note() == (
        "The oldest message was left out of the prompt to fit the context (4,096 tokens)."
    )


def test_a_message_that_cannot_fit_alone_is_refused_with_the_figures(smol):
    messages = [*conversation(1)[:-1], Message("user", PARAGRAPH * 40)]
    alone = len(smol.prompt_ids([messages[0], messages[-1]]))
    with pytest.raises(MessageTooLong) as caught:
        fit_conversation(smol, messages, 512, 128)
    assert str(caught.value) == (
        f"This message is {alone:,} tokens with the chat template, and the context holds 512 tokens with "
        "128 of them kept for the reply: shorten the message, or raise the context size in Preferences."
    )


def test_a_message_too_long_to_spell_is_refused_in_characters(smol):
    huge = "x" * (512 * smol.target.longest_piece + 1)
    with pytest.raises(MessageTooLong) as caught:
        fit_conversation(smol, [Message("user", huge)], 512, 128)
    assert str(caught.value).startswith(f"This message is {len(huge):,} characters with the chat template")


def test_an_automatic_context_is_the_trained_length_as_far_as_memory_allows():
    from engine.runtime.contextsize import auto_context

    assert auto_context(32_768) == 32_768
    assert auto_context(131_072) == 32_768  # past 32,768 few conversations use the memory
    assert auto_context(2_048, 28_672, 24 * 2**30) == 2_048
    assert auto_context(32_768, 28_672, 2 * 2**30) == 18_688  # a quarter of 2 GiB at 28,672 bytes a token
    assert auto_context(32_768, 28_672, 2**20) == 256  # never less than one step
    assert auto_context(0) == 32_768  # a model that does not say
