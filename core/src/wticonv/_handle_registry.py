"""The handles of this process: every live one by its uid, and the default one.

Private to :mod:`wticonv.handle`, which re-exports :func:`handle_by_uid` (and ``_by_uid``)
and defines :func:`wticonv.handle.get_handle` on :func:`default_handle`. This module does
not import :mod:`wticonv.handle` (no cycle): the caller passes the class to make handles.
"""

from __future__ import annotations

import itertools
import threading
import weakref
from typing import Any, TypeVar

from wticonv.runtime.device import Device

H = TypeVar("H")

#: Source of :attr:`Handle.uid` (``next()`` on a count is atomic under the GIL).
_uids = itertools.count(1)
#: Every live handle by its uid; weak, so that a handle nobody holds is freed.
_by_uid: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()


def register(handle: Any) -> int:
    """A new uid for ``handle`` (from 1, never reused), under which :func:`handle_by_uid`
    finds it while it lives."""
    uid = next(_uids)
    _by_uid[uid] = handle
    return uid


def handle_by_uid(uid: int) -> Any | None:
    """The live handle whose :attr:`Handle.uid` is ``uid``, or None (no such handle, or it
    was freed: the lookup holds no reference)."""
    return _by_uid.get(uid)


_default_handle: Any | None = None
_default_lock = threading.Lock()


def default_handle(make: type[H], device: Device | str | None = None) -> H:
    """The default handle (``make()``, created on first use), or ``make(device)`` for
    another ``device``: what :func:`wticonv.handle.get_handle` returns."""
    global _default_handle
    with _default_lock:
        if device is None:
            if _default_handle is None:
                _default_handle = make()
            return _default_handle
        if (_default_handle is not None and isinstance(device, Device)
                and device is _default_handle.device):
            return _default_handle
        return make(device)
