"""The caller's side of a fleet: what is done already (resume), and merging what the
workers return into the caller's store, under the store's own validation.

A worker's result names the device it measured (its key: platform, name, driver) and
the ids and versions of its solvers. :func:`check_result` refuses a result from a device
other than the task's, or from a worker whose installed solvers are not this process's:
one of another version measured another solver (its records would be stale here, as
find-db records of another version are), one that lacks a solver leaves out its times
(a find-db problem without them would pass for done), one with a solver this process
lacks measured what this process cannot use (:class:`WorkerMismatch`, one message per
worker). The records are stored under the worker's device key, so each driver keeps its
own. The store's ``put_*`` methods check every
value (a time that is not a positive finite number, a bad perf config) and write
each problem's find-db records in one transaction; a problem's perf-db rows are written
before its find-db records, which mark it done for :func:`find_done`, so a merge
interrupted between the two is done again by the next run.
"""

from __future__ import annotations

from wticonv.errors import FleetError
from wticonv.fleet.targets import device_resource

__all__ = ["WorkerMismatch", "check_result", "solver_difference", "find_done",
           "merge_find", "merge_tune", "perf_rows", "tune_done"]


class WorkerMismatch(FleetError):
    """A worker's installed solvers (ids, versions) are not the caller's: its results are
    refused. ``worker`` names it; the message says which solvers differ."""

    def __init__(self, message: str, worker: str) -> None:
        super().__init__(message)
        self.worker = worker


def solver_difference(theirs: dict, ours: dict) -> str:
    """How a worker's solvers (``theirs``: id -> version) differ from this process's
    (``ours``), in words ("" when they are the same)."""
    lacks = sorted(set(ours) - set(theirs))
    extra = sorted(set(theirs) - set(ours))
    other = sorted(sid for sid in set(ours) & set(theirs) if ours[sid] != theirs[sid])
    parts = []
    if lacks:
        parts.append("lacks " + ", ".join(f"{sid} {ours[sid]}" for sid in lacks))
    if extra:
        parts.append("has " + ", ".join(f"{sid} {theirs[sid]}" for sid in extra)
                     + ", which this process has not")
    if other:
        parts.append("runs " + ", ".join(f"{sid} {theirs[sid]} (here {ours[sid]})"
                                         for sid in other))
    return "; ".join(parts)


def check_result(task, value: dict, versions: dict) -> dict:
    """``value``'s device (a dict) after checking that it is the task's device and that
    the worker's installed solvers (``value["versions"]``) are this process's
    (``versions``: solver id -> version): the same ids, in the same versions.

    Raises
    ------
    FleetError
        Another device than the task's.
    WorkerMismatch
        Naming the worker and the solvers that differ, and what to do.
    """
    dev = value["device"]
    worker = str(value.get("worker"))
    if device_resource(dev["kind"], dev["name"]) != task.resource:
        raise FleetError(f"worker {worker} measured {dev['name']!r} for a task of "
                         f"{task.resource!r}; its results are refused")
    diff = solver_difference(value.get("versions", {}), versions)
    if diff:
        raise WorkerMismatch(f"worker {worker} ({dev['name']}) {diff}: its results are "
                             "refused; install the same plugins, in the same versions, on "
                             "every worker as here (`wticonv plugins` lists them)", worker)
    return dev


def find_done(store, device_keys, problem_key: str, versions: dict) -> dict | None:
    """The find-db records of ``problem_key`` under one of ``device_keys`` whose every
    solver has its installed version (``{solver: (version, workspace, ms, runs,
    capped)}``), or None when there are none: the problem is then still to do."""
    for key in device_keys:
        records = store.get_find_records(key, problem_key)
        if records and all(versions.get(sid) == rec[0] for sid, rec in records.items()):
            return records
    return None


def tune_done(store, device_keys, problem_key: str, solvers, versions: dict) -> bool:
    """Whether the perf-db holds a record of the installed version for each of
    ``solvers`` on ``problem_key`` under one of ``device_keys`` (a tuning whose best was
    the solver's default leaves no record, so such a problem is tuned again)."""
    for key in device_keys:
        rows = store.get_perf_records(key)
        if solvers and all(rows.get((problem_key, sid), (None,))[0] == versions.get(sid)
                           for sid in solvers):
            return True
    return False


def perf_rows(store, device_keys, problem_keys) -> list:
    """The caller's perf-db rows of ``problem_keys`` (under any of ``device_keys``):
    ``(problem key, solver, version, perf config, ms, default ms)``, for the workers."""
    keys = set(problem_keys)
    out = []
    for dkey in device_keys:
        for (pk, sid), rec in store.get_perf_records(dkey).items():
            if pk in keys:
                out.append((pk, sid, *rec))
    return out


def merge_find(store, device_key: str, item: dict) -> None:
    """Store one problem's find result from a worker (``item``: ``problem``, ``records``,
    ``perf``, ``perf_cleared``): its tuned perf configs first, then its find-db records
    (one transaction), as a serial ``find`` on ``store`` would have written them."""
    pk = item["problem"]
    for sid, ver, cfg, t, t0 in item.get("perf", ()):
        store.put_perf_record(device_key, pk, sid, ver, cfg, t, t0)
    for sid in item.get("perf_cleared", ()):
        store.delete_perf_record(device_key, pk, sid)
    if item["records"]:
        store.put_find_records(device_key, pk, [tuple(r) for r in item["records"]])


def merge_tune(store, device_key: str, item: dict) -> None:
    """Store one problem's tuning from a worker (``item``: ``problem``, ``results``, the
    :class:`~wticonv.measuring.tune.TuneResult` fields): each solver's best perf config,
    or no record where its default was fastest (as :func:`wticonv.measuring.tune.tune`
    records them)."""
    from wticonv.selection.perfdb import DEFAULT_PERF_CONFIG

    pk = item["problem"]
    for r in item["results"]:
        if r["best_config"] is None:
            continue
        if r["best_config"] == DEFAULT_PERF_CONFIG:
            store.delete_perf_record(device_key, pk, r["solver_id"])
        else:
            store.put_perf_record(device_key, pk, r["solver_id"], r["version"],
                                  r["best_config"], r["best_ms"],
                                  r["default_ms"] or r["best_ms"])
        r["recorded"] = True
