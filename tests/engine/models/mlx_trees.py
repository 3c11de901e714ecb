"""MLX model folders as mlx-community and mlx_lm.convert lay them out, and a transformers checkpoint beside
them, written here with real safetensors files of a few tiny tensors (zeros): the header is the
8-byte little-endian length, then its JSON, then the data."""

from __future__ import annotations

import hashlib
import json
import shutil
import struct
from pathlib import Path

DTYPE_BYTES = {"F32": 4, "F16": 2, "BF16": 2, "U32": 4, "I64": 8}
QWEN_TOKENS = {"<|endoftext|>": 0, "hello": 1, "world": 2, "def": 3, "return": 4, "x": 5, "y": 6, "z": 7}


def safetensors_bytes(tensors: dict[str, tuple[str, list[int]]], metadata: dict | None = None) -> bytes:
    """A whole safetensors file: name -> (dtype, shape), every value zero."""
    header: dict = {"__metadata__": metadata} if metadata is not None else {}
    offset = 0
    for name, (dtype, shape) in tensors.items():
        size = DTYPE_BYTES[dtype]
        for d in shape:
            size *= d
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # safetensors pads the header to 8 bytes
    return struct.pack("<Q", len(text)) + text + bytes(offset)


def write_safetensors(path: Path, tensors: dict[str, tuple[str, list[int]]], metadata: dict | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(safetensors_bytes(tensors, metadata))
    return path


def quantized_tensors(vocab: int = 8, hidden: int = 64, bits: int = 4, group: int = 32, layers: int = 2) -> dict:
    """An embedding and a projection in each of `layers` layers as mlx_lm.quantize leaves them: packed uint32
    weights with scales and biases (as many layers as config.json declares: a whole folder)."""
    out = {}
    projections = [(f"model.layers.{i}.mlp.down_proj", hidden) for i in range(layers)]
    for name, rows in (("model.embed_tokens", vocab), *projections):
        out[f"{name}.weight"] = ("U32", [rows, hidden * bits // 32])
        out[f"{name}.scales"] = ("BF16", [rows, hidden // group])
        out[f"{name}.biases"] = ("BF16", [rows, hidden // group])
    out["model.norm.weight"] = ("BF16", [hidden])
    return out


def plain_tensors(vocab: int = 8, hidden: int = 64, layers: int = 2) -> dict:
    return {
        "model.embed_tokens.weight": ("BF16", [vocab, hidden]),
        **{f"model.layers.{i}.mlp.down_proj.weight": ("BF16", [hidden, hidden]) for i in range(layers)},
        "model.norm.weight": ("BF16", [hidden]),
    }


def tokenizer_json(tokens: dict[str, int], special: dict[str, int] | None = None) -> dict:
    special = {"<|endoftext|>": 0} if special is None else special
    added = [{"id": i, "content": t, "special": True} for t, i in special.items()]
    return {"version": "1.0", "added_tokens": added, "model": {"type": "BPE", "vocab": tokens, "merges": []}}


def mlx_folder(
    folder: Path,
    model_type: str = "qwen3",
    bits: int | None = 4,
    group: int = 32,
    vocab: int = 8,
    hidden: int = 64,
    layers: int = 2,
    shards: int = 1,
    fmt: str | None = "mlx",
    tokens: dict[str, int] | None = QWEN_TOKENS,
    extra: dict | None = None,
    tensors: dict | None = None,
) -> Path:
    """An MLX folder: config.json (with `quantization` where bits is given), its weights (one projection in
    each of its `layers` layers, unless `tensors` says otherwise) in `shards` files and, where `tokens` is
    given, a tokenizer.json."""
    folder.mkdir(parents=True, exist_ok=True)
    config = {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": model_type,
        "vocab_size": vocab,
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "torch_dtype": "bfloat16",
        "eos_token_id": 0,
        **(extra or {}),
    }
    if bits is not None:
        config["quantization"] = config["quantization_config"] = {"group_size": group, "bits": bits}
    (folder / "config.json").write_text(json.dumps(config))
    weights = (
        tensors
        if tensors is not None
        else quantized_tensors(vocab, hidden, bits, group, layers)
        if bits
        else plain_tensors(vocab, hidden, layers)
    )
    names = list(weights)
    per = -(-len(names) // shards)
    metadata = {"format": fmt} if fmt else None
    for i in range(shards):
        part = {n: weights[n] for n in names[i * per : (i + 1) * per]}
        name = "model.safetensors" if shards == 1 else f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        write_safetensors(folder / name, part, metadata)
    if tokens is not None:
        (folder / "tokenizer.json").write_text(json.dumps(tokenizer_json(tokens)))
    return folder


def hf_snapshot(hub: Path, repo: str, revision: str, make, **kwargs) -> Path:
    """A Hugging Face cache entry: the files in blobs/ named by a digest, the snapshot's names symlinks to them."""
    staging = hub.parent / ".staging" / repo.replace("/", "--") / revision
    make(staging, **kwargs)
    entry = hub / f"models--{repo.replace('/', '--')}"
    snapshot = entry / "snapshots" / revision
    snapshot.mkdir(parents=True, exist_ok=True)
    (entry / "blobs").mkdir(exist_ok=True)
    for file in sorted(staging.iterdir()):
        blob = entry / "blobs" / hashlib.sha256(file.read_bytes()).hexdigest()
        if not blob.exists():
            file.rename(blob)
        link = snapshot / file.name
        if not link.exists():
            link.symlink_to(Path("..") / ".." / "blobs" / blob.name)
    shutil.rmtree(staging)
    return snapshot
