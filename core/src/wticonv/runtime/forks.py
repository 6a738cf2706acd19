"""OpenCL and ``fork()``: a forked child must not use its parent's devices.

A child made by ``fork()`` gets a copy of its parent's memory, with the parent's OpenCL
contexts and queues, but none of the driver's threads: a command queued there never runs
(PoCL: ``clFinish`` waits forever, measured on the 2-core CPU), and a new context reuses
the same driver state. :class:`~wticonv.runtime.device.Device` notes the process that
opens it (:func:`note_opened`), and :func:`check_not_forked` refuses work in any other,
with the fix: start worker processes with the ``spawn`` method.
"""

from __future__ import annotations

import os

from wticonv.errors import DeviceError

__all__ = ["check_not_forked", "note_opened"]

#: The process that opened the first device of this interpreter (None: none yet). A
#: forked child inherits it with the parent's OpenCL state.
_opened_in: int | None = None


def note_opened() -> int:
    """Note that this process opens a device; its pid (the device's ``pid``)."""
    global _opened_in
    pid = os.getpid()
    if _opened_in is None:
        _opened_in = pid
    return pid


def check_not_forked(device=None) -> None:
    """Refuse OpenCL work in a forked child of a process that had opened a device.

    ``device`` is a :class:`~wticonv.runtime.device.Device` about to be used (its ``pid``
    says which process opened it); None checks before opening a device.

    Raises
    ------
    DeviceError
        This process is not the one that opened ``device`` (with None: it is a fork of a
        process that had opened any device); the message says to use the ``spawn`` start
        method.
    """
    pid = os.getpid()
    opened = _opened_in if device is None else getattr(device, "pid", pid)
    if opened is None or opened == pid:
        return
    info = getattr(device, "info", None)
    what = f"OpenCL device {info.name!r}" if info is not None else "an OpenCL device"
    raise DeviceError(
        f"this process ({pid}) is a fork of process {opened}, which had opened {what}; "
        "OpenCL cannot be used in a forked child (the driver's threads stay in the parent, "
        "and the child would wait forever). Start worker processes with the 'spawn' (or "
        "'forkserver') start method: multiprocessing.get_context('spawn'), "
        "torch.multiprocessing.set_start_method('spawn'), "
        "DataLoader(..., multiprocessing_context='spawn'); or fork before the first "
        "convolution")
