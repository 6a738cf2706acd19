"""Kernel faults: a solver whose kernels do not build, or that runs out of memory, is set
aside for the problem with a SolverWarning and the next candidate runs; nothing is left
half-written and the databases are not touched by the failed attempt.

Faults are injected: the device's program builder raises a build error for the chosen
solver's sources, buffer allocation (pyopencl.Buffer) or a kernel launch raises
pyopencl's MemoryError. Each test runs on a handle of its own (warm_handle: a new device
object, its own store), ranked by the WTI models alone.
"""

from __future__ import annotations

import dataclasses
import math
import sqlite3
import warnings

import numpy as np
import pyopencl as cl
import pytest

import wticonv
from wticonv import ConvProblem as P
from wticonv import SolverWarning, hookimpl
from wticonv.errors import DeviceMemoryError, KernelBuildError, SolverRunError
from wticonv.runtime.programs import ProgramCache
from wticonv.problem.reference import reference, rms_range
from wticonv.problem.tensors import ConvTensors
from wticonv.testing.launches import RecordingDevice, record_run

OUT = {"fwd": "y", "bwd": "x", "wrw": "w"}


def _data(p, seed=0):
    rng = np.random.default_rng(seed)
    return {n: rng.uniform(-1, 1, s).astype(np.float32)
            for n, s in (("x", p.x_shape), ("w", p.w_shape), ("y", p.y_shape))
            if n != OUT[p.direction]}


def _run(h, p, data, fill=np.nan, **kw):
    """Run ``p`` through ``h.run`` with the output buffer filled with ``fill`` first;
    returns (RunResult, output array)."""
    dev, shapes = h.device, {"x": p.x_shape, "w": p.w_shape, "y": p.y_shape}
    out = OUT[p.direction]
    bufs = {n: dev.upload(data[n] if n != out else np.full(s, fill, np.float32))
            for n, s in shapes.items()}
    try:
        res = h.run(p, ConvTensors(bufs["x"], bufs["w"], bufs["y"]), **kw)
        return res, dev.download(bufs[out], shapes[out])
    finally:
        for b in bufs.values():
            b.release()


def _assert_correct(h, p, data, res, out):
    ref = reference(p, **data)
    err = rms_range(out, ref)
    tol = wticonv.solver_tolerance(h, res.solver_id, p)
    assert np.isfinite(out).all() and err <= tol, (res.solver_id, err, tol)


def _sources(h, sid, p):
    """The OpenCL sources solver ``sid`` builds for ``p`` (planned, nothing built)."""
    rec = record_run(h.registry, sid, p, RecordingDevice(h.device.kind))
    return {ln.source for ln in rec.launches}


def _rows(store):
    """Every record of the store's measured tables and its program digests (after an
    integrity check)."""
    conn = sqlite3.connect(store.path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        return {t: set(conn.execute(f"SELECT * FROM {t}").fetchall())
                for t in ("find_db", "perf_db", "calibration")} | {
            "programs": {r[0] for r in conn.execute("SELECT digest FROM program_binaries")}}
    finally:
        conn.close()


def test_a_kernel_that_does_not_build_sets_its_solver_aside(warm_handle, monkeypatch):
    h = warm_handle
    p = P(2, 16, 16, 16, 16, 3, 3, pad_h=1, pad_w=1)
    data = _data(p)
    sel = h.select(p)
    target = sel.chosen.solver_id
    failing = _sources(h, target, p)
    # every candidate built from a failing source fails; the first other one runs, so the
    # failing ones ranked before it are tried (and warn), those after it are not reached
    failing_ids = [v.solver_id for v in sel.candidates
                   if _sources(h, v.solver_id, p) & failing]
    expected = next(v.solver_id for v in sel.candidates if v.solver_id not in failing_ids)
    ranked = [v.solver_id for v in sel.candidates]
    failed = [sid for sid in failing_ids if ranked.index(sid) < ranked.index(expected)]
    attempts = []
    real_build = h.device.build

    def build(source, options=""):
        if source in failing:
            attempts.append((source, options))
            raise KernelBuildError(f"OpenCL program failed to build on {h.device.info.name} "
                                   f"(options {options!r}):\n<kernel>:7:3: error: "
                                   "injected build failure")
        return real_build(source, options)

    monkeypatch.setattr(h.device, "build", build)
    before = _rows(h.device.store)
    with pytest.warns(SolverWarning) as caught:
        res, out = _run(h, p, data)
    assert res.solver_id == expected and expected != target
    _assert_correct(h, p, data, res, out)
    texts = [str(w.message) for w in caught if issubclass(w.category, SolverWarning)]
    assert len(texts) == len(failed)
    for sid, text in zip(failed, texts):
        assert f"solver {sid!r} failed to run" in text and "its kernels do not build" in text
        assert "injected build failure" in text and "set aside" in text
    # set aside: the next run neither builds nor warns again
    n = len(attempts)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SolverWarning)
        res2, out2 = _run(h, p, data)
    assert res2.solver_id == expected and len(attempts) == n
    np.testing.assert_array_equal(out2, out)
    # nothing recorded for the failed builds, no measured record written
    after = _rows(h.device.store)
    assert after["find_db"] == after["perf_db"] == after["calibration"] == set()
    new_programs = after["programs"] - before["programs"]
    assert not new_programs & {ProgramCache.digest(s, o) for s, o in attempts}
    # forget_selections() gives the set-aside solvers another chance
    h.forget_selections()
    with pytest.warns(SolverWarning, match=repr(target)):
        _run(h, p, data)
    assert len(attempts) > n


