"""Compiling the programs of many problems ahead (wticonv.measuring.precompile)."""

from __future__ import annotations

import warnings

import numpy as np
from wticonv import ConvProblem
from wticonv.measuring.precompile import precompile, programs_of_solvers

P = ConvProblem(2, 8, 10, 10, 8, 3, 3, pad_h=1, pad_w=1)
SOLVERS = ("direct.naive", "direct.tiled", "gemm.im2col", "winograd.f2x3")


def _builds_after_figures(h) -> int:
    """The handle's source builds so far, once its device's launch overhead is known:
    measuring that (lazily, on the first WTI a fresh store asks for) compiles a program
    of its own, which no solver's precompile names."""
    assert h.device.launch_overhead_s > 0
    return h.device.programs.counters.source_builds


def test_programs_of_solvers_names_what_their_runs_build(own_handle):
    h = own_handle
    pairs = programs_of_solvers(h, P, dict.fromkeys(SOLVERS))
    assert len(pairs) >= len(SOLVERS)
    assert all(isinstance(s, str) and isinstance(o, str) for s, o in pairs)
    assert programs_of_solvers(h, P, {"no.such": None, "winograd.f2x3": None}) == \
        programs_of_solvers(h, P, {"winograd.f2x3": None})     # unknown ids add nothing
    # a 1x1 problem: winograd does not apply, so it names nothing
    assert programs_of_solvers(h, ConvProblem(1, 8, 6, 6, 8, 1, 1),
                               {"winograd.f2x3": None}) == []


def test_after_precompile_the_runs_compile_nothing(own_handle):
    h = own_handle
    counters = h.device.programs.counters
    work = [(P.with_direction(d), dict.fromkeys(SOLVERS)) for d in ("fwd", "bwd", "wrw")]
    expected = {pair for p, s in work for pair in programs_of_solvers(h, p, s)}
    start = _builds_after_figures(h)
    built = precompile(h, work)
    assert built == len(expected) == counters.source_builds - start
    rng = np.random.default_rng(0)
    x = rng.standard_normal(P.x_shape, dtype=np.float32)
    w = rng.standard_normal(P.w_shape, dtype=np.float32)
    results = [h.compute(P, x, w, solver=sid) for sid in SOLVERS]
    assert counters.source_builds == start + built  # nothing compiled late
    for r in results[1:]:
        assert np.allclose(r, results[0], rtol=1e-4, atol=1e-4)
    assert precompile(h, work) == 0                  # all cached now


def test_a_cold_calibration_compiles_everything_ahead(own_handle, monkeypatch):
    from wticonv.measuring import calibrate as cal

    probes = [P.with_direction(d) for d in ("fwd", "bwd", "wrw")]
    monkeypatch.setattr(cal, "_probes", lambda kind, n: probes)
    monkeypatch.setattr(cal, "SKIP_SLOWER_THAN", float("inf"))
    # the speed check after the probes builds the peak kernel, not a solver's program
    # (test_find.py::test_calibrate_reports_figures_read_on_a_busy_machine checks it)
    monkeypatch.setattr(cal, "_speed_change", lambda dev: None)
    cache = own_handle.device.programs
    start = _builds_after_figures(own_handle)
    ahead = []
    real = cache.precompile
    monkeypatch.setattr(cache, "precompile", lambda *a, **k: ahead.append(real(*a, **k))
                        or ahead[-1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        factors = cal.calibrate(own_handle, iterations=1)
    assert factors["direct.naive"][1] == 3
    assert ahead and sum(ahead) == cache.counters.source_builds - start > 0
    own_handle.device.store.clear()


def test_a_fleet_workers_compile_job_builds_what_its_finds_time(own_handle):
    """The fleet's compile-ahead job (submitted before a device's find or evaluate tasks)
    leaves the worker nothing to compile when it times the problems."""
    from wticonv.fleet.jobs_worker import JOBS
    from wticonv.measuring.find import find

    h = own_handle
    for sid in h.registry.ids():
        if sid not in SOLVERS:
            h.registry.disabled.add(sid)
    counters = h.device.programs.counters
    problems = [P.with_direction(d) for d in ("fwd", "wrw")]
    start = _builds_after_figures(h)
    assert JOBS["compile"](h, {"compile": [p.key for p in problems]}) == []
    built = counters.source_builds
    assert built - start >= len(SOLVERS)
    for p in problems:
        results = find(h, p, iterations=1, time_cap_ms=50.0, record=False, search=False)
        assert {r.solver_id for r in results if r.time_ms is not None} == set(SOLVERS)
    assert counters.source_builds == built          # nothing compiled late
