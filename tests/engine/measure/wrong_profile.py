"""A saved box profile made wrong by 10x, and what the first Auto reply must do about it: the check
both runtimes' tests make (test_soundness.py on llama.cpp, test_soundness_mlx.py on MLX)."""

from __future__ import annotations

import json
import re

from engine import AUTO, GenerationConfig, Message, RoundEvent
from engine.measure.profile import load_profile, profile_path, save_profile
from tests.engine.box_profiles import HOPELESS, profile


def assert_caught_within_one_reply(engine, text: str) -> None:
    """Save a profile whose passes and drafter step cost 10x this box's (as a busy box measured them);
    the first Auto reply's rounds contradict it: Auto runs plain, says so, and marks it stale."""
    prompt = engine.prompt_ids([Message("user", text)])
    engine.forget()
    plain = list(engine.stream(prompt, GenerationConfig(max_tokens=24, depth=0, ignore_eog=True)))[-1]
    pass_s = plain.decode_s / plain.rounds
    options = engine.target.options
    wrong = profile(engine.target.path, engine.drafter.model.path, options, HOPELESS[0], HOPELESS[1])
    wrong.target_rows_s, wrong.spread = [10 * pass_s * r for r in HOPELESS[0]], 0.0
    wrong.drafter_step_s = 10 * pass_s * HOPELESS[1]  # priced on this box's passes too: physically sound
    save_profile(wrong)
    assert load_profile(engine.target.path, engine.drafter.model.path, options) is not None
    engine.swap_drafter(engine.drafter)  # a fresh Auto, on the saved profile
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
