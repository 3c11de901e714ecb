"""The reply check on MLX: a saved MLX box profile made wrong by 10x is caught by the first Auto reply
on the MLX runtime, as on llama.cpp (tests/engine/measure/test_soundness.py). Tiny random-weight qwen2
folders written here; the profile lives in a temporary cache."""

from __future__ import annotations

import pytest

pytest.importorskip("mlx_lm")

from engine.runtime import RuntimeOptions
from engine.session import Engine
from tests.engine.measure.wrong_profile import assert_caught_within_one_reply
from tests.engine.runtime.mlx_folders import write_qwen2_folder


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    root = tmp_path_factory.mktemp("mlx-soundness")
    target = write_qwen2_folder(root / "target", seed=0, layers=2)
    drafter = write_qwen2_folder(root / "drafter", seed=0, layers=1)
    loaded = Engine.load(target, drafter, RuntimeOptions(n_ctx=512), runtime="mlx")
    yield loaded
    loaded.close()


def test_an_mlx_profile_wrong_by_10x_is_caught_within_one_reply(engine, tmp_path, monkeypatch):
    monkeypatch.setenv("DRAFTLIGHT_CACHE", str(tmp_path))
    assert engine.runtime.name == "mlx"
    assert_caught_within_one_reply(engine, "the cat sat on the mat")
