"""What llama.cpp asserts on while loading a model, checked first and said in words.

llama.cpp's loader stops the whole process (GGML_ASSERT, exit 134) rather than refusing a
file when some metadata is out of range: the checks of `llama_model_base::load_hparams`
that every architecture runs are repeated here from the header alone. Architecture-specific
asserts are too many to mirror; engine.runtime.llama.probe loads an untrusted file in a child
process first and catches those.
"""

from __future__ import annotations

from engine.errors import ModelFileError
from engine.runtime.gguf import GGUFInfo

LLAMA_MAX_LAYERS = 512  # llama-hparams.h
LLAMA_MAX_EXPERTS = 1024  # llama-hparams.h
ROPE_SCALING_TYPES = ("none", "linear", "yarn", "longrope")  # llama-model.cpp's LLAMA_ROPE_SCALING_TYPES


def _int(info: GGUFInfo, key: str) -> int | None:
    value = info.metadata.get(f"{info.architecture}.{key}")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def check_loadable(info: GGUFInfo) -> None:
    """Raise ModelFileError, naming the field and its value, where llama.cpp would abort on this header."""
    problems = _problems(info)
    if problems:
        raise ModelFileError(
            f"{info.path.name} cannot be loaded: {'; '.join(problems)}. Its metadata is damaged or was "
            "written for another program; fetch the file again or choose another."
        )


def _problems(info: GGUFInfo) -> list[str]:
    arch = info.architecture
    found: list[str] = []
    blocks = _int(info, "block_count")
    if blocks is not None and not 0 < blocks <= LLAMA_MAX_LAYERS:
        found.append(f"{arch}.block_count is {blocks:,} (llama.cpp loads 1 to {LLAMA_MAX_LAYERS} layers)")
    nextn = _int(info, "nextn_predict_layers")
    if blocks is not None and nextn is not None and nextn > blocks:
        found.append(f"{arch}.nextn_predict_layers is {nextn:,}, more than its {blocks:,} layers")
    if blocks is not None and 0 < blocks <= LLAMA_MAX_LAYERS:
        named = {_layer(name) for name in info.tensor_names}
        past = sorted({n for n in named if n is not None} - set(range(blocks)))
        if past:
            found.append(f"it holds tensors for layer {past[0]:,}, past its {arch}.block_count of {blocks:,}")
    found += _expert_problems(info)
    scaling = info.metadata.get(f"{arch}.rope.scaling.type")
    if isinstance(scaling, str) and scaling not in ROPE_SCALING_TYPES:
        found.append(f"{arch}.rope.scaling.type is {scaling[:40]!r}, not one of {', '.join(ROPE_SCALING_TYPES)}")
    return found


def _layer(name: str) -> int | None:
    parts = name.split(".")
    return int(parts[1]) if len(parts) > 2 and parts[0] == "blk" and parts[1].isdigit() else None


def _expert_problems(info: GGUFInfo) -> list[str]:
    arch = info.architecture
    experts = _int(info, "expert_count") or 0
    used = _int(info, "expert_used_count") or 0  # a per-layer array is left to the probe
    groups = _int(info, "expert_group_count") or 0
    group_used = _int(info, "expert_group_used_count") or 0
    if experts > LLAMA_MAX_EXPERTS:
        return [f"{arch}.expert_count is {experts:,} (llama.cpp allows {LLAMA_MAX_EXPERTS:,})"]
    if used > experts:
        return [f"{arch}.expert_used_count is {used:,}, more than its {experts:,} experts"]
    if experts == 0:
        return [f"{arch}.expert_group_count is {groups:,} for a model without experts"] if groups else []
    if used == 0:
        return [f"{arch}.expert_used_count is 0 for a model of {experts:,} experts"]
    if groups >= experts:
        return [f"{arch}.expert_group_count is {groups:,}, not fewer than its {experts:,} experts"]
    if groups > 1 and (experts % groups or not 0 < group_used < groups):
        return [f"its {experts:,} experts, {groups:,} expert groups and {group_used:,} groups used do not fit together"]
    return []
