"""Shared test set-up for every test directory (core, plugins, integration).

- Persistent state goes to ``.cache/wticonv-tests`` (not the user's cache), so that
  compiled programs and measured device figures are reused across test runs and
  subprocesses; tests that need a clean store make their own.
- ``@pytest.mark.gpu`` tests are skipped when no OpenCL GPU is present.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent
os.environ.setdefault("WTICONV_CACHE_DIR", str(ROOT / ".cache" / "wticonv-tests"))
os.environ.pop("WTICONV_LOAD_PLUGINS", None)
os.environ.pop("WTICONV_DISABLE_SOLVERS", None)
os.environ.pop("WTICONV_TRACE", None)


def _has_gpu() -> bool:
    try:
        import pyopencl as cl

        return any(d.type & cl.device_type.GPU for p in cl.get_platforms()
                   for d in p.get_devices())
    except Exception:  # noqa: BLE001 - no OpenCL at all means no GPU
        return False


def pytest_collection_modifyitems(config, items):
    if _has_gpu():
        return
    skip = pytest.mark.skip(reason="no OpenCL GPU device on this machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def handle():
    """The default handle (default device, every installed solver), shared by all tests."""
    import wticonv

    return wticonv.get_handle()


@pytest.fixture(scope="session")
def gpu_handle():
    """A handle on the first GPU (only for @pytest.mark.gpu tests)."""
    import wticonv

    return wticonv.Handle("gpu")
