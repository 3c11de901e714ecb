"""The app on a remote engine: a real `draftlight serve` child on localhost, the window attached
to it as it would be across machines (a tunnel's near end is such an address)."""

from __future__ import annotations

import platform

import pytest

from app import palette
from app.remote import place_text
from engine import GenerationConfig, Message, TokenEvent, TokenKind
from tests.served import Served

LOAD_TIMEOUT_MS, REPLY_TIMEOUT_MS = 180_000, 300_000  # as tests/app/conftest.py waits

TOKEN = "classroom-token"
PROMPT = "Write a bubble sort in C++."


@pytest.fixture(scope="module")
def server(target_path, drafter_path):
    served = Served(target_path, drafter_path, "--token", TOKEN, "--depth", "2")
    yield served
    served.stop()


def remote_prefs(server, token: str = TOKEN) -> dict:
    return {"engine_place": "remote", "remote_url": server.url, "remote_token": token}


def test_a_remote_reply_is_coloured_as_the_engine_streamed_it(make_window, send, server, engine, qtbot):
    window = make_window(**remote_prefs(server))
    assert window.pair.remote is not None and window.pair.remote.kind == "draftlight"
    assert window.status.labels["place"].toolTip() == place_text(window.pair.remote)
    assert f"draftlight serve on {platform.node()}" in window.status.labels["place"].toolTip()
    assert not window.side.target.isVisibleTo(window)  # the server's models, not this machine's
    assert "qwen2.5-coder-1.5b-instruct-q4_k_m, drafted by Qwen2.5 Coder 0.5B" in window.side.verdict.text()
    assert window.worker.engine is None  # nothing loaded here

    stats = send(window, PROMPT)
    assert stats is not None and stats.generated_tokens == 24

    prompt = engine.prompt_ids([Message("user", PROMPT)])  # the same request, here
    here = [e for e in engine.stream(prompt, GenerationConfig(max_tokens=24, depth=2)) if isinstance(e, TokenEvent)]
    got = window.reply_tokens
    assert [(t.token_id, t.kind, t.round_index, t.position) for t in got] == [
        (t.token_id, t.kind, t.round_index, t.position) for t in here
    ]
    assert {t.kind for t in got} >= {TokenKind.ACCEPTED, TokenKind.PLAIN}
    # On screen: each token's span drawn in its kind's colour.
    colours = palette.current().backgrounds
    spans = window.transcript.spans()
    assert spans and all(s.background == colours[got[s.token_index].kind] for s in spans)
    assert [s.kind for s in spans] == [got[s.token_index].kind.value for s in spans]
    # The charts have the remote reply's rounds; the thermal chart reads the server's box.
    assert sum(window.chart_model.message_positions.drafted) == stats.drafted > 0
    qtbot.waitUntil(lambda: bool(window.chart_model.thermal), timeout=LOAD_TIMEOUT_MS)
    assert window.chart_model.thermal[-1].source.startswith(f"{platform.node()}: ")


def test_the_engine_menu_attaches_remembers_and_comes_back(make_window, server, qtbot):
    window = make_window(wait=False, **remote_prefs(server, token="wrong"))
    qtbot.waitUntil(lambda: not window.attaching, timeout=LOAD_TIMEOUT_MS)
    assert window.pair is None
    assert "wants a token (401)" in window.notice.text() and "Check the address" in window.notice.text()

    dialog = window.engine_menu.ask()  # Engine → Remote server…, filled with what was tried
    assert (dialog.url.text(), dialog.token.text()) == (server.url, "wrong")
    dialog.token.setText(TOKEN)
    dialog.accept()
    qtbot.waitUntil(lambda: window.pair is not None and not window.busy, timeout=LOAD_TIMEOUT_MS)
    assert window.pair.remote is not None and window.engine_menu.remote.isChecked()
    assert (window.prefs.engine_place, window.prefs.remote_url, window.prefs.remote_token) == (
        "remote",
        server.url,
        TOKEN,
    )

    teaching = window.open_teaching()  # runs this machine's engine: it says so, and how to get it back
    teaching.prompt.setText("Say hi.")
    teaching.start()
    qtbot.waitUntil(lambda: "Engine → This machine" in teaching.explanation.text(), timeout=LOAD_TIMEOUT_MS)
    teaching.close()

    window.engine_menu.local.trigger()  # Engine → This machine: its own models load
    qtbot.waitUntil(lambda: window.pair.remote is None and not window.busy, timeout=LOAD_TIMEOUT_MS)
    assert window.worker.engine is not None and window.engine_menu.local.isChecked()
    assert window.prefs.engine_place == "local" and window.status.labels["place"].text() == "this machine on llama.cpp"
    assert window.side.target.isVisibleTo(window) and not window.thermal.remote


def test_a_server_killed_mid_reply_keeps_the_partial_reply_and_retry_asks_again(make_window, smollm_path, qtbot):
    served = Served(smollm_path, "ngram", "--depth", "2")
    try:
        window = make_window(wait=True, max_tokens=160, **remote_prefs(served, token=""))
        assert window.pair.remote is not None
        window.input.setPlainText("Write a long story about a lighthouse keeper.")
        with qtbot.waitSignal(window.reply_finished, timeout=REPLY_TIMEOUT_MS) as finished:
            window.send()
            qtbot.waitUntil(lambda: len(window.reply_tokens) >= 20, timeout=REPLY_TIMEOUT_MS)
            served.kill()
        assert finished.args[0] is None
        kept = list(window.reply_tokens)
        assert len(kept) >= 20
        assert f"The connection to 127.0.0.1:{served.port}" in window.transcript.toPlainText()
        assert window.retry_button.isVisible()
        stored = [m for m in window.store.messages(window.conversation_id) if m.role == "assistant"]
        assert [(t.token_id, t.kind) for t in stored[-1].tokens] == [(t.token_id, t.kind) for t in kept]

        served = Served(smollm_path, "ngram", "--depth", "2", port=served.port)  # the server is back
        with qtbot.waitSignal(window.reply_finished, timeout=REPLY_TIMEOUT_MS) as again:
            window.retry_button.click()
        assert again.args[0] is not None
        assert not window.retry_button.isVisible()
        assistants = [m for m in window.store.messages(window.conversation_id) if m.role == "assistant"]
        assert len(assistants) == 2  # the partial reply stays, and the retried one follows it
        assert [t.token_id for t in assistants[1].tokens[: len(kept)]] == [t.token_id for t in kept]
    finally:
        served.stop()
