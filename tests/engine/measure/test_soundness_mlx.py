"""The reply check on MLX: a saved MLX box profile made wrong by 10x is caught by the first Auto reply
on the MLX runtime, as on llama.cpp (tests/engine/measure/test_soundness.py). Tiny random-weight qwen2
folders written here; the profile lives in a temporary cache."""

from __future__ import annotations

import json
import re

import pytest

pytest.importorskip("mlx_lm")

from engine import AUTO, GenerationConfig, Message, RoundEvent
from engine.measure.profile import load_profile, profile_path, save_profile
from engine.runtime import RuntimeOptions
from engine.session import Engine
from tests.engine.box_profiles import HOPELESS, profile
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
    prompt = engine.prompt_ids([Message("user", "the cat sat on the mat")])
    engine.forget()
    plain = list(engine.stream(prompt, GenerationConfig(max_tokens=24, depth=0, ignore_eog=True)))[-1]
    pass_s = plain.decode_s / plain.rounds
    options = engine.target.options
    wrong = profile(engine.target.path, engine.drafter.model.path, options, HOPELESS[0], HOPELESS[1])
    wrong.target_rows_s, wrong.spread = [10 * pass_s * r for r in HOPELESS[0]], 0.0
    wrong.drafter_step_s = 10 * pass_s * HOPELESS[1]  # priced on this box's passes, as a 1-layer step
    save_profile(wrong)
    assert load_profile(engine.target.path, engine.drafter.model.path, options) is not None
    engine.swap_drafter(engine.drafter)  # a fresh Auto, on the saved MLX profile
    try:
        auto = engine.auto_depth()
        engine.forget()
        events = list(engine.stream(prompt, GenerationConfig(max_tokens=24, depth=AUTO, ignore_eog=True)))
        assert re.fullmatch(r"the box profile measured \d+x slower than this reply: re-measuring; plain until then",
                            auto.contradicted)  # fmt: skip
        assert auto.choose() == 0 and all(e.drafted == 0 for e in events if isinstance(e, RoundEvent))
        assert engine.profile_notice == f"Auto: {auto.contradicted}."
        assert load_profile(engine.target.path, engine.drafter.model.path, options) is None  # stale
        assert json.loads(profile_path(wrong.key).read_text())["stale"] is True
        assert engine.auto is None  # the next Auto reply measures the box again
    finally:
        engine.profile_notice = ""
        engine.swap_drafter(engine.drafter)
