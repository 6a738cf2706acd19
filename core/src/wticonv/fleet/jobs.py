"""find, tune, evaluate and calibrate across a fleet: the Python API of ``--cluster``.

Each function takes the arguments of its serial counterpart in :mod:`wticonv.measuring`
(less the handle: the fleet's devices are the handles) and ``cluster``: None or
``"local"`` for a local cluster of this machine's devices, a scheduler address, a
``distributed.Client`` or an open :class:`~wticonv.fleet.cluster.Fleet`. The work is one
task per (device, problem) (calibration: per device and chunk of :data:`PROBE_CHUNK`
probes, then one fit per device); results are merged into ``store`` (default: the
user's) as they arrive, and problems the store already has records of, for that device,
the installed solver versions and every solver find mode times there, are skipped
(``resume=False`` measures them again). The workers predict with the caller's figures,
perf-db, calibration and system records, not their own (:mod:`wticonv.fleet.session`);
a worker whose installed solvers are not the caller's has its results refused. Every
function returns a :class:`FleetReport`; a scheduler that goes away mid-run raises
:class:`~wticonv.errors.FleetError` (what was merged stays).
"""

from __future__ import annotations

import time

from wticonv.errors import FleetError
from wticonv.fleet import merge
from wticonv.fleet.session import FleetReport, Run, calibration_of, go

__all__ = ["FleetReport", "find", "tune", "evaluate", "calibrate", "PROBE_CHUNK",
           "TIME_LIMIT_S"]

#: Default time limit of one task, s: past it, its worker is ended and the task runs
#: elsewhere (a hung driver). A find of one large layer with tuning takes minutes on a
#: CPU.
TIME_LIMIT_S = 1800.0
#: Calibration probes per task (a probe takes 10-100 ms on a GPU: one task per probe
#: would spend as long in scheduling as in measuring).
PROBE_CHUNK = 25


def _compile_ahead(run, res: str, keys: list[str], workspace_limit: int | None,
                   search: bool = False) -> list:
    """The task, first in ``res``'s queue, that compiles the programs of ``keys`` on a
    worker of the device several at once (``jobs_worker._compile``) before the tasks
    that time them: none for fewer than two problems. The tasks are run in order per
    device, so with one worker a device's timings all find their programs built; a
    second worker of the device starts timing at once and compiles what it needs."""
    if len(keys) < 2:
        return []
    return [run.task(res, "compile", f"compile {len(keys)} problems", compile=keys,
                     workspace_limit=workspace_limit, search=search)]


def find(problems, cluster=None, devices=None, iterations: int = 5,
         time_cap_ms: float = 1000.0, workspace_limit: int | None = None,
         search: bool = True, store=None, allow_tf32: bool = False, resume: bool = True,
         progress=None, time_limit_s: float = TIME_LIMIT_S, task_fn=None) -> FleetReport:
    """:func:`wticonv.measuring.find.find` on every problem on every device of the fleet,
    its records merged into ``store``'s find-db and perf-db.

    ``progress(snapshot)`` gets ``{resource: {done, running, failed, remaining,
    device}}`` (``device``: the device's name, once its workers described it);
    ``task_fn`` replaces :func:`wticonv.fleet.worker.run_task` as what each task calls
    (a wrapper that traces, or injects a fault in a test).

    Raises
    ------
    FleetError
        Dask missing, scheduler unreachable (or gone mid-run), no device. Failed tasks
        are not raised: they are in the report's ``failures`` (refused workers in
        ``refused``).
    """
    from wticonv.measuring.timing import check_limits

    check_limits(iterations, time_cap_ms, workspace_limit)
    problems = list(problems)
    run = Run("find", cluster, devices, store, allow_tf32, progress, time_limit_s)
    run.task_fn = task_fn

    def body():
        tasks = []
        for res in list(run.report.devices):
            done = run.finds_done(res, problems, workspace_limit) if resume else {}
            todo = [p for p in problems if p.key not in done]
            run.report.skipped[res] = len(problems) - len(todo)
            perf = merge.perf_rows(run.store, run.keys(res), [p.key for p in todo])
            tasks += _compile_ahead(run, res, [p.key for p in todo], workspace_limit,
                                    search)
            tasks += [run.task(res, "find", p.key, problems=[p.key], iterations=iterations,
                               time_cap_ms=time_cap_ms, workspace_limit=workspace_limit,
                               search=search, perf=[r for r in perf if r[0] == p.key])
                      for p in todo]

        def got(task, value, dev):
            for item in value["results"]:
                merge.merge_find(run.store, dev["key"], item)
                run.report.results.setdefault(task.resource, []).append(item)
        run.run(tasks, got)

    return go(run, body)


