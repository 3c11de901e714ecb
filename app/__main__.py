"""`draftlight`: the window with no sub-command (or --self-test); the engine's command line otherwise.

The engine's command line (engine.cli) knows nothing of the app; this entry point sits
above both, so no import runs from the engine up to the app.
"""

from __future__ import annotations

import sys

from engine import command_line, run_command


def main(argv: list[str] | None = None) -> int:
    parser = command_line()
    parser.add_argument("--self-test", action="store_true", help="open the app, run a fixed prompt, check the colours")
    parser.add_argument("--screenshot", help="with --self-test: save a screenshot here")
    parser.add_argument(
        "--runtime",
        dest="app_runtime",
        choices=("auto", "llama", "mlx"),
        default="auto",
        help="the window's runtime: llama (GGUF files), mlx (MLX folders; a GGUF file is converted once), "
        "or auto (default): each model's format decides",
    )
    args = parser.parse_args(argv)
    if args.command is not None and not args.self_test:
        return run_command(args)
    try:
        from app.main import main as app_main
    except ImportError as exc:
        print(
            f"draftlight: the app needs the GUI extra ({exc.name} is missing): pip install 'draftlight[gui]'",
            file=sys.stderr,
        )
        return 2
    return app_main(self_test=args.self_test, screenshot=args.screenshot, runtime=args.app_runtime)


if __name__ == "__main__":
    sys.exit(main())
