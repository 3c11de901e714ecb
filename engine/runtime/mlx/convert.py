"""GGUF model files as MLX model folders: the weights dequantized, renamed and requantized by mlx-lm.

A GGUF is read twice, both times defensively: engine.runtime.gguf checks the header and reads the
metadata (the vocabulary too), then gguf-py's reader maps the tensors, which gguf.quants dequantizes
to float32. GGUF names become the Hugging Face names mlx-lm's model classes load (token_embd ->
model.embed_tokens, blk.N.attn_q -> model.layers.N.self_attn.q_proj, ...), with what llama.cpp's
converter changed undone: llama's q/k rows permuted for its rope, Gemma's norms stored as 1 + w.
mlx-lm then builds the model, quantizes it (mlx_lm.utils.quantize_model) and saves it
(save_model, save_config), and the tokenizer comes from the same metadata (tokenizer_files).

`mlx_folder_for(gguf, cache=...)` keeps one converted folder per file and mode, written atomically
and stamped with the source's size, time and sha256: a second call costs a stat, and a changed file
is converted again. engine.models.mlx_conversions puts them in the user cache, by catalog name too.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from engine.errors import ModelFileError
from engine.runtime.gguf import read_gguf

CONVERTER_VERSION = 1  # a change in what a conversion writes: folders stamped with another convert again
STAMP = "draftlight-conversion.json"


@dataclass(frozen=True)
class Mode:
    """How a conversion stores the weights: bits and group size where quantized, and the float type."""

    name: str
    bits: int | None
    group_size: int
    dtype: str  # float parameters (norms, biases, quantization scales; all weights when not quantized)


# 4-bit affine in groups of 64 with bfloat16 elsewhere is what mlx_lm.convert -q writes and what the
# mlx-community "-4bit" folders hold: the MLX counterpart of a Q4_K_M file. f32 keeps the GGUF's
# dequantized values exactly: the same weights llama.cpp computes with.
MODES = {
    m.name: m
    for m in (
        Mode("4bit", 4, 64, "bfloat16"),
        Mode("4bit-f32", 4, 64, "float32"),
        Mode("8bit", 8, 64, "bfloat16"),
        Mode("bf16", None, 64, "bfloat16"),
        Mode("f16", None, 64, "float16"),
        Mode("f32", None, 64, "float32"),
    )
}
DEFAULT_MODE = "4bit"
# MLX's CPU backend has no fast bfloat16 path: the 0.5B drafter's 15-token prefill took 13 s with
# float32 scales and norms and about 20 times that with bfloat16 (measured on two shared cores).


def default_mode() -> str:
    """4-bit with bfloat16 where MLX runs on a GPU (Metal), with float32 on its CPU backend."""
    import mlx.core as mx

    return DEFAULT_MODE if mx.default_device() == mx.gpu else "4bit-f32"


ARCHITECTURES = ("qwen2", "llama", "gemma3")

# Per-layer GGUF names -> Hugging Face names (llama.cpp's tensor map, read backwards).
_LAYER = {
    "attn_norm": "input_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "attn_q_norm": "self_attn.q_norm",
    "attn_k_norm": "self_attn.k_norm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
    "ffn_norm": "post_attention_layernorm",
}
_GEMMA3_LAYER = {
    **_LAYER,
    "ffn_norm": "pre_feedforward_layernorm",
    "post_attention_norm": "post_attention_layernorm",
    "post_ffw_norm": "post_feedforward_layernorm",
}
_GLOBAL = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}
_SKIPPED = ("rope_freqs",)  # precomputed rope factors: mlx-lm computes its own


def _meta(metadata: dict[str, Any], key: str, kind: type, default: Any = None) -> Any:
    value = metadata.get(key, default)
    if value is None:
        raise ModelFileError(f"the model file says no {key}: it cannot be converted.")
    if kind is int and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
        raise ModelFileError(f"the model file's {key} is {value!r}, not a positive whole number.")
    if kind is float and (isinstance(value, bool) or not isinstance(value, int | float) or not value > 0):
        raise ModelFileError(f"the model file's {key} is {value!r}, not a positive number.")
    return kind(value)


def architecture(metadata: dict[str, Any]) -> str:
    """The file's architecture, if the converter knows it; else a ModelFileError that says so."""
    arch = str(metadata.get("general.architecture", ""))
    if arch not in ARCHITECTURES:
        raise ModelFileError(
            f"converting {arch or 'an unnamed'} models to MLX is not supported "
            f"(only {', '.join(ARCHITECTURES)}): use the llama.cpp runtime for this model."
        )
    return arch


