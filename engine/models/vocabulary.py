"""A model's vocabulary as the pairing rules see it, read from a loaded model or an MLX folder, and the one
set of rules that says whether a drafter shares its target's.

The rules are llama.cpp's `common_speculative_are_compatible` in words (the type, the special tokens, the
size within a tolerance, every token's text from id 5 on), each a Rule with a sentence either way. Each rule
compares only what both vocabularies state, and says so where one side states nothing: an MLX folder without
a tokenizer.json spells no tokens, a loaded model states everything llama.cpp asks of it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Set
from dataclasses import dataclass, field

from engine.models.compat import FIRST_CHECKED_TOKEN, VOCAB_SIZE_TOLERANCE, VOCAB_TYPES, Rule, Verdict, verdict_of
from engine.models.facts import own_root
from engine.models.mlx_folders import MAX_CONFIG_BYTES, MAX_TOKENIZER_BYTES, MlxFolder, inside, read_json
from engine.runtime.protocol import TextModel

# tokenizer.json's model.type in llama.cpp's words; a BPE without a byte-level step is SentencePiece's
TOKENIZER_TYPES = {"WordPiece": VOCAB_TYPES[3], "Unigram": VOCAB_TYPES[4]}
BYTE_LEVEL_BPE, SENTENCEPIECE = VOCAB_TYPES[2], VOCAB_TYPES[1]


def _no_texts(token: int) -> str | None:
    return None


@dataclass(frozen=True)
class Vocabulary:
    """What a vocabulary states about itself; None (or empty) wherever its source says nothing."""

    type: str | None = None  # in llama.cpp's words (VOCAB_TYPES): "byte-level BPE", "SentencePiece (SPM)", ...
    size: int | None = None  # its tokens (a loaded model's n_vocab, config.json's vocab_size)
    bos: int | None = None  # the start-of-text token; -1 where a loaded model has none (llama.cpp's)
    eos: frozenset[int] = frozenset()  # the end-of-text tokens
    add_bos: bool | None = None  # whether a prompt starts with `bos`
    add_eos: bool | None = None
    special: Mapping[int, str] = field(default_factory=dict)  # special tokens' texts by id
    spelled: bool = False  # whether `text` answers: a loaded model's tokens, a folder's tokenizer.json
    texts_end: int = 0  # the ids `text` can answer for lie below this
    text: Callable[[int], str | None] = field(default=_no_texts, compare=False, repr=False)


def loaded_vocabulary(model: TextModel) -> Vocabulary:
    """A loaded model's vocabulary, as llama.cpp's check reads it (its end-of-text token alone)."""
    eos = model.eos
    special = {i: model.token_text(i) for i in (model.bos, eos) if 0 <= i < model.n_vocab}
    return Vocabulary(
        type=VOCAB_TYPES.get(model.vocab_type, f"of type {model.vocab_type}"),
        size=model.n_vocab,
        bos=model.bos,
        eos=frozenset({eos}),
        add_bos=model.add_bos,
        add_eos=model.add_eos,
        special=special,
        spelled=True,
        texts_end=model.n_vocab,
        text=model.token_text,
    )


def _byte_level(step: object, depth: int = 4) -> bool:
    """Whether a tokenizer.json pre-tokenizer or decoder (a Sequence of them, too) works on bytes."""
    if depth <= 0 or not isinstance(step, dict):
        return False
    if step.get("type") == "ByteLevel":
        return True
    parts = step.get("pretokenizers", step.get("decoders"))
    return isinstance(parts, list) and any(_byte_level(p, depth - 1) for p in parts)


def _tokenizer_type(data: dict) -> str | None:
    model = data.get("model")
    kind = model.get("type") if isinstance(model, dict) else None
    if kind == "BPE":
        return BYTE_LEVEL_BPE if any(_byte_level(data.get(k)) for k in ("pre_tokenizer", "decoder")) else SENTENCEPIECE
    return TOKENIZER_TYPES.get(kind) if isinstance(kind, str) else None


def _ids(value: object) -> list[int]:
    values = value if isinstance(value, list) else [value]
    return [i for i in values if isinstance(i, int) and not isinstance(i, bool) and i >= 0]


def _flag(value: object) -> bool | None:
    return value if isinstance(value, bool) else None


def folder_vocabulary(folder: MlxFolder) -> Vocabulary:
    """An MLX folder's vocabulary from its files: config.json's size and special ids, tokenizer_config.json's
    whether they are added, tokenizer.json's type and token texts (read within MAX_TOKENIZER_BYTES)."""
    root = own_root(folder.path).resolve()
    path = inside(folder.path / "tokenizer.json", root)
    data = (read_json(path, MAX_TOKENIZER_BYTES) if path is not None else None) or {}
    settings_path = inside(folder.path / "tokenizer_config.json", root)
    settings = (read_json(settings_path, MAX_CONFIG_BYTES) if settings_path is not None else None) or {}
    model = data.get("model")
    vocab = model.get("vocab") if isinstance(model, dict) else None
    texts = {i: t for t, i in vocab.items() if _ids(i) == [i]} if isinstance(vocab, dict) else {}
    added = data.get("added_tokens")
    added = [a for a in added if isinstance(a, dict)] if isinstance(added, list) else []
    named = [a for a in added if _ids(a.get("id")) and isinstance(a.get("content"), str)]
    texts.update((a["id"], a["content"]) for a in named)
    special = {a["id"]: a["content"] for a in named if a.get("special") is True}
    bos = _ids(folder.config.get("bos_token_id"))
    return Vocabulary(
        type=_tokenizer_type(data),
        size=folder.vocab_size,
        bos=bos[0] if len(bos) == 1 else None,
        eos=frozenset(_ids(folder.config.get("eos_token_id"))),
        add_bos=_flag(settings.get("add_bos_token")),
        add_eos=_flag(settings.get("add_eos_token")),
        special=special,
        spelled=bool(texts),
        texts_end=max(texts, default=-1) + 1,
        text=texts.get,
    )


