"""`draftlight doctor`, `tune` and `pair`: is this machine's runtime sound, what do a pair's rows and draft
steps cost on this box, and can this drafter draft for this target. No Qt here."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from engine.arguments import add_runtime_args, ctx_arg, int_in, runtime_options, threads_arg
from engine.depth import MAX_DEPTH
from engine.drafting import kinds
from engine.models import catalog
from engine.progress import terminal_progress


def cmd_doctor(args: argparse.Namespace) -> int:
    from engine.chat import Message, template_for, tokenize_prompt
    from engine.measure.probe import batch_invariance
    from engine.pairloading import converter
    from engine.runtime import Context, Model, RuntimeOptions, runtime_version, set_verbose, system_info
    from engine.runtime.loading import chosen_runtime, load_model

    set_verbose(args.verbose)
    print(f"runtime: {runtime_version()}")
    print(f"llama.cpp: {system_info()}")
    print(f"cache: {catalog.cache_dir()}")
    path = catalog.resolve(catalog.DEFAULT_TARGET if args.target == "default" else args.target, terminal_progress())
    from engine.ruler.prompts import ARTICLE

    # Past 512 cached positions llama.cpp's CPU attention changes path for a single row,
    # so the probe looks at a short context and at a long one.
    contexts = {"short context": args.prompt, "long context": f"Summarize these articles.\n\n{ARTICLE}\n{ARTICLE}"}
    runtime = chosen_runtime(path, args.runtime)
    if not runtime.has_modes:  # one way to run a batch (MLX): probe it as it is
        model = load_model(path, runtime, RuntimeOptions(n_ctx=args.ctx), converter(terminal_progress()))
        print(f"mlx: {model.options.runtime_version()}")
        ctx = model.new_context(max_rows=args.rows)
        for name, text in contexts.items():
            prompt = tokenize_prompt(model, template_for(model).render([Message("user", text)]))
            result = batch_invariance(ctx, prompt, rows=args.rows)
            print(f"{model.options.mode} ({model.describe()}), {name} ({len(prompt)} tokens): {result.describe()}")
        ctx.close()
        return 0
    for exact in (True, False):
        options = RuntimeOptions(n_ctx=args.ctx, n_threads=args.threads, exact=exact)
        model = Model(path, options)
        ctx = Context(model, options, max_rows=args.rows)
        layout = "weights as stored, Q8_0 KV cache" if exact else "weight repacking, f16 KV cache"
        for name, text in contexts.items():
            prompt = tokenize_prompt(model, template_for(model).render([Message("user", text)]))
            result = batch_invariance(ctx, prompt, rows=args.rows)
            print(f"{options.mode:5} mode ({layout}), {name} ({len(prompt)} tokens): {result.describe()}")
        ctx.close()
        model.close()
    return 0


def cmd_tune(args: argparse.Namespace) -> int:
    from engine.tuning import cmd_tune as tune

    return tune(args)


def cmd_pair(args: argparse.Namespace) -> int:
    """The pairing doctor's report; exit 1 where the drafter cannot draft for the target."""
    from engine.ledger.report import for_pair
    from engine.pairdoctor import pair_report
    from engine.pairprobe import LOAD_FAILED
    from engine.ruler.prompts import load_file
    from engine.runtime import set_verbose

    set_verbose(args.verbose)
    prompts = [(p.name, p.text) for p in load_file(args.prompts)] if args.prompts else None
    say = None if args.json else lambda done, total, what: print(f"probe: {what} ({done} of {total})", file=sys.stderr)
    report = pair_report(
        args.target,
        args.drafter,
        runtime_options(args),
        prompts,
        0 if args.no_probe else args.probe_seconds,
        args.max_tokens,
        args.max_prompts,
        say,
        runtime=args.runtime,
    )
    drafter_path = Path(report.drafter.path) if report.drafter is not None else None
    ledger = for_pair(Path(report.target.path), drafter_path, report.drafter_kind)
    if args.json:
        print(json.dumps(dict(report.to_json(), ledger=ledger and ledger.to_json()), ensure_ascii=False, indent=1))
    else:
        encoding = sys.stdout.encoding or "ascii"
        marks = ("✓", "✗") if "✓✗".encode(encoding, errors="ignore") else ("+", "x")
        lines = report.lines(marks) + (ledger.lines(with_history=args.history) if ledger else [])
        text = "\n".join(lines) + "\n"
        sys.stdout.write(text.encode(encoding, errors="replace").decode(encoding))  # a token's text may not encode
    if report.probe is not None and report.probe.note.startswith(LOAD_FAILED):
        print(f"draftlight: {report.probe.note}", file=sys.stderr)  # the pair passed its headers and cannot load
        return 2
    if report.compatible or report.drafter_kind == kinds.NONE.name:
        return 0
    # The status says it to a script; this, to a person: the sentence chat and the app refuse the pair with.
    print(f"draftlight: {report.refusal}", file=sys.stderr)
    return 1


