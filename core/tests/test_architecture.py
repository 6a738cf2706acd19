"""The layers (docs/architecture.md): import rules, no cycles, the old module paths."""

from __future__ import annotations

import importlib
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_the_import_contracts_hold():
    lint = Path(sys.executable).with_name("lint-imports")
    if not lint.exists() or not (ROOT / "pyproject.toml").is_file():
        pytest.skip("import-linter is not installed (the test extra has it)")
    r = subprocess.run([str(lint), "--config", str(ROOT / "pyproject.toml")], cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-4000:]
    assert "0 broken" in r.stdout


def test_no_module_of_the_core_imports_the_root_package():
    # The root re-exports the public API from every layer: a module importing it would
    # depend on every layer above its own.
    import grimp

    graph = grimp.build_graph("wticonv")
    importers = {m for m in graph.find_modules_that_directly_import("wticonv")}
    assert importers == set(), sorted(importers)


def test_the_layers_are_acyclic_at_module_level():
    import grimp

    graph = grimp.build_graph("wticonv")
    for module in sorted(graph.modules):
        for imported in graph.find_modules_directly_imported_by(module):
            if imported == module:
                continue
            path = graph.find_shortest_chain(importer=imported, imported=module)
            assert path is None, f"{module} -> {imported} -> ... -> {module}: {path}"


@pytest.mark.parametrize("old, new", [
    ("wticonv.store", "wticonv.db.store"),
    ("wticonv.device", "wticonv.runtime.device"),
    ("wticonv.bench", "wticonv.measuring.bench"),
    ("wticonv.plugins", "wticonv.contract.registry"),
])
def test_an_old_module_path_is_the_new_module_with_a_warning(old, new):
    sys.modules.pop(old, None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = importlib.import_module(old)
    assert module is importlib.import_module(new)
    assert any(issubclass(w.category, DeprecationWarning) and f"{old} moved to {new}"
               in str(w.message) for w in caught)
    sys.modules.pop(old, None)


def test_every_moved_path_resolves():
    from wticonv._moved import MOVED

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        for old, new in MOVED.items():
            sys.modules.pop(old, None)
            assert importlib.import_module(old) is importlib.import_module(new), old
            sys.modules.pop(old, None)


def test_an_old_path_leaves_the_new_module_its_own_spec():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        sys.modules.pop("wticonv.peak", None)
        importlib.import_module("wticonv.peak")
    real = importlib.import_module("wticonv.runtime.peak")
    assert real.__spec__.name == "wticonv.runtime.peak" == real.__name__
    assert real.__spec__.origin.endswith("runtime/peak.py")
    assert importlib.reload(real).__name__ == "wticonv.runtime.peak"
    sys.modules.pop("wticonv.peak", None)


def test_the_root_package_leaves_torch_and_dask_optional():
    # wticonv.torch needs the torch extra and wticonv.fleet's clusters the cluster extra:
    # importing wticonv (and using it) loads neither of them nor what they import.
    code = ("import sys, wticonv; wticonv.conv2d; print(sorted(m for m in sys.modules if "
            "m.split('.')[0] in ('torch', 'dask', 'distributed') or m.startswith("
            "('wticonv.torch', 'wticonv.fleet'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"
