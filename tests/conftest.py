"""Fixtures of the integration tests (the root conftest.py has the shared ones)."""

from __future__ import annotations

import shutil
import sqlite3

import pytest


@pytest.fixture(scope="session")
def _warm_template(tmp_path_factory, handle):
    """A store made once per session: the devices' figures and the shared test store's
    compiled programs, no find-db, perf-db or calibration records."""
    from wticonv.runtime.device import list_devices
    from wticonv.db.store import Store

    folder = tmp_path_factory.mktemp("warm-store")
    store, shared = Store(folder), handle.device.store
    store.copy_device_records(shared, [info.key for info, _ in list_devices()])
    store.close()
    conn = sqlite3.connect(store.path, timeout=30)
    try:
        conn.execute("ATTACH DATABASE ? AS shared", (str(shared.path),))
        conn.execute("INSERT OR IGNORE INTO program_binaries "
                     "SELECT * FROM shared.program_binaries")
        conn.commit()
        conn.execute("DETACH DATABASE shared")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    return store.path


@pytest.fixture
def warm_store(_warm_template, tmp_path):
    """A fresh store in ``tmp_path`` that knows the devices' figures and holds the shared
    test store's compiled programs (so that a new device loads its kernels instead of
    building them, a second each on PoCL), but no find-db, perf-db or calibration
    records."""
    from wticonv.db.store import Store

    shutil.copyfile(_warm_template, tmp_path / _warm_template.name)
    return Store(tmp_path)


@pytest.fixture
def warm_handle(warm_store, handle):
    """A handle on a new :class:`~wticonv.runtime.device.Device` for the default OpenCL device (its
    own context, queue and kernel objects) that keeps its records in :func:`warm_store`:
    it ranks by the WTI models alone."""
    import wticonv
    from wticonv.runtime.device import select_device

    return wticonv.Handle(select_device(handle.device.info.index, warm_store))
