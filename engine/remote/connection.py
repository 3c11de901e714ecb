"""HTTP to a remote engine: JSON requests and server-sent event streams, with a Stop that works.

The standard library's http.client, on a reader thread per stream: a reply's first line may
come only after the server's prefill, and a Stop must not wait for it. The caller polls
`cancelled` between items; a stream it leaves is closed, which a server takes as "stop".
Every failure is a sentence naming the server: refused (with the server's own words), not
reachable, or lost mid-reply.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import queue
import socket
import threading
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit

from engine.errors import DraftlightError

# A whole JSON exchange (connect, send, every byte of the answer): a server that trickles its
# answer a byte at a time cannot hold a caller past this.
CONNECT_TIMEOUT_S = 10.0
# A reply's lines may be minutes apart (a long prompt's prefill on a slow box); a server that
# says nothing for this long is taken as gone.
IDLE_TIMEOUT_S = 600.0
POLL_S = 0.05  # how often a waiting stream looks at `cancelled`
MAX_LINE = 1 << 24  # one SSE line; a token's event is well under a kilobyte
# One event, its lines together; each line costs its bytes and LINE_COST more (what Python
# keeps per line), so a million empty `data:` lines are as costly as a million bytes of text.
MAX_EVENT = 1 << 24
LINE_COST = 64
MAX_BODY = 1 << 26  # a whole JSON answer or /metrics page


class RemoteError(DraftlightError):
    """The server answered, and refused: its status and its own sentence."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class Unreachable(DraftlightError):
    """No answer at all: wrong address, server not running, tunnel down."""


class ConnectionLost(DraftlightError):
    """The server went away mid-reply; what arrived before stays with the caller."""


