"""Preloaded by every worker process of a local cluster and of ``wticonv worker``
(:data:`wticonv.fleet.cluster.QUIET_PRELOAD`, Dask's ``preload``): the worker ignores
SIGINT.

Ctrl-C in a terminal sends SIGINT to every process of the foreground group, the worker
processes a nanny started among them; each printed a KeyboardInterrupt traceback around
the caller's own message and died, and its nanny started it again. The caller (or
``wticonv worker``) handles Ctrl-C and stops its workers itself, through their nannies.
"""

from __future__ import annotations

import signal
import threading

__all__ = ["dask_setup"]


def dask_setup(worker) -> None:
    """Ignore SIGINT in this worker process (Dask calls this as the worker starts, in the
    process's main thread, which alone may set a signal handler)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
