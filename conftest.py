"""Shared test set-up for every test directory of the repository (core, plugins,
integration): the core's ``core/tests/conftest.py``, loaded here so that its fixtures and
hooks apply everywhere (it lives in the core so that the core's sdist ships it).

Persistent state of the tests goes to this repository's ``.cache/wticonv-tests``.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent
os.environ.setdefault("WTICONV_CACHE_DIR", str(ROOT / ".cache" / "wticonv-tests"))

_spec = importlib.util.spec_from_file_location("wticonv_core_tests_conftest",
                                               ROOT / "core" / "tests" / "conftest.py")
_shared = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_shared)
globals().update({k: v for k, v in vars(_shared).items()
                  if not k.startswith("__") and k not in ("ROOT",)})
