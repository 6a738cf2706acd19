"""``wticonv worker SCHEDULER``: this machine's devices join a fleet, one worker each.

Each usable device of this machine (:func:`wticonv.fleet.targets.local_targets`, or the
ones ``devices`` names) gets a Dask worker process under a nanny (started again if it
dies), with one thread, the device's resource and ``WTICONV_DEVICE`` set to the device,
named ``HOST-KIND-P.D``. :func:`worker_commands` gives the equivalent ``dask worker``
command lines, for a batch system or a container that starts workers itself.
"""

from __future__ import annotations

import shlex
import socket

from wticonv.fleet.cluster import require_distributed
from wticonv.fleet.targets import Target, local_targets

__all__ = ["serve", "worker_commands", "worker_name_of"]


def worker_name_of(target: Target, host: str | None = None) -> str:
    """The name of the worker of ``target`` on ``host`` (this machine's name by default):
    its own cache directory is ``fleet/<name>``, so a worker started again reuses its
    compiled programs."""
    return f"{host or socket.gethostname()}-{target.kind}-{(target.index or '0:0')}" \
        .replace(":", ".")


def worker_commands(address: str, devices: str | None = None) -> list[str]:
    """One ``dask worker`` command line per device of this machine, as :func:`serve`
    starts them (``WTICONV_DEVICE=P:D dask worker ADDRESS --nthreads 1 --resources
    RESOURCE=1 --name NAME --memory-limit 0``)."""
    return [f"WTICONV_DEVICE={t.index} dask worker {shlex.quote(address)} --nthreads 1 "
            f"--resources {t.resource}=1 --name {worker_name_of(t)} --memory-limit 0"
            for t in local_targets(devices)]


def serve(address: str, devices: str | None = None, ready=None) -> None:
    """Run one worker per device of this machine for the scheduler at ``address`` until
    interrupted (Ctrl-C) or the scheduler closes. ``ready(names)``, when given, is called
    once they all joined.

    Raises
    ------
    FleetError
        If Dask is not installed or no device matches ``devices``.
    """
    import asyncio

    distributed = require_distributed()
    targets = local_targets(devices)

    async def run():
        nannies = [distributed.Nanny(address, nthreads=1, resources={t.resource: 1},
                                     name=worker_name_of(t), memory_limit=0,
                                     env={"WTICONV_DEVICE": t.index}) for t in targets]
        await asyncio.gather(*nannies)
        if ready is not None:
            ready([n.name for n in nannies])
        try:
            await asyncio.gather(*(n.finished() for n in nannies))
        finally:
            await asyncio.gather(*(n.close() for n in nannies), return_exceptions=True)

    try:
        asyncio.run(run())
    except KeyboardInterrupt:
        pass
