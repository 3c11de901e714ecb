"""Can this drafter draft for that target, from their facts alone (engine.models.facts), whatever their format.

One rule says what each kind of drafter needs of its target: its width, the layers it reads inside the
target's depth (and handed out by the target's runtime), an assistant's family and the cache it reads,
EAGLE-3's vocabulary map. One rule says whether a drafter was made for the target (that rule, and the base
its makers name). The pairing doctor, `--drafter auto`, the load path and `models --list` refuse by them,
so each refuses a mismatched drafter in the same sentence and, where the rules hold, the probe runs.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from engine.drafting import kinds
from engine.models.compat import Rule
from engine.models.facts import ModelFacts

# What a Gemma 4 assistant reads of the target's cache: its shape must be the target's (engine.drafting.llama.mtp).
CACHE_SHAPE = (
    "reading a cache of {} key/value heads, and {}'s has {}",
    "reading keys {} wide, and {}'s are {} wide",
)


def fits(target: ModelFacts, side: ModelFacts) -> tuple[str, str]:
    """(what the drafter is, in words; why it does not fit this target, or ""): what each kind needs of
    its target. A draft model of its own needs nothing of its insides ("a draft model", "")."""
    if not side.kind.reads_target:
        return "a draft model", ""
    if side.made_for_family and target.architecture not in side.made_for_family and side.kind is kinds.MTP:
        return side.architecture, f"is a {side.architecture} model, not a drafter this target can use"
    why_not = next((why for why in _needs(target, side) if why), "")
    return side.said, f"is {side.said} {why_not}: it was trained for another target" if why_not else ""


def _needs(target: ModelFacts, side: ModelFacts) -> Iterator[str]:
    """Each thing the drafter needs of the target, as the clause saying it does not hold ("" where it holds)."""
    width, theirs = target.hidden_size, side.reads_width
    if theirs is not None and width is not None and theirs != width:
        yield f"for a model {theirs:,} wide, and {target.called} is {width:,} wide"
    depth = trunk(target)
    if side.trained_layers is not None and depth is not None and side.trained_layers != depth:
        yield f"for a model of {side.trained_layers} layers, and {target.called} has {depth}"
    if side.kind is kinds.ASSISTANT and target.architecture not in side.made_for_family:
        yield f"made for a Gemma 4 target, and {target.called} is {target.architecture}"
    if side.kind is kinds.ASSISTANT and side.cache_shape is not None:
        ours = target.cache_shape or (None, None)
        for words, mine, theirs_ in zip(CACHE_SHAPE, ours, side.cache_shape, strict=True):
            yield words.format(theirs_, target.called, mine) if mine != theirs_ else ""
    yield from _layers_needed(target, side)
    if side.vocab_map is not None:
        yield _vocabulary_map(target, side.vocab_map)


def _layers_needed(target: ModelFacts, side: ModelFacts) -> Iterator[str]:
    """The target's layers the drafter reads: named, inside the target's depth (where it names the layer
    past the last, the final state), and handed out by the target's runtime."""
    if side.target_layers is None or side.kind not in (kinds.DFLASH, kinds.DSPARK, kinds.EAGLE3):
        return
    reads = sorted({*side.target_layers, *side.tapped_layers})
    depth = trunk(target) or 0
    if side.kind is kinds.EAGLE3 and len(side.target_layers) != 3:
        yield f"naming {len(side.target_layers)} of the target's layers to read, where EAGLE-3 reads three"
        return
    if not reads:
        yield "naming none of the target's layers to read"
        return
    if not target.layers_handed_out and (not side.reads_final_state or min(reads) < depth):
        yield (
            f"reading the target's layers, which {target.runtime.label} does not hand out for {target.called}'s "
            f"architecture ({target.architecture})"
        )
    if trunk(target) is None:
        return
    last = depth if side.reads_final_state else depth - 1
    if not all(0 <= i <= last for i in reads):
        yield (
            f"reading the target's layers {said_and(reads)}, and {target.called} has layers 0 to {depth - 1}"
            f"{' and its final state' if side.reads_final_state else ''}"
        )


def _vocabulary_map(target: ModelFacts, vocab_map: tuple[int | None, int | None, int | None]) -> str:
    """Why an EAGLE-3 drafter's tokens do not map onto the target's, or "": its head writes the target's
    vocabulary directly (full), or a draft vocabulary through `d2t` (a draft id to the target's)."""
    full, draft, d2t = vocab_map
    if full is not None and target.vocab_size is not None and full != target.vocab_size:
        return f"mapping its tokens into a vocabulary of {full:,}, and {target.called} has {target.vocab_size:,}"
    if draft is not None and (d2t is not None or (full is not None and draft != full)) and d2t != draft:
        return f"with a draft vocabulary of {draft:,} tokens and no map (d2t) of as many into the target's"
    return ""


def made_for(target: ModelFacts, side: ModelFacts) -> bool:
    """Whether a drafter says it was made for this target: an assistant beside a Gemma 4, a drafter trained
    on a target of this many layers. `--drafter auto` takes these first."""
    if side.made_for_family:
        return target.architecture in side.made_for_family
    return side.kind.reads_target and side.trained_layers is not None and side.trained_layers == trunk(target)


def trunk(target: ModelFacts) -> int | None:
    """The layers the target's pass runs, which a drafter reads: its MTP heads' blocks are no part of it."""
    return target.trunk_layers if target.trunk_layers is not None else target.layers


def _identity(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower().rsplit("/", 1)[-1])


def made_for_rule(target: ModelFacts, drafter: ModelFacts) -> Rule | None:
    """Whether a drafter that reads the target's insides was made for this target: what it needs of it
    (fits), and the base its makers name. None for a draft model of its own, which needs neither."""
    if not drafter.kind.reads_target:
        return None
    what, why_not = fits(target, drafter)
    if why_not:
        return Rule("made for this target", False, f"{drafter.name} {why_not}.", (f"it {why_not}",))
    # Names of four characters or more: a file stem such as "t" would be found inside any name.
    ours = {_identity(s) for s in (target.called, target.path.stem, *target.base_models)}
    ours = {name for name in ours if len(name) >= 4}
    named = [b for b in drafter.base_models if len(_identity(b)) >= 4]
    if named and not any(_identity(b) in o or o in _identity(b) for b in named for o in ours):
        reason = f"its metadata names {', '.join(named)} as its base, and the target is {target.called}"
        return Rule(
            "made for this target",
            False,
            f"{drafter.name} was trained for another target: {reason}.",
            (f"it was trained for another target ({reason})",),
        )
    base = f", and names {', '.join(named)} as its base" if named else ""
    return Rule("made for this target", True, f"{drafter.name} is {what}, as wide as the target{base}.")


def said_and(numbers: list[int]) -> str:
    """ "0", "0 and 5", "-5, 1 and 2"."""
    words = [str(n) for n in numbers]
    return " and ".join(words) if len(words) < 3 else f"{', '.join(words[:-1])} and {words[-1]}"