def test_out_of_memory_on_the_workspace_sets_the_solver_aside(warm_handle, monkeypatch):
    # a handle of its own: the workspace grows only, and one that earlier tests grew
    # might already hold the chosen solver's without allocating
    h = wticonv.Handle(warm_handle.device)
    p = P(2, 16, 16, 16, 16, 3, 3, pad_h=1, pad_w=1, direction="wrw")
    data = _data(p)
    sel = h.select(p)
    # Put the candidate with the largest workspace first (which ones the device's models
    # rank first differs between the CPU and the GPU): its allocation is refused.
    chosen = max((v for v in sel.candidates if v.workspace), key=lambda v: v.workspace)
    rest = [v for v in sel.candidates if v is not chosen]
    sel = dataclasses.replace(sel, candidates=[chosen, *rest])
    nxt = next(v for v in rest if v.workspace != chosen.workspace)
    real = cl.Buffer
    refused = []

    def buffer(context, flags, size=0, hostbuf=None):
        if size == chosen.workspace:
            refused.append(size)
            raise cl.MemoryError("clCreateBuffer failed: MEM_OBJECT_ALLOCATION_FAILURE")
        return real(context, flags, size, hostbuf)

    monkeypatch.setattr(cl, "Buffer", buffer)
    with pytest.warns(SolverWarning, match=rf"solver {chosen.solver_id!r} failed to run .*"
                                           r"out of memory.*MEM_OBJECT_ALLOCATION_FAILURE"):
        res, out = _run(h, p, data, selection=sel)
    assert refused == [chosen.workspace]
    assert res.solver_id == nxt.solver_id
    _assert_correct(h, p, data, res, out)
    # the handle's workspace is consistent after the failed allocation
    assert h._workspace_bytes in (0, nxt.workspace)


def test_out_of_memory_mid_run_leaves_nothing_half_written(warm_handle, monkeypatch):
    """direct.tiled's stride-2 backward data pass is one launch per stride phase of dx: the
    first phase is written, the second launch fails; the next solver must overwrite dx."""
    h = warm_handle
    p = P(2, 32, 30, 30, 32, 3, 3, pad_h=1, pad_w=1, stride_h=2, stride_w=2, direction="bwd")
    data = _data(p)
    sel = h.select(p, workspace_limit=0)          # gemm.im2col needs workspace: out
    # direct.tiled first, whatever the device's models rank first
    tiled = next(v for v in sel.candidates if v.solver_id == "direct.tiled")
    rest = [v for v in sel.candidates if v is not tiled]
    sel = dataclasses.replace(sel, candidates=[tiled, *rest])
    nxt = rest[0].solver_id
    real = h.device.enqueue_kernel
    launches = []

    def enqueue(kernel, global_size, local_size, *args):
        if kernel.function_name == "tiled_conv":
            launches.append(global_size)
            if len(launches) == 2:
                h.device.queue.finish()                      # phase 1 is in dx now
                raise cl.MemoryError("clEnqueueNDRangeKernel failed: "
                                     "MEM_OBJECT_ALLOCATION_FAILURE")
        return real(kernel, global_size, local_size, *args)

    monkeypatch.setattr(h.device, "enqueue_kernel", enqueue)
    with pytest.warns(SolverWarning, match=r"'direct.tiled' failed to run .*out of memory"):
        res, out = _run(h, p, data, fill=1e30, selection=sel)
    assert len(launches) == 2 and res.solver_id == nxt
    _assert_correct(h, p, data, res, out)


