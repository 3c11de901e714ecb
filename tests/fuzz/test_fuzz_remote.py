"""Fuzz: the remote client against hostile servers (tests/engine/remote/hostile_servers.py)
posing as ours, llama-server or vLLM: junk, endless, trickling and oversized streams and
cancel answers, wrong content types. The contract: a reply ends with its figures or one of
the remote errors (a sentence), a Stop ends it within its grace, and nothing else escapes."""

from __future__ import annotations

import json
import random
import time

import pytest

from engine import DraftlightError, GenerationConfig, Message, RunStats, attach_remote
from tests.engine.remote.hostile_servers import Behaviour, HostileServer, box_line, sse, trickle
from tests.fuzz.bounded import case_count

CHUNK = {"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": None}]}
TOKEN = {"type": "token", "token_id": 5, "text": "a", "kind": "plain", "round": 0, "position": 0, "target_prob": 0.5}

JUNK_JSON = [[], 3, "x", {"type": "round"}, {"choices": 7}, TOKEN | {"round": -1}, {"type": "stats"},
             {"choices": [{"delta": []}]}, {"error": 5}]  # fmt: skip
NAN_CHUNK = b'data: {"choices": [{"index": 0, "delta": {"content": NaN}}], "usage": {"prompt_tokens": Infinity}}\n\n'


def streams(rng: random.Random):
    junk = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 4000)))
    return {
        "junk": lambda: iter([junk, b"\n\n"]),
        "junk-json": lambda: iter([sse(rng.choice(JUNK_JSON))] * 3),
        "endless-keepalive": trickle(b": keep-alive\n\n", 0.01, 3000),
        "endless-tokens": lambda: (sse(CHUNK) + sse(TOKEN) for _ in range(100_000)),
        "trickle-bytes": trickle(b"d", 0.01, 3000),
        "long-line": lambda: iter([b"data: " + b"x" * (1 << 25)]),
        "endless-event": lambda: (b"data: x\n" * 100_000 for _ in range(50)),
        "cut": lambda: iter([b'data: {"choi']),
        "nan": lambda: iter([NAN_CHUNK, sse("[DONE]")]),
    }


@pytest.mark.parametrize("seed", range(case_count(fast=10, full=300)))
def test_hostile_servers_end_in_a_sentence_or_the_figures(seed):
    rng = random.Random(seed)
    kind = rng.choice(["draftlight", "llama-server", "vllm"])
    name, body = rng.choice(sorted(streams(rng).items()))

    def stream():
        if kind == "draftlight" and rng.random() < 0.9:
            yield box_line()
        yield from body()

    cancel = rng.choice([None, trickle(b" ", 0.01, 3000), lambda: iter([b"not json"])])
    content_type = rng.choice(["text/event-stream"] * 4 + ["text/html", "application/json"])
    behaviour = Behaviour(kind=kind, stream=stream, cancel=cancel, content_type=content_type)
    stop_after = rng.choice([1, 3, 20])
    seen: list[object] = []
    with HostileServer(behaviour) as server:
        remote = attach_remote(server.endpoint)
        if hasattr(remote, "stop_grace_s"):
            remote.stop_grace_s, remote.cancel_timeout_s = 1.0, 0.5
        config = GenerationConfig(max_tokens=rng.choice([2, 50, 4096]))
        try:
            pressed = time.monotonic() + 0.5  # the user presses Stop then, or after `stop_after` events

            def cancelled() -> bool:
                return len(seen) >= stop_after or time.monotonic() > pressed

            for event in remote.reply([Message("user", "hi")], config, False, cancelled):
                seen.append(event)
        except DraftlightError as exc:
            assert str(exc) and "Traceback" not in str(exc), (name, exc)
        else:
            assert isinstance(seen[-1], RunStats), (kind, name, seen[-3:])
    endless = name in ("endless-keepalive", "trickle-bytes", "endless-tokens")
    assert not (endless and "stream" in behaviour.finished and len(seen) >= stop_after), (kind, name)
    json.dumps([str(e) for e in seen[:3]])