def _within(convert, high: float):
    """An argparse type: a number above 0 and at most `high`."""

    def parse(value: str):
        try:
            number = convert(value)
        except ValueError:
            number = 0
        if not 0 < number <= high:
            raise argparse.ArgumentTypeError(f"{value!r} is not a number above 0 and at most {high:g}")
        return number

    return parse


def add_cli(sub) -> None:
    """The three sub-commands, in `draftlight --help`'s order."""
    doctor = sub.add_parser("doctor", help="this machine: runtime, and whether its kernels are batch-invariant")
    doctor.add_argument("--target", default="default")
    doctor.add_argument("--prompt", default="Write a bubble sort in C++.")
    doctor.add_argument(
        "--rows",
        type=int_in(1, MAX_DEPTH + 1),
        default=MAX_DEPTH + 1,
        help=f"largest verify batch to check (default {MAX_DEPTH + 1})",
    )
    add_runtime_args(doctor)
    doctor.set_defaults(func=cmd_doctor)

    tune = sub.add_parser("tune", help="measure this box's cost of rows and draft steps for a model pair")
    tune.add_argument(
        "--target",
        default="default",
        help="default, a catalog name, a .gguf path, an MLX model folder or a name `models --list` shows",
    )
    tune.add_argument("--drafter", default="default")
    tune.add_argument("--ctx", type=ctx_arg, default=4096)
    tune.add_argument("--threads", type=threads_arg, default=0)
    tune.add_argument("--fast", action="store_true", help="profile the fast (weight repacking) mode")
    tune.add_argument("--force", action="store_true", help="measure again even if a profile is saved")
    tune.add_argument("--show", action="store_true", help="show the saved profile and its basis; measure nothing")
    tune.add_argument("--check", action="store_true", help="measure again and compare with the saved profile")
    tune.add_argument(
        "--runtime",
        choices=("auto", "llama", "mlx"),
        default="auto",
        help="the runtime to profile the pair on (a profile is kept per runtime); auto: the target's format decides",
    )
    tune.set_defaults(func=cmd_tune)

    pair = sub.add_parser(
        "pair",
        help="the pairing doctor: can this drafter draft for this target, and would it pay here (exit 1: it cannot)",
    )
    pair.add_argument(
        "target", help="default, a catalog name, a .gguf path, an MLX model folder or a name `models --list` shows"
    )
    pair.add_argument(
        "drafter",
        nargs="?",
        default="default",
        help="default, mtp, ngram, auto, none, a catalog name, a .gguf path or an MLX folder",
    )
    pair.add_argument(
        "--probe-seconds", type=_within(float, 3600), default=20.0, help="time for the acceptance probe (default 20)"
    )
    pair.add_argument("--no-probe", action="store_true", help="check the headers only: load nothing to run")
    pair.add_argument(
        "--prompts", help='the probe\'s prompts: a JSONL file of {"category", "prompt"} (default: built in)'
    )
    pair.add_argument(
        "--max-prompts", type=_within(int, 1000), default=6, help="prompts the probe runs at most (default 6)"
    )
    pair.add_argument("--max-tokens", type=_within(int, 1000), default=64, help="tokens per probe reply (default 64)")
    pair.add_argument("--json", action="store_true", help="the report as one JSON object")
    pair.add_argument(
        "--history", action="store_true", help="the pair's acceptance by content kind over time, from the ledger"
    )
    add_runtime_args(pair)
    pair.set_defaults(func=cmd_pair)
