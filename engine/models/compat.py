"""Can this drafter draft for this target? llama.cpp's rule, explained in words.

llama.cpp's `common_speculative_are_compatible` is four checks; each is a Rule here (its
name, whether it holds, and a sentence either way), so the pairing doctor can show every
one and a refusal can name each that fails.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.runtime.protocol import TextModel

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
class Rule:
    """One compatibility rule: its name in a few words, whether it holds, and what was found."""

    name: str
    holds: bool
    sentence: str
    reasons: tuple[str, ...] = ()  # where it fails: each difference, as a clause for a refusal


@dataclass(frozen=True)
class Verdict:
    compatible: bool
    reasons: tuple[str, ...] = field(default=())
    found: str = ""  # with `--drafter auto`: what was found, and why, in a sentence
    made_for: str = ""  # where the drafter's file names another target as its base: that, in a sentence

    def explain(self) -> str:
        if self.compatible:
            rule = "The drafter shares the target's vocabulary: it can draft for it."
        elif self.reasons:
            rule = "The drafter cannot draft for this target: " + "; ".join(self.reasons) + "."
        else:
            rule = ""
        return " ".join(part for part in (self.found, rule, self.made_for) if part)


def _quote(text: str) -> str:
    return repr(text)


def _vocab_type(model: TextModel) -> str:
    return VOCAB_TYPES.get(model.vocab_type, f"of type {model.vocab_type}")


def vocabulary_type_rule(target: TextModel, drafter: TextModel) -> Rule:
    if target.vocab_type == drafter.vocab_type:
        return Rule("vocabulary type", True, f"Both vocabularies are {_vocab_type(target)}.")
    reason = f"the target's vocabulary is {_vocab_type(target)} and the drafter's is {_vocab_type(drafter)}"
    return Rule("vocabulary type", False, reason[0].upper() + reason[1:] + ".", (reason,))


def special_tokens_rule(target: TextModel, drafter: TextModel) -> Rule:
    reasons: list[str] = []
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
    if reasons:
        sentence = "; ".join(reasons)
        return Rule("special tokens", False, sentence[0].upper() + sentence[1:] + ".", tuple(reasons))
    bos = f"both add start-of-text token {target.bos:,}" if target.add_bos else "neither adds a start-of-text token"
    eos = f"both add end-of-text token {target.eos:,}" if target.add_eos else "neither adds an end-of-text token"
    return Rule("special tokens", True, f"The special tokens agree: {bos}, {eos}.")


def size_rule(target: TextModel, drafter: TextModel) -> Rule:
    diff = abs(target.n_vocab - drafter.n_vocab)
    if diff > VOCAB_SIZE_TOLERANCE:
        reason = (
            f"the target has {target.n_vocab:,} tokens and the drafter {drafter.n_vocab:,} "
            f"({diff:,} apart; at most {VOCAB_SIZE_TOLERANCE} allowed)"
        )
        return Rule("vocabulary size", False, reason[0].upper() + reason[1:] + ".", (reason,))
    sizes = f"{target.n_vocab:,} tokens each" if not diff else f"{target.n_vocab:,} and {drafter.n_vocab:,} tokens"
    return Rule("vocabulary size", True, f"The sizes match: {sizes} (at most {VOCAB_SIZE_TOLERANCE} apart allowed).")


def token_texts_rule(target: TextModel, drafter: TextModel) -> Rule:
    last = min(target.n_vocab, drafter.n_vocab)
    for i in range(FIRST_CHECKED_TOKEN, last):
        a, b = target.token_text(i), drafter.token_text(i)
        if a != b:
            reason = f"token {i:,} is {_quote(a)} in the target and {_quote(b)} in the drafter"
            return Rule("token texts", False, reason[0].upper() + reason[1:] + ".", (reason,))
    return Rule(
        "token texts", True, f"Every token from id {FIRST_CHECKED_TOKEN} to {last - 1:,} is spelled the same in both."
    )


def rules(target: TextModel, drafter: TextModel) -> tuple[Rule, ...]:
    """Every rule of llama.cpp's compatibility check, in its order, each with its finding."""
    return (
        vocabulary_type_rule(target, drafter),
        special_tokens_rule(target, drafter),
        size_rule(target, drafter),
        token_texts_rule(target, drafter),
    )


def verdict_of(found: tuple[Rule, ...], max_reasons: int = 4) -> Verdict:
    """The verdict the rules add up to: compatible where all hold, else each difference named."""
    reasons = tuple(reason for rule in found for reason in rule.reasons)
    return Verdict(not reasons, reasons[:max_reasons])


def check(target: TextModel, drafter: TextModel, max_reasons: int = 4) -> Verdict:
    """Compare vocabularies the way llama.cpp does, and say in words what differs."""
    return verdict_of(rules(target, drafter), max_reasons)
