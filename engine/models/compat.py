"""Can this drafter draft for this target? llama.cpp's rule, explained in words."""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.runtime import Model

VOCAB_SIZE_TOLERANCE = 128  # llama.cpp's SPEC_VOCAB_MAX_SIZE_DIFFERENCE
FIRST_CHECKED_TOKEN = 5  # llama.cpp's SPEC_VOCAB_CHECK_START_TOKEN_ID

VOCAB_TYPES = {
    0: "none",
    1: "SentencePiece (SPM)",
    2: "byte-level BPE",
    3: "WordPiece",
    4: "Unigram",
    5: "RWKV",
    6: "PLaMo-2",
}


@dataclass(frozen=True)
class Verdict:
    compatible: bool
    reasons: tuple[str, ...] = field(default=())
    found: str = ""  # with `--drafter auto`: what was found, and why, in a sentence

    def explain(self) -> str:
        if self.compatible:
            rule = "The drafter shares the target's vocabulary: it can draft for it."
        elif self.reasons:
            rule = "The drafter cannot draft for this target: " + "; ".join(self.reasons) + "."
        else:
            rule = ""
        return " ".join(part for part in (self.found, rule) if part)


def _quote(text: str) -> str:
    return repr(text)


def check(target: Model, drafter: Model, max_reasons: int = 4) -> Verdict:
    """Compare vocabularies the way llama.cpp does, and say in words what differs."""
    reasons: list[str] = []
    if target.vocab_type != drafter.vocab_type:
        reasons.append(
            f"the target's vocabulary is {VOCAB_TYPES.get(target.vocab_type, target.vocab_type)} "
            f"and the drafter's is {VOCAB_TYPES.get(drafter.vocab_type, drafter.vocab_type)}"
        )
    if target.add_bos != drafter.add_bos:
        reasons.append(
            f"the target {'adds' if target.add_bos else 'does not add'} a start-of-text token "
            f"and the drafter {'does' if drafter.add_bos else 'does not'}"
        )
    elif target.add_bos and target.bos != drafter.bos:
        reasons.append(f"the start-of-text token is {target.bos:,} in the target and {drafter.bos:,} in the drafter")
    if target.add_eos != drafter.add_eos:
        reasons.append("one model adds an end-of-text token and the other does not")
    elif target.add_eos and target.eos != drafter.eos:
        reasons.append(f"the end-of-text token is {target.eos:,} in the target and {drafter.eos:,} in the drafter")
    diff = abs(target.n_vocab - drafter.n_vocab)
    if diff > VOCAB_SIZE_TOLERANCE:
        reasons.append(
            f"the target has {target.n_vocab:,} tokens and the drafter {drafter.n_vocab:,} "
            f"({diff:,} apart; at most {VOCAB_SIZE_TOLERANCE} allowed)"
        )
    if len(reasons) < max_reasons:
        for i in range(FIRST_CHECKED_TOKEN, min(target.n_vocab, drafter.n_vocab)):
            a, b = target.token_text(i), drafter.token_text(i)
            if a != b:
                reasons.append(f"token {i:,} is {_quote(a)} in the target and {_quote(b)} in the drafter")
                break
    return Verdict(not reasons, tuple(reasons[:max_reasons]))
