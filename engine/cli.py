"""`draftlight`: chat, check the machine, fetch models. The app is one subcommand away."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable

from engine import catalog
from engine.errors import DraftlightError
from engine.events import RoundEvent, RunStats, TokenEvent, TokenKind

ANSI = {
    TokenKind.ACCEPTED: "\x1b[32m",  # green: the drafter was right
    TokenKind.REPLACED: "\x1b[31m",  # red: the target overruled it
    TokenKind.BONUS: "\x1b[34m",  # blue: the target's extra token
    TokenKind.PLAIN: "",
}
RESET = "\x1b[0m"


def terminal_progress(stream=sys.stderr) -> Callable[[int, int, str], None]:
    """A one-line progress bar for model assembly, checks and downloads."""
    state = {"label": None, "last": 0.0}

    def report(done: int, total: int, label: str) -> None:
        now = time.monotonic()
        if label == state["label"] and done < total and now - state["last"] < 0.1:
            return
        state["label"], state["last"] = label, now
        frac = done / total if total else 1.0
        bar = "#" * int(frac * 30)
        stream.write(f"\r{label}: [{bar:<30}] {frac:6.1%} {done / 1e6:,.0f}/{total / 1e6:,.0f} MB")
        if done >= total:
            stream.write("\n")
        stream.flush()

    return report


def _runtime_options(args: argparse.Namespace):
    from engine.runtime import RuntimeOptions

    return RuntimeOptions(n_ctx=args.ctx, n_threads=args.threads, exact=not args.fast)


def _add_runtime_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--ctx", type=int, default=4096, help="context window in tokens (default 4096)")
    p.add_argument("--threads", type=int, default=0, help="CPU threads (default: all cores, up to 8)")
    p.add_argument(
        "--fast",
        action="store_true",
        help="allow CPU weight repacking: faster on some CPUs, but speculation may change greedy text",
    )
    p.add_argument("--verbose", action="store_true", help="show llama.cpp's own log")


def _depth(value: str) -> int | str:
    if value == "auto":
        return value
    depth = int(value)
    if not 0 <= depth <= 6:
        raise argparse.ArgumentTypeError("depth must be 0-6 or auto")
    return depth


def cmd_chat(args: argparse.Namespace) -> int:
    from engine.runtime import set_verbose
    from engine.sampling import SamplingConfig
    from engine.session import Engine
    from engine.speculative import GenerationConfig

    set_verbose(args.verbose)
    progress = None if args.json else terminal_progress()
    drafter = None if args.drafter == "none" else args.drafter
    depth = args.depth
    if drafter is None:
        depth = 0
    engine = Engine.load(args.target, drafter, _runtime_options(args), progress)
    tuner = None
    if depth == "auto":
        from engine.tuner import MAX_AUTO_DEPTH, AutoDepth

        tuner = AutoDepth.for_engine(engine, progress=lambda m: print(f"tune: {m}", file=sys.stderr))
        if not args.json:
            print(tuner.explain(), file=sys.stderr)
        depth = MAX_AUTO_DEPTH
    session = engine.session(system=args.system, thinking=args.thinking == "on")
    config = GenerationConfig(
        max_tokens=args.max_tokens,
        depth=depth,
        sampling=SamplingConfig(temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, seed=args.seed),
        p_min=args.p_min,
        stop=tuple(args.stop or ()),
    )
    out = sys.stdout
    color = not args.json and out.isatty() and os.environ.get("NO_COLOR") is None
    stats = None
    for event in session.send(args.prompt, config, tuner=tuner):
        if args.json:
            if isinstance(event, TokenEvent | RunStats) or (args.rounds and isinstance(event, RoundEvent)):
                out.write(json.dumps(event.to_json(), ensure_ascii=False) + "\n")
        elif isinstance(event, TokenEvent):
            out.write(f"{ANSI[event.kind]}{event.text}{RESET}" if color and ANSI[event.kind] else event.text)
            out.flush()
        if isinstance(event, RunStats):
            stats = event
    if stats is not None and not args.json:
        out.write("\n")
        if stats.message:
            print(stats.message, file=sys.stderr)
        print(summary(stats), file=sys.stderr)
    return 0


def summary(s: RunStats) -> str:
    per_pos = " ".join(f"{a:.0%}" for a in s.acceptance_per_position) or "-"
    return (
        f"[{s.generated_tokens} tokens, decode {s.decode_tps:.1f} tok/s, end-to-end {s.end_to_end_tps:.1f} tok/s, "
        f"prefill {s.prefill_s * 1e3:.0f} ms for {s.prompt_tokens} tokens; depth {'auto' if s.depth < 0 else s.depth}, "
        f"acceptance {s.acceptance:.0%} (per position {per_pos}), mean accepted length {s.mean_accepted_length:.2f}; "
        f"{s.finish_reason.value}]"
    )


def cmd_models(args: argparse.Namespace) -> int:
    progress = terminal_progress()
    names = args.names or [catalog.DEFAULT_TARGET.key, catalog.DEFAULT_DRAFTER.key]
    if args.list:
        for m in catalog.CATALOG.values():
            here = catalog.models_dir() / m.filename
            state = "ready" if here.exists() else "not fetched"
            print(f"{m.key:22} {m.title:40} {m.size / 1e6:8,.0f} MB  {state}")
        return 0
    for name in names:
        model = catalog.lookup(name)
        if model is None:
            raise DraftlightError(f"No catalog model named {name!r}; `draftlight models --list` shows them.")
        path = catalog.resolve(model, progress, download=not args.offline)
        print(f"{model.title}: {path}")
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    from engine.chat import Message
    from engine.probe import batch_invariance
    from engine.runtime import Context, Model, RuntimeOptions, runtime_version, set_verbose, system_info
    from engine.session import template_for, tokenize_prompt

    set_verbose(args.verbose)
    print(f"runtime: {runtime_version()}")
    print(f"llama.cpp: {system_info()}")
    print(f"cache: {catalog.cache_dir()}")
    path = catalog.resolve(catalog.DEFAULT_TARGET if args.target == "default" else args.target, terminal_progress())
    from engine.ruler.prompts import ARTICLE

    # Past 512 cached positions llama.cpp's CPU attention changes path for a single row,
    # so the probe looks at a short context and at a long one.
    contexts = {"short context": args.prompt, "long context": f"Summarize these articles.\n\n{ARTICLE}\n{ARTICLE}"}
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="draftlight", description="Speculative decoding you can watch.")
    parser.add_argument("--self-test", action="store_true", help="open the app, run a fixed prompt, check the colours")
    parser.add_argument("--screenshot", help="with --self-test: save a screenshot here")
    sub = parser.add_subparsers(dest="command")

    chat = sub.add_parser("chat", help="one message to the model, streamed with provenance")
    chat.add_argument("prompt")
    chat.add_argument("--system", help="system prompt")
    chat.add_argument("--target", default="default", help="default, a catalog name or a .gguf path")
    chat.add_argument("--drafter", default="default", help="default, none, ngram, a catalog name or a .gguf path")
    chat.add_argument("--depth", type=_depth, default=2, help="drafted tokens per round, 0-6 or auto (default 2)")
    chat.add_argument("--temperature", type=float, default=0.0, help="0 is greedy (default)")
    chat.add_argument("--top-k", type=int, default=0)
    chat.add_argument("--top-p", type=float, default=1.0)
    chat.add_argument("--seed", type=int, default=None)
    chat.add_argument("--p-min", type=float, default=0.0, help="stop drafting below this drafter confidence")
    chat.add_argument("--max-tokens", type=int, default=512)
    chat.add_argument("--stop", action="append", help="a stop string (repeatable)")
    chat.add_argument("--thinking", choices=("on", "off"), default="off")
    chat.add_argument("--json", action="store_true", help="one JSON object per line: tokens, then stats")
    chat.add_argument("--rounds", action="store_true", help="with --json: also a line per round")
    _add_runtime_args(chat)
    chat.set_defaults(func=cmd_chat)

    models = sub.add_parser("models", help="fetch or list catalog models")
    models.add_argument("names", nargs="*", help="catalog names (default: the default pair)")
    models.add_argument("--list", action="store_true")
    models.add_argument("--offline", action="store_true", help="never try the Hugging Face hub")
    models.set_defaults(func=cmd_models)

    doctor = sub.add_parser("doctor", help="this machine: runtime, and whether its kernels are batch-invariant")
    doctor.add_argument("--target", default="default")
    doctor.add_argument("--prompt", default="Write a bubble sort in C++.")
    doctor.add_argument("--rows", type=int, default=7, help="largest verify batch to check (default 7: depth 6)")
    _add_runtime_args(doctor)
    doctor.set_defaults(func=cmd_doctor)

    from engine.ruler.cli import add_cli as add_ruler
    from engine.tuner import add_cli as add_tuner

    add_ruler(sub)
    add_tuner(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.self_test or args.command is None:
        try:
            from app.main import main as app_main
        except ImportError as exc:
            print(
                f"draftlight: the app needs the GUI extra ({exc.name} is missing): pip install 'draftlight[gui]'",
                file=sys.stderr,
            )
            return 2
        return app_main(self_test=args.self_test, screenshot=args.screenshot)
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


if __name__ == "__main__":
    sys.exit(main())
