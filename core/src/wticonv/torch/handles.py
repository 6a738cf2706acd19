"""Which :class:`wticonv.Handle` a convolution of :mod:`wticonv.torch` runs on.

By default every thread has its own handle (:func:`thread_handle`), made on first use
with ``zero_copy=True`` on the device of wticonv's default handle
(:func:`wticonv.handle.get_handle`: ``WTICONV_DEVICE``, else the first GPU, else the
fastest CPU device), so the threads share the device's compiled programs and each
keeps its own selections: a training loop ranks the solvers once per shape and
direction, then looks its choice up. An explicit handle (``handle=``) is used instead
wherever given.

The custom ops take a handle as an int (a schema has no type for it): :func:`handle_id`
gives a handle's :attr:`wticonv.Handle.uid` (a plain attribute read, with no lock, so that
``torch.compile`` traces it), 0 meaning the calling thread's handle, and :func:`resolve`
finds the handle again through :func:`wticonv.handle.handle_by_uid`, which holds no
reference: a handle lives as long as its user (a :class:`~wticonv.torch.Conv2d`, an
autograd graph that will run its backward) holds it, and is then freed.
"""

from __future__ import annotations

import threading

from wticonv.errors import ArgumentError
from wticonv.handle import Handle, get_handle, handle_by_uid

__all__ = ["thread_handle", "handle_id", "resolve", "lookup"]

_local = threading.local()


def thread_handle() -> Handle:
    """The calling thread's handle (made on first use, ``zero_copy=True``).

    Raises
    ------
    DeviceError
        No usable OpenCL device, or the process is a fork of one that had opened the
        device (use the ``spawn`` start method).
    """
    h = getattr(_local, "handle", None)
    if h is None:
        h = _local.handle = Handle(get_handle().device, zero_copy=True)
    return h


def handle_id(handle: Handle | None) -> int:
    """The id the ops take for ``handle``: its :attr:`~wticonv.Handle.uid` (0 for None:
    the calling thread's handle).

    Raises
    ------
    ArgumentError
        ``handle`` is neither None nor a :class:`wticonv.Handle`.
    """
    if handle is None:
        return 0
    if not isinstance(handle, Handle):
        raise ArgumentError(f"handle={handle!r:.60} is not a wticonv.Handle; make one with "
                            "wticonv.Handle(device, zero_copy=True), or leave it out (the "
                            "calling thread's handle)")
    return handle.uid


def lookup(hid: int) -> Handle | None:
    """The live handle of id ``hid``; None for 0 (the thread's) or a freed handle."""
    return handle_by_uid(hid) if hid else None


def resolve(hid: int) -> Handle:
    """The handle of id ``hid`` (0: the calling thread's).

    Raises
    ------
    ArgumentError
        No live handle has that id (it was freed, or the id comes from another process).
    DeviceError
        ``hid`` is 0 and the thread's handle cannot be made (:func:`thread_handle`).
    """
    if hid == 0:
        return thread_handle()
    h = handle_by_uid(hid)
    if h is None:
        raise ArgumentError(f"no live wticonv handle has id {hid} (it was freed, or the id "
                            "comes from another process); pass handle= to "
                            "wticonv.torch.conv2d or Conv2d instead of an id")
    return h
