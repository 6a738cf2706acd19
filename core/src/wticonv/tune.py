"""Tuning: search a tunable solver's perf configs and store the fastest in the perf-db.

A solver is *tunable* when it implements the optional ``perf_configs`` hook: it lists the
perf configs (named kernel parameters: tile sizes, reduction splits) it can run a problem
with. Without a record it runs its own heuristic default (``perf_config=None``).
:func:`tune` times the default and every listed perf config on one problem (one warm-up,
then up to ``iterations`` timed runs each, cut short by a time cap as in find mode) and
stores the fastest in the perf-db (the ``perf_db`` table of :class:`~wticonv.store.Store`),
keyed by device key, problem key (MIOpen's find-db format) and solver id, with the solver's
version, its time and the default's.

Immediate mode reads the record back (:func:`stored_perf_config`) and checks it before use:

- a record of another solver version is *stale*: ignored (the default runs) and reported
  once per solver with a warning; tuning again replaces it;
- a record naming a perf config the solver no longer lists for the problem is *invalid*:
  reported with a warning, deleted, and the default runs;
- a record whose perf config needs more workspace than the caller's limit is skipped for
  that call (the default runs), and kept;
- a row that is not a valid record at all is reported and deleted when read
  (:meth:`wticonv.store.Store.get_perf_records`).

``wticonv explain`` shows the perf config each solver would run and where it came from.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

from .errors import ArgumentError, SolverWarning, WticonvError
from .problem import ConvProblem
from .records import valid_perf_config

__all__ = ["TuneResult", "tune", "stored_perf_config", "offered_perf_configs",
           "DEFAULT_PERF_CONFIG", "DEFAULT_ITERATIONS", "DEFAULT_TIME_CAP_MS"]

#: The name that forces a solver's own default perf config (``perf_config=None`` in its
#: hooks) where the perf-db may hold another; no solver may offer a config of this name.
DEFAULT_PERF_CONFIG = "default"

#: Timed runs per perf config after the warm-up (fewer when the time cap is reached).
DEFAULT_ITERATIONS = 3
#: Kernel time one perf config may spend before its runs are cut short, in ms.
DEFAULT_TIME_CAP_MS = 500.0

_warned_stale: set[tuple[str, str, str]] = set()


@dataclass
class TuneResult:
    """One tunable solver's outcome on one problem.

    Attributes
    ----------
    solver_id, version : str
    default_ms : float or None
        Median kernel time of the solver's own default (``perf_config=None``, whatever
        the perf-db holds), ms.
    best_config : str or None
        The fastest perf config, ``"default"`` when the solver's default beat every listed
        one (then no record is kept), None when none ran.
    best_ms : float or None
        Its median kernel time, ms.
    times : dict
        Perf config -> median ms, or the reason it did not run (str).
    recorded : bool
        The best was stored in the perf-db.
    reason : str
        Why the solver was not tuned ("" when it was).
    """

    solver_id: str
    version: str
    default_ms: float | None = None
    best_config: str | None = None
    best_ms: float | None = None
    times: dict = field(default_factory=dict)
    recorded: bool = False
    reason: str = ""

    @property
    def speedup(self) -> float | None:
        """Default time / best time (> 1: tuning helped)."""
        if self.default_ms is None or not self.best_ms:
            return None
        return self.default_ms / self.best_ms


def offered_perf_configs(registry, solver_id: str, problem: ConvProblem, device,
                         workspace_limit: int | None) -> list[str]:
    """The perf configs a tunable solver lists for ``problem``, checked.

    Raises
    ------
    ValueError
        If the ``perf_configs`` hook returns something other than a list of distinct valid
        names (non-empty printable strings of at most 100 characters).
    """
    offered = registry.call(solver_id, "perf_configs", problem=problem, device=device,
                            workspace_limit=workspace_limit)
    if offered is None:
        return []
    if (not isinstance(offered, (list, tuple)) or not all(map(valid_perf_config, offered))
            or len(set(offered)) != len(offered) or DEFAULT_PERF_CONFIG in offered):
        raise ValueError(f"perf_configs returned {offered!r:.200}, not a list of distinct "
                         "non-empty printable names of at most 100 characters (other than "
                         f"{DEFAULT_PERF_CONFIG!r})")
    return list(offered)


def stored_perf_config(registry, solver_id: str, problem: ConvProblem, device,
                       workspace_limit: int | None) -> tuple[str | None, str]:
    """The perf config immediate mode gives ``solver_id`` on ``problem``: the perf-db's
    when it holds a valid record, else None (the solver's default); and a note saying why
    a record was not used ("" when there was none, or it was used)."""
    store = getattr(device, "store", None)   # stand-in devices (tests) have none
    if store is None:
        return None, ""
    try:
        rec = store.get_perf_records(device.key).get((problem.key, solver_id))
    except WticonvError:
        return None, ""
    if rec is None:
        return None, ""
    version, config = rec[0], rec[1]
    installed = registry.solvers[solver_id].version
    if version != installed:
        key = (device.key, solver_id, version)
        if key not in _warned_stale:
            _warned_stale.add(key)
            warnings.warn(f"wticonv: the perf-db records of solver {solver_id!r} were tuned "
                          f"for version {version}, {installed} is installed: they are ignored "
                          "(default perf configs run); run `wticonv tune` again",
                          SolverWarning, stacklevel=2)
        return None, f"perf-db record stale (version {version}): default perf config"
    if config in offered_perf_configs(registry, solver_id, problem, device, workspace_limit):
        return config, ""
    if workspace_limit is not None and config in offered_perf_configs(
            registry, solver_id, problem, device, None):
        return None, f"tuned perf config {config} does not fit the workspace limit: default"
    warnings.warn(f"wticonv: the perf-db record of solver {solver_id!r} for {problem.key} "
                  f"names perf config {config!r}, which the solver does not offer; deleted it "
                  "(the default runs; `wticonv tune` stores a new one)", SolverWarning,
                  stacklevel=2)
    try:
        store.delete_perf_record(device.key, problem.key, solver_id)
    except WticonvError:
        pass
    return None, f"perf-db record invalid ({config!r} not offered): deleted, default used"


def tune(handle, problem: ConvProblem, workspace_limit: int | None = None,
         iterations: int = DEFAULT_ITERATIONS, time_cap_ms: float = DEFAULT_TIME_CAP_MS,
         record: bool = True, solvers=None, progress=None, tensors=None
         ) -> list[TuneResult]:
    """Time every perf config of each tunable solver of ``handle`` on ``problem``.

    Parameters
    ----------
    handle : Handle
    problem : ConvProblem
    workspace_limit : int, optional
        Bytes; only perf configs that fit are tried.
    iterations, time_cap_ms : int, float
        Timed runs per perf config after one warm-up, and the kernel time (ms) after which
        a config's runs are cut short (as in find mode).
    record : bool
        Store each solver's fastest perf config in the perf-db (replacing its record; a
        default that beats every listed config deletes the record instead).
    solvers : iterable of str, optional
        Tune only these solver ids (default: every tunable one).
    progress : callable, optional
        Called with (solver_id, perf_config or None, index, count) before each timing.
    tensors : ConvTensors, optional
        Device buffers of the problem (:func:`wticonv.find.problem_tensors`), allocated
        here when not given.

    Returns
    -------
    list[TuneResult]
        One per tunable solver, tuned ones first (by solver id).

    Raises
    ------
    ArgumentError
        If ``iterations`` < 1, ``time_cap_ms`` <= 0, ``workspace_limit`` is negative, or a
        solver in ``solvers`` is not tunable.
    SolverNotFoundError
        If ``solvers`` names a solver that is not installed.
    DeviceMemoryError, HostMemoryError
        If the problem's tensors do not fit.
    """
    from .find import check_limits, problem_tensors, timed

    check_limits(iterations, time_cap_ms, workspace_limit)
    registry, device = handle.registry, handle.device
    if isinstance(solvers, str):
        solvers = [solvers]
    if solvers is not None:
        for sid in solvers:
            if not registry.get(sid).tunable:
                raise ArgumentError(f"solver {sid!r} is not tunable (it has no perf_configs "
                                    "hook)")
    tunable = [sid for sid in registry.ids() if registry.solvers[sid].tunable
               and (solvers is None or sid in set(solvers))]
    if tensors is None and tunable:
        with problem_tensors(handle, problem) as t:
            return tune(handle, problem, workspace_limit, iterations, time_cap_ms, record,
                        solvers, progress, t)
    results = []
    for sid in tunable:
        entry = registry.solvers[sid]
        r = TuneResult(sid, entry.version)
        results.append(r)
        try:
            ok = registry.call(sid, "is_applicable", problem=problem, device=device,
                               workspace_limit=workspace_limit)
            configs = offered_perf_configs(registry, sid, problem, device, workspace_limit)
        except Exception as e:  # noqa: BLE001 - a broken solver is reported, not fatal
            r.reason = f"{type(e).__name__}: {e}"
            continue
        if not ok:
            r.reason = getattr(ok, "reason", "not applicable")
            continue
        if not configs:
            r.reason = "nothing to tune for this problem"
            continue
        for i, cfg in enumerate([None] + configs):
            if progress is not None:
                progress(sid, cfg, i, len(configs) + 1)
            try:
                t = timed(handle, problem, iterations, time_cap_ms, workspace_limit, sid,
                          cfg or DEFAULT_PERF_CONFIG, tensors)[0]
            except WticonvError as e:
                t = str(e).splitlines()[0]
            if cfg is None:
                r.default_ms = t if isinstance(t, float) else None
            else:
                r.times[cfg] = t
        ran = {c: t for c, t in r.times.items() if isinstance(t, float)}
        if r.default_ms is not None:
            ran[DEFAULT_PERF_CONFIG] = r.default_ms
        if not ran:
            r.reason = "no perf config ran"
            continue
        r.best_config = min(ran, key=ran.get)
        r.best_ms = ran[r.best_config]
        if record:
            if r.best_config == DEFAULT_PERF_CONFIG:   # the default wins: no record needed
                device.store.delete_perf_record(device.key, problem.key, sid)
            else:
                device.store.put_perf_record(device.key, problem.key, sid, entry.version,
                                             r.best_config, r.best_ms,
                                             r.default_ms or r.best_ms)
            r.recorded = True
    if record:
        handle.forget_selections()
    return sorted(results, key=lambda r: (bool(r.reason), r.solver_id))
