"""The jobs a fleet's worker runs (:func:`wticonv.fleet.worker.run_task` dispatches to
:data:`JOBS`): each is the serial measuring function of :mod:`wticonv.measuring` on the
worker's handle, its answer made plain data.

Before a job, :func:`sync` puts into the worker's own store the caller's records the job
depends on, so that the worker measures and predicts as a serial run on the caller's
store would: the perf-db rows of the task's problems (the perf config a tunable solver
is timed with when not searched, and the default a tuning starts from), for
``evaluate`` the device's calibration (the fallback's choice depends on it), and the
caller's *system* records of the device: its system calibration where it has no
calibration of its own, and the system perf-db and find-db records of the task's
problems. The worker's own system databases (another ``wticonv-sysdb`` version, or
none) are set aside for the device (:func:`wticonv.db.system.override_view`).
"""

from __future__ import annotations

import hashlib
import json

from wticonv.problem.conv import parse_key

__all__ = ["JOBS", "sync"]


def sync(handle, spec: dict, synced: dict) -> None:
    """Apply the caller's perf-db rows (``spec["perf"]``: ``(problem key, solver id,
    version, perf config, ms, default ms)``, replacing the worker's rows of the task's
    problems), calibration (``spec["calibration"]``: device key -> ``{"factors":
    [(solver, version, factor)], "models": [(solver, version, feature names, model)],
    "source", "system_db"}``, the user's (stored here) or a system database's (``source``
    ``"system calibration"``: served as the device's system calibration), applied when
    its digest, ``spec["calibration_digest"]``, changed since the last task; ``synced``
    remembers) and system records (``spec["system"]``: ``{"perf": [(problem key, solver,
    version, config, ms, default ms, database)], "find": [(problem key, database,
    [(solver, version, workspace, ms, runs, capped)])]}``) to the worker's store and
    system view of the device."""
    from wticonv.db.system import DeviceView, override_view

    store, key = handle.device.store, handle.device.key
    changed = False
    if "perf" in spec:
        keys = {p if isinstance(p, str) else p[0] for p in spec.get("problems", ())}
        for (pk, sid) in list(store.get_perf_records(key)):
            if pk in keys:
                store.delete_perf_record(key, pk, sid)
        for pk, sid, ver, cfg, t, t0 in spec["perf"]:
            store.put_perf_record(key, pk, sid, ver, cfg, t, t0)
        changed = True
    if "calibration" in spec:
        digest = spec.get("calibration_digest") or hashlib.sha256(json.dumps(
            spec["calibration"], sort_keys=True, default=str).encode()).hexdigest()
        if synced.get((id(store), key), ("",))[0] != digest:
            cal = (spec["calibration"] or {}).get(key) or {"factors": [], "models": []}
            system = cal.get("source") == "system calibration"
            store.put_calibration(key, [] if system else
                                  [(sid, ver, f, 1) for sid, ver, f in cal["factors"]])
            store.put_correction(key, [] if system else
                                 [(sid, ver, names, model, 1)
                                  for sid, ver, names, model in cal["models"]])
            served = ({sid: (ver, f) for sid, ver, f in cal["factors"]},
                      {sid: (ver, tuple(names), model)
                       for sid, ver, names, model in cal["models"]},
                      cal.get("system_db") or "") if system else ({}, {}, "")
            synced[(id(store), key)] = (digest, served)
            changed = True
    if "system" in spec:
        factors, models, source = synced.get((id(store), key), ("", ({}, {}, "")))[1]
        rows = spec["system"]
        override_view(key, DeviceView(
            calibrations=[(source, factors, models, key)] if source else [],
            find={pk: ({sid: tuple(r) for sid, *r in recs}, name)
                  for pk, name, recs in rows.get("find", ())},
            perf={(pk, sid): ((ver, cfg, t, t0), name)
                  for pk, sid, ver, cfg, t, t0, name in rows.get("perf", ())}))
        changed = True
    if changed:
        handle.forget_selections()


def _describe(handle, spec: dict) -> list:
    return []                           # run_task's answer names the device


def _perf_rows(handle, problem_key: str) -> list:
    """The worker's perf-db rows of one problem: ``(solver, version, config, ms, default
    ms)``."""
    rows = handle.device.store.get_perf_records(handle.device.key)
    return sorted((sid, *rec) for (pk, sid), rec in rows.items() if pk == problem_key)


def _find(handle, spec: dict) -> list:
    from wticonv.measuring.find import find

    out = []
    tunable = [sid for sid, e in handle.registry.solvers.items() if e.tunable]
    for key in spec["problems"]:
        p = parse_key(key)
        results = find(handle, p, spec["iterations"], spec["time_cap_ms"],
                       spec["workspace_limit"], record=True, search=spec["search"])
        perf = _perf_rows(handle, key) if spec["search"] else []
        out.append({"problem": key,
                    "records": [(r.solver_id, r.version, r.workspace, r.time_ms, r.runs,
                                 r.capped) for r in results if r.time_ms is not None],
                    "reasons": {r.solver_id: r.reason for r in results if r.reason},
                    "perf": perf,
                    "perf_cleared": sorted(set(tunable) - {row[0] for row in perf})
                    if spec["search"] else []})
    return out


