"""The drift test and its words: baselines, one odd prompt, a real fall and its likely cause."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from engine.ledger.drift import (
    CHANGE_THRESHOLD,
    EVERY_KIND,
    THRESHOLD,
    DriftTest,
    Tally,
    drift,
    drift_of_kind,
    prompt_spread,
)
from engine.ledger.report import PairLedger, history, recent_acceptance
from engine.ledger.store import LedgerReply, Setup

BASE = Setup("t.gguf", "d.gguf", "model", "gguf:1:aa", "gguf:2:bb", "llama-cpp-python 0.3.36", "0.1.0", "greedy", "3")
DAY = 86400.0
T0 = time.mktime((2026, 12, 1, 12, 0, 0, 0, 0, -1))


def replies(setup: Setup, n: int, drafted: int, accepted: int, start: float, kind: str = "code") -> list[LedgerReply]:
    return [
        LedgerReply(
            start + i * 60, setup, "chat", drafted, accepted, (drafted,), (accepted,), {kind: (drafted, accepted)}
        )
        for i in range(n)
    ]


def test_the_wilson_interval() -> None:
    lo, hi = Tally(100, 86).interval()
    assert (round(lo, 4), round(hi, 4)) == (0.7786, 0.9147)  # Wilson 1927, z = 1.96
    assert Tally().interval() == (0.0, 1.0)


def test_no_baseline_until_enough_drafts() -> None:
    assert drift(replies(BASE, 29, 100, 86, T0)) == []
    found = drift(replies(BASE, 30, 100, 86, T0))
    assert [(d.kind, d.baseline, d.stale, d.statistic) for d in found] == [
        ("code", Tally(3000, 2580), False, 0.0),
        (EVERY_KIND, Tally(3000, 2580), False, 0.0),
    ]


def test_a_target_that_writes_another_kind_of_text_is_caught_on_the_replies_whole() -> None:
    changed = replace(BASE, target_fingerprint="gguf:1:cc")
    h = replies(BASE, 30, 100, 86, T0) + replies(changed, 3, 100, 40, T0 + DAY, kind="prose")
    assert [(d.kind, d.stale, d.changed) for d in drift(h)] == [("code", False, ""), (EVERY_KIND, True, "target")]


def test_one_odd_prompt_never_raises_it() -> None:
    odd = replies(BASE, 1, 150, 0, T0 + DAY)
    alone = drift_of_kind(replies(BASE, 30, 100, 86, T0) + odd, "code")
    assert alone is not None and not alone.stale and alone.statistic == 0.0  # a group holds two replies at least
    changed = replace(BASE, target_fingerprint="gguf:1:cc")
    for setup in (BASE, changed):  # even where the setup changed
        odd = replies(setup, 1, 150, 0, T0 + DAY) + replies(setup, 1, 100, 86, T0 + DAY + 60)
        found = drift_of_kind(replies(BASE, 30, 100, 86, T0) + odd, "code")
        assert found is not None and not found.stale
        assert (round(found.statistic, 2), found.threshold) == (2.15, THRESHOLD)  # 250 drafts: not yet judged


def test_the_prompt_spread_is_measured_from_the_baseline_and_never_taken_below_three_points() -> None:
    assert prompt_spread([Tally(100, 86)] * 30) == 0.03
    assert round(prompt_spread([Tally(100, 66), Tally(100, 96)] * 5), 4) == 0.1532


@pytest.mark.parametrize(
    ("change", "n", "threshold", "z"),
    [(True, 3, CHANGE_THRESHOLD, 3.6), (False, 6, THRESHOLD, 4.87)],
)
def test_a_ten_point_fall_raises_it(change: bool, n: int, threshold: float, z: float) -> None:
    """On 300 drafts since the setup changed (judged once, a low bar); on 600 with no change."""
    after = replace(BASE, target_fingerprint="gguf:1:cc") if change else BASE
    found = drift_of_kind(replies(BASE, 30, 100, 86, T0) + replies(after, n, 100, 76, T0 + DAY), "code")
    assert found is not None and (found.stale, found.threshold, round(found.statistic, 2)) == (True, threshold, z)
    assert found.recent == Tally(100 * n, 76 * n) and found.changed == ("target" if change else "prompts")


def test_a_three_point_fall_on_300_drafts_since_a_change_does_not() -> None:
    changed = replace(BASE, target_fingerprint="gguf:1:cc")
    found = drift_of_kind(replies(BASE, 30, 100, 86, T0) + replies(changed, 3, 100, 83, T0 + DAY), "code")
    assert found is not None and not found.stale and round(found.statistic, 2) == 1.08


def test_the_test_fed_reply_by_reply_is_the_ledgers() -> None:
    test = DriftTest([Tally(100, 86)] * 30)
    for reply in [Tally(100, 86)] * 5 + [Tally(100, 70)] * 2:
        test.add(reply)
    z, threshold, start = test.verdict()
    assert (round(z, 2), threshold, start) == (4.11, THRESHOLD, 5)
    assert test.since_change() == 0.0 and test.change_at is None


def test_a_fall_after_the_target_changed_names_the_target() -> None:
    changed = replace(BASE, target_fingerprint="gguf:1:cc")
    when = time.mktime((2026, 12, 3, 9, 0, 0, 0, 0, -1))
    found = drift_of_kind(replies(BASE, 30, 100, 86, T0) + replies(changed, 3, 100, 60, when), "code")
    assert found is not None and found.stale and found.changed == "target"
    assert found.sentence() == (
        "Acceptance on code fell from 86% (3,000 drafts) to 60% (300 drafts) since the target's file changed on 3 Dec: "
        "this drafter was measured against the earlier file."
    )


@pytest.mark.parametrize(
    ("field", "value", "changed", "says"),
    [
        ("drafter_fingerprint", "gguf:2:dd", "drafter", "since the drafter's file changed on 3 Dec"),
        ("runtime", "llama-cpp-python 0.3.40", "runtime", "(llama-cpp-python 0.3.36 to llama-cpp-python 0.3.40)"),
        ("sampling", "temperature 0.7", "sampling", "since the sampling changed (greedy to temperature 0.7)"),
        ("target", "t.gguf", "prompts", "your prompts changed; the figures by content kind show which."),
    ],
)
def test_the_likely_cause(field: str, value: str, changed: str, says: str) -> None:
    other = replace(BASE, **{field: value})
    when = time.mktime((2026, 12, 3, 9, 0, 0, 0, 0, -1))
    found = drift_of_kind(replies(BASE, 30, 100, 86, T0) + replies(other, 4, 100, 60, when), "code")
    assert found is not None and found.stale
    assert found.changed == changed and says in found.cause


def test_a_recovered_pair_is_not_stale() -> None:
    h = replies(BASE, 30, 100, 86, T0) + replies(BASE, 3, 100, 60, T0 + DAY) + replies(BASE, 6, 100, 95, T0 + 2 * DAY)
    found = drift_of_kind(h, "code")
    assert found is not None and not found.stale


def test_history_marks_each_change_of_fingerprint() -> None:
    changed = replace(BASE, target_fingerprint="gguf:1:cc")
    rows = history(replies(BASE, 2, 100, 86, T0) + replies(changed, 1, 100, 60, T0 + 2 * DAY))
    assert [(r.day, r.replies, r.by_kind["code"], r.changed) for r in rows] == [
        ("2026-12-01", 2, Tally(200, 172), ()),
        ("2026-12-03", 1, Tally(100, 60), ("target file changed",)),
    ]


def test_auto_starts_from_the_ledgers_recent_acceptance_of_the_same_files() -> None:
    other = replace(BASE, target_fingerprint="gguf:1:cc")
    mine = [LedgerReply(T0 + i, BASE, "chat", 75, 51, (25, 25, 25), (20, 16, 15), {"code": (75, 51)}) for i in range(3)]
    theirs = [LedgerReply(T0 + 9, other, "chat", 75, 0, (25, 25, 25), (0, 0, 0), {"code": (75, 0)})]
    assert recent_acceptance(mine + theirs, "gguf:1:aa", "gguf:2:bb") == pytest.approx([0.8, 0.8, 0.9375])
    assert recent_acceptance(mine[:2], "gguf:1:aa", "gguf:2:bb") == []  # 150 drafts: too few to go by


def test_the_notice_puts_the_warning_first_and_the_figures_behind_why() -> None:
    changed = replace(BASE, target_fingerprint="gguf:1:cc")
    when = time.mktime((2026, 12, 3, 9, 0, 0, 0, 0, -1))
    h = replies(BASE, 30, 100, 86, T0) + replies(changed, 3, 100, 60, when)
    view = PairLedger("t.gguf", "d.gguf", len(h), tuple(drift(h)), tuple(history(h)))
    assert view.notice() == (
        "Acceptance on code fell from 86% (3,000 drafts) to 60% (300 drafts) since the target's file changed on 3 Dec: "
        "this drafter was measured against the earlier file. The acceptance ledger's figures: code 86% (3,000 drafts, "
        "85%-87%) at first, 60% (300 drafts) lately. Check the pair again in the pairing doctor or choose a drafter "
        "made for this target; Tools → Acceptance ledger → Clear forgets the old figures."
    )
    assert PairLedger("t.gguf", "d.gguf", 30, tuple(drift(h[:30])), ()).notice() == ""
