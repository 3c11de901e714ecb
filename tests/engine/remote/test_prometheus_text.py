"""The Prometheus text reader: vLLM's counters as prometheus_client writes them, and junk."""

from __future__ import annotations

from engine.remote.prometheus import MAX_LINE, Sample, by_label, parse_samples, total

# A /metrics page in the exact form prometheus_client's generate_latest writes it
# (prometheus_client/exposition.py: counters get "_total", labels sorted, floats as
# floatToGoString, "_created" samples as a gauge after the family) for vLLM's counters
# (vllm/v1/spec_decode/metrics.py, SpecDecodingProm; labels model_name and engine), with two
# engines (data parallel), and a histogram and a gauge around them.
PAGE = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="Qwen/Qwen2.5-Coder-1.5B-Instruct"} 0.0
vllm:num_requests_running{engine="1",model_name="Qwen/Qwen2.5-Coder-1.5B-Instruct"} 1.0
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="Qwen/Qwen2.5-Coder-1.5B-Instruct"} 1.234567e+06
vllm:generation_tokens_total{engine="1",model_name="Qwen/Qwen2.5-Coder-1.5B-Instruct"} 33.0
# HELP vllm:generation_tokens_created Number of generation tokens processed.
# TYPE vllm:generation_tokens_created gauge
vllm:generation_tokens_created{engine="0",model_name="Qwen/Qwen2.5-Coder-1.5B-Instruct"} 1.7254e+09
# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="Qwen/Qwen2.5-Coder-1.5B-Instruct"} 40.0
vllm:spec_decode_num_drafts_total{engine="1",model_name="Qwen/Qwen2.5-Coder-1.5B-Instruct"} 2.0
# HELP vllm:spec_decode_num_accepted_tokens_per_pos_total Accepted tokens per draft position.
# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="Qwen/Qwen2.5-Coder-1.5B-Instruct",position="0"} 35.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="Qwen/Qwen2.5-Coder-1.5B-Instruct",position="1"} 22.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="Qwen/Qwen2.5-Coder-1.5B-Instruct",position="0"} 1.0
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.001",model_name="Qwen/Qwen2.5-Coder-1.5B-Instruct"} 0.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="Qwen/Qwen2.5-Coder-1.5B-Instruct"} 3.0
"""


def test_vllms_counters_are_read_and_summed_over_engines():
    samples = parse_samples(PAGE)
    assert len(samples) == 12
    assert samples[0] == Sample(
        "vllm:num_requests_running",
        (("engine", "0"), ("model_name", "Qwen/Qwen2.5-Coder-1.5B-Instruct")),
        0.0,
    )
    assert total(samples, "vllm:spec_decode_num_drafts_total") == 42.0
    assert total(samples, "vllm:generation_tokens_total") == 1234567.0 + 33.0
    assert total(samples, "vllm:num_requests_running") == 1.0
    assert total(samples, "vllm:spec_decode_num_draft_tokens_total") is None
    assert by_label(samples, "vllm:spec_decode_num_accepted_tokens_per_pos_total", "position") == {
        "0": 36.0,
        "1": 22.0,
    }
    assert by_label(samples, "vllm:time_to_first_token_seconds_bucket", "le") == {"0.001": 0.0, "+Inf": 3.0}


def test_only_the_names_asked_for_are_kept():
    samples = parse_samples(PAGE.encode(), {"vllm:spec_decode_num_drafts_total"})
    assert [s.value for s in samples] == [40.0, 2.0]


def test_junk_is_skipped_and_never_raises():
    junk = "\n".join(
        [
            "garbage",
            'vllm:spec_decode_num_drafts_total{engine="0" 5',  # unclosed labels
            "vllm:spec_decode_num_drafts_total{engine=0} 5",  # unquoted label value
            "vllm:spec_decode_num_drafts_total abc",  # not a number
            "vllm:spec_decode_num_drafts_total NaN",  # not finite
            "vllm:spec_decode_num_drafts_total +Inf",
            "vllm:spec_decode_num_drafts_total 1 2 3",  # trailing junk
            "9starts_with_a_digit 1",
            "vllm:spec_decode_num_drafts_total " + "9" * MAX_LINE,  # over a line's limit
            "\x00\xff{}",
            '{"json": true}',
            "",
            "vllm:spec_decode_num_drafts_total 7",  # the one sample here
            'vllm:spec_decode_num_drafts_total{a="x\\"y",b="\\\\"} 3 1700000000000',  # escapes and a timestamp
            "vllm:spec_decode_num_drafts_total{} 1e2",
        ]
    )
    samples = parse_samples(junk)
    assert [(s.labels, s.value) for s in samples] == [((), 7.0), ((("a", 'x"y'), ("b", "\\")), 3.0), ((), 100.0)]
    assert parse_samples(b"\xff\xfe\x00" * 1000) == []
    assert parse_samples("") == []
    assert by_label(samples, "vllm:spec_decode_num_drafts_total", "position") == {}
