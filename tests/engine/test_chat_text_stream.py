"""Text is made from tokens at the edge, a whole UTF-8 character at a time."""

from __future__ import annotations

import pytest

from engine import Model
from engine.chat import TextStream

# Qwen's byte-level BPE splits the party popper and the Fraktur letters into byte tokens:
# " \xf0\x9f" + "\x8e" + "\x89" is " 🎉", and no piece but the last is valid UTF-8.
MIXED = "🦙 llama 你好 café 🎉🎉 𝔘𝔫𝔦 ≠ naïve"


@pytest.fixture(scope="module")
def qwen(target_path):
    model = Model(target_path, vocab_only=True)
    yield model
    model.close()


def stream_text(model: Model, tokens: list[int]) -> list[str]:
    text = TextStream()
    return [text.push(model.piece(t)) for t in tokens] + [text.flush()]


def test_split_characters_wait_for_their_last_byte(qwen):
    tokens = qwen.tokenize(MIXED)
    pieces = [qwen.piece(t) for t in tokens]
    assert b"".join(pieces).decode("utf-8") == MIXED
    # the test bites: decoded one token at a time, some pieces are broken characters
    assert any("\ufffd" in p.decode("utf-8", errors="replace") for p in pieces)

    out = stream_text(qwen, tokens)
    assert "".join(out) == MIXED
    assert not any("\ufffd" in chunk for chunk in out)
    assert out[-1] == ""  # nothing left over at the end
    assert out[:-1].count("") == 3  # the pieces '\x8e', '\x94' and '\xf0\x9d\x94': no character ends in them
    assert out[6:8] == ["", "🎉"]
    assert out[5] == " "  # the space before the split emoji comes out at once


def test_whole_characters_in_one_token_come_out_at_once(qwen):
    for word in ("🦙", "你好", " café"):
        tokens = qwen.tokenize(word)
        assert len(tokens) == 1
        assert stream_text(qwen, tokens) == [word, ""]


def test_every_prefix_of_a_stream_is_whole_characters(qwen):
    tokens = qwen.tokenize(MIXED)
    out = stream_text(qwen, tokens)
    for i in range(len(out)):
        prefix = "".join(out[: i + 1])
        assert MIXED.startswith(prefix)


def test_an_unfinished_character_at_the_end_is_replaced_once():
    text = TextStream()
    assert text.push(b"ok \xf0\x9f") == "ok "
    assert text.flush() == "\ufffd"


def test_special_tokens_render_as_nothing(qwen):
    im_end = qwen.tokenize("<|im_end|>")
    assert len(im_end) == 1 and qwen.is_eog(im_end[0])
    assert qwen.piece(im_end[0]) == b""
    assert qwen.display(im_end[0]) == "<|im_end|>"
