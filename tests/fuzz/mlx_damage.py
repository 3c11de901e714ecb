"""Damage done to a copy of a sound MLX folder, one kind per case, and a child run measured.

Every case the hostile tester of issue 45 tried is here by name (a number in config.json past any
real model's, a JSON file of the wrong kind or size, a safetensors file cut, lying or linked to a
device or to itself, twenty thousand empty shards, a tokenizer module mlx-lm does not ship), beside
the damage that already held and seeded random mutants (bits flipped in a header, a file cut at
some byte, a config field set to an odd value).
"""

from __future__ import annotations

import json
import os
import random
import resource
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tests.fuzz.bounded import ROOT, Outcome

WEIGHTS = "model.safetensors"
Damage = Callable[[Path], None]


@dataclass(frozen=True)
class Case:
    label: str
    base: str  # "qwen2" (a model of its own, also a draft model) or "qwen35" (with its own MTP head)
    damage: Damage
    whole: bool = False  # the folder is still whole: it must load and answer (exit 0)
    loader_only: bool = False  # damage only mlx-lm finds: `pair --no-probe`, reading headers alone, passes it
    unsure: bool = False  # a random mutant the headers may show or hide: `pair --no-probe` refuses it or passes it
    as_drafter: bool = True  # False: a drafter with this damage drafts on (the target's tokenizer makes the ids)


def _config(folder: Path, name: str = "config.json") -> dict:
    return json.loads((folder / name).read_text())


def set_field(key: str, value: object, text: bool = False, name: str = "config.json", within: str = "") -> Damage:
    """One field of a JSON file set: at its top, in its text_config (`text`) or in the object `within` names."""

    def damage(folder: Path) -> None:
        config = _config(folder, name)
        (config["text_config"] if text else config[within] if within else config)[key] = value
        (folder / name).write_text(json.dumps(config))

    return damage


def write(name: str, data: bytes) -> Damage:
    def damage(folder: Path) -> None:
        (folder / name).write_bytes(data)

    return damage


def sparse(name: str, size: int, start: bytes) -> Damage:
    """A file of `size` bytes that costs no disk: `start`, then a hole."""

    def damage(folder: Path) -> None:
        with (folder / name).open("wb") as f:
            f.write(start)
            f.truncate(size)

    return damage


def link(target: str) -> Damage:
    def damage(folder: Path) -> None:
        (folder / WEIGHTS).unlink()
        (folder / WEIGHTS).symlink_to(target)

    return damage


def cut(fraction: float) -> Damage:
    def damage(folder: Path) -> None:
        data = (folder / WEIGHTS).read_bytes()
        (folder / WEIGHTS).write_bytes(data[: int(len(data) * fraction)])

    return damage


def header_length(length: int) -> Damage:
    def damage(folder: Path) -> None:
        data = (folder / WEIGHTS).read_bytes()
        (folder / WEIGHTS).write_bytes(struct.pack("<Q", length) + data[8:])

    return damage


def tensor_field(key: str, value: object) -> Damage:
    """The header rewritten with one tensor's field changed, the data left as it was."""

    def damage(folder: Path) -> None:
        data = (folder / WEIGHTS).read_bytes()
        (length,) = struct.unpack("<Q", data[:8])
        header = json.loads(data[8 : 8 + length])
        name = sorted(k for k in header if k != "__metadata__")[0]
        header[name][key] = value
        text = json.dumps(header).encode()
        (folder / WEIGHTS).write_bytes(struct.pack("<Q", len(text)) + text + data[8 + length :])

    return damage


def empty_shards(count: int) -> Damage:
    def damage(folder: Path) -> None:
        (folder / WEIGHTS).unlink()
        for i in range(count):
            (folder / f"model-{i + 1:05d}-of-{count:05d}.safetensors").touch()

    return damage


def token_past_the_vocabulary(folder: Path) -> None:
    """A special token numbered past the weights' vocabulary, which the chat template writes."""
    tokenizer = _config(folder, "tokenizer.json")
    tokenizer["added_tokens"].append(
        {"id": 5000, "content": "<|far|>", "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": True}
    )  # fmt: skip
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer))
    config = _config(folder, "tokenizer_config.json")
    config["chat_template"] = "<|far|>" + config["chat_template"]
    (folder / "tokenizer_config.json").write_text(json.dumps(config))


def remove(name: str) -> Damage:
    def damage(folder: Path) -> None:
        (folder / name).unlink()

    return damage


def flip_header_bits(seed: int) -> Damage:
    def damage(folder: Path) -> None:
        rng = random.Random(seed)
        data = bytearray((folder / WEIGHTS).read_bytes())
        (length,) = struct.unpack("<Q", data[:8])
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(min(len(data), 8 + length))] ^= 1 << rng.randrange(8)
        (folder / WEIGHTS).write_bytes(bytes(data))

    return damage


def cut_at(seed: int) -> Damage:
    def damage(folder: Path) -> None:
        data = (folder / WEIGHTS).read_bytes()
        (folder / WEIGHTS).write_bytes(data[: random.Random(seed).randrange(len(data))])

    return damage


