"""What the engine streams: one event per token, one per round, one at the end."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from engine.depth import AUTO, Depth


class TokenKind(enum.Enum):
    """Where an emitted token came from."""

    ACCEPTED = "accepted"  # drafted, and the target agreed
    REPLACED = "replaced"  # the target's own token where it rejected a draft
    BONUS = "bonus"  # the target's extra token after every draft was accepted
    PLAIN = "plain"  # speculation off: one target pass, one token
    # A remote server that does not say where each token came from (llama-server, vLLM): their
    # drafting shows only in the reply's totals.
    UNREPORTED = "unreported"


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenEvent:
    """One emitted token."""

    token_id: int
    text: str  # whole UTF-8 characters only; may be "" while a character is incomplete
    kind: TokenKind
    round_index: int
    position: int  # 0-based position of the token within its round
    target_prob: float  # the target's probability of this token
    draft_prob: float | None = None  # the drafter's, where it has a distribution
    rejected_id: int | None = None  # for REPLACED: the draft the target refused
    rejected_text: str | None = None
    # For REPLACED, where the drafter had a distribution: where the target's token stood among
    # the drafter's candidates (1: its first choice; 2 or 3: a draft tree of that width had it),
    # and how sure the drafter was of the draft the target refused.
    draft_rank: int | None = None
    rejected_prob: float | None = None
    # (token id, probability) of the most likely tokens, when asked for (teaching, replays)
    target_top: tuple[tuple[int, float], ...] = ()
    draft_top: tuple[tuple[int, float], ...] = ()

    def to_json(self) -> dict:
        return {
            "type": "token",
            "token_id": self.token_id,
            "text": self.text,
            "kind": self.kind.value,
            "round": self.round_index,
            "position": self.position,
            "target_prob": self.target_prob,
            "draft_prob": self.draft_prob,
            "rejected_id": self.rejected_id,
            "rejected_text": self.rejected_text,
            "draft_rank": self.draft_rank,
            "rejected_prob": self.rejected_prob,
            "target_top": [list(t) for t in self.target_top],
            "draft_top": [list(t) for t in self.draft_top],
        }

    @classmethod
    def from_json(cls, d: dict) -> TokenEvent:
        return cls(
            token_id=d["token_id"],
            text=d["text"],
            kind=TokenKind(d["kind"]),
            round_index=d["round"],
            position=d["position"],
            target_prob=d["target_prob"],
            draft_prob=d.get("draft_prob"),
            rejected_id=d.get("rejected_id"),
            rejected_text=d.get("rejected_text"),
            draft_rank=d.get("draft_rank"),
            rejected_prob=d.get("rejected_prob"),
            target_top=tuple((int(t), float(p)) for t, p in d.get("target_top", ())),
            draft_top=tuple((int(t), float(p)) for t, p in d.get("draft_top", ())),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class RoundEvent:
    """One speculative round, emitted after its tokens."""

    round_index: int
    drafted: int
    accepted: int
    draft_ms: float = 0.0
    verify_ms: float = 0.0
    commit_ms: float = 0.0  # the accept walk and the rewind of both caches
    rewind_ms: float = 0.0  # the part of commit_ms spent rewinding
    overhead_ms: float = 0.0  # time outside llama.cpp calls: Python's share of the round
    round_ms: float = 0.0  # the whole round: what a reply's decode time adds up
    draft_tokens: tuple[int, ...] = ()
    # The drafter's top probability at each drafted position (what p_min tests), where the
    # drafter has a distribution and probabilities were asked for.
    draft_confidence: tuple[float, ...] = ()
    depth: int = 0  # the depth asked for (the tuner's choice under Auto); drafted may be fewer
    # Round 0 of a reply: its one token came from the prompt's own pass (the prefill), as in
    # llama.cpp; it took no decode time and drafted nothing.
    from_prefill: bool = False
    # The first draft was in hand when the round began: during the last round's verify the draft
    # model guessed the target's token and guessed right, so this round took one step fewer.
    guessed: bool = False
    # The host's waits for the device in this round (the eval audit: each mx.eval on MLX, a draft's
    # steps and the verify together); None where the runtime does not count them (llama.cpp).
    host_syncs: int | None = None

    @property
    def total_ms(self) -> float:
        return self.draft_ms + self.verify_ms + self.commit_ms

    def to_json(self) -> dict:
        return {
            "type": "round",
            "round": self.round_index,
            "drafted": self.drafted,
            "accepted": self.accepted,
            "draft_ms": self.draft_ms,
            "verify_ms": self.verify_ms,
            "commit_ms": self.commit_ms,
            "rewind_ms": self.rewind_ms,
            "overhead_ms": self.overhead_ms,
            "round_ms": self.round_ms,
            "draft_tokens": list(self.draft_tokens),
            "draft_confidence": list(self.draft_confidence),
            "depth": self.depth,
            "from_prefill": self.from_prefill,
            "guessed": self.guessed,
            "host_syncs": self.host_syncs,
        }

    @classmethod
    def from_json(cls, d: dict) -> RoundEvent:
        return cls(
            round_index=d["round"],
            drafted=d["drafted"],
            accepted=d["accepted"],
            draft_ms=d["draft_ms"],
            verify_ms=d["verify_ms"],
            commit_ms=d["commit_ms"],
            rewind_ms=d["rewind_ms"],
            overhead_ms=d["overhead_ms"],
            round_ms=d.get("round_ms", 0.0),
            draft_tokens=tuple(d.get("draft_tokens", ())),
            draft_confidence=tuple(float(p) for p in d.get("draft_confidence", ())),
            depth=d.get("depth", d["drafted"]),
            from_prefill=d.get("from_prefill", False),
            guessed=d.get("guessed", False),
            host_syncs=d.get("host_syncs"),
        )


class FinishReason(enum.Enum):
    EOG = "eog"  # the model ended its turn
    MAX_TOKENS = "max_tokens"
    STOP_STRING = "stop_string"
    CANCELLED = "cancelled"
    CONTEXT_FULL = "context_full"


@dataclass
class PositionTally:
    """Drafted and accepted counts per draft position, over any set of rounds.

    Position i was drafted by every round that drafted more than i tokens, and accepted by
    every round that kept more than i. The one place these counts are made: a reply's
    RunStats, the charts' message and session figures.
    """

    drafted: list[int] = field(default_factory=list)
    accepted: list[int] = field(default_factory=list)

    def add(self, drafted: int, accepted: int) -> None:
        while len(self.drafted) < drafted:
            self.drafted.append(0)
            self.accepted.append(0)
        for i in range(drafted):
            self.drafted[i] += 1
        for i in range(accepted):
            self.accepted[i] += 1

    def extend(self, drafted: tuple[int, ...], accepted: tuple[int, ...]) -> None:
        """Add counts already tallied (a finished reply's)."""
        while len(self.drafted) < len(drafted):
            self.drafted.append(0)
            self.accepted.append(0)
        for i, (d, a) in enumerate(zip(drafted, accepted)):
            self.drafted[i] += d
            self.accepted[i] += a

    @property
    def acceptance(self) -> tuple[float, ...]:
        """Accepted at i over drafted at i."""
        return tuple(a / d if d else 0.0 for a, d in zip(self.accepted, self.drafted))


@dataclass(frozen=True, slots=True)
class ContentStats:
    """One part of a reply a reader recognises (engine.content cuts them), or every part of one kind."""

    kind: str  # "thinking", "code", "json", "list", "prose"
    tokens: int = 0
    decoded_tokens: int = 0  # tokens from decode rounds (the prefill's first token is not one)
    drafted: int = 0
    accepted: int = 0
    rounds: float = 0.0  # decode rounds, each shared among the parts its tokens fell in
    start: int = -1  # character offsets into the reply's text; -1 for a kind's total
    end: int = -1

    @property
    def acceptance(self) -> float | None:
        return self.accepted / self.drafted if self.drafted else None

    @property
    def tokens_per_round(self) -> float | None:
        return self.decoded_tokens / self.rounds if self.rounds > 0 else None

    def label(self) -> str:
        """ "code 94% · 3.4/round": acceptance and tokens per round, where there are any."""
        out = self.kind
        if self.acceptance is not None:
            out += f" {self.acceptance:.0%}"
        if self.tokens_per_round is not None:
            out += f" · {self.tokens_per_round:.1f}/round"
        return out

    def to_json(self) -> dict:
        out = {
            "kind": self.kind,
            "tokens": self.tokens,
            "decoded_tokens": self.decoded_tokens,
            "drafted": self.drafted,
            "accepted": self.accepted,
            "acceptance": self.acceptance,
            "rounds": self.rounds,
            "tokens_per_round": self.tokens_per_round,
        }
        if self.start >= 0:
            out.update(start=self.start, end=self.end)
        return out

    @classmethod
    def from_json(cls, d: dict) -> ContentStats:
        return cls(
            kind=str(d["kind"]),
            tokens=int(d.get("tokens", 0)),
            decoded_tokens=int(d.get("decoded_tokens", 0)),
            drafted=int(d.get("drafted", 0)),
            accepted=int(d.get("accepted", 0)),
            rounds=float(d.get("rounds", 0.0)),
            start=int(d.get("start", -1)),
            end=int(d.get("end", -1)),
        )


CONTENT_KINDS = ("thinking", "code", "json", "list", "prose")


def content_by_kind(parts: tuple[ContentStats, ...] | list[ContentStats]) -> list[ContentStats]:
    """Every part of one kind together, in CONTENT_KINDS order; kinds absent left out."""
    out = []
    for kind in CONTENT_KINDS:
        mine = [p for p in parts if p.kind == kind]
        if mine:
            out.append(
                ContentStats(
                    kind,
                    tokens=sum(p.tokens for p in mine),
                    decoded_tokens=sum(p.decoded_tokens for p in mine),
                    drafted=sum(p.drafted for p in mine),
                    accepted=sum(p.accepted for p in mine),
                    rounds=sum(p.rounds for p in mine),
                )
            )
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class RunStats:
    """Totals for one reply; the last event of a stream."""

    prompt_tokens: int  # tokens prefilled for this reply (new tokens only in a follow-up)
    prefill_s: float
    generated_tokens: int  # every token of the reply, the prefill's first one included
    decode_s: float
    rounds: int  # decode rounds: the prefill's token is not one
    depth: Depth  # what was asked for: a fixed depth, or AUTO (RoundEvent.depth says what Auto chose)
    drafted: int
    accepted: int
    acceptance_per_position: tuple[float, ...]  # accepted at i / rounds that drafted i
    drafted_per_position: tuple[int, ...]
    accepted_per_position: tuple[int, ...]
    draft_s: float
    verify_s: float
    commit_s: float
    rewind_s: float
    overhead_s: float
    finish_reason: FinishReason
    message: str = ""  # a sentence for the user where the finish needs one
    text: str = ""
    token_ids: tuple[int, ...] = field(default=(), repr=False)
    from_prefill: int = 0  # tokens that came from the prefill's pass (the first, usually)
    # The reply cut into parts a reader recognises (code, JSON, lists, prose, thinking), each
    # with its share of the figures above: acceptance is a property of the text.
    content: tuple[ContentStats, ...] = ()
    host_syncs: int | None = None  # the decode rounds' host syncs (RoundEvent.host_syncs), where counted

    @property
    def syncs_per_round(self) -> float | None:
        """Host syncs per decode round (the eval audit), where the runtime counts them."""
        return self.host_syncs / self.rounds if self.host_syncs is not None and self.rounds else None

    @property
    def by_content(self) -> list[ContentStats]:
        """The parts summed by kind: "code 94% · 3.4/round, prose 70% · 1.9/round"."""
        return content_by_kind(self.content)

    def content_summary(self) -> str:
        """One line of acceptance by content, or "" where the reply drafted nothing and is of one kind."""
        kinds = self.by_content
        return ", ".join(c.label() for c in kinds) if len(kinds) > 1 or any(c.drafted for c in kinds) else ""

    @property
    def decoded_tokens(self) -> int:
        """Tokens written by decode rounds: what decode speed counts, as in llama.cpp."""
        return self.generated_tokens - self.from_prefill

    @property
    def decode_tps(self) -> float:
        return self.decoded_tokens / self.decode_s if self.decode_s > 0 else 0.0

    @property
    def end_to_end_tps(self) -> float:
        total = self.prefill_s + self.decode_s
        return self.generated_tokens / total if total > 0 else 0.0

    @property
    def acceptance(self) -> float:
        """Accepted drafts over drafted tokens, all positions together."""
        return self.accepted / self.drafted if self.drafted else 0.0

    @property
    def mean_accepted_length(self) -> float:
        """Tokens emitted per decode round: accepted drafts plus the target's own token."""
        return self.decoded_tokens / self.rounds if self.rounds else 0.0

    def to_json(self) -> dict:
        return {
            "type": "stats",
            "prompt_tokens": self.prompt_tokens,
            "prefill_s": self.prefill_s,
            "generated_tokens": self.generated_tokens,
            "decode_s": self.decode_s,
            "decode_tps": self.decode_tps,
            "end_to_end_tps": self.end_to_end_tps,
            "rounds": self.rounds,
            "depth": self.depth,
            "drafted": self.drafted,
            "accepted": self.accepted,
            "acceptance": self.acceptance,
            "acceptance_per_position": list(self.acceptance_per_position),
            "drafted_per_position": list(self.drafted_per_position),
            "accepted_per_position": list(self.accepted_per_position),
            "mean_accepted_length": self.mean_accepted_length,
            "draft_s": self.draft_s,
            "verify_s": self.verify_s,
            "commit_s": self.commit_s,
            "rewind_s": self.rewind_s,
            "overhead_s": self.overhead_s,
            "host_syncs": self.host_syncs,
            "finish_reason": self.finish_reason.value,
            "message": self.message,
            "token_ids": list(self.token_ids),
            "text": self.text,
            "from_prefill": self.from_prefill,
            "segments": [c.to_json() for c in self.content],
            "by_content": [c.to_json() for c in self.by_content],
        }

    @classmethod
    def from_json(cls, d: dict) -> RunStats:
        names = {f for f in cls.__dataclass_fields__}
        kw = {k: v for k, v in d.items() if k in names}
        for k in ("acceptance_per_position", "drafted_per_position", "accepted_per_position", "token_ids"):
            kw[k] = tuple(kw.get(k, ()))
        kw["finish_reason"] = FinishReason(d["finish_reason"])
        kw["content"] = tuple(ContentStats.from_json(c) for c in d.get("segments", ()))
        if kw.get("depth") == -1:  # Auto, as replies saved before it had a name were written
            kw["depth"] = AUTO
        return cls(**kw)


Event = TokenEvent | RoundEvent | RunStats


def event_from_json(d: dict) -> Event:
    """Read back one line of `draftlight chat --json` (or an app export)."""
    kind = d.get("type")
    if kind == "token":
        return TokenEvent.from_json(d)
    if kind == "round":
        return RoundEvent.from_json(d)
    if kind == "stats":
        return RunStats.from_json(d)
    raise ValueError(f"not an event line: type {kind!r}")
