"""One reply from an OpenAI-compatible chat stream, as the engine's own events.

Each content delta of `/v1/chat/completions` (stream true) becomes one `TokenEvent` of kind
UNREPORTED: these servers do not say which tokens were drafted. A delta is usually one
token, but a server may join several (a character split across tokens, a held-back stop
string) or send a token with no text, so a delta is the unit here:
  - token_id is -1 unless the chunk carries the ids (vLLM's `token_ids`, one per delta);
  - round_index is the delta's place in the reply and position 0: the server does not say
    which of its rounds a token came from;
  - target_prob is 0.0, standing for "not reported" (JSON has no NaN, and a replay's schema
    wants a number from 0 to 1).
Reasoning deltas (`reasoning_content`, vLLM's newer `reasoning`) are wrapped in
<think>...</think>, as the engine writes a thinking model's reply.

The reply ends with one RunStats. The server kinds differ only in what they know of the
drafts: `OpenAIRemote.drafts` is the hook (llama-server reads its `timings`, vLLM its counters).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from engine.chat import Message
from engine.events import Event, FinishReason, RunStats, TokenEvent, TokenKind
from engine.measure.thermal import ThermalReading, ThermalState
from engine.remote import RemoteInfo
from engine.remote.connection import ConnectionLost, Endpoint, RemoteError, _error_sentence
from engine.speculative import GenerationConfig

CHAT_PATH = "/v1/chat/completions"
UNREPORTED_PROB = 0.0  # a token's probability where the server does not report it
SLACK = 2  # deltas past max_tokens a server may send: a delta holds at least one token, so a little slack


@dataclass(frozen=True)
class Drafts:
    """What a server says of one reply's drafting; zeros and () where it says nothing."""

    drafted: int = 0
    accepted: int = 0
    rounds: int = 0
    drafted_per_position: tuple[int, ...] = ()
    accepted_per_position: tuple[int, ...] = ()
    message: str = ""


@dataclass
class Reply:
    """What has arrived of one streamed reply."""

    started: float  # time.perf_counter() when the request went out
    first_at: float | None = None  # when the first text arrived
    last_at: float | None = None
    parts: list[str] = field(default_factory=list)
    deltas: int = 0
    in_thinking: bool = False
    finish: str | None = None  # OpenAI's finish_reason
    stop_reason: int | str | None = None  # vLLM: the stop string, or the stop token's id
    usage: dict | None = None
    timings: dict | None = None  # llama-server's
    metrics: dict | None = None  # vLLM's per-request metrics, where it was started with them
    done: bool = False  # "[DONE]" arrived

    @property
    def text(self) -> str:
        return "".join(self.parts)

    def take(self, chunk: dict, host: str) -> list[tuple[str, int]]:
        """The text (and token id, -1 where not given) of each delta in one chunk."""
        if "error" in chunk or chunk.get("object") == "error":
            said = _error_sentence(json.dumps(chunk).encode())
            raise RemoteError(f"{host} stopped the reply with an error: {said}")
        for key in ("usage", "timings", "metrics"):
            if isinstance(chunk.get(key), dict):
                setattr(self, key, chunk[key])
        out = []
        choices = chunk.get("choices")
        for choice in choices if isinstance(choices, list) else ():  # a chunk is untrusted: 7 is no list
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            found = choice.get("delta")
            text = self._text(found if isinstance(found, dict) else {})
            if text:
                now = time.perf_counter()
                self.first_at = self.first_at or now
                self.last_at = now
                self.parts.append(text)
                self.deltas += 1
                ids = choice.get("token_ids")
                one = ids[0] if isinstance(ids, list) and len(ids) == 1 and isinstance(ids[0], int) else -1
                out.append((text, one))
            if isinstance(choice.get("finish_reason"), str):
                self.finish = choice["finish_reason"]
                stop = choice.get("stop_reason")
                self.stop_reason = stop if isinstance(stop, int | str) and not isinstance(stop, bool) else None
        return out

    def _text(self, delta: dict) -> str:
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        content = delta.get("content")
        out = ""
        if isinstance(reasoning, str) and reasoning:
            out += "" if self.in_thinking else "<think>"
            out += reasoning
            self.in_thinking = True
        if isinstance(content, str) and content:
            out += "</think>" if self.in_thinking else ""
            out += content
            self.in_thinking = False
        return out


def _count(d: dict | None, key: str) -> int | None:
    value = d.get(key) if d else None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value) if math.isfinite(value) and value >= 0 else None  # JSON's Infinity is no count


