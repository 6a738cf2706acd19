"""Which :class:`wticonv.Handle` a convolution of :mod:`wticonv.torch` runs on.

By default every thread has its own handle (:func:`thread_handle`), made on first use
with ``zero_copy=True`` on the device of wticonv's default handle
(:func:`wticonv.handle.get_handle`: ``WTICONV_DEVICE``, else the first GPU, else the
fastest CPU device), so the threads share the device's compiled programs and each
keeps its own selections: a training loop ranks the solvers once per shape and
direction, then looks its choice up. An explicit handle (``handle=``) is used instead
wherever given.

The custom ops take a handle as an int (a schema has no type for it): :func:`handle_id`
registers one and gives its id, 0 meaning the calling thread's handle.
"""

from __future__ import annotations

import threading

from wticonv.errors import ArgumentError
from wticonv.handle import Handle, get_handle

__all__ = ["thread_handle", "handle_id", "resolve"]

_local = threading.local()
_lock = threading.Lock()
#: Handles given as ``handle=``, by id (kept for the life of the process: a model holds
#: few, and an op traced with an id must find it again).
_registry: dict[int, Handle] = {}


def thread_handle() -> Handle:
    """The calling thread's handle (made on first use, ``zero_copy=True``).

    Raises
    ------
    DeviceError
        No usable OpenCL device.
    """
    h = getattr(_local, "handle", None)
    if h is None:
        h = _local.handle = Handle(get_handle().device, zero_copy=True)
    return h


def handle_id(handle: Handle | None) -> int:
    """The id the ops take for ``handle`` (0 for None: the calling thread's handle).

    Raises
    ------
    ArgumentError
        ``handle`` is neither None nor a :class:`wticonv.Handle`.
    """
    if handle is None:
        return 0
    if not isinstance(handle, Handle):
        raise ArgumentError(f"handle={handle!r:.60} is not a wticonv.Handle; make one with "
                            "wticonv.Handle(device, zero_copy=True) or leave it out")
    with _lock:
        _registry[id(handle)] = handle
    return id(handle)


def resolve(hid: int) -> Handle:
    """The handle of id ``hid`` (0: the calling thread's).

    Raises
    ------
    ArgumentError
        No handle was registered with that id (:func:`handle_id`).
    """
    if hid == 0:
        return thread_handle()
    h = _registry.get(hid)
    if h is None:
        raise ArgumentError(f"no wticonv handle has id {hid}; pass handle= to "
                            "wticonv.torch.conv2d or Conv2d instead of an id")
    return h
