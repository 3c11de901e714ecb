"""The window on stock llama-server (the `make oracle` build, with the default pair's drafter):
the reply's text uncoloured, the transcript saying why, and llama-server's own draft counters
in the status bar and the acceptance chart."""

from __future__ import annotations

import json

import pytest

from app.remote import place_text
from engine import Endpoint, TokenKind
from engine.ruler.oracle import serve_speculative

LOAD_TIMEOUT_MS = 180_000
PROMPT = "Write a bubble sort in C++."


@pytest.fixture(scope="module")
def llama_server(oracle, target_path, drafter_path):
    with serve_speculative(oracle, target_path, drafter_path, 2, 2, 4096, repack=False) as server:
        yield server


@pytest.mark.oracle
def test_llama_servers_counters_are_shown_and_its_tokens_are_not_coloured(make_window, send, llama_server):
    url = f"http://127.0.0.1:{llama_server.port}"
    window = make_window(engine_place="remote", remote_url=url, remote_token="", max_tokens=24)
    info = window.pair.remote
    assert info is not None and info.kind == "llama-server"
    assert (
        window.status.labels["place"].toolTip()
        == place_text(info)
        == f"remote: llama-server at 127.0.0.1:{llama_server.port}"
    )
    stats = send(window, PROMPT)
    assert stats is not None and stats.generated_tokens == 24

    # llama-server's own counters for the same request, read by a plain client.
    body = {"messages": [{"role": "user", "content": PROMPT}], "max_tokens": 24, "temperature": 0.0}
    timings = json.loads(Endpoint(url).request("POST", "/v1/chat/completions", body, timeout=600))["timings"]
    assert (stats.drafted, stats.accepted) == (timings["draft_n"], timings["draft_n_accepted"])
    assert stats.drafted > 0

    assert {t.kind for t in window.reply_tokens} == {TokenKind.UNREPORTED}
    spans = window.transcript.spans()
    assert spans and {s.kind for s in spans} == {"unreported"} and {s.background for s in spans} == {"#000000"}
    assert info.why_uncoloured in window.transcript.toPlainText()
    assert window.status.labels["acceptance"].text() == f"acceptance {stats.accepted / stats.drafted:.0%}"
    model = window.chart_model
    assert model.totals_only and model.message_positions.drafted == [timings["draft_n"]]
    assert model.message_positions.accepted == [timings["draft_n_accepted"]]
    window.charts.refresh()
    ticks = window.charts.accept_plot.getAxis("bottom")._tickLevels  # what the axis shows
    assert ticks == [[(1, "all")]]
