"""The SQLite store and the program cache: persistence, counters, corruption."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from wticonv import Device, KernelBuildError
from wticonv.runtime.programs import ProgramCache
from wticonv.db import store as store_module
from wticonv.db.store import Store

SRC = "__kernel void twice(__global float *a) { a[get_global_id(0)] *= 2.0f; }\n"


def test_store_round_trips(tmp_path):
    s = Store(tmp_path)
    assert s.get_device_figures("dev") is None
    s.put_device_figures("dev", 1.5e11, 4e10)
    s.put_program_binary("dev", "abc", b"\x00\x01binary")
    s.put_device_verdict("old#probe-1", False, "error: unknown target CPU 'generic'")
    s.put_device_verdict("dev#probe-1", True)
    s2 = Store(tmp_path)  # a second opener sees the committed rows
    assert s2.get_device_figures("dev") == (1.5e11, 4e10)
    assert s2.get_program_binary("dev", "abc") == b"\x00\x01binary"
    assert s2.get_device_verdict("old#probe-1") == (False, "error: unknown target CPU 'generic'")
    assert s2.get_device_verdict("dev#probe-1") == (True, "")
    assert s2.get_device_verdict("dev#probe-2") is None
    assert s2.summary() == {"device_figures": 1, "launch_overhead": 0, "device_unusable": 0,
                            "device_verdicts": 2,
                            "program_binaries": 1, "find_db": 0, "calibration": 0, "calibration_models": 0,
                            "perf_db": 0}
    copy = Store(tmp_path / "copy")
    copy.copy_device_records(s2, ["old"])
    assert copy.get_device_verdict("old#probe-1") == (False, "error: unknown target CPU 'generic'")
    assert copy.get_device_verdict("dev#probe-1") is None and copy.get_device_figures("dev") is None
    # Forgetting one device's verdicts leaves a device whose key it prefixes alone.
    s2.put_device_verdict("old-2#probe-1", True)
    assert s2.forget_device_verdicts("old") == 1
    assert s2.get_device_verdict("old#probe-1") is None
    assert s2.get_device_verdict("old-2#probe-1") == (True, "")
    s2.clear()
    assert s.summary() == {"device_figures": 0, "launch_overhead": 0, "device_unusable": 0,
                           "device_verdicts": 0,
                           "program_binaries": 0, "find_db": 0, "calibration": 0, "calibration_models": 0,
                           "perf_db": 0}


def test_corrupt_database_is_moved_aside(tmp_path):
    (tmp_path / "wticonv.sqlite").write_bytes(b"this is not a database" * 100)
    with pytest.warns(UserWarning, match="cannot be used"):
        s = Store(tmp_path)
        s.put_device_figures("dev", 1.0, 2.0)
    assert s.get_device_figures("dev") == (1.0, 2.0)
    aside = [p.name for p in tmp_path.iterdir() if ".corrupt-" in p.name]
    assert len(aside) == 1
    # corrupted again within the same second: the first copy is kept, not overwritten
    s.close()
    (tmp_path / "wticonv.sqlite").write_bytes(b"damaged again" * 100)
    for suffix in ("-wal", "-shm"):
        (tmp_path / f"wticonv.sqlite{suffix}").unlink(missing_ok=True)
    with pytest.warns(UserWarning, match="cannot be used"):
        Store(tmp_path).get_device_figures("dev")
    copies = sorted(p for p in tmp_path.iterdir() if p.name.endswith(tuple("0123456789"))
                    and ".corrupt-" in p.name)
    assert len(copies) == 2
    assert {p.read_bytes()[:13] for p in copies} == {b"this is not a", b"damaged again"}


def test_program_built_once_then_loaded_from_disk(handle, tmp_path):
    dev = handle.device
    store = Store(tmp_path)
    cache = ProgramCache(dev.context, dev.cl_device, dev.key, store)
    p1 = cache.build(SRC, "-DX=1")
    p2 = cache.build(SRC, "-DX=1")
    assert p1 is p2
    assert (cache.counters.source_builds, cache.counters.memory_hits) == (1, 1)
    cache.build(SRC, "-DX=2")  # other options: another build
    assert cache.counters.source_builds == 2
    fresh = ProgramCache(dev.context, dev.cl_device, dev.key, store)
    prg = fresh.build(SRC, "-DX=1")
    assert (fresh.counters.source_builds, fresh.counters.binary_loads) == (0, 1)
    assert prg.twice is not None  # the loaded binary has the kernel


def test_programs_persist_across_processes(handle, tmp_path):
    script = textwrap.dedent(f"""
        import wticonv
        from wticonv.db.store import Store
        h = wticonv.get_handle()
        dev = wticonv.Device(h.device.cl_device, h.device.info, Store({str(tmp_path)!r}))
        dev.build({SRC!r})
        c = dev.programs.counters
        print(c.source_builds, c.binary_loads)
    """)
    env = dict(os.environ)
    runs = [subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                           env=env, check=True).stdout.split()[-2:] for _ in range(2)]
    assert runs == [["1", "0"], ["0", "1"]]


def test_build_error_carries_the_log(handle, tmp_path):
    dev = Device(handle.device.cl_device, handle.device.info, Store(tmp_path))
    with pytest.raises(KernelBuildError) as e:
        dev.build("__kernel void broken(__global float *a) { a[0] = undefined_name; }")
    assert "undefined_name" in str(e.value)
    assert dev.info.name in str(e.value)


def test_foreign_schema_is_moved_aside(tmp_path):
    import sqlite3

    conn = sqlite3.connect(tmp_path / "wticonv.sqlite")
    conn.execute("CREATE TABLE device_figures (device_key TEXT, peak TEXT)")
    conn.commit()
    conn.close()
    with pytest.warns(UserWarning, match="lacks column"):
        s = Store(tmp_path)
        s.put_device_figures("dev", 3.0, 4.0)
    assert s.get_device_figures("dev") == (3.0, 4.0)


def test_non_numeric_figures_are_ignored(tmp_path):
    s = Store(tmp_path)
    s.put_device_figures("dev", 1.0, 2.0)
    s._write("INSERT OR REPLACE INTO device_figures VALUES (?, ?, ?, ?)",
             (store_module._figures_key("dev"), "fast", 1.0, 0.0))
    assert s.get_device_figures("dev") is None


def test_figures_of_an_older_method_are_measured_again_and_drop_the_calibration(tmp_path):
    # A store written before FIGURES_METHOD 2 holds the figures under the bare device key,
    # measured with mad() (half the peak on CPUs with FMA units), and a calibration fitted
    # to them.
    key = "Portable Computing Language|cpu|3.1"
    s = Store(tmp_path)
    s._write("INSERT INTO device_figures VALUES (?, ?, ?, ?)", (key, 2.2e11, 2e10, 0.0))
    s.put_calibration(key, [("direct.naive", "0.1.0", 0.5, 10)])
    s.put_correction(key, [("direct.naive", "0.1.0", ("bias",), [0.3], 10)])
    s.put_calibration("other", [("direct.naive", "0.1.0", 0.7, 10)])
    assert s.get_device_figures(key) is None          # so the device is measured again
    assert s.get_calibration(key) and s.get_correction(key)
    with pytest.warns(UserWarning, match=r"'cpu' were measured again .* run `wticonv "
                                         r"calibrate` again"):
        assert s.put_device_figures(key, 4.4e11, 2e10) == (4.4e11, 2e10)
    assert s.get_device_figures(key) == (4.4e11, 2e10)
    assert s.get_calibration(key) == {} and s.get_correction(key) == {}
    assert s.get_calibration("other") == {"direct.naive": ("0.1.0", 0.7)}
    assert s.summary()["device_figures"] == 1
    # measuring again later keeps the calibration made since
    s.put_calibration(key, [("direct.naive", "0.1.0", 0.9, 10)])
    s.put_device_figures(key, 4.5e11, 2e10, keep_best=True)
    assert s.get_calibration(key) == {"direct.naive": ("0.1.0", 0.9)}


def test_keep_best_figures(tmp_path):
    s = Store(tmp_path)
    assert s.put_device_figures("dev", 100.0, 10.0) == (100.0, 10.0)
    assert s.put_device_figures("dev", 80.0, 12.0, keep_best=True) == (100.0, 12.0)
    assert s.get_device_figures("dev") == (100.0, 12.0)


def test_cache_dir_that_is_a_file_falls_back_to_a_temporary_one(tmp_path):
    f = tmp_path / "afile"
    f.write_text("x")
    s = Store(f)
    with pytest.warns(UserWarning, match=r"cache directory .*afile cannot be used .*"
                                         r"temporary .* WTICONV_CACHE_DIR"):
        assert s.get_device_figures("dev") is None
    s.put_device_figures("dev", 100.0, 12.0)
    assert s.get_device_figures("dev") == (100.0, 12.0)
    assert s.cache_dir != f and s.path.is_file() and f.read_text() == "x"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes read-only directories")
def test_read_only_cache_dir_falls_back_to_a_temporary_one(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        s = Store(ro)
        with pytest.warns(UserWarning, match="not writable"):
            s.put_device_figures("dev", 1.0, 2.0)
        assert s.get_device_figures("dev") == (1.0, 2.0) and not any(ro.iterdir())
    finally:
        ro.chmod(0o700)


#: Byte offsets that land in the pages of a populated database (page size 4096).
def _damage(path, page: int) -> None:
    with open(path, "r+b") as f:
        f.seek((page - 1) * 4096)
        f.write(b"\xab" * 4096)


def _populated(folder):
    s = Store(folder)
    s.put_device_figures("dev", 100.0, 12.0)
    s.put_program_binary("dev", "d" * 64, b"binary" * 100)
    s.put_find_records("dev", "key", [("a.b", "1", 0, 1.5, 3, False)])
    s.put_calibration("dev", [("a.b", "1", 1.2, 4)])
    s.put_perf_record("dev", "key", "a.b", "1", "cfg", 1.0, 2.0)
    s.close()
    return s.path


@pytest.mark.parametrize("op", ["read", "write", "clear", "summary"])
def test_damage_found_by_a_query_moves_the_file_aside_and_the_query_runs_again(tmp_path, op):
    """Pages damaged after the file was opened (not its header): the query that meets the
    damage gets a fresh database instead of an error, and the damaged file is kept."""
    path = _populated(tmp_path)
    pages = path.stat().st_size // 4096
    s = Store(tmp_path)
    s.get_device_figures("dev")          # opened and checked while still intact
    for page in range(2, pages + 1):     # every page but the header
        _damage(path, page)
    with pytest.warns(UserWarning, match=r"cannot be used .*moved it to .*corrupt"):
        if op == "read":
            assert s.get_program_binary("dev", "d" * 64) is None
            assert s.get_find_records("dev", "key") == {}
        elif op == "write":
            s.put_program_binary("dev", "e" * 64, b"x")
            assert s.get_program_binary("dev", "e" * 64) == b"x"
        elif op == "clear":
            s.clear()
        else:
            assert set(s.summary().values()) == {0}
    assert s.get_device_figures("dev") is None   # a fresh database
    assert list(tmp_path.glob("wticonv.sqlite.corrupt-*"))


def test_a_damaged_program_binary_is_deleted_not_loaded(tmp_path):
    """A binary whose bytes were changed on disk (the page chain intact, so SQLite sees
    nothing wrong) would crash the driver: it is refused, deleted and None returned."""
    import sqlite3

    s = Store(tmp_path)
    s.put_program_binary("dev", "d" * 64, b"binary" * 100)
    assert s.get_program_binary("dev", "d" * 64) == b"binary" * 100
    s.close()
    conn = sqlite3.connect(s.path)
    blob = bytearray(conn.execute("SELECT binary FROM program_binaries").fetchone()[0])
    blob[100] ^= 0xFF
    conn.execute("UPDATE program_binaries SET binary = ?", (bytes(blob),))
    conn.commit()
    conn.close()
    with pytest.warns(UserWarning, match="stored program binary .* is damaged"):
        assert s.get_program_binary("dev", "d" * 64) is None
    assert s.summary()["program_binaries"] == 0


@pytest.mark.filterwarnings("ignore:.*moved it to:UserWarning")
def test_a_file_damaged_under_an_open_store_is_replaced_for_every_thread(tmp_path):
    """Another thread finds the file damaged when it first opens it: the file is moved
    aside, the new one gets its tables, and the thread that had the old file open moves
    to the new one too."""
    import threading

    first = Store(tmp_path)
    first.put_device_figures("dev", 100.0, 12.0)
    first.close()                                        # written through to the file
    s = Store(tmp_path)
    assert s.get_device_figures("dev") == (100.0, 12.0)  # this thread's connection is open
    s.path.write_bytes(os.urandom(5000))
    got = []

    def other():
        got.append(s.get_device_figures("dev"))
        s.put_device_figures("dev2", 1.0, 2.0)
        got.append(s.get_device_figures("dev2"))

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert got == [None, (1.0, 2.0)]
    assert s.get_device_figures("dev2") == (1.0, 2.0)    # the new file, from this thread
    assert len(list(tmp_path.glob("wticonv.sqlite.corrupt-*[0-9]"))) == 1


def test_stores_of_one_unusable_directory_share_one_temporary_one(tmp_path):
    f = tmp_path / "afile"
    f.write_text("x")
    with pytest.warns(UserWarning, match="cannot be used") as caught:
        a, b = Store(f), Store(f)
        a.put_device_figures("dev", 1.0, 2.0)
        assert b.get_device_figures("dev") == (1.0, 2.0)
    assert a.cache_dir == b.cache_dir and a.fallback_from == f
    assert sum("cannot be used" in str(w.message) for w in caught) == 1
