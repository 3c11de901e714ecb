"""The break-even gauge: its figures follow from the replies' own measurements, its verdict from their ratio."""

from __future__ import annotations

from dataclasses import replace

import pytest

from engine import GenerationConfig, Message, RunStats, gauge

N = 24


def reply(engine, depth: int) -> RunStats:
    prompt = engine.prompt_ids([Message("user", "Write a JSON object for a cat.")])
    engine.forget()
    return list(engine.stream(prompt, GenerationConfig(max_tokens=N, depth=depth, ignore_eog=True)))[-1]


@pytest.fixture(scope="module")
def replies(engine):
    return reply(engine, 0), reply(engine, 2)


def test_the_figures_are_the_replies_own(replies):
    plain, spec = replies
    pass_s = plain.decode_s / plain.rounds  # a plain round writes one token
    g = gauge([plain, spec], pass_s)  # the plain reply drafted nothing: only the speculative one counts
    assert g is not None
    assert g.plain_tps == pytest.approx(plain.decoded_tokens / plain.decode_s)
    assert g.tps == pytest.approx(spec.decoded_tokens / spec.decode_s)
    assert g.rows == pytest.approx(1 + spec.drafted / spec.rounds) and 2 < g.rows <= 3
    assert g.verify_passes == pytest.approx(spec.verify_s / spec.rounds / pass_s)
    assert g.step == pytest.approx(spec.draft_s / spec.drafted / pass_s)
    assert g.acceptance == pytest.approx(spec.accepted / spec.drafted)
    assert gauge([plain], pass_s) is None and gauge([spec], None) is None


def test_the_verdict_follows_the_ratio(replies):
    plain, spec = replies
    pass_s = plain.decode_s / plain.rounds
    slow = gauge([replace(spec, decode_s=spec.decoded_tokens * pass_s * 2)], pass_s)  # half the plain speed
    assert slow.speedup == pytest.approx(0.5)
    assert slow.short() == "speculation 50% slower"
    assert slow.verdict() == (
        f"speculation is 50% slower than plain decoding here ({slow.tps:.1f} against {slow.plain_tps:.1f} tok/s "
        f"plain): verifying {slow.rows:.3g} rows costs {slow.verify_passes:.2f} passes and a draft step "
        f"{slow.step:.2f}, so {slow.acceptance:.0%} acceptance cannot pay for it"
    )
    fast = gauge([replace(spec, decode_s=spec.decoded_tokens * pass_s / 1.25)], pass_s)  # 1.25x plain
    assert fast.short() == "speculation saves 20%"
    assert (
        fast.verdict()
        == f"speculation saves 20% of the time here ({fast.tps:.1f} against {fast.plain_tps:.1f} tok/s plain)"
    )


def test_a_plain_speed_the_reply_contradicts_claims_no_saving(replies):
    """A profile measured while another program shared the cores priced a plain pass 10x too slow: the
    reply's own verify passes (a row or more each) ran far under it, so no saving is claimed."""
    plain, spec = replies
    wrong = plain.decode_s / plain.rounds * 10
    g = gauge([spec], wrong, "plain 3.1 tok/s ±2%, measured today")
    assert g.contradicted and g.short() == "plain speed unknown: re-measuring"
    assert g.to_json()["speedup"] is None and g.to_json()["basis"] == "plain 3.1 tok/s ±2%, measured today"
    assert g.verdict() == (
        f"no saving can be claimed: the box profile's plain pass ({g.plain_tps:.1f} tok/s; plain 3.1 tok/s ±2%, "
        f"measured today) measured {1 / g.verify_passes:.0f}x slower than this reply's own verify passes: re-measuring"
    )
    assert not gauge([spec], wrong / 10).contradicted
