"""Fuzz: the command line's arguments. Numbers out of range, text that is not UTF-8, empty
prompts, hostile chat templates: each ends in one sentence (exit 2) or a reply, never a
traceback, a signal or a bare crash."""

from __future__ import annotations

import io
import os
import random

import pytest

from engine import cli
from engine.arguments import MAX_CTX, terminal_safe
from tests.fuzz.bounded import case_count, run_bounded

NUMERIC = {  # option: (low, high) of what the parser may let through
    "--max-tokens": (1, MAX_CTX),
    "--threads": (0, (os.cpu_count() or 1) * 4),
    "--ctx": (1, MAX_CTX),
    "--top-k": (0, 1 << 31),
    "--top-p": (0.0, 1.0),
    "--temperature": (0.0, 100.0),
    "--p-min": (0.0, 1.0),
    "--seed": (0, (1 << 63) - 1),
}
VALUES = (
    "-5", "-3", "0", "1", "10000", "100000000", "1e9", "nan", "inf", "-inf", "", "abc", "0x10", "7.5",
    "99999999999999999999999", " 7", "1_000", "٣", "-0", "1e-300", "--", "\x00", "½",
)  # fmt: skip


def parse_case(capsys, argv: list[str]) -> tuple[int, str, object]:
    try:
        args = cli.build_parser().parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0), capsys.readouterr().err, None
    return 0, capsys.readouterr().err, args


@pytest.mark.parametrize("seed", range(case_count(fast=60, full=1000)))
def test_numbers_out_of_range_are_one_sentence(capsys, seed):
    rng = random.Random(seed)
    option, value = rng.choice(sorted(NUMERIC)), rng.choice(VALUES)
    code, err, args = parse_case(capsys, ["chat", "hi", f"{option}={value}"])
    if args is None:
        assert code == 2
        lines = err.splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"draftlight: argument {option}: "), err
        assert "Traceback" not in err
    else:
        low, high = NUMERIC[option]
        got = getattr(args, option[2:].replace("-", "_"))
        assert low <= got <= high, (option, value, got)


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["chat", "hi", "--max-tokens", "-5"], "argument --max-tokens: must be from 1 to 16,777,216, not -5"),
        (["chat", "hi", "--threads", "-3"], "argument --threads: must be from 0 to"),
        (["chat", "hi", "--threads", "10000"], "(0: all cores, up to 8), not 10,000"),
        (["chat", "hi", "--ctx", "100000000"], "argument --ctx: must be from 1 to 16,777,216, not 100,000,000"),
        (["tune", "--threads", "10000"], "argument --threads: must be from 0 to"),
        (["chat"], "the following arguments are required: prompt"),
    ],
)
def test_the_reported_arguments_are_refused_in_a_sentence(capsys, argv, said):
    code, err, _ = parse_case(capsys, argv)
    assert code == 2 and len(err.splitlines()) == 1
    assert err.startswith("draftlight: ") and said in err


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["chat", "\udcff\udcfe"], "The prompt is not valid UTF-8 text (byte 0xff at character 1)"),
        (
            ["chat", "hi", "--system", "ab\udcc3"],
            "The system prompt is not valid UTF-8 text (byte 0xc3 at character 3)",
        ),
        (["chat", "hi", "--stop", "\udc80"], "The stop string is not valid UTF-8 text (byte 0x80 at character 1)"),
        (["chat", "hi", "--ctx", "-1"], "argument --ctx: must be from 1"),
        (["chat", "hi", "--seed", "-1"], "argument --seed: must be from 0"),
    ],
)
def test_bad_text_and_numbers_in_a_child(argv, said):
    outcome = run_bounded(argv, timeout_s=60)
    assert outcome.problems() == []
    assert outcome.returncode == 2
    assert outcome.stderr.startswith("draftlight: ") and said in outcome.stderr


def test_control_characters_are_escaped_for_a_terminal():
    assert terminal_safe("a\x1b]0;pwned\x07b\x1b[2Jc\r\x9bd\x7f") == "a\\x1b]0;pwned\\x07b\\x1b[2Jc\\x0d\\x9bd\\x7f"
    assert terminal_safe("line\n\tcafé 🎉") == "line\n\tcafé 🎉"


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_chat_command_escapes_the_models_text_on_a_terminal(monkeypatch):
    from engine.events import TokenEvent, TokenKind

    class Session:
        def send(self, prompt, config, policy=None):
            yield TokenEvent(
                token_id=1,
                text="\x1b]0;pwned\x07hi\n",
                kind=TokenKind.PLAIN,
                round_index=0,
                position=0,
                target_prob=1.0,
            )

    class Engine:
        verdict, notice, profile_notice, ctx = None, "", "", type("Ctx", (), {"n_ctx": 4096})()

        def depth_policy(self, depth, progress):
            return None

        def go_plain_if_due(self):
            return False

        def session(self, system, thinking):
            return Session()

        def plain_pass_s(self):
            return None

        def profile_basis(self):
            return ""

    import engine.session

    monkeypatch.setattr(engine.session.Engine, "load", classmethod(lambda cls, *a, **k: Engine()))
    out = _Terminal()
    monkeypatch.setattr("sys.stdout", out)
    assert cli.main(["chat", "hi", "--drafter", "none"]) == 0
    assert out.getvalue() == "\\x1b]0;pwned\\x07hi\n"


def test_an_empty_prompt_and_a_context_past_the_trained_one(smollm_path):
    outcome = run_bounded(
        ["chat", "", "--target", str(smollm_path), "--drafter", "none", "--max-tokens", "2", "--ctx", "10000000"],
        timeout_s=120,
    )
    assert outcome.problems() == []
    assert outcome.returncode == 0
    assert "was trained for 8,192 tokens of context: using that, not 10,000,000." in outcome.stderr
