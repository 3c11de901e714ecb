"""`draftlight serve`: the engine over HTTP (Starlette on uvicorn).

OpenAI's `POST /v1/chat/completions` (streamed as server-sent events or whole) and
`GET /v1/models`, so any OpenAI client can chat; every streamed chunk carries its token's
provenance, round, position and probabilities under "draftlight", the last one the reply's
stats. `POST /draftlight/v1/stream` streams our own events (the lines of `draftlight chat
--json --rounds`, after a line naming the reply and the server's box), `POST
/draftlight/v1/cancel` stops one of them after its round (its stats still come),
`GET /draftlight/v1/box` tells what the server's box is and how hot it runs,
`GET /draftlight/v1/status` how busy it is.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import platform
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from engine.depth import AUTO, Depth
from engine.drafting import NgramDrafter
from engine.drafting.kinds import NGRAM, NONE
from engine.errors import DraftlightError
from engine.events import RoundEvent, RunStats, TokenEvent
from engine.measure.anatomy import rejection_anatomy
from engine.measure.gauge import gauge
from engine.measure.thermal import read_thermal
from engine.sampling import SamplingConfig
from engine.serve import protocol
from engine.serve.guard import Deadlines
from engine.serve.protocol import ChatRequest, RequestError
from engine.serve.slot import Slot
from engine.session import Engine
from engine.speculative import GenerationConfig


@dataclass
class ServeConfig:
    token: str | None = None  # clients must send "Authorization: Bearer TOKEN"
    max_request_bytes: int = 1 << 20
    max_tokens: int = 4096  # the most a request may ask for
    queue: int = 4  # requests that may wait behind the running one
    default_depth: Depth = AUTO
    open_paths: tuple[str, ...] = field(default=("/health",))
    deadlines: Deadlines = field(default_factory=Deadlines)


def build_app(engine: Engine, model_id: str, config: ServeConfig) -> Starlette:
    """The server's routes over one loaded engine."""
    slot = Slot(config.queue)
    stops: dict[str, threading.Event] = {}  # our streams' Stops, by the reply id their first line gives
    drafter = engine.drafter
    drafters = {protocol.LOADED: drafter, NGRAM.name: None, NONE.name: None}

    def refuse(exc: RequestError) -> JSONResponse:
        return JSONResponse(exc.body(), status_code=exc.status)

    def check_token(request: Request) -> None:
        if config.token is None or request.url.path in config.open_paths:
            return
        given = request.headers.get("authorization", "")
        expected = f"Bearer {config.token}"
        if not hmac.compare_digest(given.encode(), expected.encode()):
            raise RequestError(401, "This server needs its token: send the header 'Authorization: Bearer TOKEN'.",
                               "authentication_error")  # fmt: skip

    async def body_of(request: Request) -> bytes:
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > config.max_request_bytes:
            raise _too_large(int(declared), config.max_request_bytes)
        body = bytearray()
        try:
            async with asyncio.timeout(config.deadlines.body_s):
                async for part in request.stream():
                    body += part
                    if len(body) > config.max_request_bytes:
                        raise _too_large(len(body), config.max_request_bytes)
        except TimeoutError:
            raise RequestError(
                408,
                f"The request's body did not arrive within {config.deadlines.body_s:g} s; send it whole and promptly.",
            ) from None
        return bytes(body)

    def generation(req: ChatRequest) -> GenerationConfig:
        return GenerationConfig(
            max_tokens=req.max_tokens,
            depth=req.depth,
            sampling=SamplingConfig(temperature=req.temperature, top_k=req.top_k, top_p=req.top_p, seed=req.seed),
            p_min=req.p_min,
            stop=req.stop,
            ignore_eog=req.ignore_eos,
        )

    def reply_for(req: ChatRequest, stop: threading.Event | None = None):
        """The engine's events for a request; runs on the reply's thread. `stop`: our stream's
        own Stop (POST /draftlight/v1/cancel), which ends the reply after its round with its stats."""

        def reply(left):
            cancelled = left if stop is None else lambda: left() or stop.is_set()
            if req.drafter == NGRAM.name and drafters[NGRAM.name] is None:
                drafters[NGRAM.name] = NgramDrafter()
            wanted = drafters[req.drafter]
            if engine.drafter is not wanted:  # a swap forgets Auto's state: only when it changes
                engine.swap_drafter(wanted)
            return engine.reply(req.messages, generation(req), req.thinking, cancelled)

        return reply

    def extra(stats: RunStats, tokens: list[TokenEvent], rounds: list[RoundEvent]) -> dict:
        """What `draftlight chat --json` adds to its stats line."""
        plain_pass_s = engine.plain_pass_s()
        out: dict[str, object] = {"rejections": rejection_anatomy(tokens, rounds, plain_pass_s).to_json()}
        out["drafter_kind"] = engine.drafter.kind if engine.drafter is not None else NONE.name
        found = gauge([stats], plain_pass_s, engine.profile_basis())
        if found is not None:
            out.update(found.to_json())
        view = engine.ledger_view()  # the drift warning, as `chat --json` says it
        out["ledger"] = view and view.brief()
        return out

    async def events_of(req: ChatRequest, stop: threading.Event | None = None) -> AsyncIterator[Event]:
        """The reply's events; an engine failure becomes a RequestError with its sentence."""
        async for event in slot.run(reply_for(req, stop)):
            if isinstance(event, DraftlightError):
                raise RequestError(400, str(event))
            if isinstance(event, Exception):
                raise RequestError(500, f"The engine failed: {event}", "server_error")
            yield event

    def guarded(handler):
        """The token checked first; a refusal anywhere in the handler is its status and sentence."""

        async def run(request: Request) -> Response:
            try:
                check_token(request)
                return await handler(request)
            except RequestError as exc:
                return refuse(exc)
            except ClientDisconnect:  # the client left mid-request: nobody reads an answer
                return Response(status_code=499)

        return run

    async def start(request: Request, stop: threading.Event | None = None) -> tuple[ChatRequest, object, AsyncIterator]:
        """The checked request and its reply's first event, read before answering, so that a
        refusal is a status code, not a broken stream."""
        req = protocol.parse_chat(await body_of(request), config.max_tokens, config.default_depth)
        events = events_of(req, stop)
        return req, await unless_gone(request, anext(events)), events

    async def chat_completions(request: Request) -> Response:
        req, first, events = await start(request)
        cid = protocol.completion_id()
        if not req.stream:
            return JSONResponse(await unless_gone(request, _whole(cid, model_id, first, events, extra)))
        return StreamingResponse(_openai_stream(cid, model_id, first, events, extra), media_type="text/event-stream")

    async def draftlight_stream(request: Request) -> Response:
        reply_id, stop = protocol.completion_id(), threading.Event()
        stops[reply_id] = stop
        try:
            _, first, events = await start(request, stop)
        except BaseException:
            stops.pop(reply_id, None)
            raise

        async def lines() -> AsyncIterator[bytes]:
            try:
                yield protocol.sse({"type": "box", "reply": reply_id, **box_info()})
                async for event, tokens, rounds in _so_far(first, events):
                    line = event.to_json()
                    if isinstance(event, RunStats):
                        line.update(extra(event, tokens, rounds))
                    yield protocol.sse(line)
            except RequestError as exc:
                yield protocol.sse({"type": "error", **exc.body()["error"]})
            finally:
                stops.pop(reply_id, None)

        return StreamingResponse(lines(), media_type="text/event-stream")

    async def cancel(request: Request) -> Response:
        """Stop one of our streams after its round: the stream still ends with its stats."""
        try:
            reply_id = json.loads(await body_of(request)).get("reply")
        except (ValueError, AttributeError):
            reply_id = None
        stop = stops.get(reply_id) if isinstance(reply_id, str) else None
        if stop is None:
            raise RequestError(404, "No running reply has that id (it may have ended already).", "not_found_error")
        stop.set()
        return JSONResponse({"cancelled": reply_id})

    def box_info() -> dict:
        thermal = read_thermal()
        profile = engine.saved_profile()
        return {
            "machine": platform.node(),
            "platform": f"{platform.system()} {platform.machine()}",
            "runtime": engine.target.options.runtime_version(),  # llama.cpp's or MLX's, as the pair runs
            "model": model_id,
            "drafter": drafter.name if drafter is not None else None,
            "thermal": {
                "state": thermal.state.value,
                "describe": thermal.describe(),
                "source": thermal.source,
                "temperature_c": thermal.temperature_c,
                "cpu_speed_limit": thermal.cpu_speed_limit,
            },
            "profile": profile.table() if profile is not None else None,
        }

    async def models(_: Request) -> Response:
        entry = {"id": model_id, "object": "model", "created": 0, "owned_by": "draftlight"}
        return JSONResponse({"object": "list", "data": [entry]})

    async def box(_: Request) -> Response:
        return JSONResponse(box_info())

    async def status(_: Request) -> Response:
        return JSONResponse(slot.status())

    async def health(_: Request) -> Response:
        return JSONResponse({"ok": True})

    return Starlette(
        routes=[
            Route("/v1/chat/completions", guarded(chat_completions), methods=["POST"]),
            Route("/v1/models", guarded(models), methods=["GET"]),
            Route("/draftlight/v1/stream", guarded(draftlight_stream), methods=["POST"]),
            Route("/draftlight/v1/cancel", guarded(cancel), methods=["POST"]),
            Route("/draftlight/v1/box", guarded(box), methods=["GET"]),
            Route("/draftlight/v1/status", guarded(status), methods=["GET"]),
            Route("/health", health, methods=["GET"]),
        ]
    )


