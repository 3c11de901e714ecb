"""The oracle: stock llama.cpp run on the same rendered prompt as our engine.

Both arms run in `llama-server` (one process per arm, one request per run): unlike
llama-speculative-simple it stops at exactly N tokens at every depth, returns the token
ids, and reports draft counts and timings as JSON. It gets the rendered prompt as text on
the /completion endpoint, so no chat template is applied, and tokenizes it itself with
special tokens parsed and the model's BOS added where the model asks for one (Qwen does
not). For a model that does, pass the text without its leading BOS, or llama.cpp will
start with two. The build lives in `oracle_build`.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from engine.ruler.oracle_build import SERVER, OracleBuild, OracleUnavailable, build_oracle, find_oracle

__all__ = [
    "OracleBuild",
    "OracleRun",
    "OracleServer",
    "OracleUnavailable",
    "build_oracle",
    "find_oracle",
    "first_error",
    "parse_completion",
    "parse_port",
    "plain_command",
    "request_body",
    "run_plain",
    "run_speculative",
    "serve_plain",
    "serve_speculative",
    "speculative_command",
]

READY_TIMEOUT_S = 300.0  # loading two models on a slow disk
REQUEST_TIMEOUT_S = 1800.0
_LOG_PREFIX = re.compile(r"^[\d.]+ [DIWE] ")  # llama.cpp's "0.00.022.508 E "
_ERROR_LINE = re.compile(r"^[\d.]+ E ")


@dataclass(frozen=True)
class OracleRun:
    """One measured generation by stock llama.cpp.

    llama.cpp samples the first token from the prefill's logits, so decode_s covers the
    other generated_tokens - 1 and decode_tps is (generated_tokens - 1) / decode_s: the
    rate of target passes, as our engine's decode_tps is.
    """

    arm: str  # "plain" or f"depth {k}"
    prompt_tokens: int
    generated_tokens: int
    prefill_s: float
    decode_s: float
    decode_tps: float
    end_to_end_tps: float
    drafted: int | None
    accepted: int | None
    text: str
    token_ids: tuple[int, ...] | None
    command: tuple[str, ...]


def _common_args(build: OracleBuild, model: Path, threads: int, n_ctx: int, repack: bool) -> list[str]:
    return [
        str(build.binary(SERVER)),
        "--host", "127.0.0.1",
        "--port", "0",  # any free port; read back from the log
        "-m", str(model),
        "-t", str(threads),
        "-tb", str(threads),
        "-c", str(n_ctx),
        "-np", "1",  # one slot: the whole context, no parallel sequences
        "-ngl", "all",  # as the engine: every layer on the GPU where there is one
        "--repack" if repack else "--no-repack",
        # as the engine: exact mode keeps the KV cache in Q8_0, fast mode in f16
        "-ctk", "f16" if repack else "q8_0",
        "-ctv", "f16" if repack else "q8_0",
        "--no-cache-prompt",
        "--cache-ram", "0",
        "--no-webui",
    ]  # fmt: skip


def plain_command(build: OracleBuild, model: Path, threads: int, n_ctx: int, repack: bool) -> list[str]:
    """llama-server for the plain arm: the target alone."""
    return _common_args(build, model, threads, n_ctx, repack)


def speculative_command(
    build: OracleBuild,
    target: Path,
    drafter: Path | None,
    depth: int,
    threads: int,
    n_ctx: int,
    repack: bool,
    spec_type: str = "draft-simple",
) -> list[str]:
    """llama-server with a drafter (`spec_type`) drafting exactly `depth` tokens a round.

    `drafter` None: the target drafts with the heads in its own file (draft-mtp). p-min 0
    keeps the drafter from stopping early. n-min stays 0 so that, as in the engine, the
    last rounds draft only what the token budget leaves (n-min k would make llama.cpp skip
    those drafts instead).
    """
    return [
        *_common_args(build, target, threads, n_ctx, repack),
        *(["-md", str(drafter)] if drafter is not None else []),
        "--spec-type", spec_type,
        "--spec-draft-n-max", str(depth),
        "--spec-draft-n-min", "0",
        "--spec-draft-p-min", "0",
        "-ctkd", "f16" if repack else "q8_0",
        "-ctvd", "f16" if repack else "q8_0",
        "-td", str(threads),
        "-tbd", str(threads),
        "-ngld", "all",
    ]  # fmt: skip


def request_body(prompt_text: str, n_tokens: int, depth: int = 0) -> dict:
    """A /completion request: raw text (no chat template), greedy, exactly n_tokens."""
    body = {
        "prompt": prompt_text,
        "n_predict": n_tokens,
        "temperature": 0.0,
        "top_k": 1,
        "ignore_eos": True,  # bans end-of-generation tokens, as the engine's ignore_eog does
        "cache_prompt": False,
        "return_tokens": True,
        "stream": False,
    }
    if depth:
        body |= {"speculative.n_max": depth, "speculative.n_min": 0, "speculative.p_min": 0.0}
    return body


def parse_port(log: str) -> int | None:
    """The port llama-server bound: 'listening on http://127.0.0.1:PORT'."""
    m = re.search(r"listening on https?://[^\s:]+:(\d+)", log)
    return int(m.group(1)) if m else None


def parse_completion(reply: dict, arm: str, command: tuple[str, ...]) -> OracleRun:
    """An OracleRun from llama-server's /completion reply (its `timings` and `tokens`)."""
    t = reply["timings"]
    generated = int(t["predicted_n"])
    prefill_s, decode_s = t["prompt_ms"] / 1e3, t["predicted_ms"] / 1e3
    speculative = arm != "plain"
    tokens = reply.get("tokens")
    return OracleRun(
        arm=arm,
        prompt_tokens=int(reply.get("tokens_evaluated", t["prompt_n"])),
        generated_tokens=generated,
        prefill_s=prefill_s,
        decode_s=decode_s,
        decode_tps=float(t["predicted_per_second"]),
        end_to_end_tps=generated / (prefill_s + decode_s) if prefill_s + decode_s > 0 else 0.0,
        drafted=int(t.get("draft_n", 0)) if speculative else None,
        accepted=int(t.get("draft_n_accepted", 0)) if speculative else None,
        text=reply["content"],
        token_ids=tuple(tokens) if tokens is not None else None,
        command=command,
    )


