"""vLLM's counters and per-request metrics turned into one reply's drafts: the arithmetic alone,
on counter values as vLLM's Prometheus page gives them (vllm/v1/spec_decode/metrics.py)."""

from __future__ import annotations

from engine.remote.vllm import NO_COUNTERS, SpecCounters, drafts_from_counters, drafts_from_request_metrics


def test_a_replys_drafts_are_the_change_in_the_counters():
    before = SpecCounters(drafts=40, draft_tokens=120, accepted=70, accepted_per_position=(35, 22, 13), generated=200)
    after = SpecCounters(drafts=43, draft_tokens=129, accepted=74, accepted_per_position=(37, 23, 14), generated=208)
    d = drafts_from_counters(before, after, generated_here=8)
    assert (d.drafted, d.accepted, d.rounds) == (9, 4, 3)
    assert (d.drafted_per_position, d.accepted_per_position, d.message) == ((3, 3, 3), (2, 1, 1), "")


def test_shared_counters_say_so_when_another_reply_overlapped():
    before = SpecCounters(40, 120, 70, (35, 22, 13), generated=200)
    after = SpecCounters(44, 132, 74, (37, 23, 14), generated=258)
    assert drafts_from_counters(before, after, 8).message == (
        "vLLM's draft counters count every client of the server, and another reply ran alongside this one "
        "(the server wrote 58 tokens, this reply 8): these draft figures include it."
    )
    running = SpecCounters(40, 120, 70, (35, 22, 13), generated=None, running=1)
    assert drafts_from_counters(running, after, 8).message == (
        "vLLM's draft counters count every client of the server, and another request was running when this "
        "reply began: these draft figures may include it."
    )


def test_missing_or_restarted_counters_give_no_figures_and_a_sentence():
    before = SpecCounters(40, 120, 70, (35, 22, 13))
    assert drafts_from_counters(None, before, 8).message == NO_COUNTERS
    restarted = drafts_from_counters(before, SpecCounters(2, 6, 1, (1,)), 8)
    assert (restarted.drafted, restarted.accepted, restarted.drafted_per_position) == (0, 0, ())
    assert restarted.message == (
        "vLLM's counters went backwards during this reply (did the server restart?): its drafts are not known."
    )
    assert SpecCounters.read("junk\n# only comments\n") is None


def test_per_request_metrics_are_the_replys_own():
    metrics = {
        "time_to_first_token_ms": 41.2,
        "speculative_decoding": {
            "mean_acceptance_length": 2.333,
            "draft_acceptance_rate": 0.444,
            "acceptance_histogram": [1, 1, 0, 1],
            "num_spec_steps": 3,
            "num_accepted_draft_tokens": 4,
            "num_draft_tokens": 9,
            "num_spec_tokens": 3,
        },
    }
    d = drafts_from_request_metrics(metrics)
    assert d is not None
    assert (d.drafted, d.accepted, d.rounds, d.drafted_per_position, d.accepted_per_position, d.message) == (
        9, 4, 3, (3, 3, 3), (2, 1, 1), "",
    )  # fmt: skip
    metrics["speculative_decoding"]["per_step_drafted"] = [3, 2, 1]
    assert drafts_from_request_metrics(metrics).drafted_per_position == (3, 2, 1)
    assert drafts_from_request_metrics({"speculative_decoding": {"num_spec_steps": "x"}}) is None
    assert drafts_from_request_metrics(None) is None


def test_a_hostile_metrics_page_cannot_name_a_billion_positions():
    page = (
        'vllm:spec_decode_num_drafts_total{model_name="m"} 3\n'
        'vllm:spec_decode_num_draft_tokens_total{model_name="m"} 9\n'
        'vllm:spec_decode_num_accepted_tokens_total{model_name="m"} 4\n'
        'vllm:spec_decode_num_accepted_tokens_per_pos_total{model_name="m",position="0"} 2\n'
        'vllm:spec_decode_num_accepted_tokens_per_pos_total{model_name="m",position="999999999"} 1\n'
    )
    counters = SpecCounters.read(page)
    assert counters is not None and counters.accepted_per_position == (2.0,)