def _tune(handle, spec: dict) -> list:
    from wticonv.measuring.tune import tune

    out = []
    for key in spec["problems"]:
        results = tune(handle, parse_key(key), spec["workspace_limit"], spec["iterations"],
                       spec["time_cap_ms"], record=False, solvers=spec.get("solvers"))
        out.append({"problem": key, "results": [dict(r.__dict__) for r in results]})
    return out


def _evaluate(handle, spec: dict) -> list:
    from wticonv.measuring.evaluate import CONFIRM_ABOVE, confirm, score
    from wticonv.measuring.find import find

    out = []
    for key, measured in spec["problems"]:
        p = parse_key(key)
        records, why = [], ""
        timed_here = measured is None
        if timed_here:                             # not in the caller's find-db: time it
            results = find(handle, p, spec["iterations"], spec["time_cap_ms"],
                           spec["workspace_limit"], search=False)
            measured = {r.solver_id: r.time_ms for r in results if r.time_ms is not None}
            why = next((r.reason for r in results if r.reason), "no solver is installed")
        case = None
        if measured:
            c = score(handle, p, measured, spec["workspace_limit"])
            if timed_here:                 # timed once more where a rule misses, as serially
                c = confirm(handle, c, spec["iterations"], spec["time_cap_ms"],
                            spec["workspace_limit"], CONFIRM_ABOVE, results)
                records = [(r.solver_id, r.version, r.workspace, r.time_ms, r.runs,
                            r.capped) for r in results if r.time_ms is not None]
            case = {"best": c.best, "chosen": c.chosen, "slowdown": c.slowdown,
                    "measured_ms": c.measured_ms, "predicted_ms": c.predicted_ms,
                    "retimed": list(c.retimed)}
        out.append({"problem": key, "records": records, "case": case, "reason": why})
    return out


def _compile(handle, spec: dict) -> list:
    """Compile ahead, several at once in build helpers, the programs that timing every
    enabled solver on the problems of ``spec["compile"]`` (keys) will build
    (:func:`wticonv.measuring.precompile.precompile_problems`, with every perf config a
    tunable solver offers when ``spec["search"]``), as the serial ``find`` and
    ``evaluate`` do for a network before they time it. Without it a worker compiles each
    problem's programs one after another as its task runs them (on the H100, evaluating
    AlexNet's 15 layers at N=8 on a fresh worker took 11.6 s against the serial run's
    3.5 s). A program that fails to compile is left for the task that needs it to
    report. Returns ``[]``: there is nothing to merge."""
    from wticonv.measuring.precompile import precompile_problems

    precompile_problems(handle, [parse_key(k) for k in spec["compile"]],
                        spec.get("workspace_limit"), bool(spec.get("search", False)))
    return []


def _probes(handle, spec: dict) -> list:
    import time

    from wticonv.measuring.calibrate import measure_probes

    budget = spec["deadline"] - time.time()     # the device's budget, shared by its tasks
    if budget <= 0:
        return []
    runs = measure_probes(handle, [parse_key(k) for k in spec["problems"]],
                          spec["iterations"], spec["time_cap_ms"], budget)
    return [(p.key, sid, pred, t) for p, sid, pred, t in runs]


def _fit(handle, spec: dict) -> dict:
    from wticonv.measuring.calibrate import fit_factors
    from wticonv.measuring.correction_fit import fit_correction
    from wticonv.selection.correction import FEATURES

    runs = [(parse_key(k), sid, pred, t) for k, sid, pred, t in spec["runs"]]
    return {"factors": fit_factors(runs), "features": list(FEATURES),
            "models": fit_correction(runs, handle.device)}


def _pending(handle, spec: dict) -> list:
    """The problems of ``spec["problems"]`` (``(key, solver ids the caller's find-db has
    records of)``) that a solver find mode would time here has no record of
    (:func:`wticonv.selection.ranking.runnable`): their find is not done."""
    from wticonv.selection.ranking import runnable

    out = []
    for key, recorded in spec["problems"]:
        wanted = runnable(handle.registry, parse_key(key), handle.device,
                          spec["workspace_limit"], handle.allow_tf32)
        if wanted - set(recorded):
            out.append(key)
    return out


#: Job name -> the function a worker runs it with, ``(handle, spec) -> plain data``.
JOBS = {"describe": _describe, "pending": _pending, "compile": _compile, "find": _find,
        "tune": _tune, "evaluate": _evaluate, "probes": _probes, "fit": _fit}