Event = TokenEvent | RoundEvent | RunStats


async def unless_gone(request: Request, awaitable):
    """The awaitable's result, or ClientDisconnect where the client leaves first: a client that
    leaves the queue gives up its place, and one that leaves a whole reply stops it."""
    work = asyncio.ensure_future(awaitable)
    gone = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait({work, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
    if work.done():
        return work.result()
    work.cancel()
    with contextlib.suppress(BaseException):
        await work
    raise ClientDisconnect()


async def _disconnected(request: Request) -> None:
    """Returns when the client has gone (the request's body has been read whole by then)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


def _too_large(size: int, limit: int) -> RequestError:
    return RequestError(413, f"The request is {size:,} bytes; this server takes up to {limit:,}.")


async def _so_far(first, events: AsyncIterator) -> AsyncIterator[tuple[Event, list[TokenEvent], list[RoundEvent]]]:
    """Each event of a reply with the reply's tokens and rounds so far (what its stats line adds needs them)."""
    tokens: list[TokenEvent] = []
    rounds: list[RoundEvent] = []
    event = first
    while True:
        if isinstance(event, TokenEvent):
            tokens.append(event)
        elif isinstance(event, RoundEvent):
            rounds.append(event)
        yield event, tokens, rounds
        try:
            event = await anext(events)
        except StopAsyncIteration:
            return


async def _openai_stream(cid: str, model: str, first, events: AsyncIterator, extra) -> AsyncIterator[bytes]:
    yield protocol.sse(protocol.chunk(cid, model, {"role": "assistant", "content": ""}))
    try:
        async for event, tokens, rounds in _so_far(first, events):
            if isinstance(event, TokenEvent):
                yield protocol.sse(protocol.token_chunk(cid, model, event))
            elif isinstance(event, RunStats):
                yield protocol.sse(protocol.final_chunk(cid, model, event, extra(event, tokens, rounds)))
                yield protocol.sse("[DONE]")
    except RequestError as exc:
        yield protocol.sse(exc.body())


async def _whole(cid: str, model: str, first, events: AsyncIterator, extra) -> dict:
    async for event, tokens, rounds in _so_far(first, events):
        if isinstance(event, RunStats):
            return protocol.completion(cid, model, tokens, event, extra(event, tokens, rounds))
    raise RequestError(500, "The engine ended the reply without its figures.", "server_error")
