"""Teaching mode's words: what a round did and what it cost, in plain language and numbers."""

from __future__ import annotations

import html
from dataclasses import dataclass

from engine import NgramMatch, RoundStep, TokenEvent, TokenKind, ordinal


@dataclass
class Totals:
    """Running figures over the rounds shown so far."""

    rounds: int = 0
    drafted: int = 0
    accepted: int = 0
    emitted: int = 0
    round_ms: float = 0.0

    def add(self, step: RoundStep) -> None:
        if step.round.from_prefill:
            return  # the prompt's pass wrote that token: not a decode round
        self.rounds += 1
        self.drafted += step.round.drafted
        self.accepted += step.round.accepted
        self.emitted += len(step.tokens)
        self.round_ms += step.round.total_ms


def rank_sentence(token: TokenEvent) -> str:
    """Why a replaced token was missed, in the drafter's terms."""
    rank = token.draft_rank or 0
    sure = (
        f", and the drafter was {token.rejected_prob:.0%} sure of its draft" if token.rejected_prob is not None else ""
    )
    tree = f": a draft tree of width {rank} would have caught it" if 1 < rank <= 3 else ""
    return f"the target's token was the drafter's {ordinal(rank)} choice{sure}{tree}"


def shown(text: str | None) -> str:
    """A token's text for rich text: quoted as Python would, and escaped, so `<h1>` or `<123>` shows as typed."""
    return html.escape(repr(text), quote=False)


def lookup_sentence(found: NgramMatch, prompt_tokens: int, piece) -> str:
    """Where prompt lookup found a round's drafts: the history's last tokens, seen before in the prompt or reply."""
    n = len(found.ngram)
    where = (
        f"the prompt (its token {found.start + 1} of {prompt_tokens})"
        if found.start < prompt_tokens
        else f"the reply (its token {found.start - prompt_tokens + 1})"
    )
    ngram = " ".join(shown(piece(t)) for t in found.ngram)
    return (
        f"Prompt lookup: the last {f'{n} tokens' if n != 1 else 'token'} ({ngram}) appeared before in {where}; "
        f"the drafts are the tokens that followed {'them' if n != 1 else 'it'} there."
    )


def explain_round(step: RoundStep, totals: Totals, plain_pass_ms: float | None, piece) -> str:
    """The panel's words for one round, and the running (1 + a) / c."""
    r = step.round
    drafts = ", ".join(shown(piece(t)) for t in r.draft_tokens) or "nothing"
    lines = [f"<b>Round {r.round_index + 1}</b>"]
    if r.from_prefill:
        return "<br>".join(
            [
                *lines,
                f"The first token, {shown(piece(step.tokens[0].token_id))}, comes from the pass that read the prompt "
                "(the prefill): there was nothing to draft after yet. Drafting starts with the next round.",
            ]
        )
    if r.drafted == 0:
        lines.append("Nothing was drafted: the target ran one plain pass and wrote one token.")
    else:
        lines.append(f"The drafter proposed {r.drafted} token{'s' if r.drafted != 1 else ''}: {drafts}.")
        last = step.tokens[-1]
        if last.kind is TokenKind.BONUS:
            lines.append(
                f"The target agreed with all {r.drafted} and added a bonus token {shown(piece(last.token_id))}: "
                f"{len(step.tokens)} tokens from one verify pass."
            )
        else:
            lines.append(
                f"The target kept {r.accepted} and rejected draft {r.accepted + 1} "
                f"({shown(last.rejected_text)}), writing its own {shown(piece(last.token_id))} instead; "
                f"{r.drafted - r.accepted - 1} later draft{'s' if r.drafted - r.accepted - 1 != 1 else ''} "
                "went unused."
            )
            if last.draft_rank is not None:
                lines.append(rank_sentence(last).capitalize() + ".")
    cost = f"draft {r.draft_ms:.1f} ms, verify {r.verify_ms:.1f} ms, commit {r.commit_ms:.2f} ms"
    if plain_pass_ms:
        lines.append(f"Cost: {cost} = {r.total_ms / plain_pass_ms:.2f} plain passes ({plain_pass_ms:.1f} ms each).")
    else:
        lines.append(f"Cost: {cost} ({r.total_ms:.1f} ms).")
    per_round = totals.emitted / totals.rounds if totals.rounds else 0.0
    a = totals.accepted / totals.drafted if totals.drafted else 0.0
    if plain_pass_ms and totals.rounds:
        c = totals.round_ms / totals.rounds / plain_pass_ms
        lines.append(
            f"So far: {totals.rounds} rounds, acceptance a = {a:.0%}, {per_round:.2f} tokens a round, "
            f"c = {c:.2f} passes a round: (1 + a) / c = {per_round:.2f} / {c:.2f} = <b>{per_round / c:.2f}x</b> "
            "plain decoding."
        )
    else:
        lines.append(
            f"So far: {totals.rounds} rounds, acceptance a = {a:.0%}, {per_round:.2f} tokens a round. "
            "The cost in plain passes needs a plain pass time: run `draftlight tune` or Auto once."
        )
    return "<br>".join(lines)
