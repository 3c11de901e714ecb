"""Remote engines: a model that runs on another machine, watched from this one.

`attach(Endpoint(url, token))` asks the server what it is and returns a `Remote`:
  - `draftlight serve`: every token with its provenance, rounds, stats, the server box's
    thermal state and profile (engine/remote/draftlight.py);
  - llama-server: text, plus the reply's draft totals from its `timings`;
  - vLLM: text, plus acceptance per position from its `/metrics` counters;
  - any other OpenAI-compatible server: text only (engine/remote/openai_servers.py).
Each yields the engine's own events, so a program (the app, a script) handles one stream;
tokens whose provenance the server does not report are `TokenKind.UNREPORTED`, and
`RemoteInfo.why_uncoloured` says why in a sentence.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from engine.chat import Message
from engine.events import Event
from engine.measure.thermal import ThermalReading
from engine.remote.connection import ConnectionLost, Endpoint, RemoteError, Unreachable
from engine.speculative import GenerationConfig


@dataclass(frozen=True)
class RemoteInfo:
    """What answers at an endpoint, in words for the window."""

    kind: str  # "draftlight", "llama-server", "vllm" or "openai"
    host: str  # "127.0.0.1:8765": where this machine reaches it (a tunnel's near end, maybe)
    model: str  # the server's model id
    drafter: str = ""  # the drafter's name, where the server says
    machine: str = ""  # the server's box ("gpu-box, Linux x86_64"), where it says
    provenance: bool = True  # whether each token says where it came from
    why_uncoloured: str = ""  # where it does not: why, in a sentence for the transcript
    thermal: bool = False  # whether the server reports its box's thermal state
    per_position: bool = False  # whether acceptance per draft position can be charted
    notes: str = ""  # anything else worth a line (vLLM's counters are shared by every client)

    def describe(self) -> str:
        """ "draftlight serve on gpu-box (Linux x86_64) at 127.0.0.1:8765"."""
        server = {"draftlight": "draftlight serve", "vllm": "vLLM", "openai": "an OpenAI-compatible server"}
        where = f" on {self.machine}" if self.machine else ""
        return f"{server.get(self.kind, self.kind)}{where} at {self.host}"


class Remote(Protocol):
    """A remote engine: one reply at a time, as the engine's own events."""

    info: RemoteInfo

    def reply(
        self, messages: Sequence[Message], config: GenerationConfig, thinking: bool, cancelled: Callable[[], bool]
    ) -> Iterator[Event]:
        """The reply's events, ending with RunStats; a Stop (`cancelled`) ends it with
        FinishReason.CANCELLED where the server allows, else by closing the connection."""
        ...

    def read_thermal(self) -> ThermalReading:
        """The server box's thermal state (UNKNOWN, with the reason, where it does not say)."""
        ...


def attach(endpoint: Endpoint) -> Remote:
    """Ask the server what it is: ours first, then llama-server, vLLM, any OpenAI server."""
    from engine.remote.draftlight import DraftlightRemote

    remote = DraftlightRemote.attach(endpoint)
    if remote is not None:
        return remote
    from engine.remote.openai_servers import attach_openai

    return attach_openai(endpoint)


__all__ = [
    "ConnectionLost",
    "Endpoint",
    "Remote",
    "RemoteError",
    "RemoteInfo",
    "Unreachable",
    "attach",
]
