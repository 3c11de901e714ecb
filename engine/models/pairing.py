"""What a pair's headers say, before anything runs: its shapes, the memory it needs, how the
target undoes a rejected draft, whether a drafter was made for another target, and a better
pair from the catalog where there is one. The pairing doctor (engine.pairdoctor) adds the probe.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from engine.drafting import kinds
from engine.models import catalog
from engine.models.compat import Rule
from engine.models.discover import discover
from engine.models.facts import ModelFacts
from engine.models.pairs import PAIRS
from engine.runtime.formats import LLAMA
from engine.runtime.loading import runtime_named
from engine.runtime.runtimes import Runtime

# A KV cache row's bytes per element: q8_0 keeps 32 values in 34 bytes (exact mode), f16 two bytes each.
KV_BLOCK = {"q8_0": (32, 34), "f16": (1, 2)}
KV_TYPES = ("q8_0", "f16")


@dataclass(frozen=True)
class ModelShapes:
    """One model's shapes, as its header gives them: what its memory and its rollback cost."""

    path: str
    name: str
    architecture: str
    file_bytes: int
    state_kind: str  # "" (attention alone), "hybrid" or "recurrent": llama.cpp's word for the architecture
    layers: int
    kv_layers: int  # layers that keep a KV cache: all of them, but a hybrid's recurrent ones
    kv_heads: int
    key_dim: int
    value_dim: int
    mtp_heads: int
    base_models: tuple[str, ...]  # general.base_model.*: what its makers say it was trained from, or for

    def kv_cache_bytes(self, n_ctx: int, kv_type: str) -> int:
        """The KV cache for n_ctx positions, as llama.cpp allocates it (a row per layer and position)."""
        per, size = KV_BLOCK[kv_type]
        row = sum(-(-self.kv_heads * dim // per) * size for dim in (self.key_dim, self.value_dim))
        return self.kv_layers * row * n_ctx


def model_shapes(facts: ModelFacts, state_kind: str, name: str) -> ModelShapes:
    """The shapes of a model from its facts (engine.models.facts); `state_kind` as its runtime says it
    (llama.cpp's Model.state_kind; an MLX folder's hybrid layers), `name` as the doctor heads it."""
    layers = facts.layers or 0
    interval = facts.attention_interval if state_kind == "hybrid" else None
    return ModelShapes(
        path=str(facts.path),
        name=name,
        architecture=facts.architecture,
        file_bytes=facts.size,
        state_kind=state_kind,
        layers=layers,
        kv_layers=0 if state_kind == "recurrent" else layers // interval if interval else layers,
        kv_heads=facts.kv_heads or 0,
        key_dim=facts.key_dim or 0,
        value_dim=facts.value_dim or 0,
        mtp_heads=facts.mtp_heads,
        base_models=facts.base_models,
    )


def gb(n: float) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e9 else f"{n / 1e6:.0f} MB"


@dataclass(frozen=True)
class Memory:
    """What the pair needs in memory at a context size: the weights and each model's KV cache."""

    target_weights: int
    drafter_weights: int
    target_kv: int
    drafter_kv: int
    n_ctx: int
    kv_type: str
    runtime: str = LLAMA  # the name of the runtime that holds them (engine.runtime.runtimes)

    @property
    def total(self) -> int:
        return self.target_weights + self.drafter_weights + self.target_kv + self.drafter_kv

    def sentence(self) -> str:
        weights = gb(self.target_weights) + (f" + {gb(self.drafter_weights)}" if self.drafter_weights else "")
        if self.target_kv:
            kv = gb(self.target_kv) + (f" + {gb(self.drafter_kv)}" if self.drafter_kv else "")
            cache = f"a KV cache of {kv} for {self.n_ctx:,} tokens ({self.kv_type})"
        else:
            cache = "a recurrent state in place of a KV cache"
        extra = runtime_named(self.runtime).working_memory
        return f"About {gb(self.total)}: weights {weights}, and {cache}; {extra}."


def memory_needed(
    target: ModelShapes, drafter: ModelShapes | None, n_ctx: int, kv_type: str, runtime: str | Runtime = LLAMA
) -> Memory:
    """The pair's memory at n_ctx; a drafter that runs on the target's context (MTP heads) has no cache of its own."""
    own_cache = drafter is not None and drafter.path != target.path and drafter.kv_layers > 0
    return Memory(
        target_weights=target.file_bytes,
        drafter_weights=drafter.file_bytes if drafter is not None and drafter.path != target.path else 0,
        target_kv=target.kv_cache_bytes(n_ctx, kv_type),
        drafter_kv=drafter.kv_cache_bytes(n_ctx, kv_type) if own_cache and drafter is not None else 0,
        n_ctx=n_ctx,
        kv_type=kv_type,
        runtime=str(runtime),
    )


def target_architecture(target: ModelShapes) -> str:
    """What the target's architecture means for speculation, in a sentence."""
    heads = (
        f" It carries {target.mtp_heads} multi-token-prediction head{'s' if target.mtp_heads > 1 else ''}: "
        "it can draft for itself (drafter mtp)."
        if target.mtp_heads
        else ""
    )
    if target.state_kind == "hybrid":
        return (
            f"The target ({target.name}) is a hybrid {target.architecture} model, recurrent layers beside "
            f"attention ({target.kv_layers} of {target.layers} keep a KV cache): a recurrent state cannot drop "
            "a suffix, so every verify pass keeps a state snapshot per drafted token and a rejected draft "
            f"restores one: a rollback costs more than dropping KV cells.{heads}"
        )
    if target.state_kind == "recurrent":
        return (
            f"The target ({target.name}) is a recurrent {target.architecture} model: it undoes a rejected draft "
            "only from state snapshots, where llama.cpp keeps them for its architecture; without them it "
            f"decodes with no speculation.{heads}"
        )
    return (
        f"The target ({target.name}) is a {target.architecture} transformer, {target.layers} layers: a rejected "
        f"draft is dropped from its KV cache, which costs next to nothing.{heads}"
    )


def drafter_architecture(drafter: ModelShapes | None, kind: str) -> str:
    """What kind of drafter this is, in a sentence."""
    if kind == kinds.NONE.name:
        return "No drafter: every token is a plain target pass."
    known = kinds.kind_named(kind)
    words = known.words if known is not None else kind
    if drafter is None or (known is kinds.MTP and drafter.mtp_heads and drafter.layers == drafter.mtp_heads):
        return f"The drafter is {words}."
    article = "an" if drafter.architecture[:1].lower() in "aeiou" else "a"
    shape = f"{article} {drafter.architecture} model"
    if drafter.layers:
        shape += f", {drafter.layers} layer{'s' if drafter.layers != 1 else ''}"
    if drafter.state_kind:
        shape += f", {drafter.state_kind}"
    return f"The drafter ({drafter.name}) is {words}: {shape}."


def mtp_rule(target: ModelShapes) -> Rule:
    """The target's own heads: the one rule for drafter mtp."""
    if target.mtp_heads:
        return Rule("MTP heads", True, f"{target.name} carries {target.mtp_heads} multi-token-prediction head(s).")
    reason = f"{target.name} carries no multi-token-prediction heads"
    return Rule("MTP heads", False, f"{reason[0].upper()}{reason[1:]}: it cannot draft for itself.", (reason,))


def _catalog_model(path: Path) -> catalog.CatalogModel | None:
    return next((m for m in catalog.CATALOG.values() if m.filename.lower() == path.name.lower()), None)


def _same_drafter(spec: str, drafter_path: str | None, wanted: str) -> bool:
    """Whether the drafter in use is the one a catalog pair names (its key, a kind's name, or its file)."""
    if spec == wanted:
        return True
    model = catalog.lookup(wanted)
    return model is not None and drafter_path is not None and Path(drafter_path).name.lower() == model.filename.lower()


def suggest(target_path: Path, spec: str, drafter_path: str | None, compatible: bool) -> str:
    """A better pair for this target in a sentence: the catalog's own where the target is a catalog
    model, else what `--drafter auto` would find where this pair cannot draft; "" where none is better."""
    target = _catalog_model(target_path)
    if target is not None:
        choices = (
            [(catalog.DEFAULT_DRAFTER.key, catalog.DEFAULT_DRAFTER.title)] if target == catalog.DEFAULT_TARGET else []
        )
        choices += [(p.drafter_spec, p.title) for p in PAIRS if p.target == target]
        if choices and not any(_same_drafter(spec, drafter_path, wanted) for wanted, _ in choices):
            wanted, title = choices[0]
            if wanted == kinds.MTP.name:
                return f"{target.title} drafts for itself: `draftlight pair {target.key} mtp` checks that pair."
            return f"The catalog pairs {target.title} with {title}: `draftlight pair {target.key} {wanted}` checks that pair."
        return ""
    if compatible and spec != kinds.NONE.name:
        return ""
    found = discover(target_path)
    if found.spec is None or found.spec == drafter_path or found.spec == spec:
        return ""
    return f"{found.said} `draftlight pair {target_path} {found.spec}` checks that pair."
