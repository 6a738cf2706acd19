"""Find mode: time every applicable solver on a problem and record the results (find-db).

Where immediate mode predicts (each solver's WTI), find mode measures: every installed
solver that applies (dynamic or not) runs the problem on random data, one warm-up run and
then up to ``iterations`` timed runs (kernel time, OpenCL profiling events; the solvers'
runs interleaved, one of each per round, so that a drifting machine speed slows them
alike), stopping early once a solver has used ``time_cap_ms`` so that a very slow solver
is cut short rather than skipped. Tunable solvers are first tuned (every perf config they
offer is timed and the fastest stored in the perf-db, :mod:`wticonv.measuring.tune`) unless
``search=False``; each solver is then timed with the perf config immediate mode would give
it. The fastest of its timed runs (:data:`wticonv.measuring.timing.STATISTIC`) is
recorded in the find-db (the ``find_db`` table of :class:`~wticonv.db.store.Store`),
keyed by device key (platform, device name, driver version), problem key (MIOpen's
find-db format) and solver id, with the solver's version and the workspace it used.

Immediate mode then uses the records (:func:`wticonv.selection.finddb.apply_records`): a
candidate whose record
matches its installed version and its planned workspace is ranked by its measured time
(the others by their predicted time); ``wticonv explain`` shows ``find-db`` as the source.
Records of another solver version are ignored (stale), as are those of another workspace
plan (a different ``workspace_limit`` or perf config). ``wticonv cache --clear`` deletes
them.
"""

from __future__ import annotations

from dataclasses import dataclass

from wticonv.errors import WticonvError
from wticonv.measuring.precompile import precompile_problems
from wticonv.measuring.timing import check_limits, problem_tensors, timed_together
from wticonv.problem.conv import ConvProblem

__all__ = ["record_results", "FindResult", "find", "DEFAULT_ITERATIONS", "DEFAULT_TIME_CAP_MS"]

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
        Kernel time of the fastest timed run (:data:`wticonv.measuring.timing.STATISTIC`),
        ms; None when the solver did not run.
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
        Tune the tunable solvers first (:func:`wticonv.measuring.tune.tune`, every perf config they
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
    precompile_problems(handle, [problem], workspace_limit, search)
    try:
        with problem_tensors(handle, problem) as tensors:
            tuned = {}
            if search:
                from wticonv.measuring.tune import tune

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
        _store(handle, problem, ran)
    return ran + sorted((r for r in results if r.time_ms is None), key=lambda r: r.solver_id)


def record_results(handle, problem: ConvProblem, results) -> None:
    """Store the timed ones of ``results`` (:class:`FindResult`) as ``problem``'s find-db
    records on ``handle``'s device, replacing its earlier ones, and forget the handle's
    remembered selections (they may rest on the old records)."""
    _store(handle, problem, sorted((r for r in results if r.time_ms is not None),
                                   key=lambda r: r.time_ms))


def _store(handle, problem: ConvProblem, ran) -> None:
    handle.forget_selections()
    handle.device.store.put_find_records(
        handle.device.key, problem.key,
        [(r.solver_id, r.version, r.workspace, r.time_ms, r.runs, r.capped) for r in ran])


