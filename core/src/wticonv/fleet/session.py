"""One fleet run on the caller's side (:mod:`wticonv.fleet.jobs` builds on it): the fleet,
the caller's solvers and store, the devices its workers describe, and what the workers
need to measure and predict as the caller would.

- The caller's *effective* records go with the tasks: its figures of each device, its
  perf-db rows of the task's problems, its calibration of the device (its own, else the
  system database's it would use, with its source) and its system perf-db and find-db
  records of the task's problems. A worker sets its own system databases aside for the
  device (:func:`wticonv.fleet.jobs_worker.sync`), so a remote worker with another
  ``wticonv-sysdb`` (or none) predicts as the caller does.
- A worker whose installed solvers are not the caller's has its results refused
  (:class:`wticonv.fleet.merge.WorkerMismatch`), reported once per worker
  (:attr:`FleetReport.refused`).
- A problem's find is done (resume) when its find-db holds records of the installed
  versions for every solver find mode would time on the device, which a worker of the
  device says (:meth:`Run.finds_done`, the ``pending`` job).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from wticonv.errors import FleetError
from wticonv.fleet import merge
from wticonv.fleet.runner import Task, run_tasks

__all__ = ["FleetReport", "Run", "go", "calibration_of"]


@dataclass
class FleetReport:
    """What a fleet run did.

    Attributes
    ----------
    job : str
    devices : dict
        Resource -> the device its workers measured (``key``, ``kind``, ``name``,
        ``platform``, ``driver``, ``index``).
    results : dict
        Resource -> the job's results, one per problem done in this run (find:
        ``problem``, ``records``, ``reasons``, ``perf``; tune: ``problem``, ``results``).
    cases : dict
        evaluate: resource -> :class:`~wticonv.measuring.evaluate.Case` list, in the
        order of the problems (resumed ones included).
    factors : dict
        calibrate: resource -> ``{key: (factor, probes)}`` as
        :func:`wticonv.measuring.calibrate.calibrate` returns.
    skipped : dict
        Resource -> problems skipped because the store had them (resume).
    failures : list
        ``(resource, label, reason)`` of each task that failed twice, found no worker,
        or whose result was refused; the others went on.
    refused : dict
        Worker name -> why its results were refused (its solvers are not the caller's:
        which differ, and what to do), once per worker.
    interrupted : bool
        Ctrl-C stopped the run; what was merged before is kept.
    timings : list
        Per task: submitted, started, ended, merged (:class:`~wticonv.fleet.runner.RunReport`).
    """

    job: str
    devices: dict = field(default_factory=dict)
    results: dict = field(default_factory=dict)
    cases: dict = field(default_factory=dict)
    factors: dict = field(default_factory=dict)
    skipped: dict = field(default_factory=dict)
    failures: list = field(default_factory=list)
    refused: dict = field(default_factory=dict)
    interrupted: bool = False
    timings: list = field(default_factory=list)

    def device_name(self, resource: str) -> str:
        """The name of the device of ``resource`` (the resource itself before its workers
        described it)."""
        return self.devices.get(resource, {}).get("name", resource)


def calibration_of(store, keys, versions: dict | None = None) -> dict:
    """The caller's effective calibration of the devices ``keys``, as plain data for the
    workers: ``{key: {"factors", "models", "source", "system_db"}}``, its store's
    (``"user calibration"``), else the system database's its selection would use
    (``"system calibration"`` and that database's name), else none (``""``); with the
    installed solver ``versions``, the first that holds a record of them, as selection
    picks it (:func:`wticonv.db.system.pick_calibration`)."""
    from wticonv.db.system import pick_calibration, system_view

    out = {}
    for key in keys:
        factors, models, source, name = pick_calibration(
            (store.get_calibration(key), store.get_correction(key)), system_view(key),
            versions)
        out[key] = {"factors": [(sid, ver, f) for sid, (ver, f) in sorted(factors.items())],
                    "models": [(sid, ver, list(names), model) for sid, (ver, names, model)
                               in sorted(models.items())],
                    "source": source, "system_db": name}
    return out


def system_rows(key: str, problem_keys) -> dict:
    """The caller's system perf-db and find-db records of ``problem_keys`` on the device
    ``key`` (:func:`wticonv.db.system.system_view`), as plain data for the workers."""
    from wticonv.db.system import system_view

    view, keys = system_view(key), set(problem_keys)
    return {"perf": [(pk, sid, *rec, name) for (pk, sid), (rec, name) in
                     sorted(view.perf.items()) if pk in keys],
            "find": [(pk, name, [(sid, *rec) for sid, rec in sorted(recs.items())])
                     for pk, (recs, name) in sorted(view.find.items()) if pk in keys]}


class Run:
    """One fleet run: the fleet, the caller's solvers and store, the described devices."""

    def __init__(self, job, cluster, devices, store, allow_tf32, progress, time_limit_s,
                 registry=None):
        from wticonv.contract.registry import SolverRegistry
        from wticonv.db.store import Store
        from wticonv.fleet.cluster import Fleet

        self.report = FleetReport(job)
        self.store = store if store is not None else Store()
        self.registry = registry if registry is not None else SolverRegistry()
        self.versions = {sid: e.version for sid, e in self.registry.solvers.items()}
        self.base = {"disabled": sorted(self.registry.disabled), "allow_tf32": allow_tf32,
                     "time_limit_s": time_limit_s}
        self.progress = progress
        self.fleet = cluster if isinstance(cluster, Fleet) else Fleet(cluster, devices)
        self.own = self.fleet is not cluster
        self.task_fn = None

    def task(self, resource, job, label, not_after=None, **spec) -> Task:
        """A task of ``job``; one with problems on a described device carries the
        caller's system records of them (:func:`system_rows`)."""
        tid = f"wticonv-{job}-{uuid.uuid4().hex[:12]}"
        if "problems" in spec and resource in self.report.devices:
            keys = [p if isinstance(p, str) else p[0] for p in spec["problems"]]
            spec["system"] = system_rows(self.report.devices[resource]["key"], keys)
        return Task(tid, resource, {**self.base, **spec, "job": job, "resource": resource,
                                    "id": tid}, label, self.task_fn, not_after)

    def _progress(self, snapshot: dict) -> None:
        self.progress({res: {**counts, "device": self.report.device_name(res)}
                       for res, counts in snapshot.items()})

    def run(self, tasks, on_result) -> None:
        """Run ``tasks``, each result checked (:func:`wticonv.fleet.merge.check_result`)
        before ``on_result(task, value, device)``; failures go to the report."""
        def merged(task, value):
            try:
                dev = merge.check_result(task, value, self.versions)
            except merge.WorkerMismatch as e:
                self.report.refused.setdefault(e.worker, str(e))
                raise FleetError(f"result refused: worker {e.worker}'s solvers are not "
                                 "this process's") from None
            on_result(task, value, dev)

        rep = run_tasks(self.fleet.client, tasks, merged,
                        self._progress if self.progress is not None else None)
        self.report.failures += [(t.resource, t.label, why) for t, why in rep.failed]
        self.report.timings += rep.timings
        self.report.interrupted |= rep.interrupted
        if rep.interrupted:
            raise KeyboardInterrupt

    def describe(self) -> dict:
        """Resource -> the device of the first of its workers that answered."""
        targets = self.fleet.targets()
        if not targets:
            raise FleetError("the cluster has no worker serving a wticonv device (see "
                             "docs/fleet.md: `wticonv worker SCHEDULER`)")

        def got(task, value, dev):
            self.report.devices.setdefault(task.resource, dev)

        self.run([self.task(t.resource, "describe", "describe") for t in targets], got)
        self.base["figures"] = {dev["key"]: self.figures_of(dev)
                                for dev in self.report.devices.values()}
        return self.report.devices

    def figures_of(self, dev: dict) -> tuple:
        """The caller's figures of a device, ``(peak, bandwidth, launch overhead)``: those
        in its store, else the worker's (then stored, so every task and the next run
        predict with the same)."""
        key, store = dev["key"], self.store
        if store.get_device_figures(key) is None:
            store.put_device_figures(key, dev["peak_flops"], dev["bandwidth"])
        overhead = store.put_launch_overhead(key, dev["launch_overhead_s"])  # first stays
        return (*store.get_device_figures(key), overhead)

    def shared(self, data) -> tuple:
        """``data`` sent once to every worker (``distributed.Client.scatter``: a learned
        calibration is megabytes, too much to send with each task), and its digest (the
        worker applies it once per change)."""
        import hashlib
        import json

        digest = hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode())
        return (self.fleet.client.scatter([data], broadcast=True, hash=False)[0],
                digest.hexdigest())

    def keys(self, resource) -> list[str]:
        return [self.report.devices[resource]["key"]]

    def finds_done(self, resource, problems, workspace_limit) -> dict:
        """``{problem key: find-db records}`` of the ``problems`` whose find is done on
        ``resource``'s device: their records are of the installed versions
        (:func:`wticonv.fleet.merge.find_done`) and cover every solver find mode would
        time there. Where they lack an enabled solver, one ``pending`` task asks a
        worker of the device whether that solver applies (an inapplicable one never has
        a record); if it fails, those problems count as not done."""
        keys = self.keys(resource)
        done = {}
        for p in problems:
            records = merge.find_done(self.store, keys, p.key, self.versions)
            if records:
                done[p.key] = records
        enabled = set(self.versions) - set(self.registry.disabled)
        unsure = [(k, sorted(recs)) for k, recs in done.items() if enabled - set(recs)]
        if not unsure:
            return done
        answered: list = []
        perf = merge.perf_rows(self.store, keys, [k for k, _ in unsure])
        self.run([self.task(resource, "pending", "resume check", problems=unsure,
                            workspace_limit=workspace_limit, perf=perf)],
                 lambda task, value, dev: answered.append(set(value["results"])))
        pending = answered[0] if answered else {k for k, _ in unsure}
        return {k: recs for k, recs in done.items() if k not in pending}

    def close(self) -> None:
        if self.own:
            self.fleet.close()


def go(run: Run, body) -> FleetReport:
    """Describe the devices, run ``body()``, close the fleet (if the run opened it);
    Ctrl-C ends the run with ``interrupted`` set."""
    try:
        run.describe()
        body()
    except KeyboardInterrupt:
        run.report.interrupted = True
    finally:
        run.close()
    return run.report
