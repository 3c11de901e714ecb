"""Shared fixtures: a private home for the whole suite, and the real models, found in the user
cache (`make test` puts them there).

The suite runs under a temporary HOME (and XDG folders, and Draftlight's cache): settings,
conversations and box profiles written by any test land there, never in the user's own
files. The user's models, MLX conversions and stock llama.cpp build stay reachable through
links in the private cache. A session that changed any of the user's own Draftlight files
fails at its end, naming them.

Every test that asks for a real model (or a window, which loads one) is marked `slow`:
`make test-fast` (`pytest -m "not slow"`) runs the rest. A model that is missing skips
the tests that need it, with one line saying how to fetch it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from engine.errors import ModelNotAvailable
from engine.models import catalog

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
# Replies made by tests fill an acceptance ledger of their own, never the user's.
os.environ["DRAFTLIGHT_LEDGER"] = str(Path(tempfile.mkdtemp(prefix="draftlight-ledger-")) / "ledger.sqlite3")

# The user's cache folders a test may read and add to: models, their MLX conversions, the oracle.
SHARED_CACHE = ("models", "mlx", "llama.cpp")


def user_draftlight_folders() -> list[Path]:
    """Where the app, the engine and Qt keep the user's own Draftlight files (settings,
    conversations, profiles), read from the environment as it is when called."""
    home = Path.home()
    config = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
    data = Path(os.environ.get("XDG_DATA_HOME") or home / ".local" / "share")
    return [
        config / "Draftlight",
        data / "Draftlight",
        home / ".draftlight",
        home / "Library" / "Application Support" / "Draftlight",
        home / "Library" / "Preferences" / "com.draftlight.Draftlight.plist",
        catalog.cache_dir(),
    ]


def snapshot(roots: list[Path], cache: Path) -> dict[str, tuple[int, int]]:
    """Every file under `roots`, the shared folders of `cache` left out: its mtime and size."""
    skipped = {str(cache / name) for name in SHARED_CACHE}
    files: list[Path] = []
    for root in roots:
        if root.is_file():
            files.append(root)
        for folder, dirs, names in os.walk(root):
            dirs[:] = [d for d in dirs if os.path.join(folder, d) not in skipped]
            files += [Path(folder) / name for name in names]
    seen: dict[str, tuple[int, int]] = {}
    for path in files:
        try:
            st = path.stat()
        except OSError:
            continue
        seen[str(path)] = (st.st_mtime_ns, st.st_size)
    return seen


@dataclass(frozen=True)
class PrivateHome:
    home: Path
    watched: list[Path]  # the user's own Draftlight files and folders
    real_cache: Path
    before: dict[str, tuple[int, int]]


_HOME = pytest.StashKey[PrivateHome]()


def pytest_configure(config: pytest.Config) -> None:
    """Point HOME, the XDG folders and Draftlight's cache at a temporary home before any test
    module is imported or any QSettings is made (Qt reads its folders once a process)."""
    if os.environ.get("DRAFTLIGHT_TEST_HOME"):
        return  # a pytest started by a test keeps its parent's home
    watched = user_draftlight_folders()
    real_cache = catalog.cache_dir()
    home = Path(tempfile.mkdtemp(prefix="draftlight-test-home-"))
    config.stash[_HOME] = PrivateHome(home, watched, real_cache, snapshot(watched, real_cache))
    private = {
        "HOME": home,
        "XDG_CONFIG_HOME": home / ".config",
        "XDG_DATA_HOME": home / ".local" / "share",
        "XDG_CACHE_HOME": home / ".cache",
        "XDG_STATE_HOME": home / ".local" / "state",
        "DRAFTLIGHT_CACHE": home / ".cache" / "draftlight",
    }
    for folder in private.values():
        folder.mkdir(parents=True, exist_ok=True)
    for name in SHARED_CACHE:
        if (real_cache / name).is_dir():
            (private["DRAFTLIGHT_CACHE"] / name).symlink_to(real_cache / name, target_is_directory=True)
    os.environ.update({k: str(v) for k, v in private.items()})
    os.environ["DRAFTLIGHT_TEST_HOME"] = str(home)


def pytest_unconfigure(config: pytest.Config) -> None:
    kept = config.stash.get(_HOME, None)
    if kept is not None:
        shutil.rmtree(kept.home, ignore_errors=True)


@pytest.fixture(scope="session", autouse=True)
def private_home(request: pytest.FixtureRequest) -> Iterator[Path]:
    """The suite's temporary home; at the session's end, a failure naming any of the user's own
    Draftlight files that a test created, changed or removed."""
    kept = request.config.stash.get(_HOME, None)
    yield Path(os.environ["DRAFTLIGHT_TEST_HOME"])
    if kept is None:
        return
    after = snapshot(kept.watched, kept.real_cache)
    changed = sorted(p for p in kept.before.keys() | after.keys() if kept.before.get(p) != after.get(p))
    if changed:
        pytest.fail(
            f"tests (or another program) wrote into the user's own Draftlight files: {', '.join(changed)}",
            pytrace=False,
        )


PROMPTS = {
    "code": "Write a bubble sort in C++.",
    "prose": "Write a short travel blog paragraph about a morning in Lisbon.",
    "arithmetic": "A shop sells pens at 3 dollars each. Ana buys 7 pens and pays with a 50 dollar note. "
    "How much change does she get? Show the steps.",
    "json": 'Return only a JSON object calling the function get_weather with arguments city="Paris" and unit="celsius".',
}
# Past 512 cached positions llama.cpp's CPU attention takes another path for a single row:
# exactness must hold there too.
LONG_PROMPT = "Summarize this article in five sentences.\n\n" + "\n".join(
    f"Paragraph {i}: the mill on the river turned for a century, stood empty for thirty years, flooded once a "
    "decade, and was rebuilt by a cooperative that let the water in instead of keeping it out."
    for i in range(1, 21)
)


# Fixtures that load a real model, directly or through another fixture: a test using any is slow.
MODEL_FIXTURES = frozenset(
    {
        "target_path",
        "drafter_path",
        "smollm_path",
        "gemma_path",
        "engine",
        "prompts",
        "make_window",
        "window",
        "mlx_default_pair",
    }
)


@pytest.fixture(autouse=True)
def own_ledger(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test's replies fill an acceptance ledger of its own: Auto reads a pair's recent acceptance
    from it, so one test's replies must not steer another's depth."""
    monkeypatch.setenv("DRAFTLIGHT_LEDGER", str(tmp_path_factory.mktemp("ledger") / "ledger.sqlite3"))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if MODEL_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


