"""vLLM as a remote engine: its text, and each reply's drafts from the server's counters.

vLLM keeps speculative decoding's counts as Prometheus counters on `/metrics`
(vllm/v1/spec_decode/metrics.py, `SpecDecodingProm`): counters named
`vllm:spec_decode_num_drafts`, `..._num_draft_tokens`, `..._num_accepted_tokens` and
`..._num_accepted_tokens_per_pos` (label "position"), which prometheus_client exposes with
a `_total` suffix. Their change over one reply is that reply's drafts, rounds and
acceptance per position (accepted at i over the drafts: every draft has each position,
as vLLM's own per-position rate counts it). They count every client of the server: where
another reply ran alongside (the server wrote more tokens than this reply had, or had a
request running when this one began) RunStats.message says so.

Newer vLLM started with per-request metrics puts the reply's own counts in the last
chunk (`metrics.speculative_decoding`, vllm/entrypoints/generate/base/protocol.py): those
are used where present, and nothing is shared.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from engine.remote.connection import RemoteError, Unreachable
from engine.remote.openai_chat import Drafts, OpenAIRemote, Reply
from engine.remote.prometheus import by_label, parse_samples, total
from engine.replayschema import MAX_DRAFTED
from engine.speculative import GenerationConfig

DRAFTS = "vllm:spec_decode_num_drafts_total"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
ACCEPTED_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
GENERATED = "vllm:generation_tokens_total"  # every reply's tokens: tells whether another reply overlapped
RUNNING = "vllm:num_requests_running"
NAMES = frozenset({DRAFTS, DRAFT_TOKENS, ACCEPTED, ACCEPTED_PER_POS, GENERATED, RUNNING})
LAG_TRIES = 5  # the counters may trail the reply's last chunk by one engine step
LAG_WAIT_S = 0.1

NO_COUNTERS = (
    "vLLM's /metrics page has no speculative-decoding counters (vllm:spec_decode_*): is the server "
    "started with a speculative config, and its stats logging on?"
)

MAX_STEPS = 1 << 20  # drafting steps a per-request metrics list may name; a reply has far fewer


@dataclass(frozen=True)
class SpecCounters:
    """vLLM's counters at one moment, summed over its engines."""

    drafts: float
    draft_tokens: float
    accepted: float
    accepted_per_position: tuple[float, ...]
    generated: float | None = None
    running: float | None = None

    @classmethod
    def read(cls, page: str | bytes) -> SpecCounters | None:
        """The counters on a /metrics page; None where it has no speculative-decoding counters."""
        samples = parse_samples(page, NAMES)
        drafts, drafted, accepted = total(samples, DRAFTS), total(samples, DRAFT_TOKENS), total(samples, ACCEPTED)
        if drafts is None or drafted is None or accepted is None:
            return None
        labels = by_label(samples, ACCEPTED_PER_POS, "position").items()  # an untrusted page: positions bounded
        per_pos = {int(k): v for k, v in labels if k.isdigit() and len(k) <= 4 and int(k) < MAX_DRAFTED}
        positions = tuple(per_pos.get(i, 0.0) for i in range(max(per_pos) + 1)) if per_pos else ()
        return cls(drafts, drafted, accepted, positions, total(samples, GENERATED), total(samples, RUNNING))


def drafts_from_counters(before: SpecCounters | None, after: SpecCounters | None, generated_here: int) -> Drafts:
    """One reply's drafts: the counters' change over it, with a sentence where it may include others'."""
    if before is None or after is None:
        return Drafts(message=NO_COUNTERS)
    n = max(len(before.accepted_per_position), len(after.accepted_per_position))
    pad = (0.0,) * n
    per_pos = [round(a - b) for a, b in zip((*after.accepted_per_position, *pad)[:n], (*before.accepted_per_position, *pad)[:n])]  # fmt: skip
    drafts = round(after.drafts - before.drafts)
    drafted = round(after.draft_tokens - before.draft_tokens)
    accepted = round(after.accepted - before.accepted)
    if min(drafts, drafted, accepted, *per_pos, 0) < 0:
        return Drafts(message="vLLM's counters went backwards during this reply (did the server restart?): its drafts are not known.")  # fmt: skip
    message = ""
    written = (
        after.generated - before.generated if after.generated is not None and before.generated is not None else None
    )
    if written is not None and written > generated_here:
        message = (
            f"vLLM's draft counters count every client of the server, and another reply ran alongside this one "
            f"(the server wrote {round(written):,} tokens, this reply {generated_here:,}): these draft figures include it."
        )
    elif before.running:
        message = (
            "vLLM's draft counters count every client of the server, and another request was running when this "
            "reply began: these draft figures may include it."
        )
    return Drafts(drafted, accepted, drafts, (drafts,) * n, tuple(per_pos), message)


def drafts_from_request_metrics(metrics: dict | None) -> Drafts | None:
    """The reply's own counts from vLLM's per-request metrics; None where it sent none."""
    sd = metrics.get("speculative_decoding") if isinstance(metrics, dict) else None
    if not isinstance(sd, dict):
        return None
    try:
        steps, drafted, accepted = int(sd["num_spec_steps"]), int(sd["num_draft_tokens"]), int(sd["num_accepted_draft_tokens"])  # fmt: skip
        histogram = [int(x) for x in sd["acceptance_histogram"][: MAX_DRAFTED + 1]]
        per_step = sd.get("per_step_drafted")
        per_step = [int(x) for x in per_step] if isinstance(per_step, list) and len(per_step) <= MAX_STEPS else None
    except (KeyError, TypeError, ValueError):
        return None
    # histogram[j]: steps that accepted exactly j drafts; position i was kept by every step that kept more than i
    k = max(len(histogram) - 1, 0)
    accepted_pp = tuple(sum(histogram[i + 1 :]) for i in range(k))
    drafted_pp = tuple(sum(1 for d in per_step if d > i) for i in range(k)) if per_step else (steps,) * k
    return Drafts(drafted, accepted, steps, drafted_pp, accepted_pp)


class VllmRemote(OpenAIRemote):
    """vLLM: text, and acceptance per draft position from its counters."""

    kind = "vllm"
    server_name = "vLLM"
    extensions = True
    why_uncoloured = (
        "vLLM reports only its draft counters (drafts, drafted and accepted tokens, acceptance per "
        "position), not which tokens were drafted: tokens are not coloured."
    )
    notes = (
        "vLLM drafts as many tokens as its speculative config says; its counters are shared by every client "
        "of the server, so a reply's figures include any other reply running at the same time."
    )

    def counters(self) -> SpecCounters | None:
        try:
            return SpecCounters.read(self.endpoint.request("GET", "/metrics"))
        except (RemoteError, Unreachable):
            return None

    def before_reply(self) -> SpecCounters | None:
        return self.counters()

    def drafts(self, reply: Reply, config: GenerationConfig, before: object) -> Drafts:
        own = drafts_from_request_metrics(reply.metrics)
        if own is not None:
            return own
        start = before if isinstance(before, SpecCounters) else None
        generated = self.counts(reply)[1]
        after = self.counters()
        for _ in range(LAG_TRIES):
            behind = (
                start is not None
                and after is not None
                and start.generated is not None
                and after.generated is not None
                and after.generated - start.generated < generated
            )
            if not behind:
                break
            time.sleep(LAG_WAIT_S)
            after = self.counters()
        return drafts_from_counters(start, after, generated)
