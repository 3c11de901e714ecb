"""The wire format: OpenAI's chat completions, with each token's provenance in an extension field.

A request is checked field by field before the engine sees it; anything wrong is a
`RequestError` whose sentence the client reads in the error body, with a 4xx status.
Responses carry, under "draftlight", the same fields as `draftlight chat --json`.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from typing import Any

from engine.chat import Message
from engine.depth import AUTO, MAX_DEPTH, Depth
from engine.drafting.kinds import NGRAM, NONE
from engine.events import FinishReason, RunStats, TokenEvent

FINISH = {  # ours -> OpenAI's finish_reason
    FinishReason.EOG: "stop",
    FinishReason.STOP_STRING: "stop",
    FinishReason.MAX_TOKENS: "length",
    FinishReason.CONTEXT_FULL: "length",
    FinishReason.CANCELLED: "stop",
}
LOADED = "loaded"  # the drafter the server loaded
DRAFTERS = (LOADED, NGRAM.name, NONE.name)  # a client may not name files on the server
MAX_MESSAGES = 512
MAX_STOPS = 8
MAX_SEED = (1 << 63) - 1  # what the command line's --seed takes


class RequestError(Exception):
    """A request the server refuses: an HTTP status and a sentence."""

    def __init__(self, status: int, message: str, kind: str = "invalid_request_error") -> None:
        super().__init__(message)
        self.status, self.message, self.kind = status, message, kind

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.kind, "code": self.status}}


@dataclass(frozen=True)
class ChatRequest:
    messages: tuple[Message, ...]
    max_tokens: int
    stream: bool = False
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None
    stop: tuple[str, ...] = ()
    depth: Depth = AUTO
    drafter: str = LOADED
    thinking: bool = False
    ignore_eos: bool = False  # write all max_tokens (benchmarks), as llama-server's ignore_eos
    top_k: int = 0  # 0: off (llama-server's and vLLM's extension field)
    p_min: float = 0.0  # stop drafting below this drafter confidence


def parse_chat(body: bytes, max_tokens_limit: int, default_depth: Depth = AUTO) -> ChatRequest:
    """A chat completion request, checked; the "draftlight" object holds our settings
    (depth: 0-6 or "auto", drafter: loaded/ngram/none, thinking, p_min)."""
    try:
        d = json.loads(body)
    except (ValueError, RecursionError):
        raise RequestError(400, "The request body is not JSON.") from None
    if not isinstance(d, dict):
        raise RequestError(400, "The request body must be a JSON object.")
    ours = _field(d, "draftlight", dict, {})
    max_tokens = _field(d, "max_completion_tokens", int, None)
    max_tokens = _field(d, "max_tokens", int, max_tokens if max_tokens is not None else min(512, max_tokens_limit))
    if not 1 <= max_tokens <= max_tokens_limit:
        raise RequestError(
            400, f"max_tokens must be between 1 and {max_tokens_limit:,} on this server; it was {max_tokens:,}."
        )
    temperature = float(_field(d, "temperature", (int, float), 0.0))
    if not 0.0 <= temperature <= 2.0:
        raise RequestError(400, f"temperature must be between 0 and 2; it was {temperature:g}.")
    top_p = float(_field(d, "top_p", (int, float), 1.0))
    if not 0.0 < top_p <= 1.0:
        raise RequestError(400, f"top_p must be above 0 and at most 1; it was {top_p:g}.")
    seed = _field(d, "seed", int, None)
    if seed is not None and not 0 <= seed <= MAX_SEED:
        raise RequestError(400, f"seed must be a whole number from 0 to {MAX_SEED:,}; it was {seed:,}.")
    top_k = _field(d, "top_k", int, 0)
    if not 0 <= top_k <= 1 << 20:
        raise RequestError(400, f"top_k must be between 0 (off) and {1 << 20:,}; it was {top_k:,}.")
    ours = {k: v for k, v in ours.items() if v is not None}  # null means "the default", as at the top level
    p_min = ours.get("p_min", 0.0)
    if isinstance(p_min, bool) or not isinstance(p_min, int | float) or not 0.0 <= p_min <= 1.0:
        raise RequestError(400, f"draftlight.p_min must be a number from 0 to 1; it was {p_min!r}.")
    stop = _field(d, "stop", (str, list), [])
    stop = [stop] if isinstance(stop, str) else stop
    if len(stop) > MAX_STOPS or not all(isinstance(s, str) and 0 < len(s) <= 256 for s in stop):
        raise RequestError(400, f"stop must be up to {MAX_STOPS} strings of 1-256 characters.")
    return ChatRequest(
        messages=_messages(d.get("messages")),
        max_tokens=max_tokens,
        stream=bool(_field(d, "stream", bool, False)),
        temperature=temperature,
        top_p=top_p,
        seed=seed,
        stop=tuple(stop),
        depth=_depth(ours.get("depth", default_depth)),
        drafter=_drafter(ours.get("drafter", LOADED)),
        thinking=_switch(ours.get("thinking", False), "draftlight.thinking"),
        ignore_eos=bool(_field(d, "ignore_eos", bool, False)),
        top_k=top_k,
        p_min=float(p_min),
    )


def _field(d: dict, name: str, kind, default):
    value = d.get(name)
    if value is None:
        return default
    if isinstance(value, bool) and kind is not bool and bool not in (kind if isinstance(kind, tuple) else (kind,)):
        raise RequestError(400, f"{name} must be a number, not true or false.")
    if not isinstance(value, kind):
        raise RequestError(400, f"{name} has the wrong type ({type(value).__name__}).")
    return value


def _switch(value: Any, name: str) -> bool:
    """true or false, nothing else: the string "false" is not false enough to pass as it."""
    if not isinstance(value, bool):
        raise RequestError(400, f"{name} must be true or false; it was {json.dumps(value)[:80]}.")
    return value


def _messages(raw: Any) -> tuple[Message, ...]:
    if not isinstance(raw, list) or not raw:
        raise RequestError(400, "messages must be a non-empty list of {role, content} objects.")
    if len(raw) > MAX_MESSAGES:
        raise RequestError(400, f"A request may hold up to {MAX_MESSAGES} messages; this one has {len(raw):,}.")
    out = []
    for i, m in enumerate(raw):
        if not isinstance(m, dict) or m.get("role") not in ("system", "developer", "user", "assistant"):
            raise RequestError(400, f"Message {i + 1} needs a role of system, user or assistant.")
        content = m.get("content")
        if isinstance(content, list):  # [{"type": "text", "text": ...}, ...]
            if not all(
                isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str) for p in content
            ):
                raise RequestError(400, f"Message {i + 1} has a part that is not text; this server reads text only.")
            content = "".join(p["text"] for p in content)
        if not isinstance(content, str):
            raise RequestError(400, f"Message {i + 1} has no text content.")
        out.append(Message("system" if m["role"] == "developer" else m["role"], content))
    return tuple(out)


def _depth(value: Any) -> Depth:
    if value == "auto" or value == AUTO:
        return AUTO
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_DEPTH:
        return value
    raise RequestError(400, f'draftlight.depth must be 0-{MAX_DEPTH} or "auto"; it was {value!r}.')


def _drafter(value: Any) -> str:
    if value not in DRAFTERS:
        raise RequestError(400, f"draftlight.drafter must be one of {', '.join(DRAFTERS)}; it was {value!r}.")
    return value


# ---- responses ----------------------------------------------------------------------------


def completion_id() -> str:
    return f"chatcmpl-{uuid.uuid4().hex[:24]}"


def chunk(cid: str, model: str, delta: dict, finish: str | None = None, ours: dict | None = None) -> dict:
    out = {
        "id": cid,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    if ours is not None:
        out["draftlight"] = ours
    return out


def token_chunk(cid: str, model: str, token: TokenEvent) -> dict:
    return chunk(cid, model, {"content": token.text}, ours=token.to_json())


def final_chunk(cid: str, model: str, stats: RunStats, extra: dict) -> dict:
    out = chunk(cid, model, {}, FINISH[stats.finish_reason], ours={**stats.to_json(), **extra})
    out["usage"] = usage(stats)
    return out


def usage(stats: RunStats) -> dict:
    return {
        "prompt_tokens": stats.prompt_tokens,
        "completion_tokens": stats.generated_tokens,
        "total_tokens": stats.prompt_tokens + stats.generated_tokens,
    }


def completion(cid: str, model: str, tokens: list[TokenEvent], stats: RunStats, extra: dict) -> dict:
    return {
        "id": cid,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": stats.text},
                "finish_reason": FINISH[stats.finish_reason],
            }
        ],
        "usage": usage(stats),
        "draftlight": {"tokens": [t.to_json() for t in tokens], "stats": {**stats.to_json(), **extra}},
    }


def sse(data: dict | str) -> bytes:
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    return f"data: {text}\n\n".encode()
