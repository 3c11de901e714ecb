"""Acceptance by content: a reply cut into the parts a reader sees, with figures that add up."""

from __future__ import annotations

import pytest

from engine import GenerationConfig, Message, RoundEvent, RunStats, TokenEvent
from engine.content import acceptance_by_segment, segment_text
from engine.events import content_by_kind

MIXED = """<think>Plan it.
</think>Here is the code:

```cpp
int main() { return 0; }
```

And the data:
{"a": [1, 2], "b": "x}"}
Steps:
1. first
2. second
   more
- third

Done.
```json
{"x": 1}
```
{"cut": "mid"""


def test_the_parts_a_reader_sees():
    parts = [(s.kind, MIXED[s.start : s.end]) for s in segment_text(MIXED)]
    assert parts == [
        ("thinking", "<think>Plan it.\n</think>"),
        ("prose", "Here is the code:\n\n"),
        ("code", "```cpp\nint main() { return 0; }\n```\n"),
        ("prose", "\nAnd the data:\n"),
        ("json", '{"a": [1, 2], "b": "x}"}'),  # a brace inside a string does not end it
        ("prose", "\nSteps:\n"),
        ("list", "1. first\n2. second\n   more\n- third\n"),
        ("prose", "\nDone.\n"),
        ("json", '```json\n{"x": 1}\n```\n{"cut": "mid'),  # a fenced block, then an object cut at the end
    ]


def test_text_that_only_looks_like_json_is_prose():
    text = "{not json} and [a list] of words\n"
    assert [(s.kind, s.start, s.end) for s in segment_text(text)] == [("prose", 0, len(text))]
    assert segment_text("") == []
    unclosed = "```python\nprint(1)\n"  # a code block the reply never closed
    assert [(s.kind, s.end) for s in segment_text(unclosed)] == [("code", len(unclosed))]


@pytest.fixture(scope="module")
def code_reply(engine):
    prompt = engine.prompt_ids([Message("user", "Write a bubble sort in C++.")])
    engine.forget()
    return list(engine.stream(prompt, GenerationConfig(max_tokens=72, depth=3, ignore_eog=True)))


def test_a_reply_with_code_and_prose_adds_up(code_reply):
    tokens = [e for e in code_reply if isinstance(e, TokenEvent)]
    rounds = [e for e in code_reply if isinstance(e, RoundEvent)]
    stats = code_reply[-1]
    assert isinstance(stats, RunStats)
    parts = stats.content
    assert parts == acceptance_by_segment(tokens, rounds)  # the stats' own parts, from the events
    text = "".join(t.text for t in tokens)
    assert text == stats.text
    assert [p.kind for p in parts] == ["prose", "code"]  # "Certainly! Below is ...", then ```cpp
    assert text[parts[1].start :].startswith("```cpp")
    assert sum(p.tokens for p in parts) == stats.generated_tokens
    assert sum(p.decoded_tokens for p in parts) == stats.decoded_tokens
    assert sum(p.drafted for p in parts) == stats.drafted
    assert sum(p.accepted for p in parts) == stats.accepted
    assert sum(p.rounds for p in parts) == pytest.approx(stats.rounds)
    code, prose = content_by_kind(parts)  # kinds in a fixed order: thinking, code, json, list, prose
    assert code.kind == "code" and prose.kind == "prose"
    assert stats.content_summary() == f"{code.label()}, {prose.label()}"
    assert code.label() == f"code {code.accepted / code.drafted:.0%} · {code.decoded_tokens / code.rounds:.1f}/round"