def tune(problems, cluster=None, devices=None, iterations: int = 3,
         time_cap_ms: float = 500.0, workspace_limit: int | None = None, solvers=None,
         store=None, resume: bool = True, progress=None,
         time_limit_s: float = TIME_LIMIT_S, task_fn=None) -> FleetReport:
    """:func:`wticonv.measuring.tune.tune` on every problem on every device of the fleet,
    each solver's fastest perf config merged into ``store``'s perf-db. Raises as
    :func:`find`; a problem counts as done when the perf-db has a record of the
    installed version for each of ``solvers`` (default: every tunable solver)."""
    from wticonv.measuring.timing import check_limits

    check_limits(iterations, time_cap_ms, workspace_limit)
    problems = list(problems)
    solvers = [solvers] if isinstance(solvers, str) else solvers
    run = Run("tune", cluster, devices, store, False, progress, time_limit_s)
    run.task_fn = task_fn
    wanted = list(solvers) if solvers else [sid for sid, e in run.registry.solvers.items()
                                            if e.tunable]

    def body():
        tasks = []
        for res in run.report.devices:
            todo = [p for p in problems if not (resume and merge.tune_done(
                run.store, run.keys(res), p.key, wanted, run.versions))]
            run.report.skipped[res] = len(problems) - len(todo)
            perf = merge.perf_rows(run.store, run.keys(res), [p.key for p in todo])
            tasks += [run.task(res, "tune", p.key, problems=[p.key], iterations=iterations,
                               time_cap_ms=time_cap_ms, workspace_limit=workspace_limit,
                               solvers=solvers, perf=[r for r in perf if r[0] == p.key])
                      for p in todo]

        def got(task, value, dev):
            for item in value["results"]:
                merge.merge_tune(run.store, dev["key"], item)
                run.report.results.setdefault(task.resource, []).append(item)
        run.run(tasks, got)

    return go(run, body)


def evaluate(problems, cluster=None, devices=None, iterations: int = 5,
             time_cap_ms: float = 1000.0, workspace_limit: int | None = None, counts=None,
             store=None, allow_tf32: bool = False, resume: bool = True, progress=None,
             time_limit_s: float = TIME_LIMIT_S, task_fn=None) -> FleetReport:
    """:func:`wticonv.measuring.evaluate.evaluate` on every device of the fleet: each
    problem is timed on a worker (find mode, recorded in ``store``'s find-db; a problem
    the find-db has already is only scored, from its records) and scored there by
    :func:`wticonv.measuring.evaluate.score` against the device's calibration in
    ``store``, so the cases equal a serial run's on the same measurements. The report's
    ``cases`` hold them per device, in problem order; ``counts`` as in the serial
    function. Problems no solver ran are left out with a warning."""
    import warnings

    from wticonv.measuring.evaluate import Case, _counts
    from wticonv.problem.conv import parse_key

    problems = list(problems)
    weights = dict(zip(problems, _counts(problems, counts), strict=True))
    run = Run("evaluate", cluster, devices, store, allow_tf32, progress, time_limit_s)
    run.task_fn = task_fn
    got_cases: dict = {}

    def body():
        tasks = []
        for res in list(run.report.devices):
            keys = run.keys(res)
            cal, digest = run.shared(calibration_of(run.store, keys, run.versions))
            perf = merge.perf_rows(run.store, keys, [p.key for p in problems])
            finds = run.finds_done(res, problems, workspace_limit) if resume else {}
            tasks += _compile_ahead(run, res, [p.key for p in problems
                                               if p.key not in finds], workspace_limit)
            skipped = 0
            for p in problems:
                done = finds.get(p.key)
                measured = {sid: rec[2] for sid, rec in done.items()} if done else None
                skipped += measured is not None
                tasks.append(run.task(res, "evaluate", p.key, problems=[(p.key, measured)],
                                      iterations=iterations, time_cap_ms=time_cap_ms,
                                      workspace_limit=workspace_limit, calibration=cal,
                                      calibration_digest=digest,
                                      perf=[r for r in perf if r[0] == p.key]))
            run.report.skipped[res] = skipped

        def got(task, value, dev):
            for item in value["results"]:
                if item["records"]:
                    merge.merge_find(run.store, dev["key"], item)
                got_cases[(task.resource, item["problem"])] = item
        run.run(tasks, got)

    report = go(run, body)
    for res in report.devices:
        cases = []
        for p in problems:
            item = got_cases.get((res, p.key))
            if item is None:
                continue
            if item["case"] is None:
                warnings.warn(f"wticonv: no solver could run {p.key} on "
                              f"{report.device_name(res)} "
                              f"({item['reason']}); it is left out of the evaluation",
                              stacklevel=2)
                continue
            c = item["case"]
            cases.append(Case(parse_key(p.key), c["best"], dict(c["chosen"]),
                              dict(c["slowdown"]), dict(c["measured_ms"]),
                              dict(c["predicted_ms"]), weights[p],
                              tuple(c.get("retimed", ()))))
        report.cases[res] = cases
    return report


