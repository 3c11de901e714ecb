"""Box profiles per runtime: the same files profiled on llama.cpp and on MLX are two profiles, and
neither prices the other's rounds; `draftlight tune --runtime mlx` measures and keeps MLX's."""

from __future__ import annotations

import contextlib
import io
import json
from dataclasses import replace
from pathlib import Path

import pytest

pytest.importorskip("mlx_lm")

from engine.cli import main
from engine.measure.profile import (
    load_profile,
    profile_key,
    profile_path,
    save_profile,
    saved_target_profile,
)
from engine.runtime import RuntimeOptions
from engine.runtime.mlx import MlxModel, MlxOptions
from tests.engine.box_profiles import PAYING, profile
from tests.engine.runtime.mlx_folders import write_qwen2_folder


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("mlx-profiles")
    return {
        "target": write_qwen2_folder(root / "target", seed=0),
        "drafter": write_qwen2_folder(root / "drafter", seed=0, layers=1),
    }


def test_a_profile_is_keyed_by_its_runtime(tmp_path, monkeypatch, folders):
    monkeypatch.setenv("DRAFTLIGHT_CACHE", str(tmp_path))
    target, drafter = folders["target"], folders["drafter"]
    llama, mlx = RuntimeOptions(), MlxOptions()
    assert profile_key(target, drafter, llama) != profile_key(target, drafter, mlx)
    saved = profile(target, drafter, llama, *PAYING)
    save_profile(saved)
    assert saved.runtime == llama.runtime_version()
    assert load_profile(target, drafter, llama) == saved
    assert load_profile(target, drafter, mlx) is None  # llama.cpp's figures never price an MLX round
    on_mlx = profile(target, drafter, mlx, *PAYING)
    assert on_mlx.runtime.startswith("mlx ") and on_mlx.mode == "mlx cpu compiled joined"
    save_profile(on_mlx)
    assert load_profile(target, drafter, mlx) == on_mlx and load_profile(target, drafter, llama) == saved


def test_an_mlx_folders_key_follows_its_weights(tmp_path, folders):
    folder = write_qwen2_folder(tmp_path / "target", seed=0)
    before = profile_key(folder, folders["drafter"], MlxOptions())
    write_qwen2_folder(folder, seed=1, layers=3)  # other weights in the same folder: another model
    assert profile_key(folder, folders["drafter"], MlxOptions()) != before


@pytest.mark.slow
def test_a_target_only_profile_is_never_borrowed_across_runtimes(tmp_path, monkeypatch, folders):
    monkeypatch.setenv("DRAFTLIGHT_CACHE", str(tmp_path))
    target = MlxModel.load(folders["target"], MlxOptions(n_ctx=256))
    try:
        llama = profile(folders["target"], folders["target"], RuntimeOptions(), *PAYING)
        save_profile(replace(llama, drafter="(none)", mode=target.options.mode))  # even with MLX's mode
        assert saved_target_profile(target, target.options) is None
        save_profile(replace(profile(folders["target"], folders["target"], target.options, *PAYING), drafter="(none)"))
        assert saved_target_profile(target, target.options).runtime == target.options.runtime_version()
    finally:
        target.close()


@pytest.mark.slow
def test_tune_on_mlx_measures_a_profile_of_its_own(tmp_path, monkeypatch, folders):
    monkeypatch.setenv("DRAFTLIGHT_CACHE", str(tmp_path))
    argv = ["tune", "--runtime", "mlx", "--target", str(folders["target"]), "--drafter", str(folders["drafter"])]

    def tune() -> str:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert main([*argv, "--ctx", "256"]) == 0
        return out.getvalue()

    first = tune()
    assert first.startswith(
        "Box profile for target + drafter, mlx cpu compiled joined mode, 0 threads, on MLX (measured in "
    )
    (saved,) = (tmp_path / "profiles").glob("*.json")
    data = json.loads(saved.read_text())
    assert data["runtime"] == MlxOptions().runtime_version() and data["mode"] == "mlx cpu compiled joined"
    assert saved == profile_path(profile_key(folders["target"], folders["drafter"], MlxOptions()))
    assert load_profile(folders["target"], folders["drafter"], RuntimeOptions()) is None
    assert "(saved " in tune().splitlines()[0]  # the second run reads it back