def _failed(name: str, reasons: list[str]) -> Rule:
    sentence = "; ".join(reasons)
    return Rule(name, False, sentence[0].upper() + sentence[1:] + ".", tuple(reasons))


def _unsaid(target_says: bool, drafter_says: bool, one: str, neither: str) -> str:
    """The sentence for a fact one side (`one`, with its {side}) or both (`neither`) leave unsaid."""
    return one.format(side="drafter" if target_says else "target") if target_says or drafter_says else neither


def type_rule(target: Vocabulary, drafter: Vocabulary) -> Rule:
    if target.type is None or drafter.type is None:
        sentence = _unsaid(target.type is not None, drafter.type is not None,
                           "The {side}'s vocabulary does not say its type: the types are not compared.",
                           "Neither vocabulary says its type: the types are not compared.")  # fmt: skip
        return Rule("vocabulary type", True, sentence)
    if target.type == drafter.type:
        return Rule("vocabulary type", True, f"Both vocabularies are {target.type}.")
    return _failed("vocabulary type", [f"the target's vocabulary is {target.type} and the drafter's is {drafter.type}"])


def _side(target_value: object, value: object) -> str:
    """The side whose value is `value` (False or None): the target where its value is, else the drafter."""
    return "target" if target_value is value else "drafter"


def _start_clause(target: Vocabulary, drafter: Vocabulary) -> str:
    if target.add_bos is False and drafter.add_bos is False:
        return "neither adds a start-of-text token"
    if target.add_bos is False or drafter.add_bos is False:
        return f"the {_side(target.add_bos, False)} adds no start-of-text token"
    if target.bos is None and drafter.bos is None:
        return "neither names a start-of-text token"
    if target.bos is None or drafter.bos is None:
        return f"the {_side(target.bos, None)} names no start-of-text token"
    verb = "add" if target.add_bos and drafter.add_bos else "name"
    return f"both {verb} start-of-text token {target.bos:,}"


def _end_clause(target: Vocabulary, drafter: Vocabulary) -> str:
    if target.add_eos is False and drafter.add_eos is False:
        return "neither adds an end-of-text token"
    if target.add_eos is False or drafter.add_eos is False:
        return f"the {_side(target.add_eos, False)} adds no end-of-text token"
    if not target.eos and not drafter.eos:
        return "neither names an end-of-text token"
    if not target.eos or not drafter.eos:
        return f"the {'target' if not target.eos else 'drafter'} names no end-of-text token"
    shared = min(target.eos & drafter.eos)
    return f"both add end-of-text token {shared:,}" if target.add_eos and drafter.add_eos else (
        f"both end text with token {shared:,}")  # fmt: skip


def _listed(ids: frozenset[int]) -> str:
    return " or ".join(f"{i:,}" for i in sorted(ids))


def _named(token: int | None) -> frozenset[int]:
    return frozenset() if token is None else frozenset({token})


