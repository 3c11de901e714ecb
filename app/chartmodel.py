"""The figures the charts draw (plain Python, no Qt): one reply's, and its conversation's totals.

The reply is the one selected in the transcript, or the one streaming now; "session" figures are
every reply of the conversation on screen, so a deleted reply or another conversation leaves them.
Both are recomputable from the events alone: a stored reply's from its replay (its rounds), or,
where it has none (a server's reply), from its tokens and totals.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from engine import (
    RANK_BUCKETS,
    PositionTally,
    RejectionAnatomy,
    RoundEvent,
    RunStats,
    ThermalReading,
    TokenEvent,
    TokenKind,
    rank_bucket,
    rejection_anatomy,
)

RECENT_ROUNDS = 60


@dataclass
class ChartModel:
    """Figures the charts draw, recomputable from the events alone.

    x is the reply's own decode time in seconds. Decode tokens/s at a point is the reply's tokens
    over its round time so far; the session's is every reply's decoded tokens over their decode time.
    """

    decode_time: float = 0.0
    tps: list[tuple[float, float]] = field(default_factory=list)
    mean_length: list[tuple[float, float]] = field(default_factory=list)
    message_positions: PositionTally = field(default_factory=PositionTally)
    session_positions: PositionTally = field(default_factory=PositionTally)
    session_rounds: list[tuple[int, int]] = field(default_factory=list)  # (drafted, accepted) per round
    session_decoded: int = 0  # decode rounds' tokens, every reply
    session_decode_s: float = 0.0
    session_round_count: int = 0
    rounds: deque = field(default_factory=lambda: deque(maxlen=RECENT_ROUNDS))  # (draft, verify, commit, host) ms
    kinds: dict[TokenKind, int] = field(default_factory=lambda: dict.fromkeys(TokenKind, 0))
    thermal: list[ThermalReading] = field(default_factory=list)
    last_stats: RunStats | None = None
    # Rejection anatomy: where the target's token stood among the drafter's choices, per rank
    # bucket (this reply, the session), and this reply's events for the p_min what-if.
    message_ranks: dict[str, int] = field(default_factory=lambda: dict.fromkeys(RANK_BUCKETS, 0))
    session_ranks: dict[str, int] = field(default_factory=lambda: dict.fromkeys(RANK_BUCKETS, 0))
    message_replaced: list[TokenEvent] = field(default_factory=list)
    message_rounds: list[RoundEvent] = field(default_factory=list)
    plain_pass_s: float | None = None  # this target alone on this box, for the what-if's prices
    shown: str = ""  # which reply the figures are, in words: "reply 2 of 3", "the reply streaming now"
    _message_tokens: int = 0
    _message_rounds: int = 0
    _pending_tokens: int = 0
    _counting: bool = True  # whether the events also add to the session's totals
    rounds_version: int = 0  # bumped when the round-driven plots change
    thermal_version: int = 0  # bumped with each thermal reading
    totals_only: bool = False  # a server that reports a reply's draft totals alone: acceptance is one bar

    def clear_thermal(self) -> None:
        """Another box's readings from now on."""
        self.thermal = []
        self.thermal_version += 1

    def begin_message(self) -> None:
        """A new reply's figures from now on; the session's stay."""
        self.decode_time = 0.0
        self.tps, self.mean_length = [], []
        self.rounds.clear()
        self.kinds = dict.fromkeys(TokenKind, 0)
        self.last_stats = None
        self.totals_only = False
        self.message_positions = PositionTally()
        self.message_ranks = dict.fromkeys(RANK_BUCKETS, 0)
        self.message_replaced, self.message_rounds = [], []
        self._message_tokens = self._message_rounds = self._pending_tokens = 0
        self._counting = True
        self.rounds_version += 1

    def clear_session(self) -> None:
        """No reply at all: a conversation opened afresh, its replies added one by one after."""
        self.session_positions = PositionTally()
        self.session_rounds = []
        self.session_ranks = dict.fromkeys(RANK_BUCKETS, 0)
        self.session_decoded, self.session_decode_s, self.session_round_count = 0, 0.0, 0
        self.begin_message()
        self.shown = ""

    def load(self, replies: list[list], shown: int | None = None) -> None:
        """The session made of these replies' events, oldest first; the figures of reply `shown`
        (an index into `replies`; the last one where None)."""
        self.clear_session()
        for events in replies:
            self.begin_message()
            self.add(events)
        if replies:
            self.show(replies, len(replies) - 1 if shown is None else shown)

    def show(self, replies: list[list], index: int) -> None:
        """Reply `index`'s own figures; the session's stay as they are."""
        self.begin_message()
        self._counting = False
        self.add(replies[index])
        self._counting = True
        self.shown = f"reply {index + 1} of {len(replies)}"

    def add(self, events: Iterable) -> None:
        for event in events:
            if isinstance(event, TokenEvent):
                self._pending_tokens += 1
                self.kinds[event.kind] += 1
                if event.draft_rank is not None:
                    bucket = rank_bucket(event.draft_rank)
                    self.message_ranks[bucket] += 1
                    if self._counting:
                        self.session_ranks[bucket] += 1
                    self.message_replaced.append(event)
            elif isinstance(event, RoundEvent):
                self._add_round(event)
            elif isinstance(event, RunStats):
                self.last_stats = event
                if not self.message_rounds:  # a remote server's reply: its totals, no rounds
                    self._add_totals(event)

    def _add_round(self, r: RoundEvent) -> None:
        self.rounds_version += 1
        self.message_rounds.append(r)
        if r.from_prefill:  # the prompt's pass wrote this token: no decode round, no decode time
            self._pending_tokens = 0
            return
        seconds = r.total_ms / 1e3
        self.decode_time += seconds
        self._message_rounds += 1
        self._message_tokens += self._pending_tokens
        self.message_positions.add(r.drafted, r.accepted)
        if self._counting:
            self.session_positions.add(r.drafted, r.accepted)
            self.session_rounds.append((r.drafted, r.accepted))
            self.session_decoded += self._pending_tokens
            self.session_decode_s += seconds
            self.session_round_count += 1
        self._pending_tokens = 0
        if self.decode_time > 0:
            self.tps.append((self.decode_time, self._message_tokens / self.decode_time))
        self.mean_length.append((self.decode_time, self._message_tokens / self._message_rounds))
        # host: the loop's own work outside the round's three parts (its events, the text, the next depth)
        self.rounds.append((r.draft_ms, r.verify_ms, r.commit_ms, max(0.0, r.round_ms - r.total_ms)))

    def _add_totals(self, stats: RunStats) -> None:
        """What llama-server (draft totals) and vLLM (per position) report of a reply."""
        self.rounds_version += 1
        self._pending_tokens = 0
        if stats.decode_s <= 0:
            return
        self.decode_time = stats.decode_s
        self.tps.append((self.decode_time, stats.decode_tps))
        if self._counting:
            self.session_decoded += stats.decoded_tokens
            self.session_decode_s += stats.decode_s
            self.session_round_count += stats.rounds
        if stats.rounds:
            self.mean_length.append((self.decode_time, stats.mean_accepted_length))
        if stats.drafted_per_position:
            drafted, accepted = stats.drafted_per_position, stats.accepted_per_position
        elif stats.drafted:
            drafted, accepted = (stats.drafted,), (stats.accepted,)
            self.totals_only = True  # one bar for every position together
        else:
            return
        self.message_positions.extend(drafted, accepted)
        if self._counting:
            self.session_positions.extend(drafted, accepted)

    def session_tps(self) -> float | None:
        """Decode tokens/s over every reply of the session, or None before any decode time."""
        return self.session_decoded / self.session_decode_s if self.session_decode_s > 0 else None

    def session_mean_length(self) -> float | None:
        """Tokens per decode round over every reply of the session that counted its rounds."""
        return self.session_decoded / self.session_round_count if self.session_round_count else None

    def add_thermal(self, reading: ThermalReading) -> None:
        self.thermal.append(reading)
        del self.thermal[:-600]
        self.thermal_version += 1

    def anatomy(self) -> RejectionAnatomy:
        """This reply's rejections and its p_min what-ifs."""
        return rejection_anatomy(self.message_replaced, self.message_rounds, self.plain_pass_s)

    def best_what_if(self) -> str:
        """The cutoff that would have helped this reply most, in a sentence (or why none would)."""
        a = self.anatomy()
        measured = self.tps[-1][1] if self.tps else None
        useful = [w for w in a.what_ifs if w.skipped and w.tps is not None]
        if not useful:
            return "" if not a.rejections else "No confidence cutoff would have skipped a draft in this reply."
        best = max(useful, key=lambda w: w.tps)
        return best.sentence(measured).capitalize() + "."

    def message_acceptance(self) -> list[float]:
        return list(self.message_positions.acceptance)

    def session_acceptance(self) -> list[float]:
        return list(self.session_positions.acceptance)
