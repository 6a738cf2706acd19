"""Find mode: time every applicable solver on a problem and record the results (find-db).

Where immediate mode predicts (each solver's WTI), find mode measures: every installed
solver that applies (dynamic or not) runs the problem on random data, one warm-up run and
then up to ``iterations`` timed runs (kernel time, OpenCL profiling events; the solvers'
runs interleaved, one of each per round, so that a drifting machine speed slows them
alike), stopping early once a solver has used ``time_cap_ms`` so that a very slow solver
is cut short rather than skipped. Tunable solvers are first tuned (every perf config they
offer is timed and the fastest stored in the perf-db, :mod:`wticonv.tune`) unless
``search=False``; each solver is then timed with the perf config immediate mode would give
it. The median of its timed runs is recorded in the find-db (the ``find_db`` table of
:class:`~wticonv.store.Store`), keyed by device key (platform, device name, driver
version), problem key (MIOpen's find-db format) and solver id, with the solver's version
and the workspace it used.

Immediate mode then uses the records (:func:`apply_records`): a candidate whose record
matches its installed version and its planned workspace is ranked by its measured time
(the others by their predicted time); ``wticonv explain`` shows ``find-db`` as the source.
Records of another solver version are ignored (stale), as are those of another workspace
plan (a different ``workspace_limit`` or perf config). ``wticonv cache --clear`` deletes
them.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from .errors import WticonvError
from .problem import ConvProblem
from .tensors import ConvTensors

__all__ = ["FindResult", "find", "timed", "timed_together", "problem_tensors", "apply_records",
           "check_limits", "DEFAULT_ITERATIONS", "DEFAULT_TIME_CAP_MS"]

#: Timed runs per solver after the warm-up (fewer when the time cap is reached).
DEFAULT_ITERATIONS = 5
#: Kernel time one solver may spend on one problem before its runs are cut short, in ms.
DEFAULT_TIME_CAP_MS = 1000.0


@dataclass
class FindResult:
    """One solver's outcome in find mode.

    Attributes
    ----------
    solver_id, version : str
    time_ms : float or None
        Median kernel time of the timed runs, ms; None when the solver did not run.
    runs : int
        Timed runs (0 when it did not run).
    capped : bool
        The time cap cut its runs short.
    workspace : int
        Bytes it used.
    reason : str
        Why it did not run ("" when it ran).
    perf_config : str or None
        The perf config it ran with (None: the solver's default, or not tunable).
    """

    solver_id: str
    version: str
    time_ms: float | None = None
    runs: int = 0
    capped: bool = False
    workspace: int = 0
    reason: str = ""
    perf_config: str | None = None


@contextmanager
def problem_tensors(handle, problem: ConvProblem, seed: int = 0) -> Iterator[ConvTensors]:
    """Device buffers for ``problem``'s three tensors, the inputs random (uniform [-1, 1)),
    allocated and uploaded once for every solver timed on it, released afterwards.

    Raises
    ------
    DeviceMemoryError, HostMemoryError
        If a tensor does not fit the device's largest buffer or the host's memory.
    """
    from .bench import _check_host, random_inputs
    from .tensors import OUTPUT_TENSOR

    dev = handle.device
    shapes = {"x": problem.x_shape, "w": problem.w_shape, "y": problem.y_shape}
    for name, shape in shapes.items():
        dev.check_alloc(4 * math.prod(shape), f"tensor {name} {shape}")
    _check_host(sum(4 * math.prod(s) for s in shapes.values()), f"the arrays of {problem.key}")
    data = random_inputs(problem, seed)
    bufs = {}
    try:
        for name, shape in shapes.items():
            bufs[name] = (dev.upload(data.pop(name)) if name != OUTPUT_TENSOR[problem.direction]
                          else dev.alloc(4 * math.prod(shape)))
        yield ConvTensors(bufs["x"], bufs["w"], bufs["y"])
    finally:
        for b in bufs.values():
            b.release()


def check_limits(iterations: int, time_cap_ms: float, workspace_limit) -> None:
    """ArgumentError unless iterations >= 1, time_cap_ms > 0 and workspace_limit is None or
    a non-negative int (find and tune check before measuring anything)."""
    from .errors import ArgumentError

    if isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < 1:
        raise ArgumentError(f"iterations={iterations!r} must be an integer >= 1")
    if not time_cap_ms > 0:
        raise ArgumentError(f"time_cap_ms={time_cap_ms!r} must be > 0 (milliseconds)")
    if workspace_limit is not None and (isinstance(workspace_limit, bool) or not isinstance(
            workspace_limit, int) or workspace_limit < 0):
        raise ArgumentError(f"workspace_limit={workspace_limit!r} must be a non-negative "
                            "integer number of bytes, or None for no limit")


def timed(handle, problem: ConvProblem, iterations: int, time_cap_ms: float,
          workspace_limit: int | None, solver: str, perf_config: str | None = None,
          tensors: ConvTensors | None = None, statistic=statistics.median
          ) -> tuple[float, int, bool, int, str | None]:
    """Time one solver (forced) on ``problem``: one untimed run (kernel builds, warm-up),
    then timed runs until ``iterations`` of them or ``time_cap_ms`` of kernel time (at
    least one). ``tensors`` (from :func:`problem_tensors`) are allocated when not given.

    Returns (``statistic`` of the timed runs in ms, the median by default; timed runs;
    cut short by the cap; workspace bytes; perf config used). Raises as
    :meth:`Handle.select` and :meth:`Handle.run`.
    """
    out = timed_together(handle, problem, iterations, time_cap_ms, workspace_limit,
                         {solver: perf_config}, tensors, statistic)[solver]
    if isinstance(out, WticonvError):
        raise out
    return out


def timed_together(handle, problem: ConvProblem, iterations: int, time_cap_ms: float,
                   workspace_limit: int | None, solvers: dict[str, str | None],
                   tensors: ConvTensors | None = None, statistic=statistics.median
                   ) -> dict[str, tuple[float, int, bool, int, str | None] | WticonvError]:
    """Time several solvers (each forced, with its perf config from ``solvers``, a
    ``{solver id: perf config or None}`` dict) on ``problem`` as :func:`timed` does, their
    timed runs interleaved: one run of each solver per round, for up to ``iterations``
    rounds, a solver leaving once it has used ``time_cap_ms``. A machine whose speed
    drifts (a shared CPU, a GPU changing clocks) then slows every solver's runs alike,
    instead of one solver's runs all at once.

    Returns ``{solver id: the tuple timed returns, or the WticonvError it raised}``.
    """
    if tensors is None:
        with problem_tensors(handle, problem) as t:
            return timed_together(handle, problem, iterations, time_cap_ms, workspace_limit,
                                  solvers, t, statistic)
    out: dict = {}
    runs: dict[str, tuple] = {}
    for sid, config in solvers.items():     # warm-up: kernel builds, first-use set-up
        try:
            sel = handle.select(problem, workspace_limit, sid, config)
            first = handle.run(problem, tensors, selection=sel)
            runs[sid] = (first.selection_used(), first, [])
        except WticonvError as e:
            out[sid] = e
    active = list(runs)
    while active:
        for sid in list(active):
            sel, first, times = runs[sid]
            try:
                times.append(handle.run(problem, tensors, selection=sel).kernel_ms)
            except WticonvError as e:
                out[sid] = e
                active.remove(sid)
                continue
            if len(times) >= iterations or sum(times) >= time_cap_ms:
                active.remove(sid)
    for sid, (sel, first, times) in runs.items():
        if sid not in out:
            out[sid] = (statistic(times), len(times), len(times) < iterations,
                        first.workspace, first.verdict.perf_config
                        if first.verdict is not None else solvers[sid])
    return {sid: out[sid] for sid in solvers}


def find(handle, problem: ConvProblem, iterations: int = DEFAULT_ITERATIONS,
         time_cap_ms: float = DEFAULT_TIME_CAP_MS, workspace_limit: int | None = None,
         record: bool = True, search: bool = True) -> list[FindResult]:
    """Time every applicable solver of ``handle`` on ``problem``; fastest first.

    Solvers disabled by ``WTICONV_DISABLE_SOLVERS`` (``handle.registry.disabled``) are
    neither timed nor tuned: their result says "disabled (WTICONV_DISABLE_SOLVERS)".

    Parameters
    ----------
    handle : Handle
    problem : ConvProblem
    iterations : int
        Timed runs per solver after one warm-up (>= 1).
    time_cap_ms : float
        Kernel time after which a solver's remaining runs are skipped (> 0).
    workspace_limit : int, optional
        Most workspace a solver may use, bytes.
    record : bool
        Store the results in the find-db (replacing the problem's earlier records), and
        the tuned perf configs in the perf-db.
    search : bool
        Tune the tunable solvers first (:func:`wticonv.tune.tune`, every perf config they
        offer) and time them with their fastest; False times them with the perf config
        immediate mode would give them (the perf-db's, else their default).

    Raises
    ------
    ArgumentError
        If ``iterations`` < 1, ``time_cap_ms`` <= 0 or ``workspace_limit`` is negative.
    """
    check_limits(iterations, time_cap_ms, workspace_limit)
    reg = handle.registry
    results = [FindResult(sid, reg.solvers[sid].version) for sid in reg.ids()]
    for r in results:                   # never timed, nor tuned: only explained
        if r.solver_id in reg.disabled:
            r.reason = "disabled (WTICONV_DISABLE_SOLVERS)"
    active = [r for r in results if r.solver_id not in reg.disabled]
    try:
        with problem_tensors(handle, problem) as tensors:
            tuned = {}
            if search:
                from .tune import tune

                tunable = [r.solver_id for r in active if reg.solvers[r.solver_id].tunable]
                tuned = {t.solver_id: t for t in tune(handle, problem, workspace_limit,
                                                      iterations, time_cap_ms, record=record,
                                                      solvers=tunable, tensors=tensors)
                         if t.best_config}
            configs = {r.solver_id: tuned[r.solver_id].best_config
                       if r.solver_id in tuned else None for r in active}
            timings = timed_together(handle, problem, iterations, time_cap_ms,
                                     workspace_limit, configs, tensors)
            for r in active:
                t = timings[r.solver_id]
                if isinstance(t, WticonvError):
                    r.reason = str(t).splitlines()[0]
                else:
                    r.time_ms, r.runs, r.capped, r.workspace, r.perf_config = t
    except WticonvError as e:           # the tensors themselves do not fit
        for r in active:
            r.reason = str(e).splitlines()[0]
    ran = sorted((r for r in results if r.time_ms is not None), key=lambda r: r.time_ms)
    if record:
        handle.forget_selections()
        handle.device.store.put_find_records(
            handle.device.key, problem.key,
            [(r.solver_id, r.version, r.workspace, r.time_ms, r.runs, r.capped) for r in ran])
    return ran + sorted((r for r in results if r.time_ms is None), key=lambda r: r.solver_id)


def apply_records(registry, device, problem: ConvProblem, verdicts) -> None:
    """Give the candidates in ``verdicts`` that have a valid find-db record their measured
    time (``measured_ms``, ``wti_source = "find-db"``); used by selection."""
    store = getattr(device, "store", None)   # stand-in devices (tests) have none
    if store is None:
        return
    try:
        records = store.get_find_records(device.key, problem.key)
    except WticonvError:
        return
    if not records:
        return
    for v in verdicts:
        rec = records.get(v.solver_id)
        if rec is None or not v.applicable or v.reason:
            continue
        version, workspace, time_ms = rec[0], rec[1], rec[2]
        if version != registry.solvers[v.solver_id].version:
            v.note = f"find-db record stale (solver version {version}): ranked by WTI"
            continue
        if workspace != v.workspace:
            v.note = (f"find-db record of another workspace plan ({workspace} bytes): "
                      "ranked by WTI")
            continue
        v.measured_ms = time_ms
        v.wti_source = "find-db"
