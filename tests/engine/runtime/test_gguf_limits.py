"""A hostile model file is refused in one true sentence: no hang, no abort, no traceback, no 5 GB read.

Every file here is a tiny llama model written at test time (tests/fuzz/tiny_gguf.py), damaged
one field at a time (tests/fuzz/gguf_map.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from engine import Model, ModelFileError
from engine.runtime.gguf import CorruptModelFile, TruncatedModelFile, read_gguf
from engine.runtime.llama.probe import ensure_loadable
from tests.fuzz.bounded import run_bounded
from tests.fuzz.gguf_map import (
    fields,
    header_end,
    kv_value,
    nested_array,
    set_field,
    string_kv,
    uint32_kv,
    with_kv,
)
from tests.fuzz.test_fuzz_gguf import read_within
from tests.fuzz.tiny_gguf import tiny_llama

DAMAGED = "The file is damaged (or was not written by a GGUF tool); fetch it again."


@pytest.fixture(scope="module")
def good(tmp_path_factory) -> bytes:
    return tiny_llama(tmp_path_factory.mktemp("tiny") / "tiny.gguf").read_bytes()


def field(data: bytes, what: str):
    return next(f for f in fields(data) if f.what == what)


def write(tmp_path: Path, data: bytes, name: str = "mutant.gguf") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def chat(path: Path, tmp_path: Path, memory_mb: int = 3072):
    return run_bounded(
        ["chat", "hi", "--target", str(path), "--drafter", "none", "--depth", "0", "--max-tokens", "2"],
        timeout_s=60,
        memory_mb=memory_mb,
        env={"DRAFTLIGHT_CACHE": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1"},
    )


# ---- item 2: one flipped byte no longer walks the reader into garbage for ever


def test_a_dimension_count_read_from_garbage_is_refused_at_once(good, tmp_path):
    # The last tensor's n_dims damaged, then megabytes with no zero byte: the old reader
    # multiplied millions of 2^64-1 "dimensions" into one integer, each product longer than
    # the last (no answer in minutes); a dimension count is at most 4.
    n_dims = field(good, "tensor 20 n_dims")
    data = good[: n_dims.offset] + b"\xff" * (4 + (4 << 20))
    said = read_within(write(tmp_path, data), seconds=5)
    assert said == (
        "mutant.gguf has a corrupt header: tensor 'blk.1.ffn_down.weight' claims 4,294,967,295 dimensions "
        f"(at most 4). {DAMAGED}"
    )


def test_a_tensor_name_length_off_by_a_few_bytes_is_a_sentence(good, tmp_path):
    length = field(good, "tensor 1 name length")
    said = read_within(write(tmp_path, set_field(good, length, length.value + 3)), seconds=5)
    assert said.startswith("mutant.gguf has a corrupt header: ") and said.endswith(DAMAGED)


def test_a_string_claiming_almost_the_whole_file_is_not_read(good, tmp_path):
    # item 7: a 6 GB file (sparse here) whose chat template claims nearly all of it; the old
    # reader read it whole (5 GB of memory); under a 1 GB budget that is a MemoryError
    data = bytearray(good)
    template = next(f for f in fields(good) if f.what.endswith(" length") and f.value == 53)
    size = 6 << 30
    data[template.offset : template.offset + 8] = (size - 100).to_bytes(8, "little")
    path = write(tmp_path, bytes(data))
    with path.open("r+b") as f:
        f.truncate(size)
    outcome = chat(path, tmp_path, memory_mb=1024)
    assert outcome.problems() == []
    assert outcome.stderr.strip() == (
        "draftlight: mutant.gguf has a corrupt header: the value of 'tokenizer.chat_template' claims "
        f"6,442,450,844 bytes. {DAMAGED}"
    )


# ---- item 6: tracebacks become sentences


@pytest.mark.parametrize("depth", [2, 5000])
def test_arrays_of_arrays_are_refused_without_recursion(good, tmp_path, depth):
    said = read_within(write(tmp_path, with_kv(good, nested_array("fuzz.nested", depth))))
    assert (
        said
        == f"mutant.gguf has a corrupt header: 'fuzz.nested' is an array of arrays, which GGUF does not allow. {DAMAGED}"
    )


@pytest.mark.parametrize(
    ("kv", "shown"), [(uint32_kv("general.alignment", 0), "0"), (string_kv("general.alignment", "32"), "'32'")]
)
def test_a_bad_alignment_is_named(good, tmp_path, kv, shown):
    with pytest.raises(CorruptModelFile) as caught:
        read_gguf(write(tmp_path, with_kv(good, kv)))
    assert str(caught.value) == (
        f"mutant.gguf has a corrupt header: general.alignment is {shown}, not a power of two up to 65,536 "
        f"stored as uint32. {DAMAGED}"
    )


def test_a_valid_alignment_other_than_the_default_still_loads(good, tmp_path):
    info = read_gguf(write(tmp_path, with_kv(good, uint32_kv("general.alignment", 64), 64)))
    assert info.metadata["general.alignment"] == 64 and info.expected_size == info.actual_size


# ---- item 18: truncated and corrupt, told apart


def test_a_file_cut_inside_its_data_is_truncated(good, tmp_path):
    with pytest.raises(TruncatedModelFile) as caught:
        read_gguf(write(tmp_path, good[:200_000]))
    assert str(caught.value) == (
        f"mutant.gguf is truncated: it holds 200,000 bytes but its tensors need {len(good):,} "
        f"({100 * 200_000 / len(good):.1f}% present). Fetch the file again."
    )


def test_a_file_cut_inside_its_header_is_cut_short(good, tmp_path):
    assert header_end(good) > 3000
    with pytest.raises(
        TruncatedModelFile, match=r"^mutant\.gguf is cut short: it ends at byte 3,000, inside its header"
    ):
        read_gguf(write(tmp_path, good[:3000]))


@pytest.mark.parametrize(
    ("what", "value", "reason"),
    [
        ("tensor 3 offset", 1 << 20, "tensor 'blk.0.attn_norm.weight' claims its data at offset 1,048,576"),
        ("tensor 20 dim 1", 1 << 40, "tensor 'blk.1.ffn_down.weight' has shape [96, 1099511627776]"),
        ("tensor 2 dim 0", -5, "tensor 'output.weight' has a dimension of -5"),
        ("tensor 2 type", 99, "tensor 'output.weight' has type 99, which ggml does not know"),
        ("n_tensors", 1 << 40, "the tensor count is 1,099,511,627,776, more than any model has"),
    ],
)
def test_impossible_offsets_shapes_and_types_are_corrupt_not_truncated(good, tmp_path, what, value, reason):
    with pytest.raises(CorruptModelFile) as caught:
        read_gguf(write(tmp_path, set_field(good, field(good, what), value)))
    assert str(caught.value).startswith(f"mutant.gguf has a corrupt header: {reason}")


# ---- item 3: what llama.cpp aborts on is refused in words, before llama.cpp sees it


@pytest.mark.parametrize(("blocks", "shown"), [(0, "0"), (1 << 31, "2,147,483,648")])
def test_a_layer_count_llama_cpp_asserts_on_is_a_sentence_not_an_abort(good, tmp_path, blocks, shown):
    path = write(tmp_path, set_field(good, kv_value(good, "llama.block_count"), blocks))
    outcome = chat(path, tmp_path)
    assert outcome.problems() == []
    assert outcome.stderr.strip() == (
        f"draftlight: mutant.gguf cannot be loaded: llama.block_count is {shown} (llama.cpp loads 1 to 512 layers). "
        "Its metadata is damaged or was written for another program; fetch the file again or choose another."
    )


@pytest.mark.parametrize(("bits", "shown"), [(0xFFFFFFFE, "nan"), (0xB727C5AC, "-1e-05"), (0x7F800000, "inf")])
def test_a_norm_epsilon_llama_cpp_asserts_on_is_a_sentence_not_an_abort(good, tmp_path, bits, shown):
    path = write(tmp_path, set_field(good, kv_value(good, "llama.attention.layer_norm_rms_epsilon"), bits))
    outcome = chat(path, tmp_path)
    assert outcome.problems() == []
    assert outcome.stderr.strip() == (
        f"draftlight: mutant.gguf has a corrupt header: llama.attention.layer_norm_rms_epsilon is {shown}; "
        f"a norm's epsilon is a small positive number. {DAMAGED}"
    )


def test_an_abort_no_check_foresees_is_caught_by_the_probe(tmp_path):
    # more experts used per layer than the model has: llama.cpp asserts; the per-layer
    # array form is not checked ahead, so the child-process probe meets it
    path = tiny_llama(tmp_path / "experts.gguf", extra=lambda w: w.add_array("llama.expert_used_count", [5, 5]))
    outcome = chat(path, tmp_path)
    assert outcome.problems() == []
    assert outcome.stderr.strip() == (
        "draftlight: llama.cpp cannot load experts.gguf: it stops at an internal check "
        "(GGML_ASSERT(n_expert_used_max <= hparams.n_expert) failed). The file's metadata is damaged or was "
        "written for another program; fetch it again or choose another file."
    )


def test_the_probe_names_the_assert_it_met(good, tmp_path):
    path = write(tmp_path, set_field(good, kv_value(good, "llama.block_count"), 0))
    with pytest.raises(ModelFileError, match=r"GGML_ASSERT\(hparams\.n_layer_all > 0 && "):
        ensure_loadable(read_gguf(path))


# ---- item 8: llama.cpp's own reason reaches the sentence


def test_llama_cpp_s_reason_for_refusing_a_file_is_kept(good, tmp_path):
    at = good.index(b"llama", 40)  # general.architecture's value
    path = write(tmp_path, good[:at] + b"nosuc" + good[at + 5 :])
    with pytest.raises(ModelFileError) as caught:
        Model(path)
    assert str(caught.value) == "llama.cpp could not load mutant.gguf: unknown model architecture: 'nosuc'"
