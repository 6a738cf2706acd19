"""Opening a fleet: a local Dask cluster of one worker per device, or an existing scheduler.

``Fleet()`` starts a ``distributed.LocalCluster`` on this machine with one worker process
per usable device (:func:`wticonv.fleet.targets.local_targets`), each with one thread, the
device's resource (:func:`wticonv.fleet.targets.device_resource`) and ``WTICONV_DEVICE``
set to the device's ``P:D``, under a nanny that starts it again if it dies. Its scheduler
fails a task after it was on 1 + ``allowed_failures`` workers that died (Dask's
``distributed.scheduler.allowed-failures``, 3 by default: 1 here, so that a task that
kills its worker is reported after its second try). ``Fleet("tcp://host:8786")`` joins
a running scheduler instead; its workers advertise their devices' resources
(``wticonv worker``, :mod:`wticonv.fleet.serve`). An address is checked before Dask sees
it (:func:`check_address`: a dashboard's ``http://`` address is refused with what to give
instead) and its port tried at once (:func:`reach`), so that a typo or a scheduler that is
not running is one clear error, not a traceback or a 30 s wait.

The worker processes of a local cluster (and of ``wticonv worker``) ignore SIGINT
(:data:`QUIET_PRELOAD`): Ctrl-C in a terminal reaches every process of its group, and
the caller, not the workers, decides what an interrupt stops (it closes them).
"""

from __future__ import annotations

import socket

from wticonv.errors import FleetError
from wticonv.fleet.targets import RESOURCE_PREFIX, Target, local_targets

__all__ = ["Fleet", "require_distributed", "check_address", "reach", "INSTALL_HINT",
           "QUIET_PRELOAD"]

#: The module a worker process preloads (Dask's ``preload``, its ``dask_setup``) to
#: ignore SIGINT: :mod:`wticonv.fleet.quiet`.
QUIET_PRELOAD = "wticonv.fleet.quiet"
#: Dask's communication schemes (``distributed.comm``); tcp is the default.
_SCHEMES = ("tcp", "tls", "ws", "wss", "ucx", "inproc")
#: Seconds to wait for a scheduler's port to answer (:func:`reach`).
REACH_TIMEOUT_S = 10.0

#: How to get Dask's distributed scheduler.
INSTALL_HINT = 'pip install "wticonv[cluster]"'

#: Seconds to wait for a local cluster's workers to start (each imports Dask, wticonv and
#: the plugins and opens its device: a few seconds on a busy 2-core machine).
START_TIMEOUT_S = 180.0


def require_distributed():
    """Dask's ``distributed`` module.

    Raises
    ------
    FleetError
        If it is not installed; the message says ``pip install "wticonv[cluster]"``.
    """
    try:
        import distributed
    except ImportError as e:
        raise FleetError(f"a fleet (--cluster, `wticonv worker`) needs Dask's distributed "
                         f"scheduler, which is not installed ({e}): {INSTALL_HINT}") from None
    return distributed


def check_address(address) -> str:
    """``address`` checked as a Dask scheduler's address (``tcp://HOST:PORT``, or another
    scheme of Dask's: tls, ws, wss, ucx, inproc; ``HOST:PORT`` is taken as tcp), and
    returned stripped.

    Raises
    ------
    FleetError
        An ``http://`` or ``https://`` address (the dashboard's: the message says to give
        the scheduler's tcp:// one), another unknown scheme, or no ``HOST:PORT``.
    """
    text = address.strip() if isinstance(address, str) else ""
    scheme, sep, loc = text.rpartition("://")
    scheme = scheme.lower() if sep else "tcp"
    if scheme in ("http", "https"):
        raise FleetError(f"{address} is a web address (the Dask dashboard's?), not the "
                         "scheduler's: give the scheduler's own address, tcp://HOST:PORT "
                         "(port 8786 unless it was started with another; `dask scheduler` "
                         "prints it as 'Scheduler at: tcp://...'), not the dashboard's "
                         "http:// one (port 8787)")
    if scheme not in _SCHEMES:
        raise FleetError(f"{address!r:.80} is not a scheduler address: unknown scheme "
                         f"{scheme!r} (Dask's are {', '.join(_SCHEMES)}); give tcp://HOST:PORT")
    if scheme != "inproc":
        host, _, port = loc.rpartition(":")
        if not host or not port.isdigit() or any(c.isspace() for c in loc) \
                or not 0 < int(port) < 65536:
            raise FleetError(f"{address!r:.80} is not a scheduler address: give "
                             "tcp://HOST:PORT, as `dask scheduler` prints it (e.g. "
                             "tcp://10.0.0.1:8786)")
    return text


def reach(address: str, timeout: float = REACH_TIMEOUT_S) -> None:
    """Try the TCP port of the scheduler at ``address`` (checked by :func:`check_address`)
    once, so that a refused or unknown address is reported at once.

    Raises
    ------
    FleetError
        The host is unknown, or its port refuses or does not answer within ``timeout``.
    """
    scheme, sep, loc = address.rpartition("://")
    if (scheme.lower() if sep else "tcp") not in ("tcp", "tls", "ws", "wss"):
        return                                   # ucx, inproc: Dask's own connect says
    host, _, port = loc.rpartition(":")
    host = host.strip("[]")
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except socket.gaierror as e:
        raise FleetError(f"cannot reach the Dask scheduler at {address}: unknown host "
                         f"{host!r} ({e.strerror or e})") from None
    except OSError as e:
        raise FleetError(f"cannot reach the Dask scheduler at {address} ("
                         f"{e.strerror or type(e).__name__}): is `dask scheduler` running "
                         "there, on this port? Start one, or leave the address out of "
                         "--cluster for a local cluster") from None


