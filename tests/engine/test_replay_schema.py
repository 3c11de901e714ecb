"""Replay files from strangers: checked against a schema with size limits before anything is
shown, each refusal one sentence naming the field; huge files refused before they are read."""

from __future__ import annotations

import json
import time

import pytest

from engine.errors import DraftlightError
from engine.replay import load
from engine.replayschema import MAX_FILE_BYTES, MAX_PIECE_CHARS
from tests.engine.replay_samples import sample_replay


def write(tmp_path, data, name="r.json"):
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def refusal(path) -> str:
    with pytest.raises(DraftlightError) as info:
        load(path)
    message = str(info.value)
    assert "\n" not in message and message.endswith(".")
    return message


def test_a_sample_replay_loads_whole(tmp_path):
    replay = sample_replay()
    again = load(replay.save(tmp_path / "ok.json"))
    assert again.steps == replay.steps and again.stats == replay.stats and again.pieces == replay.pieces


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (lambda d: d.update(version="1"), "its version is '1', not 1"),
        (lambda d: d.update(version=True), "its version is 'True', not 1"),
        (lambda d: d.update(version=[1]), "its version is '[1]', not 1"),
        (lambda d: d.update(version=7), "written by a newer Draftlight (replay version 7)"),
        (lambda d: d.update(pieces=[]), "pieces is list, not an object"),
        (lambda d: d.update(pieces={"x": "a"}), "pieces has the key 'x', not a token id"),
        (lambda d: d.update(pieces={"5": 5}), "pieces[5] is int, not text"),
        (lambda d: d.update(rounds={}), "rounds is dict, not a list"),
        (lambda d: d["rounds"][2].update(drafted="3"), "rounds[2].drafted is str, not a whole number"),
        (lambda d: d["rounds"][2].update(tokens=[]), "rounds[2] kept"),
        (lambda d: d["rounds"][1]["tokens"][0].update(kind="sneaky"), "rounds[1].tokens[0].kind is 'sneaky'"),
        (lambda d: d["rounds"][1]["tokens"][0].update(target_prob=float("nan")), "target_prob is nan"),
        (lambda d: d["rounds"][1]["tokens"][0].update(token_id=-4), "token_id is -4, outside"),
        (lambda d: d["rounds"][1]["tokens"][0].update(target_top=[[1]]), "is not a [token id, probability] pair"),
        (lambda d: d["rounds"][1]["tokens"][0].update(text=None), "rounds[1].tokens[0].text is NoneType, not text"),
        (lambda d: d["stats"].update(finish_reason="exploded"), "stats.finish_reason is 'exploded'"),
        (lambda d: d["stats"].pop("decode_s"), "stats has no 'decode_s'"),
        (lambda d: d.update(target={"a": 1}), "target is dict, not text"),
        (lambda d: d.update(plain_pass_ms="fast"), "plain_pass_ms is str, not a number"),
    ],
)
def test_each_broken_field_is_named_in_one_sentence(tmp_path, change, says):
    data = sample_replay().to_json()
    change(data)
    message = refusal(write(tmp_path, data))
    assert message.startswith("r.json ") and says in message


def test_a_token_longer_than_any_real_one_is_refused(tmp_path):
    data = sample_replay().to_json()
    data["pieces"][next(iter(data["pieces"]))] = "x" * (MAX_PIECE_CHARS + 1)
    assert "characters long, over the limit of 1,024" in refusal(write(tmp_path, data))


def test_deep_nesting_is_refused_in_words(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text('{"format": "draftlight-replay", "version": 1, "config": ' + "[" * 100_000 + "]" * 100_000 + "}")
    assert "nested too deeply" in refusal(path)


def test_bad_utf8_is_refused_in_words(tmp_path):
    path = tmp_path / "bad.json"
    path.write_bytes(b'{"format": "draftlight-replay", "target": "\xff\xfe"}')
    assert refusal(path) == "bad.json is not a Draftlight replay (not UTF-8 text at byte 43)."


def test_a_200_mb_replay_is_refused_before_it_is_read(tmp_path):
    path = tmp_path / "huge.json"
    with open(path, "wb") as f:  # sparse: 200 MB on paper, nothing on disk
        f.write(b'{"format": "draftlight-replay", "pieces": {"1": "')
        f.truncate(200 * 1024 * 1024)
    started = time.monotonic()
    message = refusal(path)
    assert time.monotonic() - started < 1.0  # nothing read: the size alone refuses it
    assert (
        message
        == f"huge.json is 200 MB, too large for a replay (the limit is {MAX_FILE_BYTES // 2**20} MB): it is not one Draftlight recorded."
    )


def test_a_folder_is_not_a_replay(tmp_path):
    assert refusal(tmp_path) == f"{tmp_path.name} is not a file: choose a Draftlight replay (.json)."


def test_only_the_last_round_may_be_cut_short_by_the_replys_end(tmp_path):
    """A reply that reaches its max tokens (or a stop) inside a round keeps fewer tokens than the
    round accepted; a round before the last cannot."""
    data = sample_replay().to_json()
    data["rounds"][-1]["tokens"] = data["rounds"][-1]["tokens"][:2]  # 3 accepted, 2 emitted: the cap
    assert [len(s.tokens) for s in load(write(tmp_path, data)).steps][-1] == 2
    data["rounds"][1]["tokens"] = data["rounds"][1]["tokens"][:2]
    assert "rounds[1] kept 3 drafts, so it needs 4 tokens, not 2" in refusal(write(tmp_path, data, "s.json"))
