"""Hostile MLX folders: a damaged config.json or safetensors header never costs the listing, never hangs.

Each case is a tiny real MLX folder (tests/engine/models/mlx_trees.py) with one kind of damage: a
config.json past the size cap, not an object, nested thousands deep, with fields of the wrong type
or huge numbers; a safetensors header whose length is 0, past the cap or past the file's end, whose
JSON is cut, not an object or lies about its tensors; bits flipped in the header; a file cut at some
byte. The reader must answer each (a folder or None) within a deadline, and `local_models` must list
the sound folder beside it. `make test` runs a seeded subset; `make fuzz` every case.
"""

from __future__ import annotations

import json
import random
import struct
import threading
from pathlib import Path

from engine.models.local import local_models
from engine.models.mlx_folders import MAX_CONFIG_BYTES, MAX_HEADER_BYTES, read_folder
from tests.engine.models.mlx_trees import mlx_folder, quantized_tensors, safetensors_bytes
from tests.fuzz.bounded import case_count

SEED = 21
CASES = case_count(fast=60, full=2000)
ODD = [0, -1, 1.5, True, "4", None, [4], {"bits": 4}, 10**30, 2**63, float("inf")]
FIELDS = ["bits", "group_size", "vocab_size", "hidden_size", "num_hidden_layers", "model_type", "text_config",
          "quantization", "architectures", "mtp_num_hidden_layers", "dflash_config"]  # fmt: skip


def _config_cases(rng: random.Random, config: dict) -> list[tuple[str, bytes | None, bytes]]:
    """(label, config.json bytes, None for the sound weights)."""
    out = [
        ("config past the cap", b" " * (MAX_CONFIG_BYTES + 1) + b"{}", None),
        ("config a list", b"[1, 2]", None),
        ("config nested 100000 deep", b"[" * 100_000 + b"]" * 100_000, None),
        ("config nested in an object 50000 deep", b'{"a":' * 50_000 + b"1" + b"}" * 50_000, None),
        ("config a number of 5000 digits", b'{"vocab_size": ' + b"9" * 5000 + b"}", None),
        ("config not UTF-8", b'{"model_type": "\xff\xfe"}', None),
        ("config empty", b"", None),
    ]
    field = rng.choice(FIELDS)
    value = rng.choice(ODD)
    mutant = json.loads(json.dumps(config))
    target = mutant["quantization"] if field in ("bits", "group_size") else mutant
    target[field] = value
    text = json.dumps(mutant, allow_nan=True).encode()
    out.append((f"config {field} = {value!r}", text, None))
    return out


def _header_cases(rng: random.Random, weights: bytes) -> list[tuple[str, None, bytes]]:
    (length,) = struct.unpack("<Q", weights[:8])
    body = weights[8:]

    def with_length(n: int) -> bytes:
        return struct.pack("<Q", n) + body

    header = json.loads(weights[8 : 8 + length])
    name = next(k for k in header if k != "__metadata__")
    lies = []
    for key, value in (("data_offsets", [0, 10**12]), ("data_offsets", [5, 1]), ("shape", [-1]), ("dtype", 7),
                       ("data_offsets", "0-4"), ("shape", [True]), ("data_offsets", [0])):  # fmt: skip
        copy = json.loads(json.dumps(header))
        copy[name][key] = value
        text = json.dumps(copy).encode()
        lies.append((f"header {name}.{key} = {value!r}", struct.pack("<Q", len(text)) + text + weights[8 + length :]))
    flipped = bytearray(weights)
    for _ in range(rng.randint(1, 4)):
        flipped[rng.randrange(8 + length)] ^= 1 << rng.randrange(8)
    cut = rng.randrange(len(weights))
    out = [
        ("header length 0", with_length(0)),
        ("header length past the cap", with_length(MAX_HEADER_BYTES + 1)),
        ("header length past the file", with_length(len(weights))),
        ("header length 2**64 - 1", with_length(2**64 - 1)),
        ("header a list", struct.pack("<Q", 2) + b"[]" + body[2:]),
        ("header cut JSON", struct.pack("<Q", length) + weights[8 : 8 + length // 2] + b"\0" * (length - length // 2)),
        ("header metadata a list", struct.pack("<Q", 20) + b'{"__metadata__":[1]}' + body[20:]),
        ("bits flipped in the header", bytes(flipped)),
        (f"cut at byte {cut}", weights[:cut]),
        *lies,
    ]
    return [(label, None, data) for label, data in out]


def cases(config: dict, weights: bytes, count: int) -> list[tuple[str, bytes | None, bytes | None]]:
    rng = random.Random(SEED)
    out: list[tuple[str, bytes | None, bytes | None]] = []
    rounds = 0
    while len(out) < count:  # the two families in turn, each round's random mutants new
        out += _header_cases(rng, weights) if rounds % 2 else _config_cases(rng, config)
        rounds += 1
    return out[:count]


def read_within(folder: Path, root: Path, seconds: float = 10.0):
    answer, failure = [], []

    def read() -> None:
        try:
            answer.append(read_folder(folder, root))
        except BaseException as exc:  # any exception is the defect under test
            failure.append(exc)

    worker = threading.Thread(target=read, daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"the folder reader did not answer within {seconds} s"
    assert not failure, f"the folder reader raised {failure[0]!r}"
    return answer[0]


def test_every_hostile_folder_is_answered_and_the_sound_one_still_listed(tmp_path):
    sound = mlx_folder(tmp_path / "models" / "sound")
    config = json.loads((sound / "config.json").read_text())
    weights = safetensors_bytes(quantized_tensors(), {"format": "mlx"})
    hostile = mlx_folder(tmp_path / "models" / "hostile")
    for label, config_bytes, weight_bytes in cases(config, weights, CASES):
        (hostile / "config.json").write_bytes(config_bytes if config_bytes is not None else json.dumps(config).encode())
        (hostile / "model.safetensors").write_bytes(weight_bytes if weight_bytes is not None else weights)
        read_within(hostile, tmp_path)
        listed = local_models([tmp_path / "models"], home=tmp_path / "no-home", env={})
        assert "sound" in [m.name for m in listed], label
        assert all(m.size >= 0 and isinstance(m.architecture, str) for m in listed), label
