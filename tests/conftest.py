"""Shared fixtures: the real models, found in the user cache (`make test` puts them there).

Every test that asks for a real model (or a window, which loads one) is marked `slow`:
`make test-fast` (`pytest -m "not slow"`) runs the rest. A model that is missing skips
the tests that need it, with one line saying how to fetch it.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from engine.errors import ModelNotAvailable
from engine.models import catalog

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
# Replies made by tests fill an acceptance ledger of their own, never the user's.
os.environ["DRAFTLIGHT_LEDGER"] = str(Path(tempfile.mkdtemp(prefix="draftlight-ledger-")) / "ledger.sqlite3")

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
