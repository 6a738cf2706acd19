"""``wticonv worker SCHEDULER``: this machine's devices join a fleet, one worker each.

Each usable device of this machine (:func:`wticonv.fleet.targets.local_targets`, or the
ones ``devices`` names) gets a Dask worker process under a nanny (started again if it
dies), with one thread, the device's resource and ``WTICONV_DEVICE`` set to the device,
named ``HOST-KIND-P.D``. :func:`worker_commands` gives the equivalent ``dask worker``
command lines, for a batch system or a container that starts workers itself.

The address is checked and its port tried first (a typo, a dashboard's ``http://``
address or a scheduler that is not running is one clear error, not a worker waiting
forever). When the scheduler goes away (it closes, restarts or its machine goes), Dask's
workers close, and :func:`serve` raises :class:`~wticonv.errors.FleetError` saying so
(``wticonv worker`` exits with status 2): start it again once the scheduler is back, or
let a service manager do it (``Restart=on-failure``). The worker processes ignore SIGINT
(:mod:`wticonv.fleet.quiet`): Ctrl-C stops them through their nannies, quietly.
"""

from __future__ import annotations

import shlex
import socket

from wticonv.errors import FleetError
from wticonv.fleet.cluster import QUIET_PRELOAD, check_address, reach, require_distributed
from wticonv.fleet.targets import Target, local_targets

#: What :func:`local_targets`' errors say the devices were wanted for.
_PURPOSE = "to serve (wticonv worker)"

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
    address = check_address(address)
    return [f"WTICONV_DEVICE={t.index} dask worker {shlex.quote(address)} --nthreads 1 "
            f"--resources {t.resource}=1 --name {worker_name_of(t)} --memory-limit 0 "
            f"--preload {QUIET_PRELOAD}"
            for t in local_targets(devices, _PURPOSE)]


def serve(address: str, devices: str | None = None, ready=None) -> None:
    """Run one worker per device of this machine for the scheduler at ``address`` until
    interrupted (Ctrl-C: returns). ``ready(names)``, when given, is called once they all
    joined.

    Raises
    ------
    FleetError
        Dask is not installed, ``address`` is not a scheduler's or cannot be reached, no
        device matches ``devices``, or the scheduler went away (its workers closed).
    """
    import asyncio

    distributed = require_distributed()
    address = check_address(address)
    targets = local_targets(devices, _PURPOSE)
    reach(address)

    async def run():
        nannies = [distributed.Nanny(address, nthreads=1, resources={t.resource: 1},
                                     name=worker_name_of(t), memory_limit=0,
                                     env={"WTICONV_DEVICE": t.index},
                                     preload=[QUIET_PRELOAD]) for t in targets]
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
        return
    except RuntimeError as e:
        # a nanny that did not start: the scheduler went away while its worker was
        # joining (then its port no longer answers), or the worker failed on its own
        try:
            reach(address)
        except FleetError:
            pass
        else:
            cause = e.__cause__ or e
            raise FleetError(f"a worker for the scheduler at {address} failed to start "
                             f"({type(cause).__name__}: {cause}): see the log above") \
                from None
    raise FleetError(f"the Dask scheduler at {address} went away (it closed, restarted or "
                     "cannot be reached), and the workers with it: start `wticonv worker "
                     f"{address}` again once it is back (a service manager can: the exit "
                     "status is 2)")
