"""Stock llama-server (the one `make oracle` builds), started with the default pair and a
drafter, as a remote engine: its text is our engine's greedy text, its draft totals are the
ones llama-server reports for the same request, and a Stop and a dead server end a reply as
they should."""

from __future__ import annotations

import json
import os
import signal

import pytest

from engine import Engine, GenerationConfig, Message
from engine.depth import AUTO
from engine.events import FinishReason, RunStats, TokenEvent, TokenKind
from engine.measure.thermal import ThermalState
from engine.remote import ConnectionLost, Endpoint, RemoteInfo
from engine.remote.openai_servers import LlamaServerRemote, attach_openai
from engine.ruler.oracle import serve_speculative

PROMPT = "Write a bubble sort in C++."
N = 24
DEPTH = 2
THREADS = 2


@pytest.fixture(scope="module")
def engine_text(target_path) -> str:
    """Our engine's greedy reply, computed (and the model closed) before llama-server loads."""
    engine = Engine.load(target_path, None)
    try:
        ids = engine.prompt_ids([Message("user", PROMPT)])
        stats = list(engine.stream(ids, GenerationConfig(max_tokens=N, depth=0)))[-1]
    finally:
        engine.close()
    assert isinstance(stats, RunStats)
    return stats.text


@pytest.fixture(scope="module")
def server(oracle, target_path, drafter_path, engine_text):
    """One llama-server for the module (exact mode, as the oracle runs it); the last test kills it."""
    with serve_speculative(oracle, target_path, drafter_path, DEPTH, THREADS, 4096, repack=False) as srv:
        yield srv


def config(max_tokens: int = N) -> GenerationConfig:
    return GenerationConfig(max_tokens=max_tokens, depth=DEPTH)


def raw_reply(endpoint: Endpoint, max_tokens: int = N) -> dict:
    """The same request, not streamed, as any client would send it: llama-server's own answer."""
    body = {"messages": [{"role": "user", "content": PROMPT}], "max_tokens": max_tokens, "temperature": 0.0}
    return json.loads(endpoint.request("POST", "/v1/chat/completions", body, timeout=600))


@pytest.mark.oracle
def test_a_reply_is_llama_servers_own_text_with_its_draft_totals(server, engine_text):
    endpoint = Endpoint(f"http://127.0.0.1:{server.port}")
    remote = attach_openai(endpoint)
    assert isinstance(remote, LlamaServerRemote)
    info = remote.info
    assert (info.kind, info.host, info.provenance, info.per_position, info.thermal) == (
        "llama-server",
        f"127.0.0.1:{server.port}",
        False,
        False,
        False,
    )
    assert info.model == str(server.command[server.command.index("-m") + 1])
    assert info.why_uncoloured == (
        "llama-server reports only a reply's draft totals (draft_n, draft_n_accepted), not which tokens "
        "were drafted: tokens are not coloured."
    )
    assert info.describe() == f"llama-server at 127.0.0.1:{server.port}"

    events = list(remote.reply([Message("user", PROMPT)], config(), False, lambda: False))
    tokens, stats = events[:-1], events[-1]
    assert all(isinstance(t, TokenEvent) for t in tokens) and isinstance(stats, RunStats)
    assert {t.kind for t in tokens} == {TokenKind.UNREPORTED}
    assert [t.round_index for t in tokens] == list(range(len(tokens)))
    assert {(t.token_id, t.position, t.target_prob) for t in tokens} == {(-1, 0, 0.0)}
    text = "".join(t.text for t in tokens)

    reference = raw_reply(endpoint)
    timings = reference["timings"]
    assert text == stats.text == reference["choices"][0]["message"]["content"] == engine_text
    assert (stats.prompt_tokens, stats.generated_tokens) == (timings["prompt_n"], timings["predicted_n"])
    assert (stats.prompt_tokens, stats.generated_tokens) == (36, N)
    assert (stats.drafted, stats.accepted) == (timings["draft_n"], timings["draft_n_accepted"])
    assert 0 < stats.accepted <= stats.drafted <= DEPTH * (N - 1)
    assert stats.rounds == N - 1 - stats.accepted
    assert stats.acceptance_per_position == stats.drafted_per_position == stats.accepted_per_position == ()
    assert (stats.depth, stats.finish_reason, stats.message, stats.from_prefill) == (
        DEPTH,
        FinishReason.MAX_TOKENS,
        "",
        1,
    )
    assert stats.prefill_s > 0 and stats.decode_s > 0
    reading = remote.read_thermal()
    assert (reading.state, reading.source) == (
        ThermalState.UNKNOWN,
        "llama-server does not report its machine's thermal state",
    )


def test_llama_server_is_asked_for_the_depth_and_the_thinking_switch():
    remote = LlamaServerRemote(
        Endpoint("http://127.0.0.1:8080"), RemoteInfo("llama-server", "127.0.0.1:8080", "m.gguf")
    )
    messages = [Message("system", "Be brief."), Message("user", "hi")]
    fixed = GenerationConfig(max_tokens=7, depth=3, stop=("\n\n",), ignore_eog=True)
    assert remote.request_body(messages, fixed, thinking=True) == {
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}],
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": 7,
        "temperature": 0.0,
        "top_p": 1.0,
        "model": "m.gguf",
        "stop": ["\n\n"],
        "ignore_eos": True,
        "chat_template_kwargs": {"enable_thinking": True},
        "speculative.n_max": 3,
        "speculative.n_min": 0,
    }
    auto = remote.request_body(messages, GenerationConfig(max_tokens=7, depth=AUTO), thinking=False)
    assert "speculative.n_max" not in auto and "speculative.n_min" not in auto
    assert auto["chat_template_kwargs"] == {"enable_thinking": False}


@pytest.mark.oracle
def test_a_stop_ends_the_reply_and_the_server_answers_the_next(server, engine_text):
    remote = attach_openai(Endpoint(f"http://127.0.0.1:{server.port}"))
    seen: list[TokenEvent] = []
    events = []
    for event in remote.reply([Message("user", PROMPT)], config(400), False, lambda: len(seen) >= 3):
        events.append(event)
        if isinstance(event, TokenEvent):
            seen.append(event)
    stats = events[-1]
    assert isinstance(stats, RunStats)
    assert stats.finish_reason is FinishReason.CANCELLED
    assert stats.generated_tokens == len(seen) == 3
    assert stats.text == "".join(t.text for t in seen) == engine_text[: len(stats.text)]
    assert (stats.drafted, stats.accepted) == (0, 0)
    assert stats.message == "llama-server sends a reply's draft totals only when the reply ends."

    again = list(remote.reply([Message("user", PROMPT)], config(), False, lambda: False))
    assert again[-1].finish_reason is FinishReason.MAX_TOKENS
    assert again[-1].text == engine_text


@pytest.mark.oracle
def test_a_server_killed_mid_reply_raises_connection_lost(server, engine_text):
    """Runs last: it kills the module's server."""
    remote = attach_openai(Endpoint(f"http://127.0.0.1:{server.port}"))
    kept: list[str] = []
    lost = rf"^The connection to 127\.0\.0\.1:{server.port} was lost mid-reply \(.*\)(; the text so far is kept)?\.$"
    with pytest.raises(ConnectionLost, match=lost):
        for event in remote.reply([Message("user", PROMPT)], config(400), False, lambda: False):
            assert isinstance(event, TokenEvent)  # no RunStats: the reply never ended
            kept.append(event.text)
            if len(kept) == 2:
                os.kill(server.proc.pid, signal.SIGKILL)
    assert len(kept) >= 2
    assert "".join(kept) == engine_text[: len("".join(kept))]
