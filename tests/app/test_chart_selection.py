"""The charts show the reply on screen: the one streaming, or a stored one the user clicks; "all"
is every reply of the conversation, so a deleted reply or another conversation leaves the charts.
A chart with no data source (thermal without a sensor) gives its room away and says why."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from app import replaystore, storeedits
from app.messagetags import point_in
from app.store import StoredMessage
from app.storeopen import open_store
from engine import (
    FinishReason,
    Replay,
    RoundEvent,
    RoundStep,
    RunStats,
    ThermalReading,
    ThermalState,
    TokenEvent,
    TokenKind,
)


def token(i: int, kind: TokenKind, round_index: int, position: int, rank: int | None = None) -> TokenEvent:
    rejected = {"rejected_id": 900 + i, "rejected_text": "?", "draft_rank": rank} if rank else {}
    return TokenEvent(
        token_id=i, text=f"t{i} ", kind=kind, round_index=round_index, position=position, target_prob=0.9, **rejected
    )


def stats(generated: int, decode_s: float, rounds: int, drafted: tuple, accepted: tuple) -> RunStats:
    return RunStats(
        prompt_tokens=5, prefill_s=0.1, generated_tokens=generated, decode_s=decode_s, rounds=rounds, depth=3,
        drafted=sum(drafted), accepted=sum(accepted), acceptance_per_position=(),
        drafted_per_position=drafted, accepted_per_position=accepted, draft_s=0.0, verify_s=0.0, commit_s=0.0,
        rewind_s=0.0, overhead_s=0.0, finish_reason=FinishReason.MAX_TOKENS, from_prefill=1,
    )  # fmt: skip


def local_reply() -> tuple[StoredMessage, Replay]:
    """Round 0 from the prefill; round 1 accepts 2 of 3 (the third was the drafter's 2nd choice);
    round 2 accepts 3 of 3 and a bonus token. Each decode round takes 32 ms."""
    steps = [
        RoundStep(RoundEvent(round_index=0, drafted=0, accepted=0, from_prefill=True), (token(0, TokenKind.PLAIN, 0, 0),)),
        RoundStep(
            RoundEvent(round_index=1, drafted=3, accepted=2, draft_ms=10, verify_ms=20, commit_ms=2, round_ms=33),
            (token(1, TokenKind.ACCEPTED, 1, 0), token(2, TokenKind.ACCEPTED, 1, 1), token(3, TokenKind.REPLACED, 1, 2, 2)),
        ),
        RoundStep(
            RoundEvent(round_index=2, drafted=3, accepted=3, draft_ms=10, verify_ms=20, commit_ms=2, round_ms=32),
            (*tuple(token(i, TokenKind.ACCEPTED, 2, i - 4) for i in (4, 5, 6)), token(7, TokenKind.BONUS, 2, 3)),
        ),
    ]  # fmt: skip
    run = stats(8, 0.064, 2, (2, 2, 2), (2, 2, 1))
    tokens = [t for s in steps for t in s.tokens]
    replay = Replay("t.gguf", "d.gguf", "p", {}, steps, run, {t.token_id: t.text for t in tokens})
    return StoredMessage("assistant", "".join(t.text for t in tokens), tokens, run), replay


def server_reply() -> StoredMessage:
    """A server's reply: its totals alone (vLLM's counters per position), no rounds."""
    tokens = [token(i, TokenKind.UNREPORTED, i, 0) for i in range(11)]
    return StoredMessage("assistant", "x", tokens, stats(11, 0.5, 4, (4, 4), (3, 2)))


@pytest.fixture
def conversation(tmp_path):
    """A conversation of a local reply and a server's reply, and an empty second conversation."""
    store, _ = open_store(tmp_path / "c.sqlite3")
    cid = store.new_conversation("Charts")
    store.add_message(cid, StoredMessage("user", "First question."))
    message, replay = local_reply()
    first = store.add_message(cid, message)
    replaystore.keep(store, first, replay)
    store.add_message(cid, StoredMessage("user", "Second question."))
    second = store.add_message(cid, server_reply())
    other = store.new_conversation("Empty")
    store.close()
    return tmp_path / "c.sqlite3", cid, first, second, other


def click(qtbot, window, message_id: int) -> None:
    qtbot.mouseClick(
        window.transcript.viewport(), Qt.MouseButton.LeftButton, pos=point_in(window.transcript, message_id)
    )


