"""Hostile model files: mutations of a tiny real GGUF never hang, never abort, always get one true sentence.

Each case is a copy of a two-layer llama model (tests/fuzz/tiny_gguf.py) with one kind of
damage: cut at some byte; a count, length, type, dimension or offset set to 0, 1, a huge
value or a negative one read as unsigned; a few bits flipped in the header; arrays of
arrays up to thousands deep; a bad `general.alignment`. Two entry points see every case:
the header reader itself (in this process, under a deadline) and `draftlight chat --target
FILE` (a child under a time and memory budget, tests/fuzz/bounded.py), which goes on into
llama.cpp's loader when the reader lets a file through. `make test` runs a seeded subset;
`make fuzz` every case.
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

from engine.errors import ModelFileError
from engine.runtime.gguf import read_gguf
from tests.fuzz.bounded import case_count, run_bounded
from tests.fuzz.gguf_map import fields, header_end, nested_array, set_field, string_kv, uint32_kv, with_kv
from tests.fuzz.tiny_gguf import tiny_llama

SEED = 14
READER_CASES = case_count(fast=150, full=3000)
CLI_CASES = case_count(fast=14, full=400)
CUT_WORDS = ("is cut short", "is truncated", "is not a GGUF model file")


@dataclass(frozen=True)
class Case:
    label: str
    data: bytes
    cut: bool = False  # a truncation: the sentence must say the file ends early


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> bytes:
    return tiny_llama(tmp_path_factory.mktemp("fuzz-gguf") / "tiny.gguf").read_bytes()


def _odd_values(rng: random.Random, value: int, width: int) -> list[int]:
    bits = 8 * width
    return [
        0,
        1,
        (1 << bits) - 1,
        1 << (bits - 1),
        -2,
        value + 1,
        value ^ (1 << rng.randrange(bits)),
        rng.getrandbits(bits),
    ]


def cases(data: bytes, count: int) -> list[Case]:
    """`count` seeded mutants of data, the kinds in turn."""
    rng = random.Random(SEED)
    table = fields(data)
    end = header_end(data)
    out: list[Case] = []
    special = [
        *(Case(f"arrays nested {d} deep", with_kv(data, nested_array("fuzz.nested", d))) for d in (2, 3, 900, 5000)),
        *(
            Case(f"alignment {a}", with_kv(data, uint32_kv("general.alignment", a), 32))
            for a in (0, 3, 1 << 31, 1 << 17)
        ),
        Case("alignment as a string", with_kv(data, string_kv("general.alignment", "32"))),
        Case("alignment 64 (valid)", with_kv(data, uint32_kv("general.alignment", 64), 64)),
    ]
    while len(out) < count:
        kind = len(out) % 4
        if kind == 0:
            at = rng.randrange(end) if rng.random() < 0.6 else rng.randrange(end, len(data))
            out.append(Case(f"cut at byte {at:,}", data[:at], cut=True))
        elif kind == 1:
            field = rng.choice(table)
            value = rng.choice(_odd_values(rng, field.value, field.width))
            out.append(Case(f"{field.what} set to {value:,}", set_field(data, field, value)))
        elif kind == 2:
            mutant = bytearray(data)
            flips = []
            for _ in range(rng.randint(1, 3)):
                at, bit = rng.randrange(4, end), rng.randrange(8)
                mutant[at] ^= 1 << bit
                flips.append(f"{at}:{bit}")
            out.append(Case(f"bits flipped at {', '.join(flips)}", bytes(mutant)))
        else:
            out.append(special[(len(out) // 4) % len(special)])
    return out


def read_within(path: Path, seconds: float = 10.0) -> str:
    """The header reader's verdict on path: "" (accepted) or its sentence; a hang or a traceback fails."""
    verdict: list[str] = []
    failure: list[BaseException] = []

    def read() -> None:
        try:
            read_gguf(path)
            verdict.append("")
        except ModelFileError as exc:
            verdict.append(str(exc))
        except BaseException as exc:  # any other exception is the defect under test
            failure.append(exc)

    worker = threading.Thread(target=read, daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"the header reader did not answer within {seconds} s"
    assert not failure, f"the header reader raised {failure[0]!r} instead of a sentence"
    return verdict[0]


def test_the_header_reader_answers_every_mutant_in_one_sentence(base, tmp_path):
    tried = 0
    for case in cases(base, READER_CASES):
        path = tmp_path / "mutant.gguf"
        path.write_bytes(case.data)
        said = read_within(path)
        tried += 1
        if said:
            assert "\n" not in said and said.startswith(("mutant.gguf ", "No model file")), (case.label, said)
        if case.cut and len(case.data) < len(base):
            assert said.startswith("mutant.gguf ") and any(w in said for w in CUT_WORDS), (case.label, said)
    assert tried == READER_CASES


@pytest.mark.parametrize("index", range(CLI_CASES))
def test_loading_a_mutant_as_a_model_ends_in_one_sentence(base, tmp_path, index):
    case = cases(base, CLI_CASES)[index]
    path = tmp_path / f"mutant-{index}.gguf"
    path.write_bytes(case.data)
    reader_said = read_within(path)
    outcome = run_bounded(
        ["chat", "hi", "--target", str(path), "--drafter", "none", "--depth", "0", "--max-tokens", "2"],
        timeout_s=60,
        env={"DRAFTLIGHT_CACHE": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1", "NO_COLOR": "1"},
    )
    assert outcome.problems() == [], (case.label, outcome.stderr[-2000:])
    if reader_said:  # refused before llama.cpp: the same sentence, word for word
        assert outcome.returncode == 2 and outcome.stderr.strip() == f"draftlight: {reader_said}", case.label
    elif outcome.returncode:
        line = outcome.stderr.strip()
        assert outcome.returncode == 2 and line.startswith("draftlight: ") and path.name in line, (case.label, line)