NAMED = [
    # What did not hold in issue 45.
    Case("num_hidden_layers 10**7", "qwen2", set_field("num_hidden_layers", 10**7)),
    Case("mtp_num_hidden_layers 10**6", "qwen35", set_field("mtp_num_hidden_layers", 10**6, text=True)),
    Case("weights truncated mid-tensor", "qwen2", cut(0.5)),
    Case("weights 8 bytes", "qwen2", write(WEIGHTS, struct.pack("<Q", 2))),
    Case("header length 2**60", "qwen2", header_length(2**60)),
    Case("data offsets past the end", "qwen2", tensor_field("data_offsets", [0, 10**12])),
    Case("a bad dtype string", "qwen2", tensor_field("dtype", "Q7_K")),
    Case("shape [2**31, 2**31]", "qwen2", tensor_field("shape", [2**31, 2**31])),
    Case("weights a link to /dev/zero", "qwen2", link("/dev/zero")),
    Case("weights a link loop", "qwen2", link(WEIGHTS)),
    Case("20,000 empty shards", "qwen2", empty_shards(20_000)),
    Case("config.json a JSON list", "qwen2", write("config.json", b"[1, 2, 3]")),
    Case("config.json nested 200,000 deep", "qwen2", write("config.json", b"[" * 200_000 + b"]" * 200_000)),
    Case("num_attention_heads 0", "qwen2", set_field("num_attention_heads", 0)),
    Case('hidden_size "64"', "qwen2", set_field("hidden_size", "64")),
    Case("vocab_size 10**12", "qwen2", set_field("vocab_size", 10**12)),
    Case("generation_config.json a list", "qwen2", write("generation_config.json", b"[]")),
    Case("tokenizer_config.json a list", "qwen2", write("tokenizer_config.json", b"[]")),
    Case(
        "unknown chat_template_type", "qwen2", set_field("chat_template_type", "nosuch", name="tokenizer_config.json")
    ),
    Case("unknown tool_parser_type", "qwen2", set_field("tool_parser_type", "nosuch", name="tokenizer_config.json")),
    Case("config.json of 1 GB", "qwen2", sparse("config.json", 1 << 30, b'{"a": "')),
    Case("tokenizer.json of 1 GB", "qwen2", sparse("tokenizer.json", 1 << 30, b'{"a": "')),
    # What already held, kept held.
    Case("config.json not JSON", "qwen2", write("config.json", b"{not json")),
    Case("unknown model_type", "qwen2", set_field("model_type", "nosuchmodel"), loader_only=True),
    Case("no model_type", "qwen2", set_field("model_type", None)),
    Case("no weights", "qwen2", remove(WEIGHTS)),
    Case("a tensor shape unlike the config", "qwen2", set_field("intermediate_size", 96), loader_only=True),
    Case(
        "a garbage tokenizer.json",
        "qwen2",
        write("tokenizer.json", b'{"model": 5, "added_tokens": 7}'),
        loader_only=True,
    ),
    Case("a token id past the vocabulary", "qwen2", token_past_the_vocabulary, loader_only=True, as_drafter=False),
    Case("model_file asks for remote code", "qwen2", set_field("model_file", "evil.py"), loader_only=True),
    Case("auto_map and trust_remote_code", "qwen2", set_field("auto_map", {"AutoModel": "evil.Model"}), whole=True),
    Case("sound", "qwen2", lambda folder: None, whole=True),
]
# The drafter kinds that read the target, each from its own folder beside a tiny target of its family.
KIND_TARGETS = {"dflash": "qwen35", "dspark": "qwen35", "eagle3": "qwen35", "assistant": "gemma4"}
# A field mlx-vlm reads that the folder check does not bound: mlx-vlm's module meets it first.
LOOSE_FIELDS = {"dflash": ("dflash_config", "mask_token_id"), "dspark": ("dflash_config", "mask_token_id"),
                "eagle3": ("", "target_hidden_size"), "assistant": ("", "backbone_hidden_size")}  # fmt: skip


def swap_shape(folder: Path) -> None:
    """The first two-dimensional tensor whose sides differ, its shape turned: the bytes the same, the shape wrong."""
    data = (folder / WEIGHTS).read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + length])
    name = next(k for k in sorted(header) if k != "__metadata__" and len(set(header[k]["shape"])) == 2)
    header[name]["shape"] = header[name]["shape"][::-1]
    text = json.dumps(header).encode()
    (folder / WEIGHTS).write_bytes(struct.pack("<Q", len(text)) + text + data[8 + length :])


