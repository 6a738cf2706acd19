"""Where the time of :mod:`wticonv.torch`'s convolutions goes: :func:`profile`.

Inside ``with wticonv.torch.profile() as t:`` every convolution of the process
(forward, backward data, backward weights; from any thread, so the backward passes that
PyTorch's autograd engine runs on its own thread for CUDA tensors count too) adds to
``t``: its wall time, the time of its OpenCL kernels (profiling events,
:meth:`wticonv.runtime.device.Device.profile`), and the time of copies between a
tensor's device (CUDA...) and the host; the rest is host work (argument checks,
selection lookups, buffer set-up, bias, asymmetric padding).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

__all__ = ["ConvTimes", "profile"]

_lock = threading.Lock()
_open: list = []              # the open records, of every thread


@dataclass(eq=False)      # records are told apart by identity: two may hold the same times
class ConvTimes:
    """Times of the convolutions run inside :func:`profile`, in ms.

    Attributes
    ----------
    calls : dict
        Number of calls per direction (``"fwd"``, ``"bwd"``, ``"wrw"``).
    total_ms : float
        Wall time inside the ops.
    kernel_ms : float
        OpenCL kernel time (profiling events).
    copy_ms : float
        Copies between the tensors' device and the host (none for contiguous float32 CPU
        tensors), and the copies around the ops: the NCHW copy of a channels_last or
        otherwise non-contiguous tensor, the result's conversion back to channels_last,
        and ``cast=True``'s dtype casts.
    """

    calls: dict = field(default_factory=lambda: {"fwd": 0, "bwd": 0, "wrw": 0})
    total_ms: float = 0.0
    kernel_ms: float = 0.0
    copy_ms: float = 0.0

    @property
    def host_ms(self) -> float:
        """Wall time that is neither kernels nor copies, ms."""
        return max(0.0, self.total_ms - self.kernel_ms - self.copy_ms)


def active() -> list[ConvTimes]:
    """The open :func:`profile` records (of every thread; innermost last)."""
    with _lock:
        return list(_open)


@contextmanager
def profile() -> Iterator[ConvTimes]:
    """Collect the times of the process's convolutions while open, whichever thread runs
    them (nested or concurrent scopes each collect them all)."""
    t = ConvTimes()
    with _lock:
        _open.append(t)
    try:
        yield t
    finally:
        with _lock:
            _open.remove(t)


def add(direction: str, total_s: float, kernel_ms: float, copy_s: float) -> None:
    """Add one call's times to every open record."""
    with _lock:
        for t in _open:
            t.calls[direction] += 1
            t.total_ms += total_s * 1e3
            t.kernel_ms += kernel_ms
            t.copy_ms += copy_s * 1e3


def add_copy(copy_s: float) -> None:
    """Add a copy made around a call (a layout conversion or a dtype cast) to every open
    record: to its wall time and its copies, not to its calls."""
    with _lock:
        for t in _open:
            t.total_ms += copy_s * 1e3
            t.copy_ms += copy_s * 1e3


def now() -> float:
    """A monotonic clock, in s."""
    return time.perf_counter()
