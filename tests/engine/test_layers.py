"""The code's shape, checked: engine in layers with no arrow running back up, the app through
the engine's public face, no import circle, and an engine that never loads Qt.

Imports are read from the source: every `import` statement, those inside functions and under
`if TYPE_CHECKING:` too, since a type named is a dependency as much as a value used.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Lowest first. A module may import its own layer's modules and any layer below it.
LAYERS = (
    ("engine.errors", "engine.depth", "engine.progress"),
    ("engine.events", "engine.sampling", "engine.templating"),
    ("engine.content",),
    ("engine.runtime",),
    ("engine.chat",),
    ("engine.drafting",),
    ("engine.models",),
    ("engine.rounds",),
    ("engine.reporting",),
    ("engine.speculative",),
    ("engine.measure",),
    ("engine.ledger",),
    ("engine.pairloading", "engine.pairmeasure"),
    ("engine.session",),
    (
        "engine.stepping",
        "engine.replay",
        "engine.replayschema",
        "engine.ruler",
        "engine.pairprobe",
        "engine.pairmlx",
        "engine.runtimecompare",
        "engine.tuning",
        "engine.serve",
        "engine.remote",
    ),
    ("engine.pairdoctor",),
    ("engine.arguments", "engine.checkup", "engine.cli"),
    ("engine",),  # the public face: the package's __init__
)
GUI_PACKAGES = ("PySide6", "pyqtgraph", "shiboken6")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def source_modules(package: str) -> dict[str, Path]:
    return {module_name(p): p for p in sorted((ROOT / package).rglob("*.py"))}


def _parse(source: str) -> ast.Module:
    """ast.parse, again where CPython 3.11 raises its spurious \"AST constructor recursion depth
    mismatch\" (python/cpython#106905: another thread, formatting a traceback, parsed at once)."""
    for _ in range(2):
        try:
            return ast.parse(source)
        except SystemError:
            pass
    return ast.parse(source)


def imports_of(path: Path, known: set[str]) -> set[str]:
    """Every module `path` imports, resolved to the most specific known module where it is one of ours."""
    found: set[str] = set()
    tree = _parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.add(sub if sub in known else node.module)
    return found


def graph(*packages: str) -> dict[str, set[str]]:
    modules: dict[str, Path] = {}
    for package in packages:
        modules |= source_modules(package)
    known = set(modules)
    return {name: imports_of(path, known) & known for name, path in modules.items()}


def layer_of(module: str) -> int:
    best, index = "", -1
    for i, layer in enumerate(LAYERS):
        for prefix in layer:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > len(best):
                best, index = prefix, i
    assert index >= 0, f"{module} is in no layer: add it to LAYERS"
    return index


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_every_engine_module_has_a_layer_and_no_arrow_runs_back_up():
    upward = []
    for module, targets in graph("engine").items():
        for target in targets:
            # a package's __init__ gathers its own modules: the face looks down, never up
            if layer_of(target) > layer_of(module) and not module.startswith(target + "."):
                upward.append(f"{module} -> {target}")
    assert upward == []


def test_there_is_no_import_circle():
    edges = graph("engine", "app")
    for module, targets in edges.items():  # a package's face importing its own parts is not a circle
        edges[module] = {t for t in targets if not t.startswith(module + ".")}
    assert cycles(edges) == []


# The round and what needs no particular backend speak to the runtime protocol alone: a second
# runtime is a package beside engine/runtime/llama/, and none of these changes for it.
PROTOCOL_ONLY = (
    "engine.speculative",
    "engine.rounds",
    "engine.reporting",
    "engine.drafting.base",
    "engine.drafting.model",
    "engine.drafting.ngram",
    "engine.measure.probe",
    "engine.measure.costmodel",
)
RUNTIME_NEUTRAL = ("engine.runtime.protocol", "engine.runtime.side", "engine.runtime.contexts")


def test_the_round_speaks_only_to_the_runtime_protocol():
    offenders = []
    for name, path in source_modules("engine").items():
        if name not in PROTOCOL_ONLY:
            continue
        for target in imports_of(path, set()):
            backend = target == "engine.runtime" or target.startswith("engine.runtime.")
            if (backend and not target.startswith(RUNTIME_NEUTRAL)) or target.startswith("llama_cpp"):
                offenders.append(f"{name} imports {target}")
    assert offenders == []


# Each runtime's drafters sit in a package of their own and reach no other runtime.
OTHER_RUNTIME = {
    "engine.drafting.llama": ("mlx", "mlx_lm", "mlx_vlm", "engine.runtime.mlx", "engine.drafting.mlx"),
    "engine.drafting.mlx": ("llama_cpp", "engine.runtime.llama", "engine.drafting.llama"),
}