def test_the_charts_show_the_reply_clicked_and_all_replies_apart(qtbot, window_at, conversation):
    path, cid, first, second, _ = conversation
    window = window_at(path)
    window.open_conversation(cid)
    m = window.chart_model
    # The latest reply first: a server's totals, one point each.
    assert m.shown == "reply 2 of 2" and m.tps == [(0.5, 10 / 0.5)] and m.mean_length == [(0.5, 10 / 4)]
    assert m.message_acceptance() == [3 / 4, 2 / 4]
    # "All": both replies' decoded tokens over both replies' decode time, rounds and positions summed.
    assert m.session_tps() == pytest.approx((7 + 10) / (0.064 + 0.5))
    assert m.session_mean_length() == pytest.approx((7 + 10) / (2 + 4))
    assert (m.session_positions.drafted, m.session_positions.accepted) == ([6, 6, 2], [5, 4, 1])

    click(qtbot, window, first)
    assert m.shown == "reply 1 of 2"
    assert [x for x, _ in m.tps] == pytest.approx([0.032, 0.064]) == [x for x, _ in m.mean_length]
    assert [y for _, y in m.tps] == pytest.approx([3 / 0.032, 7 / 0.064])
    assert [y for _, y in m.mean_length] == pytest.approx([3.0, 3.5])
    assert m.message_acceptance() == [1.0, 1.0, 0.5]
    assert list(m.rounds) == [(10, 20, 2, 1.0), (10, 20, 2, 0.0)]
    assert m.message_ranks["2nd"] == 1 and m.session_ranks["2nd"] == 1  # clicking adds nothing to "all"
    assert m.session_tps() == pytest.approx((7 + 10) / (0.064 + 0.5))
    window.charts.refresh()
    _xs, ys = window.charts.tps_curve.getData()
    assert list(ys) == pytest.approx([3 / 0.032, 7 / 0.064])
    assert window.charts.tps_session.value() == pytest.approx(m.session_tps())
    assert window.charts.length_session.value() == pytest.approx(m.session_mean_length())
    assert list(window.charts.accept_message.opts["height"]) == [1.0, 1.0, 0.5]
    assert window.charts.showing.text().startswith("Charts: reply 1 of 2")

    # Deleting the server's reply: "all" is the first reply alone, and the charts show it.
    storeedits.delete_message(window.store, cid, second)
    window.open_conversation(cid)
    assert m.shown == "reply 1 of 1" and m.session_tps() == pytest.approx(7 / 0.064)
    assert (m.session_positions.drafted, m.session_positions.accepted) == ([2, 2, 2], [2, 2, 1])


def test_another_conversation_leaves_the_charts_empty(qtbot, window_at, conversation):
    path, cid, _first, _, other = conversation
    window = window_at(path)
    window.open_conversation(cid)
    window.open_conversation(other)
    m = window.chart_model
    assert m.tps == [] and m.mean_length == [] and m.session_tps() is None and m.session_acceptance() == []
    assert sum(m.session_ranks.values()) == 0 and m.shown == ""
    window.charts.refresh()
    assert len(window.charts.tps_curve.getData()[0] or ()) == 0 and not window.charts.tps_session.isVisible()
    window.open_conversation(cid)  # back again: the latest reply, as stored
    assert m.shown == "reply 2 of 2" and m.tps == [(0.5, 20.0)]


def test_a_chart_without_a_source_gives_its_room_away_and_says_why(qtbot, window_at, tmp_path):
    window = window_at(tmp_path / "c.sqlite3")
    charts = window.charts
    window.chart_model.clear_thermal()
    window.chart_model.add_thermal(ThermalReading(ThermalState.UNKNOWN, "no thermal zone"))
    charts.refresh()
    assert charts.thermal_plot.isHidden() and charts.thermal_plot not in charts.plots()
    assert charts.thermal_note.isVisibleTo(charts)
    assert charts.thermal_note.text() == "No thermal chart: this machine reports no thermal state."
    assert charts.thermal_note.toolTip() == "unknown: no thermal zone"
    window.chart_model.add_thermal(ThermalReading(ThermalState.NOMINAL, "pmset -g therm"))
    charts.refresh()
    assert charts.thermal_plot.isVisibleTo(charts) and not charts.thermal_note.isVisibleTo(charts)
    assert charts.thermal_plot in charts.plots()


def decode_tps(events: list) -> list[float]:
    """Decode tokens/s after each decode round of one reply's events: tokens so far over round time so far."""
    t, n, out = 0.0, 0, []
    tokens = [e for e in events if isinstance(e, TokenEvent)]
    for r in (e for e in events if isinstance(e, RoundEvent) and not e.from_prefill):
        t += r.total_ms / 1e3
        n += sum(1 for e in tokens if e.round_index == r.round_index)
        out.append(n / t)
    return out


def test_a_streamed_reply_is_charted_live_then_kept_and_selectable(qtbot, make_window, send):
    window = make_window(depth=3)
    events: list = []
    window.worker.events.connect(events.extend)
    replies = []
    for prompt in ("Write a bubble sort in C++.", "Name three colours."):
        send(window, prompt)
        replies.append(events[:])
        events.clear()
        assert [y for _, y in window.chart_model.tps] == pytest.approx(decode_tps(replies[-1]))
    m = window.chart_model
    assert m.shown == "reply 2 of 2"
    first_stats, second_stats = replies[0][-1], replies[1][-1]
    assert m.session_decoded == first_stats.decoded_tokens + second_stats.decoded_tokens
    first = next(mid for mid, _ in replaystore.replays_in(window.store, window.conversation_id))
    click(qtbot, window, first)
    assert m.shown == "reply 1 of 2"
    assert [y for _, y in m.tps] == pytest.approx(decode_tps(replies[0]))
    assert m.message_acceptance() == pytest.approx(list(first_stats.acceptance_per_position))
