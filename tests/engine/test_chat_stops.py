"""Stop strings: found across tokens, text held back only while it may begin one."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from engine import FinishReason, GenerationConfig, RoundEvent, RunStats, TokenEvent
from engine.chat import StopMatcher


@dataclass(frozen=True)
class Item:
    text: str


def texts(items) -> list[str]:
    return [i.text for i in items]


def feed(matcher: StopMatcher, *pieces: str) -> list[tuple[list[str], bool]]:
    return [(texts(released), stopped) for released, stopped in (matcher.push(Item(p)) for p in pieces)]


def test_no_stops_releases_everything_at_once():
    assert feed(StopMatcher(()), "a", "b") == [(["a"], False), (["b"], False)]
    assert feed(StopMatcher(("",)), "a") == [(["a"], False)]  # an empty stop string is no stop


def test_a_stop_split_across_items():
    m = StopMatcher(("</end>",))
    assert feed(m, "x = 1", " </", "en", "d>", "after") == [
        (["x = 1"], False),
        ([], False),  # " </" may begin the stop
        ([], False),
        ([], True),  # the stop completed: the held items touching it are dropped
        (["after"], False),  # a fresh start
    ]
    assert m.held == []


def test_held_text_is_released_once_it_cannot_begin_the_stop():
    m = StopMatcher(("STOP",))
    assert feed(m, "ST", "O") == [([], False), ([], False)]
    assert texts(m.held) == ["ST", "O"]
    assert feed(m, "P?") == [([], True)]
    m = StopMatcher(("STOP",))
    assert feed(m, "ST", "O", "W") == [([], False), ([], False), (["ST", "O", "W"], False)]
    assert m.held == []


def test_an_item_is_held_only_from_where_a_stop_may_begin():
    m = StopMatcher(("STOP",))
    assert feed(m, "abc", "dS", "T") == [(["abc"], False), ([], False), ([], False)]
    # "dST" ends with "ST": the item holding "S" waits, though its "d" cannot be a stop
    assert feed(m, "x") == [(["dS", "T", "x"], False)]


def test_items_before_the_stop_are_released_and_items_touching_it_dropped():
    m = StopMatcher(("STOP",))
    released, stopped = m.push(Item("one "))
    assert texts(released) == ["one "] and not stopped
    # a single item holding the end of the text, the stop and more
    assert feed(m, "S", "TOP and more") == [([], False), ([], True)]
    m = StopMatcher(("STOP",))
    # "two " waits behind nothing; "threeS" waits: its "S" may begin the stop
    assert feed(m, "two ", "threeS", "TOPx") == [(["two "], False), ([], False), ([], True)]


def test_the_text_before_a_stop_inside_one_item_is_dropped_with_it():
    """Items are tokens: a token touching the stop goes whole, even the part before it."""
    m = StopMatcher(("STOP",))
    assert feed(m, "ok", " bye STOP") == [(["ok"], False), ([], True)]


def test_a_stop_can_complete_before_a_longer_one_that_began_first():
    m = StopMatcher(("world", "lo w"))
    # "hel" waits: its "l" may begin "lo w"
    assert feed(m, "hel", "lo", " wor") == [([], False), (["hel"], False), ([], True)]


def test_the_stop_that_begins_earliest_decides_the_cut():
    m = StopMatcher(("cd", "bcde"))
    # both complete at the third item; "bcde" begins first, so "b" is dropped with it
    assert feed(m, "a", "b", "cdef") == [(["a"], False), ([], False), ([], True)]


def test_several_stops_hold_for_the_longest_possible_beginning():
    m = StopMatcher(("abcd", "cx"))
    assert feed(m, "ab", "c") == [([], False), ([], False)]
    assert feed(m, "y") == [(["ab", "c", "y"], False)]


def test_flush_releases_what_is_held():
    m = StopMatcher(("STOP",))
    feed(m, "a", "ST")
    assert texts(m.flush()) == ["ST"]
    assert m.held == [] and m.flush() == []


def test_empty_items_pass_through():
    m = StopMatcher(("STOP",))
    assert feed(m, "", "a", "") == [([""], False), (["a"], False), ([""], False)]


# ---- end to end ---------------------------------------------------------------------

N_TOKENS = 12  # "Certainly! Below is a simple implementation of the bubble sort algorithm"
STOP = "bubble"


@pytest.fixture(scope="module")
def unstopped(engine, prompts) -> list[TokenEvent]:
    events = list(engine.stream(prompts["code"], GenerationConfig(max_tokens=N_TOKENS, depth=0)))
    tokens = [e for e in events if isinstance(e, TokenEvent)]
    assert STOP in events[-1].text
    return tokens


def expected_before(tokens: list[TokenEvent], stop: str) -> str:
    """The tokens that end before the stop string begins, as text."""
    start = "".join(t.text for t in tokens).index(stop)
    out = ""
    for t in tokens:
        if len(out) + len(t.text) > start:
            break
        out += t.text
    return out


def decode(engine, ids: list[int]) -> str:
    return b"".join(engine.target.piece(t) for t in ids).decode("utf-8", errors="replace")


@pytest.mark.parametrize("depth", [0, 2])
def test_generation_ends_before_the_stop_string(engine, prompts, unstopped, depth):
    config = GenerationConfig(max_tokens=N_TOKENS, depth=depth, stop=(STOP,))
    events = list(engine.stream(prompts["code"], config))
    stats = events[-1]
    assert isinstance(stats, RunStats)
    assert stats.finish_reason is FinishReason.STOP_STRING
    assert stats.message == ""
    assert stats.text == expected_before(unstopped, STOP) == "Certainly! Below is a simple implementation of the"
    tokens = [e for e in events if isinstance(e, TokenEvent)]
    assert "".join(t.text for t in tokens) == stats.text
    assert [t.token_id for t in tokens] == [t.token_id for t in unstopped[: len(tokens)]]
    # the stop ended the run: nothing was generated past the round that completed it
    rounds = [e for e in events if isinstance(e, RoundEvent)]
    assert len(rounds) == stats.rounds + stats.from_prefill  # round 0 is the prefill's token
    ids = list(stats.token_ids)
    assert ids == [t.token_id for t in unstopped[: len(ids)]]
    in_last_round = rounds[-1].accepted + 1
    assert STOP in decode(engine, ids)
    assert STOP not in decode(engine, ids[:-in_last_round])
    if depth == 0:  # one token a round: the last one generated is the one that completed the stop
        assert stats.generated_tokens == len(tokens) + 1
        assert unstopped[len(tokens)].text == " bubble"


def test_a_stop_string_that_never_comes_changes_nothing(engine, prompts, unstopped):
    config = GenerationConfig(max_tokens=N_TOKENS, depth=2, stop=("quicksort",))
    stats = list(engine.stream(prompts["code"], config))[-1]
    assert stats.finish_reason is FinishReason.MAX_TOKENS
    assert stats.text == "".join(t.text for t in unstopped)
    assert list(stats.token_ids) == [t.token_id for t in unstopped]


def test_a_rounds_items_pushed_at_once_stop_where_one_at_a_time_would():
    items = [Item("a"), Item("b")]
    assert StopMatcher(()).push_all(items) == (items, False)  # no stop strings: the round's own list
    m = StopMatcher(("STOP",))
    released, stopped = m.push_all([Item("a"), Item("ST"), Item("OP"), Item("after")])
    assert (texts(released), stopped) == (["a"], True)  # what follows the stop in the round is dropped
    released, stopped = m.push_all([Item("x"), Item("ST")])
    assert (texts(released), stopped, texts(m.held)) == (["x"], False, ["ST"])
