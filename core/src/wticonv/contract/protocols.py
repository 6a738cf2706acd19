"""What a solver's hooks may use of the device they receive: :class:`DeviceLike`.

The core passes a :class:`wticonv.runtime.device.Device`; tests and tools pass stand-ins
(:class:`wticonv.testing.launches.RecordingDevice`, a device presented as another kind).
Both provide every member below, so hooks and the core's readers never need
``getattr(device, ..., None)``: a stand-in without persistent state has ``store = None``.
"""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["DeviceLike"]


class DeviceLike(Protocol):
    """The device members the contract guarantees to hooks.

    Attributes
    ----------
    info : wticonv.runtime.discovery.DeviceInfo
        What the driver reports: compute units, clock (MHz), local and global memory and
        the largest buffer (bytes), the largest work-group, the preferred float vector
        width.
    store : wticonv.db.store.Store or None
        The device's records (find-db, perf-db, calibration); None on stand-ins.
    context, queue
        The pyopencl context and its in-order profiling queue (``run`` only).
    """

    info: Any
    store: Any
    context: Any
    queue: Any

    @property
    def kind(self) -> str:
        """``"gpu"``, ``"cpu"``, ``"accelerator"`` or ``"other"``."""

    @property
    def key(self) -> str:
        """``platform|name|driver version``: the device's key in the databases."""

    @property
    def peak_flops(self) -> float:
        """Measured peak FP32 rate, FLOP/s."""

    @property
    def bandwidth(self) -> float:
        """Measured memory bandwidth, bytes/s."""

    def build(self, source: str, options: str = "") -> Any:
        """The built pyopencl program of ``source`` with ``options`` (program cache)."""

    def enqueue_kernel(self, kernel: Any, global_size: tuple[int, ...],
                       local_size: tuple[int, ...] | None, *args: Any) -> Any:
        """Set ``kernel``'s arguments and enqueue it on :attr:`queue`; returns its event."""