class OpenAIRemote:
    """Any OpenAI-compatible server: its text, with no word on drafts."""

    kind = "openai"
    server_name = "This server"
    why_uncoloured = (
        "This OpenAI-compatible server reports neither which tokens were drafted nor any draft "
        "totals: tokens are not coloured."
    )
    notes = ""
    extensions = False  # top_k, ignore_eos and the thinking switch: a strict OpenAI server refuses them

    def __init__(self, endpoint: Endpoint, info: RemoteInfo) -> None:
        self.endpoint = endpoint
        self.info = info

    # ---- what is asked ----
    def request_body(self, messages: Sequence[Message], config: GenerationConfig, thinking: bool) -> dict:
        """The chat request: OpenAI's own fields, and the common extensions where the server takes them."""
        s = config.sampling
        body: dict = {
            "messages": [m.as_dict() for m in messages],
            "stream": True,
            "stream_options": {"include_usage": True},
            "max_tokens": config.max_tokens,
            "temperature": s.temperature,
            "top_p": s.top_p,
        }
        if self.info.model:
            body["model"] = self.info.model
        if s.seed is not None:
            body["seed"] = s.seed
        if config.stop:
            body["stop"] = list(config.stop)
        if self.extensions:  # what llama-server and vLLM both take beyond OpenAI's fields
            if s.top_k > 0:
                body["top_k"] = s.top_k
            if config.ignore_eog:
                body["ignore_eos"] = True
            body["chat_template_kwargs"] = {"enable_thinking": thinking}
        return body

    # ---- hooks for the kinds that know more ----
    def before_reply(self) -> object:
        """Whatever must be read before the request (vLLM: its counters)."""
        return None

    def drafts(self, reply: Reply, config: GenerationConfig, before: object) -> Drafts:
        return Drafts()

    def counts(self, reply: Reply) -> tuple[int, int, float, float]:
        """prompt tokens, generated tokens, prefill and decode seconds: usage plus wall times."""
        end = reply.last_at or time.perf_counter()
        first = reply.first_at or end
        prompt = _count(reply.usage, "prompt_tokens") or 0
        generated = _count(reply.usage, "completion_tokens")
        return prompt, reply.deltas if generated is None else generated, first - reply.started, end - first

    # ---- the reply ----
    def reply(
        self, messages: Sequence[Message], config: GenerationConfig, thinking: bool, cancelled: Callable[[], bool]
    ) -> Iterator[Event]:
        """The reply's tokens (UNREPORTED), then its RunStats; a Stop ends it with CANCELLED."""
        body = self.request_body(messages, config, thinking)
        before = self.before_reply()
        reply = Reply(started=time.perf_counter())
        items = self.endpoint.stream(CHAT_PATH, body, cancelled)
        stopped = False
        try:
            for item in items:
                if item == "[DONE]":
                    reply.done = True
                    break
                if not isinstance(item, dict):
                    continue  # a keep-alive or a line we do not read
                taken = reply.take(item, self.endpoint.host)
                if reply.deltas > config.max_tokens + SLACK:  # a delta holds at least one token
                    raise RemoteError(
                        f"{self.endpoint.host} sent more than the {config.max_tokens:,} tokens asked for; "
                        "the reply was cut there."
                    )
                for text, token_id in taken:
                    yield TokenEvent(
                        token_id=token_id,
                        text=text,
                        kind=TokenKind.UNREPORTED,
                        round_index=reply.deltas - 1,
                        position=0,
                        target_prob=UNREPORTED_PROB,
                    )
                if reply.finish is None and cancelled():  # a finished reply reads on to its totals
                    stopped = True
                    break
        finally:
            items.close()  # closing the connection is what stops a server mid-reply
        if reply.finish is None and not reply.done and not stopped:
            stopped = cancelled()
            if not stopped:
                # http.client reads a chunked stream cut short as a clean end: only the missing
                # finish tells the two apart
                raise ConnectionLost(
                    f"The connection to {self.endpoint.host} was lost mid-reply (the stream ended before the "
                    "reply's finish); the text so far is kept."
                )
        yield self.run_stats(reply, config, before, stopped)

    def run_stats(self, reply: Reply, config: GenerationConfig, before: object, stopped: bool) -> RunStats:
        prompt, generated, prefill_s, decode_s = self.counts(reply)
        d = self.drafts(reply, config, before)
        accepted_pp = d.accepted_per_position
        acceptance = tuple(a / n if n else 0.0 for a, n in zip(accepted_pp, d.drafted_per_position))
        return RunStats(
            prompt_tokens=prompt,
            prefill_s=prefill_s,
            generated_tokens=generated,
            decode_s=decode_s,
            rounds=d.rounds,
            depth=config.depth,
            drafted=d.drafted,
            accepted=d.accepted,
            acceptance_per_position=acceptance,
            drafted_per_position=d.drafted_per_position,
            accepted_per_position=accepted_pp,
            draft_s=0.0,
            verify_s=0.0,
            commit_s=0.0,
            rewind_s=0.0,
            overhead_s=0.0,
            finish_reason=self.finish_reason(reply, stopped),
            message=d.message,
            text=reply.text,
            from_prefill=1 if generated else 0,  # both servers sample the first token from the prompt's pass
        )

    @staticmethod
    def finish_reason(reply: Reply, stopped: bool) -> FinishReason:
        if stopped:
            return FinishReason.CANCELLED
        if reply.finish == "length":
            return FinishReason.MAX_TOKENS
        if isinstance(reply.stop_reason, str):  # vLLM names the stop string that ended the reply
            return FinishReason.STOP_STRING
        return FinishReason.EOG

    def read_thermal(self) -> ThermalReading:
        return ThermalReading(ThermalState.UNKNOWN, f"{self.server_name} does not report its machine's thermal state")
