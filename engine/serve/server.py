"""Run the server: on 127.0.0.1 by default, elsewhere only behind a token."""

from __future__ import annotations

import ipaddress
import sys

from engine.errors import DraftlightError
from engine.serve.app import ServeConfig, build_app
from engine.serve.guard import close_refused
from engine.session import Engine

MAX_HEAD_BYTES = 16 * 1024  # a request's line and headers (h11's own default, said here)
SIDE_CONNECTIONS = 32


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_binding(host: str, token: str | None) -> None:
    """Refuse, in a sentence, to listen where other machines reach without a token."""
    if not is_loopback(host) and not token:
        raise DraftlightError(
            f"Listening on {host} lets other machines in: give --token (or DRAFTLIGHT_TOKEN) so that only "
            "clients with it are answered, or keep the default 127.0.0.1 and reach it through an ssh tunnel."
        )


def serve_from_args(args, options, progress) -> int:
    """`draftlight serve`: check the arguments, load the pair, answer until interrupted."""
    check_binding(args.host, args.token)  # before minutes of loading
    for name, value, low, high in (("--port", args.port, 1, 65535), ("--queue", args.queue, 0, 1000),
                                   ("--max-tokens", args.max_tokens, 1, 1 << 20),
                                   ("--max-request-bytes", args.max_request_bytes, 1024, 1 << 30)):  # fmt: skip
        if not low <= value <= high:
            raise DraftlightError(f"{name} must be between {low:,} and {high:,}; it was {value:,}.")
    engine = Engine.load(args.target, args.drafter, options, progress, runtime=args.runtime)
    engine.ledger_source = "serve"
    config = ServeConfig(args.token, args.max_request_bytes, args.max_tokens, args.queue, args.depth)
    try:
        serve(engine, args.host, args.port, config)
    finally:
        engine.close()
    return 0


def serve(engine: Engine, host: str, port: int, config: ServeConfig) -> None:
    """Answer on host:port until interrupted (uvicorn, one worker: the engine is one model's)."""
    import uvicorn

    check_binding(host, config.token)
    # a file name: what OpenAI clients expect of an id
    model_id = engine.target.path.stem if engine.target.path is not None else engine.target.name
    print(f"draftlight: serving {model_id} on http://{host}:{port} (Ctrl-C stops)", file=sys.stderr, flush=True)
    deadlines = config.deadlines
    uvicorn.run(
        close_refused(build_app(engine, model_id, config)),
        host=host,
        port=port,
        log_level="warning",
        http=deadlines.protocol(),  # h11, with a deadline for each request's head and for a reader that stalls
        h11_max_incomplete_event_size=MAX_HEAD_BYTES,
        timeout_keep_alive=deadlines.keep_alive_s,
        # Every connection beyond the running reply, its queue and a few side requests (box, status,
        # cancel) is answered 503 at once: a crowd of sockets cannot take the server's descriptors.
        limit_concurrency=config.queue + 1 + SIDE_CONNECTIONS,
    )