def _model_path(model: catalog.CatalogModel) -> Path:
    try:
        return catalog.resolve(model, download=False)
    except ModelNotAvailable as exc:
        pytest.skip(f"{model.key} is not on this machine ({exc}); `make models test-models` fetches it")


@pytest.fixture(scope="session")
def target_path() -> Path:
    return _model_path(catalog.DEFAULT_TARGET)


@pytest.fixture(scope="session")
def drafter_path() -> Path:
    return _model_path(catalog.DEFAULT_DRAFTER)


@pytest.fixture(scope="session")
def smollm_path() -> Path:
    return _model_path(catalog.SMOLLM2_135M)


@pytest.fixture(scope="session")
def gemma_path() -> Path:
    return _model_path(catalog.GEMMA3_270M)


@pytest.fixture(scope="session")
def mlx_default_pair(target_path, drafter_path) -> tuple[Path, Path]:
    """The default pair as MLX folders (4-bit), converted once into the user cache (`make mlx-models`)."""
    pytest.importorskip("mlx_lm")
    from engine.models.mlx_conversions import mlx_folder_for

    return mlx_folder_for(target_path), mlx_folder_for(drafter_path)


@pytest.fixture(scope="session")
def engine(target_path, drafter_path):
    from engine import Engine

    eng = Engine.load(target_path, drafter_path)
    yield eng
    eng.close()


@pytest.fixture(scope="session")
def prompts(engine) -> dict[str, list[int]]:
    """Each prompt rendered with the target's chat template, as token ids."""
    from engine import Message

    rendered = {k: engine.prompt_ids([Message("user", v)]) for k, v in PROMPTS.items()}
    rendered["long"] = engine.prompt_ids([Message("user", LONG_PROMPT)])
    assert len(rendered["long"]) > 560
    return rendered


@pytest.fixture(scope="session")
def oracle():
    """Stock llama.cpp built from the same source (`make oracle`), or a skip that says how to build it."""
    from engine.ruler.oracle_build import find_oracle

    build = find_oracle()
    if build is None:
        pytest.skip("stock llama.cpp is not built: run `make oracle` (draftlight oracle build) first")
    return build


@pytest.fixture(autouse=True)
def shared_box(monkeypatch):
    """Several test runs share this machine: a box profile measured in a test is judged by physics
    alone, not refused for the load and spread the others cause. tests/engine/measure/test_soundness.py
    judges load and spread on a clock and a load of its own."""
    from engine.measure import soundness

    monkeypatch.setattr(soundness, "MAX_OTHER_CPU", float("inf"))
    monkeypatch.setattr(soundness, "MAX_SPREAD", float("inf"))
