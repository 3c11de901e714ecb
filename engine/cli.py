"""`draftlight`'s sub-commands: chat, models, serve; doctor, tune and pair (engine.checkup); bench. No Qt here.

`draftlight` with no sub-command opens the window: the console script is app.__main__,
which hands every sub-command to `main` below.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from engine.arguments import (
    MAX_CTX,
    Parser,
    add_runtime_args,
    float_in,
    int_in,
    runtime_options,
    terminal_safe,
    utf8_or_refuse,
)
from engine.checkup import add_cli as add_checkup
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
        args.target, args.drafter, runtime_options(args), progress, go_plain=args.depth == AUTO, runtime=args.runtime
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


def cmd_serve(args: argparse.Namespace) -> int:
    from engine.serve.server import serve_from_args

    return serve_from_args(args, runtime_options(args), terminal_progress())


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
    add_runtime_args(chat, ctx_default=0)  # sized like the app's context
    chat.set_defaults(func=cmd_chat)

    models = sub.add_parser("models", help="fetch or list catalog models")
    models.add_argument("names", nargs="*", help="catalog names (default: the default pair)")
    models.add_argument("--list", action="store_true")
    models.add_argument("--offline", action="store_true", help="never try the Hugging Face hub")
    models.set_defaults(func=cmd_models)

    add_checkup(sub)

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
    add_runtime_args(serve)
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