def calibrate(cluster=None, devices=None, n: int | None = None, iterations: int = 3,
              time_cap_ms: float = 100.0, budget_s: float | None = None, store=None,
              progress=None, measurements: dict | None = None,
              time_limit_s: float = TIME_LIMIT_S, task_fn=None) -> FleetReport:
    """:func:`wticonv.measuring.calibrate.calibrate` on every device of the fleet: the
    probes (:func:`~wticonv.measuring.calibrate.probe_problems` of the device's kind) in
    tasks of :data:`PROBE_CHUNK`, measured by the device's workers together until the
    budget (default :data:`~wticonv.measuring.calibrate.BUDGET_S` of its kind, from the
    run's start) is spent, then fitted on one of its workers and stored in ``store`` for
    the device (replacing its calibration). ``measurements``, when a dict, receives per
    resource the ``(problem, solver, raw predicted ms, measured ms)`` runs. An
    interrupted calibration stores nothing (as a serial one)."""
    from wticonv.measuring.calibrate import BUDGET_S, PROBE_COUNT, probe_problems
    from wticonv.problem.conv import parse_key

    if budget_s is not None and not (isinstance(budget_s, (int, float)) and budget_s > 0):
        raise FleetError(f"budget_s={budget_s!r} must be a positive number of seconds")
    run = Run("calibrate", cluster, devices, store, False, progress, time_limit_s)
    run.task_fn = task_fn
    runs: dict = {}

    def body():
        tasks = []
        for res, dev in run.report.devices.items():
            budget = budget_s or BUDGET_S.get(dev["kind"], BUDGET_S["cpu"])
            deadline = time.time() + budget
            keys = [p.key for p in probe_problems(dev["kind"], PROBE_COUNT, n=n)]
            tasks += [run.task(res, "probes", f"probes {i + 1}-{i + len(chunk)}",
                               problems=chunk, iterations=iterations,
                               time_cap_ms=time_cap_ms, deadline=deadline,
                               not_after=deadline)
                      for i in range(0, len(keys), PROBE_CHUNK)
                      for chunk in [keys[i:i + PROBE_CHUNK]]]
        def measured(task, value, dev):          # solvers this process has (the fit's)
            runs.setdefault(task.resource, []).extend(
                r for r in value["results"] if r[1] in run.versions)
        run.run(tasks, measured)
        fits = [run.task(res, "fit", "fit", runs=rs) for res, rs in runs.items() if rs]

        def fitted(task, value, dev):
            out = value["results"]
            factors = {k: tuple(v) for k, v in out["factors"].items()}
            run.store.put_calibration(dev["key"], [
                (k, run.versions[k.split("@")[0]], f, c) for k, (f, c) in factors.items()])
            run.store.put_correction(dev["key"], [
                (sid, run.versions[sid], out["features"], model, k)
                for sid, (model, k) in out["models"].items()])
            run.report.factors[task.resource] = factors
        run.run(fits, fitted)

    report = go(run, body)
    if measurements is not None:
        for res, rs in runs.items():
            measurements[res] = [(parse_key(k), sid, pred, t) for k, sid, pred, t in rs]
    return report
