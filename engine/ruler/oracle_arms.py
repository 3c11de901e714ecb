"""What the MLX ruler's oracle arms share: another project's own loop on our prompt's token ids, as a record.

An oracle (mlx-lm's loops, engine.ruler.mlx_reference; mlx-vlm's, engine.ruler.mlx_vlm_reference)
prefills the prompt and writes its first token (timed as the prefill), then its loop writes the
rest (the decode), and says what it drafted round by round. OracleArms turns that into the RunRecord
every arm reports, so the arms differ only in the loop they run.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.ruler.prompts import BenchPrompt
from engine.ruler.runner import Arm, RunRecord


@dataclass(frozen=True)
class ReferenceRun:
    """One generation by an oracle: its tokens, times and drafts (no drafts where it ran plain)."""

    token_ids: list[int]
    prefill_s: float
    decode_s: float
    rounds: int
    drafted: int
    accepted: int
    acceptance_per_position: list[float]


def per_position(drafted: list[int], accepted: list[int]) -> list[float]:
    """Acceptance at each draft position from each round's drafted and accepted counts: position i is
    drafted in the rounds that drafted more than i, accepted in those that kept more than i."""
    deepest = max(drafted, default=0)
    out = []
    for i in range(deepest):
        tried = [a for d, a in zip(drafted, accepted) if d > i]
        out.append(sum(a > i for a in tried) / len(tried))
    return out


class OracleArms:
    """An oracle's loop on the models our MLX engine runs: `generate` is the loop, `run` the record."""

    def generate(self, ids: list[int], n_tokens: int, depth: int) -> ReferenceRun:
        raise NotImplementedError

    def run(self, arm: Arm, prompt: BenchPrompt, ids: list[int], n_tokens: int) -> RunRecord:
        r = self.generate(ids, n_tokens, int(arm.depth))
        decoded = len(r.token_ids) - 1  # the first token is the prefill's, as in our runs
        return RunRecord(
            arm=arm.name,
            prompt=prompt.name,
            repeat=0,
            prompt_tokens=len(ids),
            generated_tokens=len(r.token_ids),
            prefill_s=r.prefill_s,
            decode_s=r.decode_s,
            decode_tps=decoded / r.decode_s if r.decode_s else 0.0,
            end_to_end_tps=len(r.token_ids) / (r.prefill_s + r.decode_s),
            rounds=r.rounds,
            drafted=r.drafted,
            accepted=r.accepted,
            acceptance_per_position=r.acceptance_per_position,
            token_ids=r.token_ids,
        )

    def close(self) -> None:
        """The models are our engine's, or the oracle's own to drop with it."""
