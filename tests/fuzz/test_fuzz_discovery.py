"""Fuzz: model discovery over hostile folders. Ollama manifests whose digests are paths,
traversals or junk; manifests and blobs that are links, loops, FIFOs or devices; GGUF folders
with link loops, special files and junk. Each case runs in a child process under a time and
memory budget (tests/fuzz/discovery_child.py) that watches every open() and folder listing:
nothing outside the searched folders is read, and no hostile file is listed.

MLX folders: `MLX_FOLDERS` holds hostile ones (config.json and safetensors headers are
untrusted too), laid out in LM Studio, the Hugging Face cache and a chosen folder: none is
listed, nothing past them is read. What the MLX reader answers for each damaged file is
tests/fuzz/test_fuzz_mlx_folders.py's; a new kind of MLX damage is one entry here.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import struct
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.fuzz.bounded import case_count, run_bounded
from tests.fuzz.tiny_gguf import tiny_llama

HEX = "a" * 64
Build = Callable[[Path, Path], None]  # (home, outside): lay out a hostile case


def run_cases(tmp_path: Path, cases: list[dict]) -> list[dict]:
    file = tmp_path / "cases.json"
    file.write_text(json.dumps(cases))
    child = "import sys; from tests.fuzz.discovery_child import main; main(sys.argv[1])"
    out = run_bounded(["-c", child, str(file)], timeout_s=60 + 2 * len(cases))
    out_lines = out.stdout.splitlines()
    assert not out.problems() and out.returncode == 0 and len(out_lines) == len(cases), (out.problems(), out.stderr[-2000:])  # fmt: skip
    return [json.loads(line) for line in out_lines]


def case(home: Path, folders: tuple[Path, ...] = ()) -> dict:
    return {"home": str(home), "folders": [str(f) for f in folders], "env": {}, "allowed": [str(home), *map(str, folders)]}  # fmt: skip


def outside_files(outside: Path) -> None:
    """What a hostile folder points at: a secret, and a real model kept elsewhere."""
    outside.mkdir(parents=True, exist_ok=True)
    (outside / "secret.txt").write_text("GGUF" + "s" * 100)
    if not (outside / "elsewhere.gguf").exists():
        tiny_llama(outside / "elsewhere.gguf")


# ---- Ollama -----------------------------------------------------------------------------


def manifest(home: Path, layers, tag: str = "latest") -> Path:
    path = home / ".ollama/models/manifests/registry.ollama.ai/library/evil" / tag
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"layers": layers}) if not isinstance(layers, str) else layers)
    return path


def model_layer(digest) -> list:
    return [{"mediaType": "application/vnd.ollama.image.model", "digest": digest}]


def digests(outside: Path) -> list:
    return [str(outside / "secret.txt"), str(outside / "elsewhere.gguf"), f"sha256:../../../../{outside.name}/secret.txt",
            "../../../etc/passwd", "/etc/passwd", "sha256:" + "g" * 64, "sha256:" + HEX + "/../x", "sha256:" + HEX.upper(),
            "sha256:" + "b" * 64, 7, None, [HEX], {"d": HEX}, "", "\x00", "sha256:" + HEX + "\n", "~/.ssh/id_rsa"]  # fmt: skip


def ollama_builds() -> list[tuple[str, Build]]:
    builds: list[tuple[str, Build]] = []
    for i in range(len(digests(Path("/x")))):
        builds.append((f"digest-{i}", lambda home, out, i=i: manifest(home, model_layer(digests(out)[i]))))

    def blob_link(home: Path, out: Path) -> None:  # the blob itself a link to a model kept elsewhere
        blobs = home / ".ollama/models/blobs"
        blobs.mkdir(parents=True, exist_ok=True)
        (blobs / f"sha256-{HEX}").symlink_to(out / "elsewhere.gguf")
        manifest(home, model_layer(f"sha256:{HEX}"))

    def blobs_link(home: Path, out: Path) -> None:  # blobs/ a link out of the models folder
        (home / ".ollama/models").mkdir(parents=True, exist_ok=True)
        (out / f"sha256-{HEX}").write_bytes((out / "elsewhere.gguf").read_bytes())
        (home / ".ollama/models/blobs").symlink_to(out)
        manifest(home, model_layer(f"sha256:{HEX}"))

    def manifest_link(home: Path, out: Path) -> None:  # a manifest that is a link to a file elsewhere
        (out / "manifest.json").write_text(json.dumps({"layers": model_layer(f"sha256:{HEX}")}))
        manifest(home, []).unlink()
        manifest(home, [], "real").parent.joinpath("linked").symlink_to(out / "manifest.json")

    def specials(home: Path, out: Path) -> None:  # a FIFO and a device as manifest and blob; a loop
        folder = manifest(home, model_layer(f"sha256:{HEX}")).parent
        os.mkfifo(folder / "fifo")
        (folder / "zero").symlink_to("/dev/zero")
        (folder / "loop").symlink_to(folder)
        blobs = home / ".ollama/models/blobs"
        blobs.mkdir(parents=True, exist_ok=True)
        os.mkfifo(blobs / f"sha256-{HEX}")

    def huge(home: Path, out: Path) -> None:  # a manifest of 2 MB, and one nested 100,000 deep
        manifest(home, json.dumps({"layers": model_layer(f"sha256:{HEX}"), "pad": "x" * 2_000_000}), "big")
        manifest(home, "[" * 100_000 + "]" * 100_000, "deep")

    def junk(home: Path, out: Path) -> None:
        for n, text in enumerate(("not json", "[]", '{"layers": 3}', '{"layers": [3]}', '{"layers": [{}]}', "\xff")):
            manifest(home, text, f"junk{n}")

    builds += [("blob-link", blob_link), ("blobs-link", blobs_link), ("manifest-link", manifest_link),
               ("specials", specials), ("huge", huge), ("junk", junk)]  # fmt: skip
    return builds


# ---- GGUF folders (LM Studio, the Hugging Face cache, a folder the user named) -------------


def gguf_builds() -> list[tuple[str, Build]]:
    def loops(home: Path, out: Path) -> None:
        root = home / ".lmstudio/models/pub/repo"
        root.mkdir(parents=True)
        (root / "loop").symlink_to(root.parent)
        (root / "self.gguf").symlink_to(root / "self.gguf")  # a link to itself
        (root / "dangling.gguf").symlink_to(home / "nowhere.gguf")

    def specials(home: Path, out: Path) -> None:
        root = home / "mine"
        root.mkdir(parents=True)
        os.mkfifo(root / "fifo.gguf")
        (root / "zero.gguf").symlink_to("/dev/zero")
        (root / "folder.gguf").mkdir()

    def junk(home: Path, out: Path) -> None:
        root = home / ".cache/huggingface/hub/models--evil--repo/snapshots/abc"
        root.mkdir(parents=True)
        good = tiny_llama(home / "good.gguf").read_bytes()
        (root / "truncated.gguf").write_bytes(good[:300])
        (root / "magic-only.gguf").write_bytes(b"GGUF")
        (root / "huge-count.gguf").write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 1 << 62, 1 << 62))
        (root / "flipped.gguf").write_bytes(good[:64] + bytes(b ^ 0xFF for b in good[64:200]) + good[200:])
        (home / "good.gguf").unlink()

    def deep(home: Path, out: Path) -> None:
        root = home / "mine"
        deep = root.joinpath(*(f"d{i}" for i in range(40)))
        deep.mkdir(parents=True)
        tiny_llama(deep / "too-deep.gguf")

    return [("gguf-loops", loops), ("gguf-specials", specials), ("gguf-junk", junk), ("gguf-deep", deep)]


# ---- MLX folders: the hook for MLX discovery ---------------------------------------------


def mlx_folder(root: Path, config: str | bytes, safetensors: bytes) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.json").write_bytes(config.encode() if isinstance(config, str) else config)
    (root / "model.safetensors").write_bytes(safetensors)
    (root / "tokenizer.json").write_text("{}")


def header(text: bytes, length: int | None = None) -> bytes:
    return struct.pack("<Q", len(text) if length is None else length) + text


GOOD_CONFIG = json.dumps({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "vocab_size": 128})
PAST_END = json.dumps({"w": {"dtype": "F32", "shape": [1 << 40, 1 << 40], "data_offsets": [0, 1 << 62]}}).encode()
JUNK_DTYPE = json.dumps({"w": {"dtype": "Q99", "shape": "x", "data_offsets": 3}}).encode()
MLX_FOLDERS: list[tuple[str, str | bytes, bytes]] = [  # (name, config.json, model.safetensors)
    ("config-not-json", "not json", header(b"{}")),
    ("config-array", "[1, 2]", header(b"{}")),
    ("config-deep", "[" * 100_000 + "]" * 100_000, header(b"{}")),
    ("config-huge", json.dumps({"model_type": "llama", "pad": "x" * 3_000_000}), header(b"{}")),
    (
        "config-wrong-types",
        json.dumps({"model_type": 7, "hidden_size": "wide", "num_hidden_layers": -1}),
        header(b"{}"),
    ),
    ("config-nan", '{"model_type": "llama", "hidden_size": NaN, "rope_theta": Infinity}', header(b"{}")),
    ("header-length-huge", GOOD_CONFIG, header(b"{}", 1 << 62)),
    ("header-length-past-end", GOOD_CONFIG, header(b'{"a": 1}', 1 << 20)),
    ("header-not-json", GOOD_CONFIG, header(b"\xff\xfe not json")),
    ("header-offsets-past-end", GOOD_CONFIG, header(PAST_END)),
    ("header-junk-dtype", GOOD_CONFIG, header(JUNK_DTYPE)),
    ("header-short", GOOD_CONFIG, b"\x01\x02"),
]


def mlx_builds() -> list[tuple[str, Build]]:
    def build(name: str, config: str | bytes, weights: bytes) -> Build:
        def lay_out(home: Path, out: Path) -> None:
            for root in (home / ".lmstudio/models/mlx-community" / name,
                         home / ".cache/huggingface/hub" / f"models--evil--{name}/snapshots/abc", home / "mine" / name):  # fmt: skip
                mlx_folder(root, config, weights)

        return lay_out

    return [(f"mlx-{name}", build(name, config, weights)) for name, config, weights in MLX_FOLDERS]


ALL = [*ollama_builds(), *gguf_builds(), *mlx_builds()]


def lay_out(tmp_path: Path, builds: list[tuple[str, Build]]) -> list[dict]:
    cases = []
    for n, (name, build) in enumerate(builds):
        home, out = tmp_path / f"{n}-{name}" / "home", tmp_path / f"{n}-{name}" / "outside"
        home.mkdir(parents=True)
        outside_files(out)
        build(home, out)
        cases.append(case(home, (home / "mine",)))
    return cases


def test_an_ollama_digest_that_is_a_path_reads_nothing_outside(tmp_path):
    builds = [b for b in ollama_builds() if b[0] in ("digest-0", "digest-1", "digest-2")]
    for got in run_cases(tmp_path, lay_out(tmp_path, builds)):
        assert got == {"models": [], "outside": []}


def test_a_true_ollama_model_is_still_found(tmp_path):
    home = tmp_path / "home"
    (home / ".ollama/models/blobs").mkdir(parents=True)
    blob = tiny_llama(home / ".ollama/models/blobs" / f"sha256-{'c' * 64}")
    manifest(home, model_layer(f"sha256:{'c' * 64}"))
    [got] = run_cases(tmp_path, [case(home)])
    assert got == {"models": [["evil:latest", "Ollama", str(blob)]], "outside": []}


@pytest.mark.parametrize("seed", range(case_count(fast=2, full=20)))
def test_hostile_folders_are_left_out_and_nothing_outside_is_read(tmp_path, seed):
    rng = random.Random(seed)
    chosen = ALL if seed == 0 or case_count(0, 1) else rng.sample(ALL, 6)
    # a random mix in one home as well: hostile entries beside one another
    mixed_builds = rng.sample(ALL, min(8, len(ALL)))
    cases = lay_out(tmp_path / "alone", list(chosen))
    mixed_home, mixed_out = tmp_path / "mixed" / "home", tmp_path / "mixed" / "outside"
    mixed_home.mkdir(parents=True)
    outside_files(mixed_out)
    for _, build in mixed_builds:
        with contextlib.suppress(FileExistsError, FileNotFoundError):  # two builds on one path: the first stands
            build(mixed_home, mixed_out)
    cases.append(case(mixed_home, (mixed_home / "mine",)))
    for (name, _), got in zip([*chosen, ("mixed", None)], run_cases(tmp_path, cases)):
        assert got["outside"] == [], (name, got)
        assert got["models"] == [], (name, got)