def _differ(target_adds: bool | None, drafter_adds: bool | None, target_ids: Set[int], drafter_ids: Set[int]) -> bool:
    """Whether the start- or end-of-text tokens differ: compared where both name theirs, unless either side
    says it does not add it; tokens of a set share one where any agrees (a singleton each on llama.cpp)."""
    compared = target_adds is not False and drafter_adds is not False and target_ids and drafter_ids
    return bool(compared) and target_ids.isdisjoint(drafter_ids)


def special_tokens_rule(target: Vocabulary, drafter: Vocabulary) -> Rule:
    """Whether both add the same start- and end-of-text tokens; a token is compared only where neither side
    says it does not add it (llama.cpp compares the tokens both add)."""
    reasons: list[str] = []
    if target.add_bos is not None and drafter.add_bos is not None and target.add_bos != drafter.add_bos:
        reasons.append(
            f"the target {'adds' if target.add_bos else 'does not add'} a start-of-text token "
            f"and the drafter {'does' if drafter.add_bos else 'does not'}"
        )
    elif _differ(target.add_bos, drafter.add_bos, _named(target.bos), _named(drafter.bos)):
        reasons.append(f"the start-of-text token is {target.bos:,} in the target and {drafter.bos:,} in the drafter")
    if target.add_eos is not None and drafter.add_eos is not None and target.add_eos != drafter.add_eos:
        reasons.append("one model adds an end-of-text token and the other does not")
    elif _differ(target.add_eos, drafter.add_eos, target.eos, drafter.eos):
        reasons.append(
            f"the end-of-text token is {_listed(target.eos)} in the target and {_listed(drafter.eos)} in the drafter"
        )
    if reasons:
        return _failed("special tokens", reasons)
    return Rule(
        "special tokens",
        True,
        f"The special tokens agree: {_start_clause(target, drafter)}, {_end_clause(target, drafter)}.",
    )


def size_rule(target: Vocabulary, drafter: Vocabulary) -> Rule:
    if target.size is None or drafter.size is None:
        sentence = _unsaid(target.size is not None, drafter.size is not None,
                           "The {side} does not say how many tokens it has: the sizes are not compared.",
                           "Neither model says how many tokens it has: the sizes are not compared.")  # fmt: skip
        return Rule("vocabulary size", True, sentence)
    diff = abs(target.size - drafter.size)
    if diff > VOCAB_SIZE_TOLERANCE:
        return _failed(
            "vocabulary size",
            [
                f"the target has {target.size:,} tokens and the drafter {drafter.size:,} "
                f"({diff:,} apart; at most {VOCAB_SIZE_TOLERANCE} allowed)"
            ],
        )
    sizes = f"{target.size:,} tokens each" if not diff else f"{target.size:,} and {drafter.size:,} tokens"
    return Rule("vocabulary size", True, f"The sizes match: {sizes} (at most {VOCAB_SIZE_TOLERANCE} apart allowed).")


def token_texts_rule(target: Vocabulary, drafter: Vocabulary) -> Rule:
    """Every token from FIRST_CHECKED_TOKEN to the smaller size spelled alike; past the last id either side
    spells, none is looked up (a folder's config may claim more tokens than its tokenizer holds)."""
    if not target.spelled or not drafter.spelled:
        sentence = _unsaid(target.spelled, drafter.spelled,
                           "The {side} spells no tokens (no tokenizer.json): only the sizes are compared.",
                           "Neither model spells its tokens (no tokenizer.json): only the sizes are compared.")  # fmt: skip
        return Rule("token texts", True, sentence)
    spelled = max(target.texts_end, drafter.texts_end)
    end = min([n for n in (target.size, drafter.size) if n is not None] + [spelled])
    for i in range(FIRST_CHECKED_TOKEN, end):
        a, b = target.text(i), drafter.text(i)
        if a != b:
            return _failed("token texts", [f"token {i:,} is {a!r} in the target and {b!r} in the drafter"])
    return Rule(
        "token texts", True, f"Every token from id {FIRST_CHECKED_TOKEN} to {end - 1:,} is spelled the same in both."
    )


def vocabulary_rules(target: Vocabulary, drafter: Vocabulary) -> tuple[Rule, ...]:
    """Every rule of llama.cpp's compatibility check, in its order, each with its finding."""
    return (
        type_rule(target, drafter),
        special_tokens_rule(target, drafter),
        size_rule(target, drafter),
        token_texts_rule(target, drafter),
    )


def check(target: TextModel, drafter: TextModel, max_reasons: int = 4) -> Verdict:
    """Compare two loaded models' vocabularies the way llama.cpp does, and say in words what differs."""
    return verdict_of(vocabulary_rules(loaded_vocabulary(target), loaded_vocabulary(drafter)), max_reasons)
