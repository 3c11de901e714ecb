"""`draftlight`'s sub-commands: chat, models, doctor, pair, tune, bench. No Qt here.

`draftlight` with no sub-command opens the window: the console script is app.__main__,
which hands every sub-command to `main` below.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from engine.arguments import MAX_CTX, Parser, ctx_arg, float_in, int_in, terminal_safe, threads_arg, utf8_or_refuse
from engine.depth import AUTO, MAX_DEPTH, describe_depth, parse_depth
from engine.drafting import kinds
from engine.errors import DraftlightError
from engine.events import RoundEvent, RunStats, TokenEvent, TokenKind
from engine.models import catalog
from engine.progress import say_on_stderr, terminal_progress

ANSI = {
    TokenKind.ACCEPTED: "\x1b[32m",  # green: the drafter was right
    TokenKind.REPLACED: "\x1b[31m",  # red: the target overruled it
    TokenKind.BONUS: "\x1b[34m",  # blue: the target's extra token
    TokenKind.PLAIN: "",
}
RESET = "\x1b[0m"


def _runtime_options(args: argparse.Namespace):
    from engine.runtime import RuntimeOptions

    return RuntimeOptions(n_ctx=args.ctx, n_threads=args.threads, exact=not args.fast)


def _ctx_or_auto(value: str) -> int:
    return 0 if value.strip().lower() == "auto" else ctx_arg(value)


def _add_runtime_args(p: argparse.ArgumentParser, ctx_default: int = 4096) -> None:
    """The runtime's options; `ctx_default` 0 sizes the context as the app does (engine/runtime/contextsize.py)."""
    default = "auto: the model's trained length, at most 32,768, as far as a quarter of the free memory holds"
    p.add_argument(
        "--ctx",
        type=_ctx_or_auto,
        default=ctx_default,
        help=f"context window in tokens, or auto (default {default if ctx_default == 0 else ctx_default})",
    )
    p.add_argument("--threads", type=threads_arg, default=0, help="CPU threads (default: all cores, up to 8)")
    p.add_argument(
        "--fast",
        action="store_true",
        help="allow CPU weight repacking: faster on some CPUs, but speculation may change greedy text",
    )
    p.add_argument(
        "--runtime",
        choices=("auto", "llama", "mlx"),
        default="auto",
        help="llama (llama.cpp, GGUF files) or mlx (MLX folders; a GGUF file is converted once); "
        "auto (default): the target's format decides",
    )
    p.add_argument("--verbose", action="store_true", help="show llama.cpp's own log")