@dataclass(frozen=True)
class Endpoint:
    """Where a remote engine answers: a base URL ("http://127.0.0.1:8765") and its bearer token."""

    url: str
    token: str | None = None

    def __post_init__(self) -> None:
        parts = urlsplit(self.url.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise DraftlightError(
                f"{self.url!r} is not a server address: give one such as http://127.0.0.1:8765 "
                "(through an ssh tunnel: ssh -L 8765:127.0.0.1:8765 HOST)."
            )
        try:
            parts.port  # noqa: B018 (a bad port raises here)
        except ValueError:
            raise DraftlightError(f"{self.url!r} has a port that is not a number from 1 to 65535.") from None

    @property
    def host(self) -> str:
        parts = urlsplit(self.url.strip())
        return f"{parts.hostname}:{parts.port}" if parts.port else str(parts.hostname)

    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        parts = urlsplit(self.url.strip())
        kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        return kind(parts.hostname or "", parts.port, timeout=timeout)

    def _path(self, path: str) -> str:
        return urlsplit(self.url.strip()).path.rstrip("/") + path

    def _headers(self, body: bool) -> dict[str, str]:
        headers = {"Accept": "application/json, text/event-stream, text/plain"}
        if body:
            headers["Content-Type"] = "application/json"
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        return headers

    def request(self, method: str, path: str, body: dict | None = None, timeout: float = CONNECT_TIMEOUT_S) -> bytes:
        """One whole answer's bytes, all of it within `timeout` seconds; a refusal raises
        RemoteError with the server's sentence."""
        conn = self._connection(timeout)
        late = threading.Event()

        def cut() -> None:  # the deadline: wakes a read that a trickling server keeps alive
            late.set()
            sock = conn.sock
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

        timer = threading.Timer(timeout, cut)
        timer.daemon = True
        timer.start()
        try:
            response = self._open(conn, method, path, body)
            data = response.read(MAX_BODY + 1)
            if late.is_set():
                raise TimeoutError
            if len(data) > MAX_BODY:
                raise RemoteError(f"{self.host} answered {path} with more than {MAX_BODY >> 20} MiB.")
            return data
        except (OSError, http.client.HTTPException) as exc:
            if late.is_set():
                raise Unreachable(
                    f"Could not reach {self.host}: it did not answer {path} within {timeout:g} s."
                ) from None
            raise Unreachable(self._unreachable(exc)) from None
        finally:
            timer.cancel()
            conn.close()

    def get_json(self, path: str, timeout: float = CONNECT_TIMEOUT_S) -> dict:
        data = self.request("GET", path, timeout=timeout)
        try:
            out = json.loads(data)
        except ValueError:
            raise RemoteError(f"{self.host} answered {path} with something that is not JSON.") from None
        if not isinstance(out, dict):
            raise RemoteError(f"{self.host} answered {path} with JSON that is not an object.")
        return out

    def _open(self, conn: http.client.HTTPConnection, method: str, path: str, body: dict | None):
        payload = json.dumps(body).encode() if body is not None else None
        conn.request(method, self._path(path), body=payload, headers=self._headers(payload is not None))
        response = conn.getresponse()
        if response.status >= 400:
            raise RemoteError(self._refusal(response, path), response.status)
        return response

    def _refusal(self, response: http.client.HTTPResponse, path: str) -> str:
        try:
            raw = response.read(1 << 16)
        except (OSError, http.client.HTTPException):
            raw = b""
        said = _error_sentence(raw)
        if response.status == 401:
            return f"{self.host} wants a token (401): {said or 'check the token in the engine settings.'}"
        if response.status == 404:
            return f"{self.host} has no {path} (404): {said or 'is this the right kind of server?'}"
        return f"{self.host} refused ({response.status}): {said or response.reason}"

    def _unreachable(self, exc: BaseException) -> str:
        if isinstance(exc, ConnectionRefusedError):
            why = "nothing is listening there (is the server running, and the ssh tunnel open?)"
        elif isinstance(exc, socket.timeout | TimeoutError):
            why = "it did not answer in time"
        elif isinstance(exc, socket.gaierror):
            why = "that host name is unknown"
        else:
            why = str(exc) or type(exc).__name__
        return f"Could not reach {self.host}: {why}."

    def stream(self, path: str, body: dict, cancelled: Callable[[], bool]) -> Generator[dict | str, None, None]:
        """The `data:` items of a server-sent event stream, JSON-decoded where they are JSON.

        Leaving the iterator (or `cancelled()` turning true, which ends it) closes the
        connection. A refusal before the stream raises RemoteError; no answer, Unreachable;
        a stream that breaks before the server ended it, ConnectionLost.
        """
        reader = _StreamReader(self, path, body)
        reader.start()
        try:
            while True:
                if cancelled():
                    return
                try:
                    kind, item = reader.items.get(timeout=POLL_S)
                except queue.Empty:
                    continue
                if kind == "data":
                    yield item
                elif kind == "end":
                    return
                else:
                    raise item
        finally:
            reader.close()


class _TooLong(ValueError):
    """A line or an event past its cap: the server's fault, not the connection's."""


class _StreamReader(threading.Thread):
    """Connects, sends, and reads lines into a queue; the consumer decides when to stop."""

    def __init__(self, endpoint: Endpoint, path: str, body: dict) -> None:
        super().__init__(name="draftlight-remote", daemon=True)
        self.endpoint, self.path, self.body = endpoint, path, body
        self.items: queue.Queue = queue.Queue()
        self._conn: http.client.HTTPConnection | None = None
        self._closed = threading.Event()
        self._started_reading = False

    def run(self) -> None:
        try:
            self._conn = self.endpoint._connection(CONNECT_TIMEOUT_S)
            self._conn.connect()
            # Connected: from here the server may say nothing until its prefill is done (llama-server
            # sends even its status line with the first token), so it gets the idle allowance.
            if self._conn.sock is not None:
                self._conn.sock.settimeout(IDLE_TIMEOUT_S)
            response = self.endpoint._open(self._conn, "POST", self.path, self.body)
            kind = response.getheader("Content-Type") or "no content type"
            if kind.split(";")[0].strip().lower() != "text/event-stream":
                raise RemoteError(f"{self.endpoint.host} answered {self.path} with {kind[:80]}, not an event stream.")
            self._started_reading = True
            for item in _sse_items(response):
                self.items.put(("data", item))
            self.items.put(("end", None))
        except RemoteError as exc:
            self.items.put(("error", exc))
        except _TooLong as exc:
            self.items.put(("error", RemoteError(f"{self.endpoint.host} sent {exc}; the reply was cut there.")))
        except (OSError, http.client.HTTPException, ValueError, AttributeError) as exc:
            # AttributeError: http.client's response, closed under the reader by `close`.
            if self._closed.is_set():
                return
            if self._started_reading:
                self.items.put(("error", ConnectionLost(f"The connection to {self.endpoint.host} was lost mid-reply ({exc or type(exc).__name__}).")))  # fmt: skip
            else:
                self.items.put(("error", Unreachable(self.endpoint._unreachable(exc))))

    def close(self) -> None:
        self._closed.set()
        conn = self._conn
        if conn is not None and conn.sock is not None:
            with contextlib.suppress(OSError):
                conn.sock.shutdown(socket.SHUT_RDWR)  # wakes the reader blocked in recv
        if conn is not None:
            conn.close()


def _sse_items(response: http.client.HTTPResponse) -> Iterator[dict | str]:
    """The `data:` payloads of an event stream; one that ends without a blank line is cut short."""
    data: list[str] = []
    size = 0
    while True:
        raw = response.readline(MAX_LINE)
        if not raw:
            if data:
                raise ValueError("the stream ended inside an event")
            return
        if len(raw) >= MAX_LINE and not raw.endswith(b"\n"):
            raise _TooLong(f"a line longer than {MAX_LINE >> 20} MiB")
        line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
        if not line:
            if data:
                text = "\n".join(data)
                data, size = [], 0
                try:
                    yield json.loads(text)
                except ValueError:
                    yield text
            continue
        if line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
            size += len(raw) + LINE_COST
            if size > MAX_EVENT:
                raise _TooLong(f"an event longer than {MAX_EVENT >> 20} MiB")
        # comments (":" keep-alives), "event:", "id:" and "retry:" lines carry nothing we use


def _error_sentence(raw: bytes) -> str:
    """The sentence in an error body: OpenAI's {"error": {"message"}}, or {"detail"}, or the text."""
    try:
        d = json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", errors="replace").strip()[:300]
    if isinstance(d, dict):
        err = d.get("error")
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return err["message"][:300]
        if isinstance(err, str):
            return err[:300]
        if isinstance(d.get("detail"), str):
            return d["detail"][:300]
        if isinstance(d.get("message"), str):
            return d["message"][:300]
    return raw.decode("utf-8", errors="replace").strip()[:300]
