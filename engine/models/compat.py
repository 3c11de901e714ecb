"""Can this drafter draft for this target? A rule, and the verdict the rules add up to.

llama.cpp's `common_speculative_are_compatible` is four checks, written once over both runtimes'
vocabularies in engine.models.vocabulary; the rules of what a drafter kind needs of its target are in
engine.models.rules. Each is a Rule (its name, whether it holds, and a sentence either way), so the
pairing doctor can show every one and a refusal can name each that fails.
"""

from __future__ import annotations

from dataclasses import dataclass, field

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


def verdict_of(found: tuple[Rule, ...], max_reasons: int = 4) -> Verdict:
    """The verdict the rules add up to: compatible where all hold, else each difference named."""
    reasons = tuple(reason for rule in found for reason in rule.reasons)
    return Verdict(not reasons, reasons[:max_reasons])
