"""The module paths of wticonv 0.1 that moved into the layers, kept working for one version.

``import wticonv.store`` (or ``from wticonv.device import Device``) still works: a finder
on :data:`sys.meta_path` answers each old path with the module's new home (the same
module object, so attributes and monkeypatching behave as before) and a
``DeprecationWarning`` naming the new path. See docs/architecture.md for the layers.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

__all__ = ["MOVED"]

#: Old module path -> new module path.
MOVED = {
    "wticonv.keys": "wticonv.problem",
    "wticonv.tensors": "wticonv.problem.tensors",
    "wticonv.networks": "wticonv.workloads.networks",
    "wticonv.driver": "wticonv.workloads.driver",
    "wticonv.onnx_models": "wticonv.workloads.onnx",
    "wticonv.store": "wticonv.db.store",
    "wticonv.records": "wticonv.db.records",
    "wticonv.hookspecs": "wticonv.contract.hookspecs",
    "wticonv.plugins": "wticonv.contract.registry",
    "wticonv.ownership": "wticonv.contract.ownership",
    "wticonv.kernelfiles": "wticonv.runtime.kernelfiles",
    "wticonv.device": "wticonv.runtime.device",
    "wticonv.peak": "wticonv.runtime.peak",
    "wticonv.programs": "wticonv.runtime.programs",
    "wticonv.find": "wticonv.measuring.find",
    "wticonv.tune": "wticonv.measuring.tune",
    "wticonv.calibrate": "wticonv.measuring.calibrate",
    "wticonv.evaluate": "wticonv.measuring.evaluate",
    "wticonv.bench": "wticonv.measuring.bench",
}


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds the old paths of :data:`MOVED`; loads each as its new module."""

    def __init__(self) -> None:
        self._specs: dict = {}

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        new = MOVED[spec.name]
        warnings.warn(f"{spec.name} moved to {new} (wticonv 0.2); import it from there: "
                      "the old path goes in the next version", DeprecationWarning,
                      stacklevel=2)
        module = importlib.import_module(new)
        self._specs[spec.name] = module.__spec__   # the import system overwrites it
        return module

    def exec_module(self, module):
        # The new module is loaded already; it keeps its own spec (so that reload and
        # introspection see the real module, not the alias).
        for name, real in list(self._specs.items()):
            if real.name == module.__name__:
                module.__spec__ = real
                del self._specs[name]


def install() -> None:
    """Put the finder on :data:`sys.meta_path` (once)."""
    if not any(isinstance(f, _Alias) for f in sys.meta_path):
        sys.meta_path.append(_Alias())
