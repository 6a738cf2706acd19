"""Tuning: search a tunable solver's perf configs and store the fastest in the perf-db.

A solver is *tunable* when it implements the optional ``perf_configs`` hook: it lists the
perf configs (named kernel parameters: tile sizes, reduction splits) it can run a problem
with. Without a record it runs its own heuristic default (``perf_config=None``).
:func:`tune` times the default and every listed perf config on one problem (one warm-up,
then up to ``iterations`` timed runs each, cut short by a time cap as in find mode) and
stores the fastest in the perf-db (the ``perf_db`` table of :class:`~wticonv.db.store.Store`),
keyed by device key, problem key (MIOpen's find-db format) and solver id, with the solver's
version, its time and the default's.

Immediate mode reads the record back (:func:`wticonv.selection.perfdb.stored_perf_config`)
and checks it before use:

- a record of another solver version is *stale*: ignored (the default runs) and reported
  once per solver with a warning; tuning again replaces it;
- a record naming a perf config the solver no longer lists for the problem is *invalid*:
  reported with a warning, deleted, and the default runs;
- a record whose perf config needs more workspace than the caller's limit is skipped for
  that call (the default runs), and kept;
- a row that is not a valid record at all is reported and deleted when read
  (:meth:`wticonv.db.store.Store.get_perf_records`).

``wticonv explain`` shows the perf config each solver would run and where it came from.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from wticonv.errors import ArgumentError, WticonvError
from wticonv.measuring import timing
from wticonv.problem.conv import ConvProblem
from wticonv.selection.perfdb import DEFAULT_PERF_CONFIG, offered_perf_configs

__all__ = ["TuneResult", "tune", "DEFAULT_ITERATIONS", "DEFAULT_TIME_CAP_MS"]


#: Timed runs per perf config after the warm-up (fewer when the time cap is reached).
DEFAULT_ITERATIONS = 3
#: Kernel time one perf config may spend before its runs are cut short, in ms.
DEFAULT_TIME_CAP_MS = 500.0
#: The fastest perf config is timed again this many times, in turn with the default, each
#: keeping its fastest run; it is kept only if it is then faster than the default by
#: :data:`MIN_GAIN`. On a shared 2-core CPU (PoCL) one block of three runs stored
#: configs 1.7x "faster" that ran as fast as the default over 40 runs, and a config whose
#: fastest run had been a slow spell's opposite made its layer 3.2x slower through the
#: model's ranking (trial of 2026-12-07).
CONFIRM_ROUNDS = 2
#: Least speed-up over the default, after the confirmation, for a perf config to be kept.
MIN_GAIN = 1.02


@dataclass
class TuneResult:
    """One tunable solver's outcome on one problem.

    Attributes
    ----------
    solver_id, version : str
    default_ms : float or None
        Kernel time (fastest timed run) of the solver's own default
        (``perf_config=None``, whatever the perf-db holds), ms.
    best_config : str or None
        The fastest perf config, ``"default"`` when the solver's default beat every listed
        one (then no record is kept), None when none ran.
    best_ms : float or None
        Its kernel time (fastest timed run), ms.
    times : dict
        Perf config -> kernel time (fastest run), ms, or the reason it did not run (str).
    recorded : bool
        The best was stored in the perf-db.
    kept : str
        With a workspace limit: the perf config of the perf-db's record that was kept
        because it needs more workspace than the limit (it was tuned with more; selections
        under the limit skip it and run the default), else "".
    reason : str
        Why the solver was not tuned ("" when it was).
    declined : bool
        The solver does not apply to the problem (``reason`` is its decline).
    """

    solver_id: str
    version: str
    default_ms: float | None = None
    best_config: str | None = None
    best_ms: float | None = None
    times: dict = field(default_factory=dict)
    recorded: bool = False
    kept: str = ""
    reason: str = ""
    declined: bool = False

    @property
    def speedup(self) -> float | None:
        """Default time / best time (> 1: tuning helped)."""
        if self.default_ms is None or not self.best_ms:
            return None
        return self.default_ms / self.best_ms


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
        default that beats every listed config deletes the record instead). Under a
        ``workspace_limit``, a record whose config needs more workspace than the limit is
        kept (``TuneResult.kept``).
    solvers : iterable of str, optional
        Tune only these solver ids (default: every tunable one).
    progress : callable, optional
        Called with (solver_id, perf_config or None, index, count) before each timing.
    tensors : ConvTensors, optional
        Device buffers of the problem (:func:`wticonv.measuring.timing.problem_tensors`),
        allocated here when not given.

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
    timing.check_limits(iterations, time_cap_ms, workspace_limit)
    tunable = _tunable(handle.registry, solvers)
    if tensors is None and tunable:
        with timing.problem_tensors(handle, problem) as t:
            return tune(handle, problem, workspace_limit, iterations, time_cap_ms, record,
                        solvers, progress, t)
    results = [_tune_one(handle, problem, sid, workspace_limit, iterations, time_cap_ms,
                         record, progress, tensors) for sid in tunable]
    if record:
        handle.forget_selections()
    return sorted(results, key=lambda r: (bool(r.reason), r.solver_id))


def _tunable(registry, solvers) -> list[str]:
    """The ids of the tunable solvers to tune: ``solvers`` (an id or ids; ArgumentError if
    one is not tunable), else every tunable one."""
    if isinstance(solvers, str):
        solvers = [solvers]
    if solvers is not None:
        for sid in solvers:
            if not registry.get(sid).tunable:
                raise ArgumentError(f"solver {sid!r} is not tunable (it has no perf_configs "
                                    "hook)")
    return [sid for sid in registry.ids() if registry.solvers[sid].tunable
            and (solvers is None or sid in set(solvers))]


def _tune_one(handle, problem: ConvProblem, sid: str, workspace_limit, iterations: int,
              time_cap_ms: float, record: bool, progress, tensors) -> TuneResult:
    """Time the default and every perf config ``sid`` offers on ``problem``; the result
    names the fastest (and stores it when ``record``), or the reason nothing ran."""
    registry, device = handle.registry, handle.device
    r = TuneResult(sid, registry.solvers[sid].version)
    try:
        ok = registry.call(sid, "is_applicable", problem=problem, device=device,
                           workspace_limit=workspace_limit)
        # the hook's contract: perf configs are asked of applicable problems only
        configs = offered_perf_configs(registry, sid, problem, device,
                                       workspace_limit) if ok else []
    except Exception as e:  # noqa: BLE001 - a broken solver is reported, not fatal
        r.reason = f"{type(e).__name__}: {e}"
        return r
    if not ok:
        r.reason, r.declined = getattr(ok, "reason", "not applicable"), True
        return r
    if not configs:
        r.reason = "nothing to tune for this problem"
        return r
    for i, cfg in enumerate([None] + configs):
        if progress is not None:
            progress(sid, cfg, i, len(configs) + 1)
        try:
            t = timing.timed(handle, problem, iterations, time_cap_ms, workspace_limit, sid,
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
        return r
    r.best_config = min(ran, key=ran.get)
    if r.best_config != DEFAULT_PERF_CONFIG and r.default_ms is not None:
        _confirm(handle, problem, r, iterations, time_cap_ms, workspace_limit, tensors)
    r.best_ms = (r.default_ms if r.best_config == DEFAULT_PERF_CONFIG
                 else r.times[r.best_config])
    if record:
        held = device.store.get_perf_records(device.key).get((problem.key, sid))
        if (workspace_limit is not None and held is not None and held[0] == r.version
                and held[1] not in configs):
            # tuned earlier with more workspace than this limit allows: that record still
            # serves callers with more, and selections under this limit skip it anyway
            r.kept = held[1]
        else:
            _record(device, problem, r)
    return r


def _confirm(handle, problem: ConvProblem, r: TuneResult, iterations: int,
             time_cap_ms: float, workspace_limit, tensors) -> None:
    """Time ``r``'s fastest perf config and the default again, in turn,
    :data:`CONFIRM_ROUNDS` times (each keeping its fastest run); the default stays the
    best unless the config then beats it by :data:`MIN_GAIN`."""
    sid, best = r.solver_id, r.best_config
    for _ in range(CONFIRM_ROUNDS):
        for cfg in (DEFAULT_PERF_CONFIG, best):
            try:
                t = timing.timed(handle, problem, iterations, time_cap_ms, workspace_limit,
                                 sid, cfg, tensors)[0]
            except WticonvError:
                continue
            if not isinstance(t, float):
                continue
            if cfg == DEFAULT_PERF_CONFIG:
                r.default_ms = min(r.default_ms, t)
            else:
                r.times[best] = min(r.times[best], t)
    if r.times[best] * MIN_GAIN > r.default_ms:
        r.best_config = DEFAULT_PERF_CONFIG


def _record(device, problem: ConvProblem, r: TuneResult) -> None:
    """Store ``r``'s fastest perf config in the perf-db; a default that beat every listed
    config needs no record (an earlier one is deleted)."""
    if r.best_config == DEFAULT_PERF_CONFIG:
        device.store.delete_perf_record(device.key, problem.key, r.solver_id)
    else:
        device.store.put_perf_record(device.key, problem.key, r.solver_id, r.version,
                                     r.best_config, r.best_ms, r.default_ms or r.best_ms)
    r.recorded = True
