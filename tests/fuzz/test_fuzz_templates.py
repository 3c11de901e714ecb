"""Fuzz: hostile chat templates end within their budget, in one sentence, never a traceback.

Most cases render in-process, each in a thread with a deadline well past the template's own
budget; a batch renders in a child process under a memory cap, so a bomb the size checks
missed would show as a signal or a MemoryError rather than a slow box.
"""

from __future__ import annotations

import json
import random
import threading

import pytest

from engine.chat import ChatTemplate, Message
from engine.errors import DraftlightError
from tests.fuzz.bounded import case_count, run_bounded
from tests.fuzz.gguf_template import TemplateSwap
from tests.fuzz.hostile_templates import every_template, hostile_template

CONVERSATION = [Message("system", "Be brief."), Message("user", "Hi"), Message("assistant", "Hello!")]
SECONDS = 0.5  # the render budget under test (the engine's default is 2 s)
DEADLINE_S = 20.0  # the thread's: a render still running by then broke its budget
MAX_CHARS = 1_000_000


def render_once(source: str) -> tuple[str, str]:
    """('ok', text) or ('refused', sentence) or ('broken', what went wrong)."""
    result: list[tuple[str, str]] = []

    def work() -> None:
        try:
            text = ChatTemplate(source).render(CONVERSATION, seconds=SECONDS, max_chars=MAX_CHARS)
            result.append(("ok", text))
        except DraftlightError as exc:
            result.append(("refused", str(exc)))
        except BaseException as exc:  # anything else breaks the contract
            result.append(("broken", f"{type(exc).__name__}: {exc}"))

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    thread.join(DEADLINE_S)
    if thread.is_alive():
        return "broken", "did not end within its deadline"
    return result[0]


def check(source: str) -> None:
    kind, said = render_once(source)
    assert kind != "broken", f"{source[:120]!r}: {said}"
    if kind == "ok":
        assert len(said) <= MAX_CHARS
    else:
        assert said.startswith("The model's chat template "), said
        assert "\n" not in said and "Traceback" not in said, said


@pytest.mark.parametrize("seed", range(case_count(fast=40, full=400)))
def test_hostile_template_in_process(seed):
    check(hostile_template(random.Random(seed)))


def test_every_hostile_piece_alone():
    cases = every_template()
    rng = random.Random(7)
    for source in cases if case_count(False, True) else rng.sample(cases, 25):
        check(source)


CHILD = """
import json, sys
from engine.chat import ChatTemplate, Message
from engine.errors import DraftlightError
for source in json.loads(sys.stdin.read()):
    try:
        ChatTemplate(source).render([Message('user', 'hi')], seconds=0.5)
        print('ok')
    except DraftlightError as exc:
        print('refused', str(exc).splitlines()[0][:60])
"""


def test_bombs_stay_under_a_memory_cap_in_a_child():
    rng = random.Random(11)
    sources = [hostile_template(rng) for _ in range(case_count(fast=20, full=200))]
    outcome = run_bounded(["-c", CHILD], timeout_s=60 + 3 * len(sources), memory_mb=1024, stdin=json.dumps(sources))
    assert outcome.problems() == []
    assert outcome.returncode == 0, outcome.stderr
    assert len(outcome.stdout.splitlines()) == len(sources)


# Through the whole command line, on a real (small) model whose template is replaced.
TEMPLATES = {
    "{% if false %}{% endif %}": "rendered the conversation as no text at all",
    "{{ 'x' * 4000000000 }}": "was stopped building too large a value: a repeated value would hold 4,000,000,000",
    "{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}": "ran past its 2-second budget",
    "{{ messages | tojson(indent=10**8) }}": "tojson's indent 100000000 is not between 0 and 64",
    "{{ ''.__class__.__mro__ }}": "tried to reach outside its sandbox",
    "{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}": "recursed too deeply",
}


@pytest.fixture(scope="module")
def hostile_models(smollm_path, tmp_path_factory):
    folder = tmp_path_factory.mktemp("templates")
    swap = TemplateSwap(smollm_path)
    return {t: swap.write(folder / f"t{i}.gguf", t) for i, t in enumerate(TEMPLATES)}


@pytest.mark.parametrize("template", list(TEMPLATES))
def test_a_hostile_template_through_the_command_line(hostile_models, template):
    outcome = run_bounded(
        ["chat", "hi", "--target", str(hostile_models[template]), "--drafter", "none", "--max-tokens", "2"],
        timeout_s=120,
        memory_mb=2048,
    )
    assert outcome.problems() == []
    assert outcome.returncode == 2
    assert outcome.stderr.startswith("draftlight: The model's chat template ") and TEMPLATES[template] in outcome.stderr
