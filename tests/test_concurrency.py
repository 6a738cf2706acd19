"""Concurrency: threads sharing a device, processes sharing a cache directory, and a
process killed (SIGKILL) in the middle of its database writes.

Every convolution is checked against the float64 reference; the database is checked with
SQLite's integrity check and read back through the store's own (validating) readers.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import threading
import warnings

import numpy as np
import pytest

import wticonv
from wticonv import ConvProblem as P
from wticonv.problem.reference import reference, rms_range
from wticonv.db.store import Store

#: Small problems of every direction; threads take them in turn.
PROBLEMS = [P(2, 4, 9, 11, 6, 3, 3, pad_h=1, pad_w=1),
            P(1, 6, 12, 10, 4, 3, 3, pad_h=1, pad_w=1, direction="bwd"),
            P(2, 4, 10, 10, 4, 1, 1, direction="wrw"),
            P(1, 8, 13, 13, 8, 3, 3, pad_h=1, pad_w=1, groups=8),
            P(2, 3, 15, 14, 5, 5, 5, pad_h=2, pad_w=2, stride_h=2, stride_w=2),
            P(1, 4, 16, 16, 8, 3, 3, pad_h=1, pad_w=1, direction="wrw")]


def _worker(h, seed: int, rounds: int, errors: list, solvers: list) -> None:
    rng = np.random.default_rng(seed)
    try:
        for i in range(rounds):
            p = PROBLEMS[(seed + i) % len(PROBLEMS)]
            if i % 3 == 2:            # a problem no thread has seen: a selection runs
                p = dataclasses.replace(p, h=p.h + seed + i, w=p.w + 1)
            data = {n: rng.uniform(-1, 1, s).astype(np.float32)
                    for n, s in (("x", p.x_shape), ("w", p.w_shape), ("y", p.y_shape))
                    if n != {"fwd": "y", "bwd": "x", "wrw": "w"}[p.direction]}
            sid = h.select(p).solver_id
            forced = "direct.naive" if i % 4 == 3 else None
            out = h.compute(p, solver=forced, **data)
            err = rms_range(out, reference(p, **data))
            tol = wticonv.solver_tolerance(h, forced or sid, p)
            solvers.append(forced or sid)
            if not err <= tol:
                errors.append(f"{forced or sid} on {p.key}: rms_range {err} > {tol}")
    except Exception as e:  # noqa: BLE001 - reported by the test
        errors.append(f"{type(e).__name__}: {e}")


def _hammer(h, seed: int, rounds: int, errors: list, solvers: list) -> None:
    """The same tiny problem, over and over, with one solver: many launches of one kernel."""
    p = P(1, 3, 7 + seed, 6 + seed, 4, 3, 3, pad_h=1, pad_w=1)
    rng = np.random.default_rng(seed)
    x, w = (rng.uniform(-1, 1, s).astype(np.float32) for s in (p.x_shape, p.w_shape))
    ref = reference(p, x=x, w=w)
    try:
        for _ in range(rounds):
            err = rms_range(h.compute(p, x=x, w=w, solver="direct.naive"), ref)
            solvers.append("direct.naive")
            if not err <= 1e-5:
                errors.append(f"direct.naive on {p.key}: rms_range {err}")
    except Exception as e:  # noqa: BLE001 - reported by the test
        errors.append(f"{type(e).__name__}: {e}")


def test_threads_sharing_one_handle_one_device_and_the_device(warm_handle):
    """Regression: two handles on one Device shared its kernel objects, and one thread could
    set a kernel's arguments between another's setting them and enqueueing (wrong outputs
    in about 1 run in 4, with a short switch interval)."""
    from wticonv.runtime.device import select_device

    a = warm_handle
    b = wticonv.Handle(a.device)                                   # same Device
    c = wticonv.Handle(select_device(a.device.info.index, a.device.store))  # its own
    errors, solvers = [], []
    handles = [a, a, b, b, c]
    threads = [threading.Thread(target=_worker, args=(h, k, 12, errors, solvers))
               for k, h in enumerate(handles)]
    threads += [threading.Thread(target=_hammer, args=(h, k, 150, errors, solvers))
                for k, h in enumerate([a, b, b])]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)                # switch threads as often as possible
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
    finally:
        sys.setswitchinterval(interval)
    assert not any(t.is_alive() for t in threads)
    assert not errors, errors[:5]
    assert len(solvers) == 12 * len(handles) + 450 and len(set(solvers)) >= 3, set(solvers)


_COMPUTE = r"""
import sys, numpy as np, wticonv
from wticonv import ConvProblem as P
from wticonv.measuring.find import find
from wticonv.problem.reference import reference, rms_range
k = int(sys.argv[1])
h = wticonv.get_handle()
rng = np.random.default_rng(k)
shared = P(1, 4, 8, 8, 4, 3, 3, pad_h=1, pad_w=1)
mine = P(1, 4, 8 + k, 9, 4, 3, 3, pad_h=1, pad_w=1, direction=("fwd", "bwd", "wrw")[k % 3])
for p in (shared, mine, shared.with_batch(2)):
    data = {n: rng.uniform(-1, 1, s).astype(np.float32)
            for n, s in (("x", p.x_shape), ("w", p.w_shape), ("y", p.y_shape))
            if n != {"fwd": "y", "bwd": "x", "wrw": "w"}[p.direction]}
    sid = h.select(p).solver_id
    err = rms_range(h.compute(p, **data), reference(p, **data))
    assert err <= wticonv.solver_tolerance(h, sid, p), (sid, p.key, err)
for p in (shared, mine):
    assert [r for r in find(h, p, iterations=1, search=False) if r.time_ms]