def model_config(metadata: dict[str, Any], embedding_rows: int, has_output: bool) -> dict[str, Any]:
    """config.json for mlx-lm's model class, from the GGUF's metadata."""
    arch = architecture(metadata)
    heads = _meta(metadata, f"{arch}.attention.head_count", int)
    hidden = _meta(metadata, f"{arch}.embedding_length", int)
    config: dict[str, Any] = {
        "model_type": {"gemma3": "gemma3_text"}.get(arch, arch),
        "hidden_size": hidden,
        "num_hidden_layers": _meta(metadata, f"{arch}.block_count", int),
        "intermediate_size": _meta(metadata, f"{arch}.feed_forward_length", int),
        "num_attention_heads": heads,
        "num_key_value_heads": _meta(metadata, f"{arch}.attention.head_count_kv", int, heads),
        "rms_norm_eps": _meta(metadata, f"{arch}.attention.layer_norm_rms_epsilon", float),
        "rope_theta": _meta(metadata, f"{arch}.rope.freq_base", float, 10_000.0),
        "max_position_embeddings": _meta(metadata, f"{arch}.context_length", int),
        "vocab_size": embedding_rows,
        "tie_word_embeddings": not has_output,
    }
    head_dim = _meta(metadata, f"{arch}.attention.key_length", int, hidden // heads)
    if arch == "llama":
        config["head_dim"] = head_dim
    if arch == "gemma3":
        # llama.cpp's gemma3 graph: every sixth layer global, the others a sliding window with rope base
        # 10,000, and queries scaled by 1/sqrt(head_dim).
        config.update(
            head_dim=head_dim,
            query_pre_attn_scalar=head_dim,
            sliding_window=_meta(metadata, "gemma3.attention.sliding_window", int, 512),
            sliding_window_pattern=6,
            rope_local_base_freq=10_000.0,
        )
    return config


def _unpermute(rows: np.ndarray, n_head: int) -> np.ndarray:
    """Undo convert_hf_to_gguf's permute() of llama's q/k rows (its rope pairs halves, not neighbours)."""
    shape = rows.shape
    return rows.reshape(n_head, shape[0] // n_head // 2, 2, *shape[1:]).swapaxes(1, 2).reshape(shape)


def _hf_name(gguf_name: str, arch: str) -> str | None:
    base, _, suffix = gguf_name.rpartition(".")
    if suffix not in ("weight", "bias") or base in _SKIPPED:
        return None
    if base in _GLOBAL:
        return f"{_GLOBAL[base]}.{suffix}"
    parts = base.split(".")
    table = _GEMMA3_LAYER if arch == "gemma3" else _LAYER
    if len(parts) == 3 and parts[0] == "blk" and parts[1].isdigit() and parts[2] in table:
        return f"model.layers.{int(parts[1])}.{table[parts[2]]}.{suffix}"
    return None


def hf_weights(path: Path, metadata: dict[str, Any]) -> dict[str, np.ndarray]:
    """Every tensor of the file, dequantized to float32, under the Hugging Face name mlx-lm loads."""
    import gguf
    from gguf.quants import dequantize

    arch = architecture(metadata)
    try:
        reader = gguf.GGUFReader(str(path))
        tensors = list(reader.tensors)
    except (ValueError, IndexError, KeyError, OSError, EOFError) as exc:
        raise ModelFileError(
            f"{path.name}'s tensors cannot be read: {exc}. The file is damaged; fetch it again."
        ) from exc
    heads = int(metadata.get(f"{arch}.attention.head_count", 1))
    kv_heads = int(metadata.get(f"{arch}.attention.head_count_kv", heads))
    weights: dict[str, np.ndarray] = {}
    for tensor in tensors:
        name = _hf_name(tensor.name, arch)
        if name is None:
            if tensor.name.split(".")[0] in _SKIPPED:
                continue
            raise ModelFileError(
                f"{path.name} has a tensor {tensor.name!r} that the MLX {arch} model has no place for."
            )
        try:
            values = dequantize(tensor.data, tensor.tensor_type).astype(np.float32, copy=False)
        except NotImplementedError as exc:
            raise ModelFileError(
                f"{path.name}'s tensor {tensor.name} is stored as {tensor.tensor_type.name}, "
                "which the converter cannot dequantize: use the llama.cpp runtime for this model."
            ) from exc
        except (ValueError, IndexError) as exc:
            raise ModelFileError(f"{path.name}'s tensor {tensor.name} cannot be read: {exc}.") from exc
        if arch == "llama" and tensor.name.endswith(("attn_q.weight", "attn_q.bias")):
            values = _unpermute(values, heads)
        elif arch == "llama" and tensor.name.endswith(("attn_k.weight", "attn_k.bias")):
            values = _unpermute(values, kv_heads)
        elif arch == "gemma3" and tensor.name.endswith("norm.weight"):
            values = values - 1.0  # llama.cpp stores Gemma's (1 + w) norms; mlx-lm adds the 1 itself
        weights[name] = values
    if "model.embed_tokens.weight" not in weights:
        raise ModelFileError(f"{path.name} has no token embedding (token_embd.weight): it cannot be converted.")
    return weights


def convert_gguf(path: str | Path, folder: str | Path, mode: str = DEFAULT_MODE) -> Path:
    """Write the GGUF at `path` as an MLX model folder (config.json, model.safetensors, tokenizer files)."""
    import mlx.core as mx
    from mlx.utils import tree_map
    from mlx_lm.utils import _get_classes, quantize_model, save_config, save_model

    from engine.runtime.mlx.tokenizer_files import write_tokenizer_files

    chosen = MODES.get(mode)
    if chosen is None:
        raise ValueError(f"no conversion mode {mode!r}; choose one of {', '.join(MODES)}")
    path, folder = Path(path).expanduser(), Path(folder)
    metadata = read_gguf(path, keep_arrays=True).metadata
    weights = hf_weights(path, metadata)
    embedding = weights["model.embed_tokens.weight"]
    config = model_config(metadata, embedding.shape[0], "lm_head.weight" in weights)
    folder.mkdir(parents=True, exist_ok=True)
    config["eos_token_id"] = write_tokenizer_files(metadata, folder)
    bos = metadata.get("tokenizer.ggml.bos_token_id")
    if isinstance(bos, int) and not isinstance(bos, bool):
        config["bos_token_id"] = bos

    model_class, args_class = _get_classes(config)
    model = model_class(args_class.from_dict(config))
    arrays = {k: mx.array(weights.pop(k)) for k in list(weights)}
    arrays = model.sanitize(arrays) if hasattr(model, "sanitize") else arrays
    try:
        model.load_weights(list(arrays.items()), strict=True)
    except ValueError as exc:
        raise ModelFileError(f"{path.name}'s tensors do not fit the model its metadata describes: {exc}") from exc
    del arrays
    if chosen.bits is not None:
        model, config = quantize_model(model, config, chosen.group_size, chosen.bits)
    dtype = getattr(mx, chosen.dtype)
    model.update(tree_map(lambda v: v.astype(dtype) if mx.issubdtype(v.dtype, mx.floating) else v, model.parameters()))
    mx.eval(model.parameters())
    config["torch_dtype"] = chosen.dtype
    save_model(folder, model, donate_model=True)
    save_config(config, folder / "config.json")
    return folder


# ---- the cache ----------------------------------------------------------------------------------


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(4 << 20):
            digest.update(block)
    return digest.hexdigest()


def _source_stamp(path: Path, digest: str | None = None) -> dict[str, Any]:
    st = path.stat()
    if digest is None:
        digest = _verified_sha256(path, st) or _sha256(path)
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": digest}


def _verified_sha256(path: Path, st: os.stat_result) -> str | None:
    """The sha256 the catalog's own stamp (`<file>.verified`) recorded, while it still describes the file."""
    try:
        stamp = json.loads(path.with_name(path.name + ".verified").read_text())
    except (OSError, ValueError):
        return None
    if isinstance(stamp, dict) and stamp.get("size") == st.st_size and stamp.get("mtime_ns") == st.st_mtime_ns:
        digest = stamp.get("sha256")
        return digest if isinstance(digest, str) and len(digest) == 64 else None
    return None


def _read_stamp(folder: Path) -> dict[str, Any] | None:
    try:
        stamp = json.loads((folder / STAMP).read_text())
    except (OSError, ValueError):
        return None
    return stamp if isinstance(stamp, dict) else None


def _is_current(folder: Path, path: Path, mode: str) -> bool:
    """Whether `folder` is this file's conversion in this mode; a file only touched keeps it (same sha256)."""
    stamp = _read_stamp(folder)
    if stamp is None or stamp.get("version") != CONVERTER_VERSION or stamp.get("mode") != mode:
        return False
    st = path.stat()
    if stamp.get("size") == st.st_size and stamp.get("mtime_ns") == st.st_mtime_ns:
        return True
    if stamp.get("size") != st.st_size:
        return False
    source = _source_stamp(path)
    if source["sha256"] != stamp.get("sha256"):
        return False
    with contextlib.suppress(OSError):
        (folder / STAMP).write_text(json.dumps({**stamp, **source}, indent=2))
    return True


def converted_folder(path: str | Path, mode: str | None = None, *, cache: Path) -> Path | None:
    """The folder already converted from the GGUF at `path` in `cache`, current, or None: nothing converted."""
    mode = mode or default_mode()
    path = Path(path).expanduser().resolve()
    folder = Path(cache) / f"{path.stem}-{mode}"
    return folder if path.is_file() and mode in MODES and _is_current(folder, path, mode) else None


def mlx_folder_for(
    path: str | Path,
    mode: str | None = None,
    *,
    cache: Path,
    log: Callable[[str], None] | None = None,
) -> Path:
    """The MLX folder converted from the GGUF at `path`, in `cache`: the one there, or a new conversion
    (engine.models.mlx_conversions keeps them in the user cache).

    The folder is written under a temporary name and renamed into place when whole, so a conversion
    cut short leaves nothing that looks finished, and two at once leave one folder.
    """
    mode = mode or default_mode()
    path = Path(path).expanduser().resolve()
    if not path.is_file():
        raise ModelFileError(f"No model file at {path}.")
    if mode not in MODES:
        raise ValueError(f"no conversion mode {mode!r}; choose one of {', '.join(MODES)}")
    root = Path(cache)
    folder = root / f"{path.stem}-{mode}"
    if _is_current(folder, path, mode):
        return folder
    root.mkdir(parents=True, exist_ok=True)
    source = _source_stamp(path)
    started = time.perf_counter()
    if log:
        log(f"converting {path.name} to MLX ({mode})...")
    partial = Path(tempfile.mkdtemp(prefix=f".{folder.name}.partial-", dir=root))
    try:
        convert_gguf(path, partial, mode)
        stamp = {"version": CONVERTER_VERSION, "mode": mode, "source": str(path), **source}
        (partial / STAMP).write_text(json.dumps(stamp, indent=2))
        _move_into_place(partial, folder, path, mode)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    if log:
        log(f"converted {path.name} in {time.perf_counter() - started:.0f} s: {folder}")
    return folder


def _move_into_place(partial: Path, folder: Path, path: Path, mode: str) -> None:
    if folder.exists():
        if _is_current(folder, path, mode):  # another conversion of the same file finished first
            return
        old = folder.with_name(f".{folder.name}.old-{os.getpid()}")
        folder.rename(old)
        shutil.rmtree(old, ignore_errors=True)
    try:
        partial.rename(folder)
    except OSError:
        if not _is_current(folder, path, mode):
            raise