class OracleServer:
    """One llama-server process for one arm; each run() is one request to it."""

    def __init__(self, command: list[str], arm: str, depth: int = 0):
        self.command, self.arm, self.depth = tuple(command), arm, depth
        self.proc: subprocess.Popen | None = None
        self.port: int | None = None
        self._log: Path | None = None

    def __enter__(self) -> OracleServer:
        self.start()
        return self

    def __exit__(self, exc_type: object, *_: object) -> None:
        self.close(keep_log=exc_type is not None)  # a failure's message points at the log

    def start(self) -> None:
        if not Path(self.command[0]).is_file():
            raise OracleUnavailable(f"{self.command[0]} is missing: build the oracle (draftlight oracle build).")
        fd, name = tempfile.mkstemp(prefix="draftlight-oracle-", suffix=".log")
        os.close(fd)
        self._log = Path(name)
        with self._log.open("w") as out:
            self.proc = subprocess.Popen(self.command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            self._wait_until_ready()
        except BaseException:
            self.close(keep_log=True)  # the message points at the log
            raise

    def _wait_until_ready(self) -> None:
        assert self.proc is not None and self._log is not None
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            log = self._log.read_text(errors="replace")
            if self.proc.poll() is not None:
                raise OracleUnavailable(
                    f"{SERVER} stopped while starting ({first_error(log)}); its log is {self._log}."
                )
            self.port = self.port or parse_port(log)
            if self.port and self._healthy():
                return
            time.sleep(0.1)
        raise OracleUnavailable(f"{SERVER} did not load its models in {READY_TIMEOUT_S:.0f} s; its log is {self._log}.")

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=5) as reply:
                return reply.status == 200
        except (OSError, ValueError):
            return False  # 503 while the models load

    def run(self, prompt_text: str, n_tokens: int) -> OracleRun:
        """Generate n_tokens greedily after prompt_text (sent as is, no chat template)."""
        if self.proc is None or self.proc.poll() is not None:
            raise OracleUnavailable(f"{SERVER} is not running; its log is {self._log}.")
        data = json.dumps(request_body(prompt_text, n_tokens, self.depth)).encode()
        req = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/completion", data=data, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(req, timeout=REQUEST_TIMEOUT_S) as reply:
                answer = json.load(reply)
        except urllib.error.HTTPError as exc:
            message = exc.read().decode("utf-8", "replace")[:300]
            raise OracleUnavailable(f"{SERVER} refused the request ({exc.code}: {message}).") from exc
        except (OSError, ValueError) as exc:
            raise OracleUnavailable(f"{SERVER} failed during a request ({exc}); its log is {self._log}.") from exc
        return parse_completion(answer, self.arm, self.command)

    def close(self, keep_log: bool = False) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._log is not None and not keep_log:
            self._log.unlink(missing_ok=True)


def first_error(log: str) -> str:
    """The first error line of a llama.cpp log (usually the cause), without its timestamp."""
    lines = [ln for ln in log.splitlines() if ln.strip()]
    errors = [ln for ln in lines if _ERROR_LINE.match(ln)]
    errors = errors or [ln for ln in lines if "error" in ln.lower()]
    line = (errors or lines[-1:] or ["no output"])[0]
    return _LOG_PREFIX.sub("", line).strip()[:200]


def serve_plain(build: OracleBuild, model: Path, threads: int, n_ctx: int, repack: bool) -> OracleServer:
    """A server for repeated plain runs (use as a context manager)."""
    return OracleServer(plain_command(build, model, threads, n_ctx, repack), "plain")


def serve_speculative(
    build: OracleBuild,
    target: Path,
    drafter: Path | None,
    depth: int,
    threads: int,
    n_ctx: int,
    repack: bool,
    spec_type: str = "draft-simple",
) -> OracleServer:
    """A server for repeated runs at one draft depth (use as a context manager)."""
    if depth < 1:
        raise ValueError("a speculative arm drafts at least one token")
    command = speculative_command(build, target, drafter, depth, threads, n_ctx, repack, spec_type)
    return OracleServer(command, f"depth {depth}", depth)


def run_plain(
    build: OracleBuild, model: Path, prompt_text: str, n_tokens: int, threads: int, n_ctx: int, repack: bool
) -> OracleRun:
    """One plain run in a fresh server, after a short warm-up request."""
    with serve_plain(build, model, threads, n_ctx, repack) as server:
        server.run(prompt_text, min(n_tokens, 4))
        return server.run(prompt_text, n_tokens)


def run_speculative(
    build: OracleBuild,
    target: Path,
    drafter: Path,
    prompt_text: str,
    depth: int,
    n_tokens: int,
    threads: int,
    n_ctx: int,
    repack: bool,
) -> OracleRun:
    """One run at a fixed draft depth in a fresh server, after a short warm-up request."""
    with serve_speculative(build, target, drafter, depth, threads, n_ctx, repack) as server:
        server.run(prompt_text, min(n_tokens, 4))
        return server.run(prompt_text, n_tokens)