class Fleet:
    """An open fleet: a Dask client, the local cluster it started (if any), its devices.

    Parameters
    ----------
    cluster : str, distributed.Client or None
        None or ``"local"``: start a local cluster; a scheduler address
        (``tcp://host:8786``, :func:`check_address`): join it; a ``distributed.Client``:
        use it as it is.
    devices : str, optional
        Keep only some devices: ``"gpu"`` or ``"cpu"`` (a kind), or ``"P:D"`` (a device of
        this machine, local clusters only); None: every one.
    allowed_failures : int
        A local cluster's scheduler fails a task once more than this many workers died
        running it.
    workers_per_device : int
        Workers a local cluster starts per device. More than 1 times two tasks on one
        device at once, each disturbing the other's times: it is for testing the fleet
        (a task retried on another worker), not for measuring.

    Raises
    ------
    FleetError
        Dask is not installed, the address is not a scheduler's (an ``http://`` one is
        the dashboard's), the scheduler cannot be reached, or no device matches.

    Use it as a context manager (or call :meth:`close`): a local cluster is shut down.
    """

    def __init__(self, cluster=None, devices: str | None = None,
                 allowed_failures: int = 1, workers_per_device: int = 1) -> None:
        distributed = require_distributed()
        self.local = None
        self._own_client = True
        self.devices = devices
        if isinstance(cluster, distributed.Client):
            self.client, self._own_client = cluster, False
        elif cluster is None or cluster == "local":
            self._start_local(distributed, devices, allowed_failures, workers_per_device)
        elif isinstance(cluster, str):
            cluster = check_address(cluster)
            if devices and ":" in devices:
                raise FleetError(f"a device of this machine ({devices}) cannot be asked of a "
                                 "remote scheduler; give a kind (gpu or cpu)")
            reach(cluster)
            try:
                self.client = distributed.Client(cluster, timeout=30)
            except (OSError, TimeoutError, ValueError) as e:
                raise FleetError(f"cannot reach the Dask scheduler at {cluster} ({e}); start "
                                 "one with `dask scheduler`, or leave the address out for a "
                                 "local cluster") from None
        else:
            raise FleetError(f"cluster={cluster!r:.60} is not a scheduler address, 'local', "
                             "None or a distributed.Client")

    def _start_local(self, distributed, devices, allowed_failures, per_device) -> None:
        targets = local_targets(devices)
        cluster = distributed.LocalCluster(
            n_workers=0, processes=True, threads_per_worker=1, dashboard_address=None,
            scheduler_kwargs={"allowed_failures": allowed_failures})
        try:
            for t in targets:
                for k in range(per_device):
                    name = f"{t.kind}-{t.index}".replace(":", ".") + (f"-{k}" if k else "")
                    cluster.worker_spec[name] = {
                        "cls": distributed.Nanny,
                        "options": {**cluster.new_spec["options"], "nthreads": 1,
                                    "name": name, "resources": {t.resource: 1},
                                    "memory_limit": 0, "env": {"WTICONV_DEVICE": t.index},
                                    "preload": [QUIET_PRELOAD]}}
            cluster.scale(len(cluster.worker_spec))
            self.client = distributed.Client(cluster)
            self.client.wait_for_workers(len(cluster.worker_spec), timeout=START_TIMEOUT_S)
        except BaseException:
            cluster.close()
            raise
        self.local = cluster
        self._targets = targets

    def targets(self) -> list[Target]:
        """The devices the fleet's workers serve now (one per resource), filtered by
        ``devices``' kind."""
        if self.local is not None:
            return list({t.resource: t for t in self._targets}.values())
        seen: dict[str, Target] = {}
        from wticonv.fleet.runner import scheduler_workers

        for w in scheduler_workers(self.client).values():
            for res, n in (w.get("resources") or {}).items():
                if not n or not res.startswith(RESOURCE_PREFIX):
                    continue
                kind, _, name = res[len(RESOURCE_PREFIX):].partition("-")
                if self.devices in (None, "", kind):
                    seen.setdefault(res, Target(kind, name))
        return list(seen.values())

    def close(self) -> None:
        """Close the client (if the fleet opened it) and the local cluster (if any). A
        client whose scheduler went away is closed at once and quietly (Dask would log its
        failed reconnection as an error with a traceback)."""
        if self._own_client:
            if getattr(self.client, "status", "running") in ("connecting", "closing"):
                import logging

                log = logging.getLogger("distributed.client")
                level = log.level
                log.setLevel(logging.CRITICAL)
                try:
                    self.client.close(timeout=5)
                except Exception:  # noqa: BLE001 - nothing left to close cleanly
                    pass
                finally:
                    log.setLevel(level)
            else:
                self.client.close()
        if self.local is not None:
            self.local.close()
            self.local = None

    def __enter__(self) -> Fleet:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
