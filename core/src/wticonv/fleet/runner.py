"""Running a fleet's tasks: submitted a few at a time per device, merged as they finish.

:func:`run_tasks` keeps, per device resource, at most :data:`WINDOW` tasks per worker
submitted (one running, the next waiting on the worker, so a worker never waits for the
caller), each asking for its device's resource and retried once by the scheduler
(``retries``) when it raises. A worker that dies (its process killed, or ended by a task
past its time limit, :mod:`wticonv.fleet.worker`) has its tasks run elsewhere by the
scheduler; a task on two workers that died is failed by it (``allowed-failures``, set to
1 by a local cluster). Results are merged, through ``on_result``, one at a time as they
arrive (in the order they finish), so a run interrupted with Ctrl-C keeps what was
merged. A task whose device no worker serves is reported at once, not left waiting; one
whose workers all went away, after :data:`NO_WORKER_GRACE_S`. A scheduler that goes away
mid-run (closed, restarted, its machine gone) is a :class:`~wticonv.errors.FleetError`
saying so: what was merged stays merged, and the next run resumes.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field

from wticonv.errors import FleetError, one_line
from wticonv.fleet.worker import EVENT_TOPIC

__all__ = ["Task", "RunReport", "run_tasks", "scheduler_gone", "WINDOW",
           "NO_WORKER_GRACE_S"]

#: Tasks submitted at a time per worker of a device (one running, one waiting).
WINDOW = 2
#: Seconds a device may have no worker (one died, its nanny starting it again) before its
#: waiting tasks are reported failed.
NO_WORKER_GRACE_S = 60.0


@dataclass
class Task:
    """One unit of a fleet's work: ``fn(spec)`` run on a worker of ``resource``.

    ``label`` names it in reports (its problem key, or how many probes); a task not yet
    submitted at ``not_after`` (``time.time()`` seconds) is dropped, as done with nothing
    to merge (a calibration's probes past its budget)."""

    id: str
    resource: str
    spec: dict
    label: str
    fn: object = None
    not_after: float | None = None


@dataclass
class RunReport:
    """What :func:`run_tasks` did.

    Attributes
    ----------
    done : int
        Tasks whose result was merged.
    failed : list
        ``(task, reason)`` of the tasks that failed (twice, or on no worker) or whose
        result was refused by the merge.
    interrupted : bool
        Ctrl-C stopped the run (what was merged is kept).
    timings : list of dict
        Per finished task: ``id``, ``resource``, ``worker``, ``submitted``, ``started``
        and ``ended`` (the task's own work, on the worker), ``merged`` (``time.time()``
        seconds; the workers of a local cluster share the caller's clock).
    """

    done: int = 0
    failed: list = field(default_factory=list)
    interrupted: bool = False
    timings: list = field(default_factory=list)


class _Counts:
    """Per resource: tasks done, running, failed and remaining (progress)."""

    def __init__(self, tasks) -> None:
        self.lock = threading.Lock()
        self.total: dict[str, int] = {}
        for t in tasks:
            self.total[t.resource] = self.total.get(t.resource, 0) + 1
        self.done = dict.fromkeys(self.total, 0)
        self.failed = dict.fromkeys(self.total, 0)
        self.running: dict[str, set] = {r: set() for r in self.total}
        self.changed = False

    def snapshot(self) -> dict:
        with self.lock:
            return {r: {"done": self.done[r], "running": len(self.running[r]),
                        "failed": self.failed[r],
                        "remaining": self.total[r] - self.done[r] - self.failed[r]
                        - len(self.running[r])} for r in self.total}


def scheduler_workers(client) -> dict:
    """Every worker the scheduler knows: address -> its info (``resources``...)."""
    try:
        return client.scheduler_info(n_workers=-1)["workers"]
    except TypeError:            # distributed before 2025.4 lists every worker anyway
        return client.scheduler_info()["workers"]


def scheduler_gone(address) -> FleetError:
    """The error of a run whose scheduler went away."""
    return FleetError(f"the Dask scheduler at {address} went away (it closed, restarted or "
                      "cannot be reached any more): what finished was merged; run the "
                      "command again to resume (it skips what is done)")


def _lost(client) -> bool:
    """Whether ``client`` lost its scheduler (it is reconnecting, or closed)."""
    return getattr(client, "status", "running") not in ("running", "newly-created")


def _workers_by_resource(client) -> dict[str, int]:
    out: dict[str, int] = {}
    for w in scheduler_workers(client).values():
        for r, n in (w.get("resources") or {}).items():
            if n:
                out[r] = out.get(r, 0) + 1
    return out


def run_tasks(client, tasks, on_result, progress=None, retries: int = 1) -> RunReport:
    """Run ``tasks`` (:class:`Task`) on ``client``'s workers; call ``on_result(task,
    value)`` in this thread for each result as it arrives (an exception it raises, e.g. a
    refused record, fails that task); ``progress(snapshot)``, when given, after each
    change, with :meth:`_Counts.snapshot`'s ``{resource: {done, running, failed,
    remaining}}``. Returns the :class:`RunReport`; Ctrl-C cancels what is left and
    returns with ``interrupted`` set.

    Raises
    ------
    FleetError
        The scheduler went away (:func:`scheduler_gone`); the results merged before stay.
    """
    from concurrent.futures import CancelledError

    from distributed import TimeoutError as DaskTimeout
    from distributed import wait

    from wticonv.fleet.worker import run_task

    report = RunReport()
    counts = _Counts(tasks)
    queues: dict[str, deque] = {}
    for t in tasks:
        queues.setdefault(t.resource, deque()).append(t)
    inflight: dict = {}                     # future -> (task, submitted)
    on_worker: dict = {}                    # worker name -> the task it started last

    def on_event(event):
        msg = event[1] if isinstance(event, tuple) else event
        with counts.lock:
            task = by_id.get(msg.get("id"))
            if task is not None and task.id not in finished:
                # one thread per worker: the task it ran before has ended
                prev = on_worker.get(msg.get("worker"))
                if prev is not None:
                    counts.running[prev.resource].discard(prev.id)
                on_worker[msg.get("worker")] = task
                counts.running[task.resource].add(task.id)
                counts.changed = True
        # progress is called from this thread only: this handler runs in the client's
        # event loop, which an exception (a Ctrl-C) there would end

    by_id = {t.id: t for t in tasks}
    finished: set = set()

    def fail(task, reason):
        report.failed.append((task, reason))
        with counts.lock:
            finished.add(task.id)
            counts.running[task.resource].discard(task.id)
            counts.failed[task.resource] += 1

    def refill(workers):
        for res, q in queues.items():
            busy = sum(1 for t, _ in inflight.values() if t.resource == res)
            room = WINDOW * workers.get(res, 0) - busy
            while q and room > 0:
                t = q.popleft()
                if t.not_after is not None and time.time() > t.not_after:
                    with counts.lock:
                        counts.done[res] += 1
                        counts.changed = True
                    continue
                f = client.submit(t.fn or run_task, t.spec, key=t.id, pure=False,
                                  resources={res: 1}, retries=retries)
                inflight[f] = (t, time.time())
                room -= 1

    address = getattr(getattr(client, "scheduler", None), "address", None) or "?"
    client.subscribe_topic(EVENT_TOPIC, on_event)
    missing_since: dict[str, float] = {}
    try:
        workers = _workers_by_resource(client)
        for res in list(queues):
            if not workers.get(res):
                while queues[res]:
                    fail(queues[res].popleft(), f"no worker serves device resource {res!r}: "
                         "start one with `wticonv worker` on a machine that has the device "
                         "(or `dask worker ... --resources \"" + res + "=1\"`)")
        if progress is not None:
            progress(counts.snapshot())
        refill(workers)
        checked = time.monotonic()
        while inflight or any(queues.values()):
            done: set = set()
            if not inflight:            # waiting for a worker of a device (a restart)
                time.sleep(0.5)
            else:
                try:
                    done, _ = wait(list(inflight), timeout=0.5,
                                   return_when="FIRST_COMPLETED")
                except DaskTimeout:
                    pass
            for f in done:
                task, submitted = inflight.pop(f)
                if f.status == "cancelled" and _lost(client):
                    raise scheduler_gone(address)
                if f.status == "finished":
                    try:
                        value = f.result()
                        on_result(task, value)
                    except Exception as e:  # noqa: BLE001 - a refused result is reported
                        fail(task, one_line(e) or type(e).__name__)
                        continue
                    report.done += 1
                    report.timings.append({"id": task.id, "resource": task.resource,
                                           "worker": value.get("worker"),
                                           "submitted": submitted,
                                           "started": value.get("started"),
                                           "ended": value.get("ended"),
                                           "merged": time.time()})
                    with counts.lock:
                        finished.add(task.id)
                        counts.running[task.resource].discard(task.id)
                        counts.done[task.resource] += 1
                else:
                    exc = f.exception() if f.status == "error" else None
                    fail(task, one_line(exc) if exc is not None else f"task {f.status}")
            if time.monotonic() - checked > 2.0 or done:
                if time.monotonic() - checked > 2.0:
                    workers = _workers_by_resource(client)
                    checked = time.monotonic()
                    _fail_unserved(workers, inflight, queues, missing_since, fail, client)
                refill(workers)
            if progress is not None and (done or counts.changed):
                counts.changed = False
                progress(counts.snapshot())
    except KeyboardInterrupt:
        report.interrupted = True
        client.cancel(list(inflight))
    except (CancelledError, OSError, DaskTimeout) as e:
        # distributed's FuturesCancelledError ("scheduler-connection-lost") is a
        # CancelledError, its CommClosedError an OSError
        if not _lost(client) and not isinstance(e, CancelledError):
            raise
        raise scheduler_gone(address) from None
    finally:
        try:
            client.unsubscribe_topic(EVENT_TOPIC)
        except Exception:  # noqa: BLE001 - a closed client has nothing to unsubscribe
            pass
    if progress is not None:
        progress(counts.snapshot())
    return report


def _fail_unserved(workers, inflight, queues, missing_since, fail, client) -> None:
    """Fail the tasks of resources that have had no worker for :data:`NO_WORKER_GRACE_S`."""
    now = time.monotonic()
    for res in {t.resource for t, _ in inflight.values()} | {r for r, q in queues.items()
                                                              if q}:
        if workers.get(res):
            missing_since.pop(res, None)
            continue
        since = missing_since.setdefault(res, now)
        if now - since < NO_WORKER_GRACE_S:
            continue
        why = (f"every worker of device resource {res!r} went away and none came back in "
               f"{NO_WORKER_GRACE_S:.0f} s")
        for f, (t, _) in list(inflight.items()):
            if t.resource == res:
                del inflight[f]
                client.cancel([f])
                fail(t, why)
        while queues.get(res):
            fail(queues[res].popleft(), why)