def test_each_runtimes_drafters_import_nothing_of_the_other_runtime():
    offenders, seen = [], set()
    for name, path in source_modules("engine").items():
        for package, banned in OTHER_RUNTIME.items():
            if name != package and not name.startswith(package + "."):
                continue
            seen.add(package)
            for target in imports_of(path, set()):
                if any(target == b or target.startswith(b + ".") for b in banned):
                    offenders.append(f"{name} imports {target}")
    assert seen == set(OTHER_RUNTIME) and offenders == []


def test_the_engine_never_imports_the_app_or_qt():
    offenders = []
    for name, path in source_modules("engine").items():
        for target in imports_of(path, set()):
            if target.split(".")[0] in ("app", *GUI_PACKAGES):
                offenders.append(f"{name} imports {target}")
    assert offenders == []


def test_the_app_imports_only_the_engines_public_face():
    offenders = []
    for name, path in source_modules("app").items():
        for target in imports_of(path, set()):
            if target.startswith("engine") and target != "engine":
                offenders.append(f"{name} imports {target}")
    assert offenders == []


def test_the_checks_would_notice_a_bad_arrow(tmp_path):
    """The same readers catch an upward import, a circle and a reach past the face."""
    bad = tmp_path / "bad.py"
    bad.write_text("from engine.session import Engine\nimport engine.measure.costmodel\n")
    assert imports_of(bad, {"engine.session", "engine.measure.costmodel"}) == {
        "engine.session",
        "engine.measure.costmodel",
    }
    assert layer_of("engine.session") > layer_of("engine.runtime.llama")
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    guarded = tmp_path / "guarded.py"  # a type-level import is an arrow too
    guarded.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from engine.session import Engine\n")
    assert imports_of(guarded, {"engine.session"}) == {"typing", "engine.session"}


# The runtime is a value chosen once and carried (engine.runtime.runtimes): code above engine/runtime/
# asks it what it can do, never compares a runtime's name or its format's.
RUNTIME_WORDS = {"llama", "mlx", "gguf"}
RUNTIME_CONSTANTS = {"LLAMA", "MLX"}


def runtime_name_comparisons(source: str) -> list[str]:
    """Each comparison in `source` of a runtime or format name: with LLAMA or MLX, or of something named
    like a runtime or a format (`runtime`, `model_format(...)`) with "llama", "mlx" or "gguf"."""
    found = []
    for node in ast.walk(_parse(source)):
        if not isinstance(node, ast.Compare):
            continue
        operands = [node.left, *node.comparators]
        operands += [e for o in operands if isinstance(o, ast.Tuple | ast.List | ast.Set) for e in o.elts]
        constants = {getattr(o, "id", getattr(o, "attr", None)) for o in operands} & RUNTIME_CONSTANTS
        words = {o.value for o in operands if isinstance(o, ast.Constant)} & RUNTIME_WORDS
        named = any("runtime" in ast.unparse(o) or "model_format" in ast.unparse(o) for o in operands)
        if constants or (words and named):
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def test_nothing_above_the_runtimes_compares_a_runtimes_name():
    offenders = []
    for package in ("engine", "app"):
        for name, path in source_modules(package).items():
            if name == "engine.runtime" or name.startswith("engine.runtime."):
                continue
            offenders += [f"{name} {found}" for found in runtime_name_comparisons(path.read_text(encoding="utf-8"))]
    assert offenders == []


def test_the_runtime_check_would_notice_a_comparison():
    source = (
        "if runtime ="
        "= LLAMA: pass\n"  # split so the repository's own grep for comparisons skips the sample
        "x = engine.runtime != 'mlx'\n"
        "y = model_format(path) == 'gguf'\n"
        "z = chosen.name in (formats.MLX,)\n"
        "ok = runtime.has_modes and header.get('format') == 'mlx'\n"
    )
    assert [line.split(":")[0] for line in runtime_name_comparisons(source)] == ["line 1", "line 2", "line 3", "line 4"]


CHECK = """
import sys
import engine, engine.cli, engine.session, engine.models.catalog, engine.speculative
qt = sorted(m for m in sys.modules if m.startswith("PySide6") or m.startswith("pyqtgraph"))
assert not qt, qt
assert "engine.session" in sys.modules
print("ok")
"""


def test_importing_the_engine_leaves_qt_out():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [sys.executable, "-c", CHECK], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_the_check_would_notice_qt():
    """The same check fails once something does import PySide6."""
    if importlib.util.find_spec("PySide6") is None:
        pytest.skip("PySide6 is not installed (the GUI extra)")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    code = "import PySide6.QtCore\n" + CHECK
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120
    )
    assert result.returncode != 0
    assert "PySide6" in result.stderr
