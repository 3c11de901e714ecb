"""Servers we did not write, as remote engines: llama-server, vLLM, any OpenAI-compatible one.

`attach_openai(endpoint)` asks what answers:
  - llama-server: `GET /props` answers with its `default_generation_settings` and
    `build_info` (tools/server/server-context.cpp, get_res_props);
  - vLLM: `GET /metrics` carries `vllm:` counters, or `GET /v1/models` says `owned_by` "vllm";
  - otherwise any server whose `GET /v1/models` answers.
The model id is the first of `/v1/models`. None of them says which tokens were drafted, so
every token is UNREPORTED and `RemoteInfo.why_uncoloured` says so.

llama-server's reply ends with its `timings` (tools/server/server-common.cpp,
server_slot_stats::to_json): prompt_n, prompt_ms, predicted_n, predicted_ms, and, where it
drafted, draft_n and draft_n_accepted, this reply's own totals.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Sequence
from pathlib import PurePath

from engine.chat import Message
from engine.remote import Remote, RemoteInfo
from engine.remote.connection import Endpoint, RemoteError
from engine.remote.openai_chat import Drafts, OpenAIRemote, Reply, _count
from engine.remote.vllm import VllmRemote
from engine.speculative import GenerationConfig

__all__ = ["LlamaServerRemote", "OpenAIRemote", "VllmRemote", "attach_openai"]


class LlamaServerRemote(OpenAIRemote):
    """llama-server: text, and each reply's draft totals from its `timings`."""

    kind = "llama-server"
    server_name = "llama-server"
    extensions = True
    why_uncoloured = (
        "llama-server reports only a reply's draft totals (draft_n, draft_n_accepted), not which tokens "
        "were drafted: tokens are not coloured."
    )
    notes = (
        "llama-server drafts as its command line says (--spec-draft-n-max); the depth asked for is sent "
        "with each reply (speculative.n_max), which only builds that take a per-request depth follow."
    )

    def request_body(self, messages: Sequence[Message], config: GenerationConfig, thinking: bool) -> dict:
        body = super().request_body(messages, config, thinking)
        if isinstance(config.depth, int):  # Auto: the server's own setting
            # llama-server's per-request draft settings, as the oracle sends them (engine/ruler/oracle.py);
            # n_min 0 lets the last rounds draft only what the token budget leaves, as the engine does.
            # The build `make oracle` makes compiles them out (tools/server/server-schema.cpp, the
            # `#if 0` around "speculative.n_max"), and its command line's depth rules.
            body["speculative.n_max"] = config.depth
            body["speculative.n_min"] = 0
        return body

    def counts(self, reply: Reply) -> tuple[int, int, float, float]:
        t = reply.timings
        prompt, generated = _count(t, "prompt_n"), _count(t, "predicted_n")
        prompt_ms, predicted_ms = _milliseconds(t, "prompt_ms"), _milliseconds(t, "predicted_ms")
        if prompt is None or generated is None or prompt_ms is None or predicted_ms is None:
            return super().counts(reply)  # a reply cut short carries no timings
        return prompt, generated, prompt_ms / 1e3, predicted_ms / 1e3

    def drafts(self, reply: Reply, config: GenerationConfig, before: object) -> Drafts:
        if reply.timings is None:
            return Drafts(message="llama-server sends a reply's draft totals only when the reply ends.")
        drafted = _count(reply.timings, "draft_n") or 0  # absent where nothing was drafted
        accepted = _count(reply.timings, "draft_n_accepted") or 0
        generated = _count(reply.timings, "predicted_n") or 0
        # Each target pass after the prompt's writes the drafts it kept plus one token of its own.
        rounds = max(generated - 1 - accepted, 0)
        return Drafts(drafted, accepted, rounds)


def _milliseconds(d: dict | None, key: str) -> float | None:
    value = d.get(key) if d else None
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    return float(value) if math.isfinite(value) and value >= 0 else None


def _is_llama_server(props: dict) -> bool:
    return isinstance(props.get("default_generation_settings"), dict) and (
        "build_info" in props or "total_slots" in props
    )


def _first_model(models: dict) -> tuple[str, str]:
    """The first model's id and owner in a /v1/models answer ("" where it lists none)."""
    data = models.get("data")
    first = data[0] if isinstance(data, list) and data and isinstance(data[0], dict) else {}
    model, owner = first.get("id"), first.get("owned_by")
    return (model if isinstance(model, str) else ""), (owner if isinstance(owner, str) else "")


def _is_vllm(endpoint: Endpoint, owner: str) -> bool:
    if owner == "vllm":
        return True
    try:
        page = endpoint.request("GET", "/metrics")
    except RemoteError:
        return False
    return b"vllm:" in page


def attach_openai(endpoint: Endpoint) -> Remote:
    """llama-server, vLLM or any OpenAI-compatible server at `endpoint`; a sentence where none answers."""
    props: dict = {}
    with contextlib.suppress(RemoteError):  # not llama-server (Unreachable goes up: nothing answers there)
        props = endpoint.get_json("/props")
    try:
        models = endpoint.get_json("/v1/models")
    except RemoteError as exc:
        if exc.status == 401:
            raise
        if not _is_llama_server(props):
            raise RemoteError(
                f"{endpoint.host} answers, but not as an OpenAI-compatible server (GET /v1/models: {exc}).",
                exc.status,
            ) from None
        models = {}
    model, owner = _first_model(models)
    kind: type[OpenAIRemote]
    if _is_llama_server(props):
        kind = LlamaServerRemote
        path = props.get("model_alias") or props.get("model_path")
        model = model or (PurePath(path).name if isinstance(path, str) else "")
    elif _is_vllm(endpoint, owner):
        kind = VllmRemote
    else:
        kind = OpenAIRemote
    info = RemoteInfo(
        kind=kind.kind,
        host=endpoint.host,
        model=model,
        provenance=False,
        why_uncoloured=kind.why_uncoloured,
        thermal=False,
        per_position=kind is VllmRemote,
        notes=kind.notes,
    )
    return kind(endpoint, info)
