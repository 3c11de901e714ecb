"""Chat templates render within a budget: time, value sizes, output size, and a cancel flag."""

from __future__ import annotations

import threading
import time

import pytest

from engine.chat import ChatTemplate, Message
from engine.errors import Cancelled, ChatTemplateError

HI = [Message("user", "hi")]


def refusal(source: str, **budget) -> str:
    with pytest.raises(ChatTemplateError) as caught:
        ChatTemplate(source).render(HI, **budget)
    return str(caught.value)


def test_nested_loops_inside_the_range_limit_stop_at_the_deadline():
    said = refusal("{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}", seconds=0.3)
    assert said == (
        "The model's chat template ran past its 0.3-second budget and was stopped: "
        "the model file's template is faulty or hostile."
    )


def test_loops_over_characters_and_exponential_macros_stop_at_the_deadline():
    chars = (
        "{% set s = 'ab' * 1000 %}{% for a in s %}{% for b in s %}{% for c in s %}{% endfor %}{% endfor %}{% endfor %}"
    )
    doubling = "{% macro f(n) %}{% if n %}{{ f(n-1) }}{{ f(n-1) }}{% endif %}{% endmacro %}{{ f(40) }}"
    for source in (chars, doubling):
        assert "ran past its 0.3-second budget" in refusal(source, seconds=0.3)


def test_a_huge_constant_is_refused_not_folded_at_compile_time():
    template = ChatTemplate("{{ 'x' * 4000000000 }}")  # compiling alone used to allocate 4 GB
    with pytest.raises(ChatTemplateError, match="4,000,000,000 items, past the limit of 8,388,608"):
        template.render(HI)


@pytest.mark.parametrize(
    ("source", "words"),
    [
        ("{{ messages | tojson(indent=10**8) }}", "tojson's indent 100000000 is not between 0 and 64"),
        ("{{ strftime_now('%c' * 1000) }}", "strftime_now's format is 2,000 characters"),
        ("{{ '{:>999999999}'.format(1) }}", "a format string asks for a width of 999999999"),
        ("{{ '%999999999d' % 1 }}", "a '%' format asks for a width of 999999999"),
        ("{{ '%s' | format(1) }}{{ '%0999999999d' | format(1) }}", "a '%' format asks for a width of 999999999"),
        ("{{ 'x' | center(999999999) }}", "the center filter would hold 999,999,999 items"),
        ("{{ 'a\nb' | indent(999999999) }}", "the indent filter would hold"),
        ("{{ ('x' * 1000000) | replace('', 'y' * 1000) }}", "str.replace would hold 1,001,001,000 items"),
        ("{{ (['x' * 1000000] * 1000) | join }}", "a joined string would hold 1,000,000,000 items"),
        ("{{ ''.join(['x' * 1000000] * 1000) }}", "a joined string would hold 1,000,000,000 items"),
        ("{{ 'x'.ljust(10**9) }}", "str.ljust would hold 1,000,000,000 items"),
        ("{{ 7 ** 100000 }}", "bits is past the limit of 65,536"),
    ],
)
def test_values_that_would_grow_past_their_limit_are_refused_before_they_are_built(source, words):
    said = refusal(source)
    assert said.startswith("The model's chat template was stopped building too large a value: ")
    assert words in said


def test_output_past_its_cap_is_refused():
    said = refusal("{% for i in range(100) %}{{ 'x' * 1000 }}{% endfor %}", max_chars=50_000)
    assert said == (
        "The model's chat template wrote more than 50,000 characters, more than the context can hold: "
        "shorten the conversation or use another model."
    )


def test_endless_recursion_is_a_sentence():
    said = refusal("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}")
    assert said == "The model's chat template recursed too deeply (a macro that calls itself without end?)."


def test_a_cancel_stops_a_render_at_once():
    stop = threading.Event()
    template = ChatTemplate("{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}")
    threading.Timer(0.2, stop.set).start()
    t0 = time.monotonic()
    with pytest.raises(Cancelled, match=r"Stopped before the reply began\."):
        template.render(HI, cancelled=stop.is_set, seconds=60)
    assert time.monotonic() - t0 < 30  # a 60-second budget: only the cancel could have ended it


def test_the_budget_leaves_a_tracer_that_was_set_before_in_place():
    import sys

    def outer(frame, event, arg):
        return None

    sys.settrace(outer)
    try:
        assert ChatTemplate(None).render(HI).endswith("<|im_start|>assistant\n")
        assert sys.gettrace() is outer
    finally:
        sys.settrace(None)
