"""Test set-up of the core's tests, shared with every test directory of the repository
(its root conftest.py loads this file), and shipped in the core's sdist, so that the
core's tests run from it too.

- Persistent state goes to ``.cache/wticonv-tests`` (not the user's cache) of the
  repository (or of the unpacked sdist), so that compiled programs and measured device
  figures are reused across test runs and subprocesses; tests that need a clean store
  make their own.
- No system database is read (``WTICONV_SYSTEM_DB=""``), so that an installed one does
  not change what the tests rank.
- ``@pytest.mark.gpu`` tests are skipped when no OpenCL GPU is present.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# The test modules import their shared helper modules (db_transfer_helpers.py) by name:
# with --import-mode=importlib no test folder is on sys.path, so this one is put there.
if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))

ROOT = Path(__file__).resolve().parents[1]       # core/ (or the unpacked sdist)
os.environ.setdefault("WTICONV_CACHE_DIR", str(ROOT / ".cache" / "wticonv-tests"))
os.environ.pop("WTICONV_LOAD_PLUGINS", None)
os.environ.pop("WTICONV_DISABLE_SOLVERS", None)
os.environ.pop("WTICONV_TRACE", None)
# No system database (wticonv.db.system): the tests rank with the records of their own
# stores, whatever data distribution is installed; the tests of system databases name
# their files (or unset it) themselves.
os.environ["WTICONV_SYSTEM_DB"] = ""


def _has_gpu() -> bool:
    # wticonv's own classification: a simulator such as Oclgrind (installed by the test
    # extra) reports the GPU type too, but is not a GPU.
    try:
        from wticonv.runtime.device import list_devices

        return any(info.kind == "gpu" for info, _ in list_devices())
    except Exception:  # noqa: BLE001 - no OpenCL at all means no GPU
        return False


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs an OpenCL GPU device; skipped when none "
                            "is present")
    config.addinivalue_line("markers", "slow: takes more than a few seconds on a 2-core CPU")


def pytest_collection_modifyitems(config, items):
    if not any("gpu" in item.keywords for item in items) or _has_gpu():
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


@pytest.fixture
def own_store(tmp_path, handle):
    """A fresh store under ``tmp_path`` that already knows the devices' figures (so nothing
    is measured again) but holds no find-db, perf-db or calibration records, unlike the
    shared test store other tests rank with."""
    from wticonv.db.store import Store
    from wticonv.runtime.device import list_devices

    store = Store(tmp_path)
    store.copy_device_records(handle.device.store, [info.key for info, _ in list_devices()])
    return store


@pytest.fixture
def own_handle(own_store, handle):
    """A handle on the default device that keeps its records in :func:`own_store`."""
    import wticonv
    from wticonv.runtime.device import select_device

    return wticonv.Handle(select_device(handle.device.info.index, own_store))


@pytest.fixture
def fake_dist(tmp_path, monkeypatch):
    """Write throw-away installed distributions, as ``pip install`` would leave them.

    ``fake_dist(dist, modules, entry_points)`` writes each module ``{name: source}`` and a
    ``<dist>-1.0.dist-info`` folder whose ``entry_points.txt`` declares ``entry_points``
    (``{name: "module:attr"}``) in the group ``wticonv.solvers``, into a temporary folder
    that is put on ``sys.path`` (and returned, for subprocesses' ``PYTHONPATH``).
    """
    import sys
    import textwrap

    monkeypatch.syspath_prepend(str(tmp_path))
    written: list[str] = []

    def make(dist: str, modules: dict[str, str], entry_points: dict[str, str]):
        for name, code in modules.items():
            (tmp_path / f"{name}.py").write_text(textwrap.dedent(code))
            written.append(name)
        info = tmp_path / f"{dist.replace('-', '_')}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
        eps = "\n".join(f"{k} = {v}" for k, v in entry_points.items())
        (info / "entry_points.txt").write_text(f"[wticonv.solvers]\n{eps}\n")
        return tmp_path

    yield make
    for name in written:
        sys.modules.pop(name, None)


@pytest.fixture
def system(tmp_path, monkeypatch):
    """``system(*records, name=...)`` writes a system database file (records of
    :class:`wticonv.db.transfer.Record`, or its ``lines``) and makes it the only one
    (WTICONV_SYSTEM_DB, each call adding a file); returns its path
    (test_system_db.py, test_system_db_cli.py)."""
    from wticonv.db.system import ENV, reset_system_databases
    from wticonv.db.transfer import format_db

    paths = []

    def make(*records, name="sys.jsonl", lines=None):
        path = tmp_path / name
        path.write_text("\n".join(lines if lines is not None else format_db(records)) + "\n")
        paths.append(str(path))
        monkeypatch.setenv(ENV, ":".join(paths))
        return path

    yield make
    reset_system_databases()
