"""What a fleet's workers run: :func:`run_task`, one job on a few problems of one device.

Each worker is a process of its own (a Dask worker, one thread) and keeps, for the rest
of its life, one :class:`~wticonv.Handle` per device and solver set
(:func:`worker_handle`): its program cache, and so its compiled kernels, serve every
task the worker runs. The handle's store is the worker's own, under ``fleet/<worker
name>`` in the cache directory (``WTICONV_CACHE_DIR`` of the worker's process), started
with the machine's probe verdicts of the device and the caller's figures of it (peak,
bandwidth, launch overhead: every worker then predicts alike), so that nothing is
measured or probed again; what a task measures is returned as plain data (tuples, dicts, str) and
merged by the caller into its own store (:mod:`wticonv.fleet.merge`).

A task that runs past its time limit (``spec["time_limit_s"]``) ends its worker's
process: a driver call that hangs cannot be interrupted any other way. The scheduler
then runs the task again on another worker (or on the one its nanny starts again).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from contextlib import contextmanager

from wticonv.errors import FleetError
from wticonv.fleet.targets import device_resource, worker_slug

__all__ = ["EVENT_TOPIC", "run_task", "worker_handle", "worker_name"]

#: The Dask event topic on which a task says that its own work starts (progress shows it
#: as running; the fleet benchmark measures the scheduling overhead from it).
EVENT_TOPIC = "wticonv-fleet"

#: Exit status of a worker whose task ran past its time limit.
EXIT_TIMED_OUT = 75

_HANDLES: dict = {}
_LOCK = threading.Lock()
_SYNCED: dict = {}


def _worker():
    try:
        from distributed import get_worker

        return get_worker()
    except (ImportError, ValueError):        # not in a Dask worker (a serial call, a test)
        return None


def worker_name() -> str:
    """This worker's name (its process id outside a Dask worker)."""
    w = _worker()
    return str(w.name) if w is not None else f"pid{os.getpid()}"


def _device_for(resource: str):
    """This machine's device that serves ``resource``: ``WTICONV_DEVICE``'s when it names
    one (the worker of each of several alike GPUs names its own), else the first usable
    one of that kind and name."""
    from wticonv.db.store import Store
    from wticonv.runtime.device import list_devices
    from wticonv.runtime.probe import stored_verdict

    listed = list_devices()
    spec = os.environ.get("WTICONV_DEVICE", "").strip()
    for info, _ in listed:
        if spec == info.index and device_resource(info.kind, info.name) == resource:
            return info
    home = Store()
    fits = [i for i, _ in listed if device_resource(i.kind, i.name) == resource]
    for info in fits:
        v = stored_verdict(info, home)
        if v is None or v.usable:
            return info
    have = ", ".join(sorted({device_resource(i.kind, i.name) for i, _ in listed}))
    raise FleetError(f"worker {worker_name()} has no usable device for resource {resource!r} "
                     f"(its devices: {have}); start it with the resource of a device it has "
                     "(`wticonv worker` does)")


def worker_handle(resource: str, disabled=(), allow_tf32: bool = False, figures=None):
    """The worker's handle on its device for ``resource`` with the solvers of ``disabled``
    disabled, made on first use and kept for the worker's life (one program cache, so
    every program is compiled once per worker).

    ``figures`` (device key -> ``(peak FLOP/s, bandwidth bytes/s, launch overhead s)``,
    the caller's) are the figures the handle's device predicts with, so that every worker
    of a device ranks alike and as the caller would; without them, the machine's."""
    info = _device_for(resource)
    fig = tuple((figures or {}).get(info.key) or ())
    key = (resource, tuple(sorted(disabled)), fig)
    with _LOCK:
        handle = _HANDLES.get(key)
        if handle is None:
            handle = _HANDLES[key] = _open(info, disabled, fig)
    handle.allow_tf32 = allow_tf32
    return handle


def _open(info, disabled, figures: tuple):
    """A handle on ``info``'s device in the worker's own store: ``fleet/<worker>/<figures
    digest>`` in the cache directory (a store per set of figures: a store keeps the first
    launch overhead it is given), holding the machine's probe verdicts and ``figures``."""
    import hashlib

    from wticonv.contract.registry import SolverRegistry
    from wticonv.db.store import Store
    from wticonv.handle import Handle
    from wticonv.runtime.device import select_device

    home = Store()
    tag = hashlib.sha256(repr(figures).encode()).hexdigest()[:10] if figures else "machine"
    own = Store(home.cache_dir / "fleet" / worker_slug(worker_name()) / tag)
    if figures:
        own.put_launch_overhead(info.key, figures[2])
    own.copy_device_records(home, [info.key])
    if figures:
        own.put_device_figures(info.key, figures[0], figures[1])
    return Handle(select_device(info.index, own), SolverRegistry(disabled=list(disabled)))


@contextmanager
def _time_limit(seconds):
    """End this process if the block runs past ``seconds`` (None: no limit)."""
    if not seconds:
        yield
        return

    def expire():
        print(f"wticonv: a fleet task ran past its time limit of {seconds:g} s on worker "
              f"{worker_name()}; ending the worker so that the task runs elsewhere",
              file=sys.stderr, flush=True)
        os._exit(EXIT_TIMED_OUT)

    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def run_task(spec: dict) -> dict:
    """Run one fleet task on this worker's device and return what it measured.

    ``spec`` (plain data, made by :mod:`wticonv.fleet.jobs`): ``job`` (``describe``,
    ``pending``, ``find``, ``tune``, ``evaluate``, ``probes``, ``fit``), ``resource``,
    ``id``, ``disabled`` (solver ids), ``allow_tf32``, ``time_limit_s``, the job's
    arguments, and the caller's records the job needs (``perf``: perf-db rows;
    ``calibration``; ``system``: its system records, :func:`jobs_worker.sync`).

    Returns ``{"device": {key, kind, name, platform, driver, index}, "worker",
    "versions": {solver id: version}, "started", "ended" (``time.time()``), "results"}``.

    Raises
    ------
    FleetError
        If the worker has no device for ``spec["resource"]``.
    WticonvError
        What the job raises (the scheduler retries the task, then reports it).
    """
    from wticonv.fleet import jobs_worker

    started = time.time()
    w = _worker()
    if w is not None:
        w.log_event(EVENT_TOPIC, {"id": spec.get("id"), "worker": worker_name(),
                                  "started": started})
    with _time_limit(spec.get("time_limit_s")):
        handle = worker_handle(spec["resource"], spec.get("disabled", ()),
                               bool(spec.get("allow_tf32", False)), spec.get("figures"))
        jobs_worker.sync(handle, spec, _SYNCED)
        results = jobs_worker.JOBS[spec["job"]](handle, spec)
    info, dev = handle.device.info, handle.device
    return {"device": {"key": info.key, "kind": info.kind, "name": info.name,
                       "platform": info.platform, "driver": info.driver_version,
                       "index": info.index, "compute_units": info.compute_units,
                       "vector_width": info.vector_width, "peak_flops": dev.peak_flops,
                       "bandwidth": dev.bandwidth,
                       "launch_overhead_s": dev.launch_overhead_s},
            "worker": worker_name(),
            "versions": {sid: e.version for sid, e in handle.registry.solvers.items()},
            "started": started, "ended": time.time(), "results": results}
