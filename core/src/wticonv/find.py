"""Find mode: time every applicable solver on a problem and record the results (find-db).

Where immediate mode predicts (each solver's WTI), find mode measures: every installed
solver that applies (dynamic or not) runs the problem on random data, one warm-up run and
then up to ``iterations`` timed runs (kernel time, OpenCL profiling events), stopping early
once a solver has used ``time_cap_ms`` so that a very slow solver is cut short rather than
skipped. The median of its timed runs is recorded in the find-db (the ``find_db`` table of
:class:`~wticonv.store.Store`), keyed by device key (platform, device name, driver
version), problem key (MIOpen's find-db format) and solver id, with the solver's version
and the workspace it used.

Immediate mode then uses the records (:func:`apply_records`): a candidate whose record
matches its installed version and its planned workspace is ranked by its measured time,
ahead of the candidates ranked by WTI; ``wticonv explain`` shows ``find-db`` as the source.
Records of another solver version are ignored (stale), as are those of another workspace
plan (a different ``workspace_limit``). ``wticonv cache --clear`` deletes them.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from .errors import WticonvError
from .problem import ConvProblem

__all__ = ["FindResult", "find", "apply_records", "DEFAULT_ITERATIONS", "DEFAULT_TIME_CAP_MS"]

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
    """

    solver_id: str
    version: str
    time_ms: float | None = None
    runs: int = 0
    capped: bool = False
    workspace: int = 0
    reason: str = ""


def find(handle, problem: ConvProblem, iterations: int = DEFAULT_ITERATIONS,
         time_cap_ms: float = DEFAULT_TIME_CAP_MS, workspace_limit: int | None = None,
         record: bool = True) -> list[FindResult]:
    """Time every applicable solver of ``handle`` on ``problem``; fastest first.

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
        Store the results in the find-db (replacing the problem's earlier records).

    Raises
    ------
    ValueError
        If ``iterations`` < 1 or ``time_cap_ms`` <= 0.
    """
    from .bench import measure

    if iterations < 1 or not time_cap_ms > 0:
        raise ValueError(f"iterations={iterations!r} must be >= 1 and "
                         f"time_cap_ms={time_cap_ms!r} > 0")
    results = []
    for sid in handle.registry.ids():
        version = handle.registry.solvers[sid].version
        r = FindResult(sid, version)
        try:
            first = measure(handle, problem, 1, verify=False, workspace_limit=workspace_limit,
                            solver=sid)
            times = list(first.kernel_ms)
            r.workspace = first.workspace
            more = min(iterations - 1, int(time_cap_ms // max(times[0], 1e-6)) - 1)
            if more > 0:
                times += measure(handle, problem, more, verify=False,
                                 workspace_limit=workspace_limit, solver=sid).kernel_ms
            r.capped = len(times) < iterations
            r.time_ms, r.runs = statistics.median(times), len(times)
        except WticonvError as e:
            r.reason = str(e).splitlines()[0]
        results.append(r)
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
        if version != registry.solvers[v.solver_id].version or workspace != v.workspace:
            v.note = "find-db record stale (other version or workspace): ranked by WTI"
            continue
        v.measured_ms = time_ms
        v.wti_source = "find-db"