def _depth(value: str):
    try:
        return parse_depth(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def cmd_chat(args: argparse.Namespace) -> int:
    from engine.measure.anatomy import rejection_anatomy
    from engine.measure.auto import AutoDepth
    from engine.measure.gauge import gauge
    from engine.runtime import set_verbose
    from engine.sampling import SamplingConfig
    from engine.session import Engine
    from engine.speculative import GenerationConfig

    utf8_or_refuse(args.prompt, "prompt")
    utf8_or_refuse(args.system, "system prompt")
    for stop in args.stop or ():
        utf8_or_refuse(stop, "stop string")
    set_verbose(args.verbose)
    progress = None if args.json else terminal_progress()
    # At Auto depth, a pair that cannot beat plain decoding on this box loads (or, once its
    # first reply has measured the box, reloads) as a plain target on the fastest settings.
    engine = Engine.load(
        args.target, args.drafter, _runtime_options(args), progress, go_plain=args.depth == AUTO, runtime=args.runtime
    )
    engine.ledger_source = "chat"
    if args.drafter == "auto" and engine.verdict is not None and not args.json:
        print(engine.verdict.explain(), file=sys.stderr)  # what auto found, and why it fits
    policy = engine.depth_policy(args.depth, say_on_stderr("tune"))  # Auto's first use measures the box
    engine.go_plain_if_due()  # where it found drafts cannot pay: the plain target, loaded before the reply
    if engine.ctx.n_ctx < args.ctx and not args.json:
        print(
            f"{engine.target.name} was trained for {engine.ctx.n_ctx:,} tokens of context: using that, "
            f"not {args.ctx:,}.",
            file=sys.stderr,
        )
    if engine.notice and not args.json:
        print(engine.notice, file=sys.stderr)
    if isinstance(policy, AutoDepth) and not args.json:
        print(policy.explain(), file=sys.stderr)
    session = engine.session(system=args.system, thinking=args.thinking == "on")
    config = GenerationConfig(
        max_tokens=args.max_tokens,
        depth=args.depth,
        sampling=SamplingConfig(temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, seed=args.seed),
        p_min=args.p_min,
        stop=tuple(args.stop or ()),
        ignore_eog=args.ignore_eos,
        probabilities=args.json,  # the coloured text shows none: they would only cost time
    )
    out = sys.stdout
    terminal = not args.json and out.isatty()
    color = terminal and os.environ.get("NO_COLOR") is None
    stats = None
    plain_pass_s = engine.plain_pass_s()  # this target alone on this box, from a saved profile
    basis = engine.profile_basis()
    tokens: list[TokenEvent] = []
    rounds: list[RoundEvent] = []
    for event in session.send(args.prompt, config, policy=policy):  # the policy asked for once
        if isinstance(event, TokenEvent):
            tokens.append(event)
        elif isinstance(event, RoundEvent):
            rounds.append(event)
        if args.json:
            if isinstance(event, TokenEvent | RunStats) or (args.rounds and isinstance(event, RoundEvent)):
                line = event.to_json()
                if isinstance(event, RunStats):
                    found = gauge([event], plain_pass_s, basis)
                    if found is not None:  # the break-even gauge
                        line.update(found.to_json())
                    if engine.profile_notice:
                        line["profile_notice"] = engine.profile_notice
                    line["rejections"] = rejection_anatomy(tokens, rounds, plain_pass_s).to_json()
                    line["drafter_kind"] = engine.drafter.kind if engine.drafter is not None else kinds.NONE.name
                    if engine.verdict is not None and engine.verdict.made_for:
                        line["made_for"] = engine.verdict.made_for  # said on stderr before the reply without --json
                    view = engine.ledger_view()
                    line["ledger"] = view and view.brief()
                out.write(json.dumps(line, ensure_ascii=False) + "\n")
        elif isinstance(event, TokenEvent):
            text = terminal_safe(event.text) if terminal else event.text
            out.write(f"{ANSI[event.kind]}{text}{RESET}" if color and ANSI[event.kind] else text)
            out.flush()
        if isinstance(event, RunStats):
            stats = event
    if stats is not None and not args.json:
        out.write("\n")
        if stats.message:
            print(stats.message, file=sys.stderr)
        print(summary(stats), file=sys.stderr)
        content = stats.content_summary()
        if content:
            print(f"[by content: {content}]", file=sys.stderr)
        found = gauge([stats], plain_pass_s, basis)
        if found is not None:
            print(f"[{found.verdict()}]", file=sys.stderr)
        if engine.profile_notice:
            print(engine.profile_notice, file=sys.stderr)
        view = engine.ledger_view()
        for warning in view.warnings if view else ():
            print(f"[ledger: {warning}]", file=sys.stderr)
    return 0


def summary(s: RunStats) -> str:
    per_pos = " ".join(f"{a:.0%}" for a in s.acceptance_per_position) or "-"
    syncs = s.syncs_per_round
    host = "" if syncs is None else f"host {s.overhead_s / s.rounds * 1e3:.2f} ms and {syncs:.1f} syncs a round; "
    return (
        f"[{s.generated_tokens} tokens, decode {s.decode_tps:.1f} tok/s, end-to-end {s.end_to_end_tps:.1f} tok/s, "
        f"prefill {s.prefill_s * 1e3:.0f} ms for {s.prompt_tokens} tokens; depth {describe_depth(s.depth)}, "
        f"acceptance {s.acceptance:.0%} (per position {per_pos}), mean accepted length {s.mean_accepted_length:.2f}; "
        f"{host}{s.finish_reason.value}]"
    )


def cmd_models(args: argparse.Namespace) -> int:
    progress = terminal_progress()
    names = args.names or [catalog.DEFAULT_TARGET.key, catalog.DEFAULT_DRAFTER.key]
    if args.list:
        _list_catalog()
        return 0
    from engine.models.mlx_catalog import resolve_mlx

    for name in names:
        model = catalog.entry(name)
        if model is None:
            raise DraftlightError(f"No catalog model named {name!r}; `draftlight models --list` shows them.")
        if isinstance(model, catalog.MlxCatalogModel):
            print(f"{model.title}: {resolve_mlx(model, download=not args.offline)}")
        else:
            print(f"{model.title}: {catalog.resolve(model, progress, download=not args.offline)}")
    return 0


def _catalog_row(model: catalog.CatalogEntry) -> str:
    if isinstance(model, catalog.MlxCatalogModel):
        from engine.models.mlx_catalog import cached_mlx

        state = "in the Hugging Face cache" if cached_mlx(model) is not None else "not fetched"
        return f"{model.key:30} {model.title:52} {model.hf_repo}  {state}"
    return f"{model.key:22} {model.title:48} {model.size / 1e6:8,.0f} MB  {catalog.cache_state(model)}"


def _list_catalog() -> None:
    """`models --list`: the catalog, one section per format, each with the pairs its users measured; then the
    models already on this machine (engine.models.listing)."""
    from engine.models.listing import print_local_models
    from engine.models.mlx_catalog import MAC_PAIRS
    from engine.models.pairs import PAIRS

    sections = (
        ("gguf", "", "Pairs that draft for themselves, with what their users measured (not us: see the links):", PAIRS),
        (
            "mlx",
            "\nMLX models, fetched from the Hugging Face hub by repository id (`draftlight models KEY`):",
            "Pairs for Macs (MLX), with what their users measured (not us: see the links):",
            MAC_PAIRS,
        ),
    )
    for fmt, heading, pairs_heading, pairs in sections:
        if heading:
            print(heading)
        for model in catalog.ENTRIES.values():
            if model.format == fmt:
                print(_catalog_row(model))
        print("\n" + pairs_heading)
        for pair in pairs:
            print(pair.describe())
    print_local_models()


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
        _runtime_options(args),
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


def cmd_serve(args: argparse.Namespace) -> int:
    from engine.serve.server import serve_from_args

    return serve_from_args(args, _runtime_options(args), terminal_progress())


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="draftlight", description="Speculative decoding you can watch.")
    sub = parser.add_subparsers(dest="command")

    chat = sub.add_parser("chat", help="one message to the model, streamed with provenance")
    chat.add_argument("prompt")
    chat.add_argument("--system", help="system prompt")
    chat.add_argument(
        "--target",
        default="default",
        help="default, a catalog name, a .gguf path, an MLX model folder or a name `models --list` shows",
    )
    chat.add_argument(
        "--drafter",
        default="default",
        help="default, none, ngram, mtp (the target's own heads), auto (find one: heads, a drafter file beside "
        "the target, a smaller model of its family), a catalog name, a .gguf path or an MLX folder (a draft model, "
        "DFlash, DSpark, EAGLE-3, a Gemma 4 assistant: its kind is read from the file)",
    )
    chat.add_argument(
        "--depth",
        type=_depth,
        default=AUTO,
        help=f"drafted tokens per round, 0-{MAX_DEPTH}, or {AUTO} (the default): chosen each round from this box's "
        "measured costs and the text's acceptance; where no depth could pay, plain decoding on the fastest settings",
    )
    chat.add_argument("--temperature", type=float_in(0, 100), default=0.0, help="0 is greedy (default)")
    chat.add_argument("--top-k", type=int_in(0, 1 << 31), default=0)
    chat.add_argument("--top-p", type=float_in(0, 1), default=1.0)
    chat.add_argument("--seed", type=int_in(0, (1 << 63) - 1), default=None)
    chat.add_argument("--p-min", type=float_in(0, 1), default=0.0, help="stop drafting below this drafter confidence")
    chat.add_argument("--max-tokens", type=int_in(1, MAX_CTX), default=512)
    chat.add_argument("--stop", action="append", help="a stop string (repeatable)")
    chat.add_argument(
        "--ignore-eos", action="store_true", help="write all --max-tokens, past the end of the turn (benchmarks)"
    )
    chat.add_argument("--thinking", choices=("on", "off"), default="off")
    chat.add_argument("--json", action="store_true", help="one JSON object per line: tokens, then stats")
    chat.add_argument("--rounds", action="store_true", help="with --json: also a line per round")
    _add_runtime_args(chat, ctx_default=0)  # sized like the app's context
    chat.set_defaults(func=cmd_chat)

    models = sub.add_parser("models", help="fetch or list catalog models")
    models.add_argument("names", nargs="*", help="catalog names (default: the default pair)")
    models.add_argument("--list", action="store_true")
    models.add_argument("--offline", action="store_true", help="never try the Hugging Face hub")
    models.set_defaults(func=cmd_models)

    doctor = sub.add_parser("doctor", help="this machine: runtime, and whether its kernels are batch-invariant")
    doctor.add_argument("--target", default="default")
    doctor.add_argument("--prompt", default="Write a bubble sort in C++.")
    doctor.add_argument(
        "--rows",
        type=int_in(1, MAX_DEPTH + 1),
        default=MAX_DEPTH + 1,
        help=f"largest verify batch to check (default {MAX_DEPTH + 1})",
    )
    _add_runtime_args(doctor)
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
    _add_runtime_args(pair)
    pair.set_defaults(func=cmd_pair)

    serve = sub.add_parser("serve", help="the engine as an HTTP server (OpenAI-compatible, with provenance)")
    serve.add_argument(
        "--target",
        default="default",
        help="default, a catalog name, a .gguf path, an MLX model folder or a name `models --list` shows",
    )
    serve.add_argument(
        "--drafter",
        default="default",
        help="default, none, ngram, mtp, auto, a catalog name, a .gguf path or an MLX folder",
    )
    serve.add_argument("--host", default="127.0.0.1", help="where to listen (default 127.0.0.1: this machine only)")
    serve.add_argument("--port", type=int, default=8765)
    serve.add_argument(
        "--token",
        default=os.environ.get("DRAFTLIGHT_TOKEN"),
        help="clients must send 'Authorization: Bearer TOKEN' (or set DRAFTLIGHT_TOKEN); required off 127.0.0.1",
    )
    serve.add_argument("--max-tokens", type=int, default=4096, help="the most one request may ask for")
    serve.add_argument("--queue", type=int, default=4, help="requests that may wait behind the running one")
    serve.add_argument("--max-request-bytes", type=int, default=1 << 20, help="the largest request body taken")
    serve.add_argument("--depth", type=_depth, default=AUTO, help="a request's depth unless it asks for one")
    _add_runtime_args(serve)
    serve.set_defaults(func=cmd_serve)

    from engine.ledger.cli import add_cli as add_ledger
    from engine.ruler.cli import add_cli as add_ruler

    add_ruler(sub)
    add_ledger(sub)
    return parser


def run(args: argparse.Namespace) -> int:
    """One parsed sub-command; a failure is a sentence on standard error and exit status 2."""
    try:
        return args.func(args)
    except DraftlightError as exc:
        print(f"draftlight: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("draftlight: interrupted", file=sys.stderr)
        return 130
    except OSError as exc:
        print(f"draftlight: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), file=sys.stderr)
        return 2


def main(argv: list[str] | None = None) -> int:
    """The engine's command line on its own; `draftlight` with no sub-command (app.__main__) opens the window."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