store = h.device.store
store.put_perf_record("proc|dev|1", mine.key, "direct.tiled", "1", f"cfg{k}", 1.0 + k, 2.0)
store.put_calibration(f"proc|dev|{k}", [("direct.tiled", "1", 1.5 + k, 3)])
print("done", k, flush=True)
"""


def test_processes_sharing_one_cache_directory(warm_store, handle):
    env = {**os.environ, "WTICONV_CACHE_DIR": str(warm_store.cache_dir),
           "WTICONV_DEVICE": handle.device.info.index}
    procs = [subprocess.Popen([sys.executable, "-c", _COMPUTE, str(k)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for k in range(3)]
    outs = [p.communicate(timeout=300) for p in procs]
    for k, (p, (out, err)) in enumerate(zip(procs, outs)):
        assert p.returncode == 0 and f"done {k}" in out, err[-2000:]
    store = Store(warm_store.cache_dir)
    assert _integrity(store) == "ok"
    with warnings.catch_warnings():
        warnings.simplefilter("error")                 # no record may be corrupt
        key = handle.device.key
        assert store.get_find_records(key, P(1, 4, 8, 8, 4, 3, 3, pad_h=1, pad_w=1).key)
        for k in range(3):
            mine = P(1, 4, 8 + k, 9, 4, 3, 3, pad_h=1, pad_w=1,
                     direction=("fwd", "bwd", "wrw")[k % 3])
            assert store.get_find_records(key, mine.key)
            assert store.get_perf_records("proc|dev|1")[(mine.key, "direct.tiled")][1] == \
                f"cfg{k}"
            assert store.get_calibration(f"proc|dev|{k}") == {"direct.tiled": ("1", 1.5 + k)}


_WRITER = r"""
import sys
from wticonv.db.store import Store
tag, limit = sys.argv[1], int(sys.argv[2])
store, dev = Store(), "writer|dev|" + tag
i = 0
while limit == 0 or i < limit:
    store.put_find_records(dev, f"{tag}-{i}", [(f"s{j}", "1", 16 * j, 1.0 + i + j / 64, 1 + j % 5,
                                                j % 2) for j in range(48)])
    store.put_perf_record(dev, f"{tag}-{i}", "direct.tiled", "1", f"c{i % 7}", 1.0 + i, 2.0 + i)
    store.put_calibration(dev, [(f"s{j}", "1", 1.0 + i / 1000 + j, i + 1) for j in range(24)])
    print(i, flush=True)
    i += 1
"""


def _integrity(store: Store) -> str:
    import sqlite3

    conn = sqlite3.connect(store.path, timeout=30)
    try:
        return conn.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        conn.close()


def _check_writer(store: Store, tag: str, last: int) -> None:
    """Every record the writer ``tag`` committed up to ``last`` is there and valid, and its
    calibration is one whole write (not a mix of two)."""
    dev = "writer|dev|" + tag
    perf = store.get_perf_records(dev)
    for i in range(last + 1):
        rec = store.get_find_records(dev, f"{tag}-{i}")
        assert len(rec) == 48 and rec["s5"] == ("1", 80, 1.0 + i + 5 / 64, 1, True), (i, rec)
        assert perf[(f"{tag}-{i}", "direct.tiled")] == ("1", f"c{i % 7}", 1.0 + i, 2.0 + i)
    cal = store.get_calibration(dev)
    i = round((cal["s0"][1] - 1.0) * 1000)
    assert i >= last and len(cal) == 24
    assert all(abs(cal[f"s{j}"][1] - (1.0 + i / 1000 + j)) < 1e-9 for j in range(24))


def test_a_writer_killed_mid_write_leaves_a_consistent_database(tmp_path):
    env = {**os.environ, "WTICONV_CACHE_DIR": str(tmp_path)}

    def start(tag, limit):
        return subprocess.Popen([sys.executable, "-c", _WRITER, tag, str(limit)], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    victim, other = start("a", 0), start("b", 400)
    last = -1
    for line in victim.stdout:                  # let it commit a while, then kill it
        last = int(line)
        if last >= 250:
            break
    os.kill(victim.pid, signal.SIGKILL)
    rest, _ = victim.communicate(timeout=60)
    last = max([last] + [int(v) for v in rest.split()])
    assert victim.returncode == -signal.SIGKILL
    out, err = other.communicate(timeout=300)    # the other writer is not blocked
    assert other.returncode == 0 and out.split()[-1] == "399", err[-2000:]
    store = Store(tmp_path)
    assert _integrity(store) == "ok"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _check_writer(store, "a", last)
        _check_writer(store, "b", 399)
        # the killed writer's uncommitted record (if any) is absent, not half there
        rec = store.get_find_records("writer|dev|a", f"a-{last + 1}")
        assert len(rec) in (0, 48)
    store.put_find_records("writer|dev|a", "after", [("s0", "1", 0, 1.0, 1, False)])
    assert store.get_find_records("writer|dev|a", "after")["s0"][2] == 1.0


@pytest.mark.parametrize("kill_at", [40, 120])
def test_kill_during_the_first_writes_of_a_new_database(tmp_path, kill_at):
    """A fresh cache directory: the kill may land while the schema is being created."""
    env = {**os.environ, "WTICONV_CACHE_DIR": str(tmp_path)}
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, "n", "0"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    last = -1
    for line in proc.stdout:
        last = int(line)
        if last >= kill_at:
            break
    os.kill(proc.pid, signal.SIGKILL)
    rest, _ = proc.communicate(timeout=60)
    last = max([last] + [int(v) for v in rest.split()])
    store = Store(tmp_path)
    assert _integrity(store) == "ok"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _check_writer(store, "n", last)