def drafter_cases(kind: str) -> list[Case]:
    """Damage to a drafter folder of `kind`, which chat takes as --drafter and pair as the drafter."""
    within, loose = LOOSE_FIELDS[kind]
    return [
        Case(f"{kind} config.json a JSON list", kind, write("config.json", b"[1]")),
        Case(f"{kind} num_hidden_layers 10**7", kind, set_field("num_hidden_layers", 10**7)),
        Case(f'{kind} hidden_size "64"', kind, set_field("hidden_size", "64")),
        Case(f"{kind} weights truncated mid-tensor", kind, cut(0.5)),
        Case(f"{kind} header length 2**60", kind, header_length(2**60)),
        Case(f"{kind} a bad dtype string", kind, tensor_field("dtype", "Q7_K")),
        Case(f"{kind} weights a link to /dev/zero", kind, link("/dev/zero")),
        Case(f"{kind} no weights", kind, remove(WEIGHTS)),
        Case(f"{kind} {loose} not a number", kind, set_field(loose, "wide", within=within), loader_only=True),
        Case(f"{kind} a weight's shape turned", kind, swap_shape, loader_only=True),
        Case(f"{kind} sound", kind, lambda folder: None, whole=True),
    ]


DRAFTERS = [case for kind in KIND_TARGETS for case in drafter_cases(kind)]
ODD = [0, -1, 1.5, True, "4", None, [4], {"a": 4}, 10**30, 2**63]
FIELDS = ["num_hidden_layers", "num_attention_heads", "num_key_value_heads", "hidden_size", "intermediate_size",
          "vocab_size", "max_position_embeddings", "model_type", "rms_norm_eps", "tie_word_embeddings"]  # fmt: skip


def random_cases(seed: int, count: int) -> list[Case]:
    rng = random.Random(seed)
    out = []
    for i in range(count):
        kind = i % 3
        if kind == 0:
            field, value = rng.choice(FIELDS), rng.choice(ODD)
            # A model_type that is a name is only mlx-lm's to know, as the named "unknown model_type" case.
            named = field == "model_type" and isinstance(value, str)
            out.append(Case(f"config {field} = {value!r}", "qwen2", set_field(field, value), unsure=named))
        elif kind == 1:
            # A flipped bit may leave the header whole and rename a tensor: only the loader, which knows the
            # model's parameters, can tell (`pair --no-probe` reads the headers alone).
            label = f"header bits flipped (seed {seed + i})"
            out.append(Case(label, "qwen2", flip_header_bits(seed + i), unsure=True))
        else:
            out.append(Case(f"weights cut (seed {seed + i})", "qwen2", cut_at(seed + i)))
    return out


def damaged(case: Case, sound: Path, into: Path) -> Path:
    folder = into / "damaged"
    shutil.copytree(sound, folder, symlinks=True)
    case.damage(folder)
    return folder


@dataclass(frozen=True)
class Measured:
    outcome: Outcome
    max_rss: int  # bytes
    seconds: float


# A small launcher forks the run and reads its peak RSS with wait4. A child forked straight from the test
# process would report that process's own high-water mark (Linux keeps it across fork and exec), so a
# test run that loaded a model first would see every case as large as that model.
_MEASURED_CHILD = """
import os, signal, subprocess, sys
child = subprocess.Popen([sys.executable, *sys.argv[2:]])
_, status, usage = os.wait4(child.pid, 0)
with open(sys.argv[1], "w") as out:
    out.write(str(usage.ru_maxrss))
code = os.waitstatus_to_exitcode(status)
if code < 0:
    signal.signal(-code, signal.SIG_DFL)
    os.kill(os.getpid(), -code)
sys.exit(code)
"""


def run_measured(args: list[str], timeout_s: float, memory_mb: int) -> Measured:
    """`python -m engine.cli ARGS` under an address-space cap, its own peak RSS read from wait4."""

    def limit() -> None:
        cap = memory_mb << 20
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    start = time.monotonic()
    fd, rss_path = tempfile.mkstemp(prefix="draftlight-rss-")
    os.close(fd)
    proc = subprocess.Popen(
        [sys.executable, "-c", _MEASURED_CHILD, rss_path, "-m", "engine.cli", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env=env,
        preexec_fn=limit,
        start_new_session=True,  # a timeout kills the launcher and the run it waits on together
    )
    streams: dict[str, bytes] = {}
    readers = [
        threading.Thread(target=lambda: streams.__setitem__("out", proc.stdout.read())),  # type: ignore[union-attr]
        threading.Thread(target=lambda: streams.__setitem__("err", proc.stderr.read())),  # type: ignore[union-attr]
    ]
    for reader in readers:
        reader.start()
    timed_out = threading.Event()

    def kill() -> None:
        timed_out.set()
        os.killpg(proc.pid, signal.SIGKILL)

    timer = threading.Timer(timeout_s, kill)
    timer.start()
    _, status, usage = os.wait4(proc.pid, 0)
    timer.cancel()
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
    for reader in readers:
        reader.join()
    seconds = time.monotonic() - start
    del usage  # the launcher's own figure carries the high-water mark of the process it was forked from
    recorded = Path(rss_path).read_text().strip()
    Path(rss_path).unlink()
    rss = int(recorded or 0) * (1 if sys.platform == "darwin" else 1024)
    outcome = Outcome(
        0 if timed_out.is_set() else proc.returncode,
        streams.get("out", b"").decode(errors="replace"),
        streams.get("err", b"").decode(errors="replace"),
        timed_out.is_set(),
    )
    return Measured(outcome, rss, seconds)
