"""Load an untrusted model file in a child process first, so an abort inside llama.cpp costs a
child, not the app.

llama.cpp's loader stops the whole process (GGML_ASSERT, SIGABRT) on some metadata it does
not expect: a `block_count` of 0 or past 512, more MTP layers than layers, expert counts
that do not add up, and more per architecture. The header reader checks the ones we know
(engine.runtime.llama.loadcheck); the probe catches the rest, whatever llama.cpp learns to assert
next. It loads with no_alloc (metadata and tensor shapes only, no weights read), so it
costs a process start and a header's read. A file proven whole by its published checksum
(the catalog's) is not probed, and a verdict is remembered for the process by the header's
digest and the file's size (all a metadata-only load reads), so the same model written again
elsewhere is not probed twice.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from pathlib import Path

from engine.errors import ModelFileError
from engine.runtime.gguf import GGUFInfo

ENGINE_ROOT = Path(__file__).resolve().parents[2]
REFUSED, ABORTED = 3, 134  # the child's exit: llama.cpp returned no model; abort() as a shell reports it
PROBE_TIMEOUT_S = 120.0  # metadata and shapes only: seconds even for a 20 GB model on a slow disk
_trusted: set[tuple[str, int, int]] = set()  # (path, size, mtime) of checksum-proven files
_loaded: set[tuple[str, int, bool, bool]] = set()  # (header digest, size, vocab_only, load_mtp) probed fine
# ggml_abort writes "path/llama-model.cpp:1328: GGML_ASSERT(...) failed"; an uncaught C++ exception "what():  ..."
_ABORT_LINE = re.compile(r"\.(?:c|cc|cpp|h|m):\d+: (.+)$|what\(\):\s*(.+)$")


def _key(path: Path) -> tuple[str, int, int] | None:
    try:
        st = path.stat()
        return (str(path.resolve()), st.st_size, st.st_mtime_ns)
    except OSError:
        return None


def trust(path: str | Path) -> None:
    """Mark a file as loadable without a probe (its checksum proved it the published file)."""
    key = _key(Path(path))
    if key is not None:
        _trusted.add(key)


def _header_key(info: GGUFInfo, vocab_only: bool, load_mtp: bool) -> tuple[str, int, bool, bool] | None:
    try:
        with info.path.open("rb") as f:
            digest = hashlib.sha256(f.read(info.header_bytes)).hexdigest()
    except OSError:
        return None
    return (digest, info.actual_size, vocab_only, load_mtp)


def ensure_loadable(info: GGUFInfo, vocab_only: bool = False, load_mtp: bool = False) -> None:
    """Raise ModelFileError if llama.cpp would abort loading the file info describes; else return.

    A load llama.cpp merely refuses (returns no model) passes: the real load then says why.
    """
    path = info.path
    if _key(path) in _trusted or getattr(sys, "frozen", False):  # a bundle has no `python -m` to run
        return
    key = _header_key(info, vocab_only, load_mtp)
    if key is not None and key in _loaded:
        return
    command = [sys.executable, "-m", "engine.runtime.llama.probe", str(path), str(int(vocab_only)), str(int(load_mtp))]
    # The child finds this engine wherever the parent runs from; ggml would attach gdb for a backtrace.
    paths = [str(ENGINE_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "GGML_NO_BACKTRACE": "1"}
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, errors="replace", timeout=PROBE_TIMEOUT_S, env=env
        )
    except subprocess.TimeoutExpired:
        raise ModelFileError(
            f"llama.cpp did not finish reading {path.name}'s metadata within {PROBE_TIMEOUT_S:.0f} s: "
            "the file is damaged or not a model llama.cpp can load."
        ) from None
    if done.returncode == 0 and key is not None:
        _loaded.add(key)
    if done.returncode >= 0 and done.returncode != ABORTED:
        # Loaded; or refused (REFUSED), which the real load explains in llama.cpp's words; or the
        # probe itself could not run, which is no reason to keep the user from the real load.
        return
    raise ModelFileError(
        f"llama.cpp cannot load {path.name}: {_reason(done.stderr)}. "
        "The file's metadata is damaged or was written for another program; fetch it again or choose another file."
    )


def _reason(stderr: str) -> str:
    """llama.cpp's own words for the abort, without the source path: the assert that failed."""
    for line in reversed(stderr.splitlines()):
        found = _ABORT_LINE.search(line.strip())
        if found:
            return f"it stops at an internal check ({(found.group(1) or found.group(2)).strip()[:300]})"
    return "it stops the process while loading it (no reason given)"


def _main(argv: list[str]) -> int:
    """The child: load with no weights allocated; 0 loaded, REFUSED refused (an abort never returns)."""
    import ctypes

    import llama_cpp.llama_cpp as llama

    quiet = llama.llama_log_callback(lambda level, text, user: None)  # kept alive while llama.cpp holds it
    llama.llama_log_set(quiet, ctypes.c_void_p(0))
    llama.llama_backend_init()
    params = llama.llama_model_default_params()
    params.n_gpu_layers = 0
    params.no_alloc = True
    params.load_mode = llama.LLAMA_LOAD_MODE_NONE  # no_alloc maps nothing (llama.cpp asserts so)
    params.vocab_only = argv[1] == "1"
    params.load_mtp = argv[2] == "1"
    ptr = llama.llama_model_load_from_file(argv[0].encode(), params)
    if not ptr:
        return REFUSED
    llama.llama_model_free(ptr)
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
