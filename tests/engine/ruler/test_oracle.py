"""The oracle: stock llama.cpp's command lines, its output parsers, and a short real run."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest

from engine import GenerationConfig, Message
from engine.ruler import oracle_build
from engine.ruler.oracle import (
    OracleBuild,
    OracleServer,
    OracleUnavailable,
    build_oracle,
    find_oracle,
    first_error,
    parse_completion,
    parse_port,
    plain_command,
    request_body,
    run_plain,
    run_speculative,
    speculative_command,
)
from engine.ruler.oracle_build import build_percent, cmake_flags

BUILD = OracleBuild("test", Path("/opt/llama/bin"))
SERVER = str(BUILD.binary("llama-server"))
TARGET, DRAFTER = Path("/m/target.gguf"), Path("/m/drafter.gguf")

# llama-server's /completion reply (depth 2, 32 tokens, the code prompt), trimmed to the
# fields the parser reads.
REPLY = json.loads("""{
 "content": "Certainly! Below is a simple implementation of the bubble sort algorithm in C++. Bubble sort is \
a simple sorting algorithm that repeatedly steps through the list, compares adjacent elements",
 "tokens": [95456, 0, 21193, 374, 264, 4285, 8129, 315, 279, 23611, 3378, 12111, 304, 356, 22890, 53324, 3378,
  374, 264, 4285, 28273, 12111, 429, 18822, 7354, 1526, 279, 1140, 11, 42465, 23942, 5424],
 "tokens_predicted": 32, "tokens_evaluated": 36, "stop_type": "limit",
 "timings": {"cache_n": 0, "prompt_n": 36, "prompt_ms": 403.816, "prompt_per_token_ms": 11.21711111111111,
  "prompt_per_second": 89.1495136398756, "predicted_n": 32, "predicted_ms": 1967.188,
  "predicted_per_token_ms": 63.457677419354845, "predicted_per_second": 15.758534517290672,
  "draft_n": 22, "draft_n_accepted": 19}
}""")

# The lines of llama-server's log around start-up (port 0: it says which port it took).
SERVER_LOG = """\
warning: no usable GPU found, --gpu-layers option will be ignored
0.00.002.302 I srv  llama_server: initializing ...
0.07.051.681 I srv    load_model: initializing, n_slots = 1, n_ctx_slot = 4096, kv_unified = 'false'
0.07.066.185 I srv  llama_server: model loaded
0.07.066.230 I srv  llama_server: listening on http://127.0.0.1:40237
"""

# ... and when its model will not load.
FAILED_LOG = """\
0.00.022.352 I srv    load_model: loading model '/nonexistent.gguf'
0.00.022.508 E gguf_init_from_file: failed to open GGUF file '/nonexistent.gguf' (No such file or directory)
0.00.022.710 E llama_model_load: error loading model: llama_model_loader: failed to load model from /nonexistent.gguf
0.00.022.808 I srv    operator(): operator(): cleaning up before exit...
0.00.023.129 E srv  llama_server: exiting due to model loading error
"""


def test_plain_command():
    assert plain_command(BUILD, TARGET, threads=2, n_ctx=4096, repack=False) == [
        SERVER,
        "--host", "127.0.0.1", "--port", "0",
        "-m", "/m/target.gguf",
        "-t", "2", "-tb", "2", "-c", "4096", "-np", "1", "-ngl", "all",
        "--no-repack", "-ctk", "q8_0", "-ctv", "q8_0",
        "--no-cache-prompt", "--cache-ram", "0", "--no-webui",
    ]  # fmt: skip


def test_speculative_command():
    assert speculative_command(BUILD, TARGET, DRAFTER, depth=3, threads=4, n_ctx=2048, repack=True) == [
        SERVER,
        "--host", "127.0.0.1", "--port", "0",
        "-m", "/m/target.gguf",
        "-t", "4", "-tb", "4", "-c", "2048", "-np", "1", "-ngl", "all",
        "--repack", "-ctk", "f16", "-ctv", "f16",
        "--no-cache-prompt", "--cache-ram", "0", "--no-webui",
        "-md", "/m/drafter.gguf",
        "--spec-type", "draft-simple",
        "--spec-draft-n-max", "3", "--spec-draft-n-min", "0", "--spec-draft-p-min", "0",
        "-ctkd", "f16", "-ctvd", "f16",
        "-td", "4", "-tbd", "4", "-ngld", "all",
    ]  # fmt: skip


def test_request_bodies():
    plain = {
        "prompt": "<|im_start|>user\nhi<|im_end|>\n",
        "n_predict": 96,
        "temperature": 0.0,
        "top_k": 1,
        "ignore_eos": True,
        "cache_prompt": False,
        "return_tokens": True,
        "stream": False,
    }
    assert request_body("<|im_start|>user\nhi<|im_end|>\n", 96) == plain
    assert request_body("<|im_start|>user\nhi<|im_end|>\n", 96, depth=2) == plain | {
        "speculative.n_max": 2,
        "speculative.n_min": 0,
        "speculative.p_min": 0.0,
    }


def test_the_reference_is_built_for_the_device_llama_cpp_python_was_built_for(monkeypatch):
    monkeypatch.setenv("CMAKE_ARGS", "-DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=90")
    assert cmake_flags("Linux", "x86_64")[-2:] == ["-DGGML_CUDA=on", "-DCMAKE_CUDA_ARCHITECTURES=90"]


def test_cmake_flags_follow_llama_cpp_python(monkeypatch):
    monkeypatch.delenv("CMAKE_ARGS", raising=False)
    linux = cmake_flags("Linux", "x86_64")
    assert linux[:2] == ["-DCMAKE_BUILD_TYPE=Release", "-DBUILD_SHARED_LIBS=ON"]
    assert not any("NATIVE" in f or "METAL" in f or "AVX" in f for f in linux)
    mac_arm = cmake_flags("Darwin", "arm64")
    assert {"-DGGML_METAL=ON", "-DGGML_METAL_EMBED_LIBRARY=ON", "-DCMAKE_OSX_ARCHITECTURES=arm64"} <= set(mac_arm)
    assert not any("AVX" in f for f in mac_arm)
    assert {"-DGGML_AVX=OFF", "-DGGML_AVX2=OFF", "-DGGML_FMA=OFF", "-DGGML_F16C=OFF"} <= set(
        cmake_flags("Darwin", "x86_64")
    )


def test_parse_completion():
    run = parse_completion(REPLY, "depth 2", ("llama-server",))
    assert (run.arm, run.prompt_tokens, run.generated_tokens) == ("depth 2", 36, 32)
    assert (run.drafted, run.accepted) == (22, 19)
    assert run.prefill_s == pytest.approx(0.403816)
    assert run.decode_s == pytest.approx(1.967188)
    assert run.decode_tps == pytest.approx(31 / 1.967188)  # the first token came from the prefill
    assert run.end_to_end_tps == pytest.approx(32 / (0.403816 + 1.967188))
    assert run.token_ids is not None and run.token_ids[:3] == (95456, 0, 21193)
    assert run.text.startswith("Certainly! Below is")
    plain = parse_completion(REPLY, "plain", ())
    assert (plain.drafted, plain.accepted) == (None, None)


def test_parse_port():
    assert parse_port(SERVER_LOG) == 40237
    assert parse_port(SERVER_LOG.split("listening")[0]) is None


def test_first_error_is_the_cause():
    assert first_error(FAILED_LOG) == (
        "gguf_init_from_file: failed to open GGUF file '/nonexistent.gguf' (No such file or directory)"
    )
    assert first_error("") == "no output"


@pytest.mark.parametrize(
    ("line", "percent"),
    [
        ("[  5%] Building C object ggml/src/CMakeFiles/ggml-base.dir/ggml.c.o", 5),
        ("[100%] Built target llama-server", 100),
        ("[12/345] Building CXX object src/CMakeFiles/llama.dir/llama.cpp.o", 3),
        ("-- Configuring done", None),
        ("In file included from [ 5%]", None),
    ],
)
def test_build_percent(line, percent):
    assert build_percent(line) == percent


def _fake_sdist(path: Path, commit: str) -> Path:
    files = {
        "llama_cpp_python-9.9.9/CHANGELOG.md": "## [9.9.9]\n\n- feat: update llama.cpp to ggml-org/llama.cpp@0c1e57098\n",
        "llama_cpp_python-9.9.9/.git/modules/vendor/llama.cpp/HEAD": commit + "\n",
        "llama_cpp_python-9.9.9/vendor/llama.cpp/CMakeLists.txt": "project(llama)\n",
        "llama_cpp_python-9.9.9/vendor/llama.cpp/include/llama.h": "",
    }
    with tarfile.open(path, "w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_extract_takes_only_vendored_llama_cpp_and_its_commit(tmp_path):
    commit = "0c1e57098bba43ac29e6e3b677cdceebdd22334f"
    sdist = _fake_sdist(tmp_path / "llama_cpp_python-9.9.9.tar.gz", commit)
    lines: list[str] = []
    tree, found = oracle_build._extract(sdist, tmp_path / "src", lines.append)
    assert found == commit
    assert sorted(p.relative_to(tree).as_posix() for p in tree.rglob("*") if p.is_file()) == [
        "CMakeLists.txt",
        "include/llama.h",
    ]
    assert lines == ["extracting llama_cpp_python-9.9.9.tar.gz", "extracted 2 files of llama.cpp"]


def test_no_cached_build_means_none(tmp_path, monkeypatch):
    monkeypatch.setenv("DRAFTLIGHT_CACHE", str(tmp_path))
    assert find_oracle() is None


def test_a_missing_source_is_one_sentence(tmp_path, monkeypatch):
    monkeypatch.setenv("DRAFTLIGHT_CACHE", str(tmp_path))
    with pytest.raises(OracleUnavailable, match=r"^the llama.cpp source .* does not exist: fix DRAFTLIGHT_LLAMA_SRC"):
        build_oracle(progress=lambda _: None, source=tmp_path / "nowhere")


def test_a_missing_binary_is_one_sentence():
    with (
        pytest.raises(OracleUnavailable, match="is missing: build the oracle"),
        OracleServer(["/nowhere/llama-server"], "plain"),
    ):
        pass


# ---- against the real build --------------------------------------------------------------

N_TOKENS = 8
CODE_RENDERED = (
    "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
    "<|im_start|>user\nWrite a bubble sort in C++.<|im_end|>\n<|im_start|>assistant\n"
)


@pytest.fixture(scope="module")
def code_prompt(engine) -> tuple[str, list[int], tuple[int, ...], str]:
    """The rendered code prompt, our tokens for it, and our greedy reply's ids and text."""
    text = engine.render([Message("user", "Write a bubble sort in C++.")])
    assert text == CODE_RENDERED
    ids = engine.tokenize_prompt(text)
    stats = list(engine.stream(ids, GenerationConfig(max_tokens=N_TOKENS, depth=0, ignore_eog=True)))[-1]
    return text, ids, stats.token_ids, stats.text


@pytest.mark.oracle
@pytest.mark.slow
def test_plain_run_matches_the_engine(oracle, engine, target_path, code_prompt):
    text, ids, our_ids, our_text = code_prompt
    run = run_plain(oracle, target_path, text, N_TOKENS, engine.options.threads, 4096, repack=False)
    assert run.prompt_tokens == len(ids)
    assert run.generated_tokens == N_TOKENS
    assert run.token_ids == our_ids
    assert run.text == our_text
    assert run.drafted is None and run.decode_tps > 0


@pytest.mark.oracle
@pytest.mark.slow
def test_depth_two_run_matches_the_engine(oracle, engine, target_path, drafter_path, code_prompt):
    text, ids, our_ids, our_text = code_prompt
    run = run_speculative(
        oracle, target_path, drafter_path, text, 2, N_TOKENS, engine.options.threads, 4096, repack=False
    )
    assert run.arm == "depth 2"
    assert run.prompt_tokens == len(ids)
    assert run.generated_tokens == N_TOKENS
    assert run.token_ids == our_ids
    assert run.text == our_text
    assert run.drafted is not None and run.accepted is not None
    assert 0 < run.drafted <= 2 * N_TOKENS and run.accepted <= run.drafted
