"""A GGUF catalog model (`CatalogModel`: its file and where it comes from), and how that file is fetched
and proved whole: checksums, stamps, chunk packages, the hub.

`engine.models.catalog.resolve` tries the sources in order; here is each source and the check.
Whatever is found is checked against its sha256 once and remembered with a stamp next to it (or in the
models folder), so later starts cost a stat, not a hash. Chunk packages from PyPI are concatenated
once into the user cache, atomically.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from engine.errors import ModelFileError
from engine.models.housekeeping import remove_stale_partials
from engine.runtime.gguf import TruncatedModelFile, read_gguf
from engine.runtime.llama.probe import trust

Progress = Callable[[int, int, str], None]  # (bytes done, bytes total, what)
BLOCK = 4 << 20


@dataclass(frozen=True)
class CatalogModel:
    """A GGUF catalog model: its one file, that file's size and checksum, and the sources that hold it."""

    key: str
    title: str
    filename: str
    size: int
    sha256: str  # "" where none is published: the size and a readable header are checked instead
    hf_repo: str | None = None
    # Import names of packages whose files, concatenated in order, make the model.
    chunk_packages: tuple[str, ...] = ()
    chunk_member: str = "data/part01.bin"  # else the one file in the package's data/
    pip_names: tuple[str, ...] = field(default=(), repr=False)
    format: str = "gguf"


# ---- verification -------------------------------------------------------------------


def _stamp_path(path: Path) -> Path:
    return path.with_name(path.name + ".verified")


def _stamp_of(path: Path) -> dict:
    st = path.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}


def sha256_file(path: Path, progress: Progress | None = None, label: str = "") -> str:
    digest = hashlib.sha256()
    total, done = path.stat().st_size, 0
    with path.open("rb") as f:
        while block := f.read(BLOCK):
            digest.update(block)
            done += len(block)
            if progress:
                progress(done, total, label)
    return digest.hexdigest()


def verify(model: CatalogModel, path: Path, progress: Progress | None = None, stamp_dir: Path | None = None) -> bool:
    """True if `path` is the model's exact file; remembered with a stamp next to it."""
    path = Path(path)
    if not path.is_file() or path.stat().st_size != model.size:
        return False
    stamp = (stamp_dir / (path.name + ".verified")) if stamp_dir else _stamp_path(path.resolve())
    current = {**_stamp_of(path), "sha256": model.sha256}
    try:
        if json.loads(stamp.read_text()) == current:
            trust(path)  # the published file: llama.cpp loads it without a probe
            return True
    except (OSError, ValueError):
        pass
    if not model.sha256:  # no published checksum: the size matched; the header must read whole
        try:
            read_gguf(path)
        except ModelFileError:
            return False
    elif sha256_file(path, progress, f"checking {model.filename}") != model.sha256:
        return False
    try:
        stamp.parent.mkdir(parents=True, exist_ok=True)
        stamp.write_text(json.dumps(current))
    except OSError:
        pass  # a read-only location: the hash is simply checked again next time
    if model.sha256:
        trust(path)
    return True


def file_state(model: CatalogModel, path: Path) -> str:
    """What `models --list` says of the model's file at `path`, from its size and header alone."""
    if not path.is_file():
        return "not fetched"
    size = path.stat().st_size
    try:
        if json.loads(_stamp_path(path).read_text()) == {**_stamp_of(path), "sha256": model.sha256}:
            return "ready"
    except (OSError, ValueError):
        pass
    try:
        read_gguf(path)
    except TruncatedModelFile:
        return f"incomplete ({size / 1e6:,.0f} MB of {model.size / 1e6:,.0f}): fetch it again"
    except ModelFileError:
        return "damaged: fetch it again"
    if size != model.size:
        return f"not the catalog's file ({size / 1e6:,.0f} MB): fetch it again"
    return "fetched (checked on first use)"


# ---- sources ------------------------------------------------------------------------


def chunk_paths(model: CatalogModel) -> list[Path] | None:
    """Files of the installed chunk packages, in order; None if any is missing."""
    paths = []
    for package in model.chunk_packages:
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            return None
        folder = Path(next(iter(spec.submodule_search_locations)))
        member = folder / model.chunk_member
        if not member.exists():  # chunk packages name their one data file by part number
            data = folder / "data"
            found = [p for p in data.iterdir() if p.is_file()] if data.is_dir() else []
            if len(found) != 1:
                return None
            member = found[0]
        paths.append(member)
    return paths


def assemble(model: CatalogModel, parts: list[Path], dest: Path, progress: Progress | None = None) -> Path:
    """Concatenate parts into dest, hashing on the way; atomic: a partial file is never dest."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_partials(dest.parent)  # ~the model's size each, left by an assembly that was killed
    tmp = dest.with_name(dest.name + f".partial-{os.getpid()}")
    digest = hashlib.sha256()
    done = 0
    try:
        with tmp.open("wb") as out:
            for part in parts:
                with part.open("rb") as f:
                    while block := f.read(BLOCK):
                        out.write(block)
                        digest.update(block)
                        done += len(block)
                        if progress:
                            progress(done, model.size, f"assembling {model.filename}")
            out.flush()
            os.fsync(out.fileno())
        if done != model.size or digest.hexdigest() != model.sha256:
            raise ModelFileError(
                f"The installed chunk packages for {model.title} do not add up to the expected file "
                f"({done:,} bytes, sha256 {digest.hexdigest()[:12]}...; expected {model.size:,} bytes, "
                f"{model.sha256[:12]}...). Reinstall them: pip install --force-reinstall "
                f"{' '.join(model.pip_names)}"
            )
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)
    _stamp_path(dest).write_text(json.dumps({**_stamp_of(dest), "sha256": model.sha256}))
    trust(dest)
    return dest


def from_hf(model: CatalogModel, local_only: bool, progress: Progress | None) -> Path:
    """The model's file from the Hugging Face cache, or (local_only False) downloaded from the hub."""
    from huggingface_hub import hf_hub_download

    if model.hf_repo is None:
        raise ModelFileError(f"{model.key} has no Hugging Face repository to fetch it from.")
    kwargs = {}
    if progress is not None and not local_only:
        kwargs["tqdm_class"] = _tqdm_reporting(progress, f"downloading {model.filename}")
    return Path(hf_hub_download(model.hf_repo, model.filename, local_files_only=local_only, **kwargs))


def _tqdm_reporting(progress: Progress, label: str):
    from tqdm.auto import tqdm

    class Reporting(tqdm):
        def __init__(self, *args, **kwargs):
            # Older huggingface_hub releases pass their own `name`, which vanilla tqdm refuses,
            # and disable=None, which silences a bar (and this report) off a terminal: the app.
            kwargs.pop("name", None)
            kwargs["disable"] = False
            kwargs["file"] = io.StringIO()  # the Progress callback is the display, not tqdm's bar
            super().__init__(*args, **kwargs)

        def update(self, n=1):
            out = super().update(n)
            if self.total:
                progress(int(self.n), int(self.total), label)
            return out

    return Reporting