class _Scribbler:
    """Ranks first, writes NaN over the whole output, then fails."""

    solver_id = "fault.scribbler"
    max_wti = 10.0

    @hookimpl
    def is_applicable(self, problem):
        return problem.direction == "fwd"

    @hookimpl
    def is_dynamic(self):
        return True

    @hookimpl
    def get_wti(self):
        return 10.0

    @hookimpl
    def workspace_size(self):
        return 0

    @hookimpl
    def run(self, problem, device, tensors):
        nbytes = 4 * math.prod(problem.y_shape)
        cl.enqueue_fill_buffer(device.queue, tensors.y, np.float32(np.nan), 0, nbytes)
        raise RuntimeError("scribbled, then crashed")


def test_the_next_solver_overwrites_what_a_failed_one_wrote(warm_handle):
    from wticonv.contract.registry import SolverRegistry

    reg = SolverRegistry()
    reg.register(_Scribbler())
    h = wticonv.Handle(warm_handle.device, reg)
    p = P(2, 5, 9, 11, 7, 3, 3, pad_h=1, pad_w=1)
    data = _data(p)
    with pytest.warns(SolverWarning, match="'fault.scribbler' failed to run .*RuntimeError: "
                                           "scribbled, then crashed"):
        res, out = _run(h, p, data, fill=0.0)
    assert res.solver_id != "fault.scribbler" and res.verdict.solver_id == res.solver_id
    _assert_correct(h, p, data, res, out)
    # forced, the failure is an error naming the solver (nothing to fall back on)
    with pytest.raises(SolverRunError, match="fault.scribbler: RuntimeError"):
        _run(h, p, data, solver="fault.scribbler")


def test_find_mode_records_only_the_solvers_that_ran(warm_handle, monkeypatch):
    from wticonv.measuring.find import find

    h = warm_handle
    p = P(1, 4, 8, 8, 4, 3, 3, pad_h=1, pad_w=1)
    failing = _sources(h, "direct.naive", p)
    real_build = h.device.build

    def build(source, options=""):
        if source in failing:
            raise KernelBuildError("OpenCL program failed to build on X:\nerror: injected")
        return real_build(source, options)

    monkeypatch.setattr(h.device, "build", build)
    results = find(h, p, iterations=1, search=False)
    naive = next(r for r in results if r.solver_id == "direct.naive")
    assert naive.time_ms is None and "do not build" in naive.reason, naive.reason
    records = h.device.store.get_find_records(h.device.key, p.key)
    ran = {r.solver_id for r in results if r.time_ms is not None}
    assert set(records) == ran and "direct.naive" not in records and ran
    assert all(rec[2] > 0 for rec in records.values())


def test_tensors_that_cannot_be_allocated_are_a_clear_error(warm_handle, monkeypatch):
    h = warm_handle
    p = P(1, 3, 8, 8, 4, 3, 3)

    def buffer(*args, **kwargs):
        raise cl.MemoryError("clCreateBuffer failed: MEM_OBJECT_ALLOCATION_FAILURE")

    monkeypatch.setattr(cl, "Buffer", buffer)
    data = _data(p)
    with pytest.raises(DeviceMemoryError, match="cannot allocate tensor x"):
        h.compute(p, **data)
    assert dataclasses.asdict(p)          # the problem object is untouched, still valid


def test_host_memory_exhaustion_is_a_clear_error(warm_handle, monkeypatch):
    import wticonv.runtime.device
    import wticonv.handle
    from wticonv.errors import HostMemoryError

    h = warm_handle
    p = P(1, 3, 8, 8, 4, 3, 3)
    data = _data(p)

    def no_memory(*args, **kwargs):
        raise MemoryError("simulated")

    class NumpyWithoutEmpty:                   # numpy, except that np.empty fails
        empty = staticmethod(no_memory)

        def __getattr__(self, name):
            return getattr(np, name)

    monkeypatch.setattr(wticonv.runtime.device, "np", NumpyWithoutEmpty())
    with pytest.raises(HostMemoryError, match=r"cannot hold the 576 bytes of an array of "
                                              r"\(1, 4, 6, 6\)"):
        h.compute(p, **data)
    monkeypatch.setattr(wticonv.handle, "as_float32", no_memory)
    with pytest.raises(HostMemoryError, match=r"float32 copy of array x \(1, 3, 8, 8\)"):
        h.compute(p, **data)
