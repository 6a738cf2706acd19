"""OpenCL devices: discovery, selection, figures, program builds and kernel launches.

Selection (``WTICONV_DEVICE`` or ``--device``):

- ``gpu``: the first GPU of the first platform that has one;
- ``cpu``: the CPU device with the highest measured peak FP32 rate (PoCL from the system
  package and PoCL from PyPI may both be present: the faster one wins);
- ``P:D``: device D of platform P, as numbered by ``wticonv devices``;
- unset: ``gpu`` if there is a GPU, else ``cpu``.

A device is used only once its driver has passed the probe (:mod:`wticonv.runtime.probe`): its
first use runs in a child process, and a driver that aborts, hangs, builds nothing or
computes wrongly there is set aside (one warning, the verdict stored) while the other
devices serve. Programs are compiled in a build helper (:mod:`wticonv.runtime.build_helper`).
"""

from __future__ import annotations

import os
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
import pyopencl as cl

from wticonv.db.store import Store
from wticonv.errors import (
    DeviceError,
    DeviceMemoryError,
    HostMemoryError,
    KernelBuildError,
    TensorError,
)
from wticonv.runtime.build_helper import helper_for, real_key
from wticonv.runtime.discovery import INSTALL_HINT, DeviceInfo, list_devices
from wticonv.runtime.forks import check_not_forked, note_opened
from wticonv.runtime.isolation import check_timeouts
from wticonv.runtime.probe import describe, ensure_verdict, stored_verdict
from wticonv.runtime.programs import ProgramCache

__all__ = ["Device", "DeviceInfo", "Profile", "list_devices", "select_device",
           "check_not_forked"]

#: Relative change of a re-measured peak or bandwidth past which the device's calibration
#: is dropped: each re-measurement keeps the best so far and creeps up by a fraction of a
#: per cent on a quiet machine, which moves every prediction alike and changes no choice.
FIGURES_TOLERANCE = 0.1


class Profile:
    """Kernel events enqueued through :meth:`Device.enqueue_kernel` inside a profile scope."""

    def __init__(self) -> None:
        self.events: list[cl.Event] = []

    @property
    def kernel_ms(self) -> float:
        """Sum of the kernels' execution times (OpenCL profiling), in ms; waits for them."""
        total = 0
        for ev in self.events:
            ev.wait()
            total += ev.profile.end - ev.profile.start
        return total * 1e-6


@dataclass
class _Figures:
    peak_flops: float = 0.0
    bandwidth: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)


class Device:
    """One OpenCL device with its context, in-order profiling queue and program cache.

    Parameters
    ----------
    cl_device : pyopencl.Device
    info : DeviceInfo
    store : Store, optional
        Where measured figures and program binaries persist; the default store when omitted.

    Attributes
    ----------
    info : DeviceInfo
    context : pyopencl.Context
    queue : pyopencl.CommandQueue
        In-order, with profiling enabled. Solvers enqueue their kernels here.
    programs : ProgramCache
    pid : int
        The process that opened the device (:func:`wticonv.runtime.forks.check_not_forked`).

    Raises
    ------
    DeviceError
        The process is a fork of one that had opened a device
        (:func:`wticonv.runtime.forks.check_not_forked`).
    """

    def __init__(self, cl_device: cl.Device, info: DeviceInfo, store: Store | None = None):
        check_not_forked()
        self.pid = note_opened()
        self.cl_device = cl_device
        self.info = info
        self.store = store if store is not None else Store()
        self.context = cl.Context([cl_device])
        self.queue = cl.CommandQueue(
            self.context, cl_device, properties=cl.command_queue_properties.PROFILING_ENABLE)
        self.programs = ProgramCache(
            self.context, cl_device, info.key, self.store,
            helper=helper_for(info.platform_index, info.device_index, real_key(cl_device)))
        self._figures = _Figures()
        self._launch_overhead = 0.0
        self._profiles = threading.local()
        # Kernel objects are shared by every user of this device (the plugins cache them
        # per device), and OpenCL's clSetKernelArg is not thread-safe on one kernel: a
        # launch sets its arguments and enqueues under this lock, so that another thread
        # cannot change them in between.
        self._launch_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<Device {self.info.index} {self.info.name!r} ({self.info.platform})>"

    @property
    def kind(self) -> str:
        """``"gpu"``, ``"cpu"``, ``"accelerator"`` or ``"other"``."""
        return self.info.kind

    @property
    def key(self) -> str:
        """Database key of device + driver."""
        return self.info.key

    # ---------------------------------------------------------------------- figures
    def _ensure_figures(self) -> _Figures:
        f = self._figures
        if f.peak_flops > 0:
            return f
        with f.lock:
            if f.peak_flops > 0:
                return f
            stored = self.store.get_device_figures(self.key)
            if stored is None:
                self.verify()   # the probe child measures the figures of a new device
                stored = self.store.get_device_figures(self.key)
            if stored is None:
                # Probed (e.g. a verdict copied from another store) but not measured here.
                # One process measures at a time: concurrent measurements disturb each
                # other (and would cache a low peak); the others then read the figures.
                from wticonv.runtime.peak import measure_device_figures

                with self.store.exclusive("measure"):
                    stored = self.store.get_device_figures(self.key)
                    if stored is None:
                        stored = self.store.put_device_figures(
                            self.key, *measure_device_figures(self))
            f.peak_flops, f.bandwidth = stored
        return f

    def verify(self, warn: bool = True) -> None:
        """Make sure the driver passed the probe (run it in a child process now if this
        device has no verdict on this host; see :mod:`wticonv.runtime.probe`).

        Raises
        ------
        DeviceError
            If the device is set aside; the message says why and what to do.
        """
        v = ensure_verdict(self.info, self.store, warn=warn)
        if not v.usable:
            raise DeviceError(f"OpenCL device {describe(self.info)} is set aside: {v.reason}")

    @property
    def unusable_reason(self) -> str | None:
        """Why the probe set this device aside (stored verdict), or None (usable, or not
        probed yet)."""
        v = stored_verdict(self.info, self.store)
        return v.reason if v is not None and not v.usable else None

    def measure_figures(self) -> tuple[float, float]:
        """Measure peak and bandwidth again now; the store keeps, for each, the best of
        this and earlier measurements (a busy machine only reads low). Returns them.
        When one moves by more than :data:`FIGURES_TOLERANCE`, the device's calibration
        (fitted to the old figures) is removed with a warning. Waits for a calibration
        running in the same cache directory to end."""
        from wticonv.runtime.peak import measure_device_figures

        # Not during a calibration (its factors are fitted to the figures it started with).
        with self.store.exclusive("calibrate"), self._figures.lock, \
                self.store.exclusive("measure"):
            old = self.store.get_device_figures(self.key)
            peak, bw = self.store.put_device_figures(self.key, *measure_device_figures(self),
                                                     keep_best=True)
            self._figures.peak_flops, self._figures.bandwidth = peak, bw
        moved = old is not None and max(abs(peak / old[0] - 1), abs(bw / old[1] - 1))
        if moved and moved > FIGURES_TOLERANCE and (self.store.get_calibration(self.key)
                                                     or self.store.get_correction(self.key)):
            # The factors correct predictions made from the old figures: they no longer fit.
            self.store.put_calibration(self.key, [])
            self.store.put_correction(self.key, [])
            warnings.warn(f"wticonv: {self.info.name}'s measured figures changed (peak "
                          f"{old[0] / 1e9:.1f} -> {peak / 1e9:.1f} GFLOP/s, bandwidth "
                          f"{old[1] / 1e9:.1f} -> {bw / 1e9:.1f} GB/s); its calibration was "
                          "fitted to the old ones and is removed: run `wticonv calibrate` "
                          "again", stacklevel=2)
        return peak, bw

    @property
    def figures_known(self) -> bool:
        """True when peak and bandwidth are measured (in memory or in the store)."""
        return self._figures.peak_flops > 0 or self.store.get_device_figures(self.key) is not None

    @property
    def peak_flops(self) -> float:
        """Measured peak FP32 rate, FLOP/s (measured on first use, then cached)."""
        return self._ensure_figures().peak_flops

    @property
    def bandwidth(self) -> float:
        """Measured memory bandwidth, bytes/s (measured on first use, then cached)."""
        return self._ensure_figures().bandwidth

    @property
    def launch_overhead_s(self) -> float:
        """Seconds one kernel launch costs beyond its work (an empty kernel's median
        queued-to-end time, :func:`wticonv.runtime.peak.measure_launch_overhead`): measured on first
        use, then kept in the store. Where it cannot be measured (the driver fails the
        empty kernel), the constant measured on the development machines for this kind
        (:data:`wticonv.runtime.kit.FALLBACK_LAUNCH_OVERHEAD_S`; GPU's for other kinds)."""
        if self._launch_overhead > 0:
            return self._launch_overhead
        self._ensure_figures()      # a new driver is probed in a child process first
        with self._figures.lock:
            if self._launch_overhead <= 0:
                stored = self.store.get_launch_overhead(self.key)
                if stored is None:
                    from wticonv.runtime.kit import FALLBACK_LAUNCH_OVERHEAD_S
                    from wticonv.runtime.peak import measure_launch_overhead
                    # one process measures at a time, as for the figures above
                    with self.store.exclusive("measure"):
                        stored = self.store.get_launch_overhead(self.key)
                        try:
                            if stored is None:
                                self.queue.finish()   # nothing queued ahead of the kernels
                                stored = self.store.put_launch_overhead(
                                    self.key, measure_launch_overhead(self))
                        except (cl.Error, KernelBuildError):
                            stored = FALLBACK_LAUNCH_OVERHEAD_S.get(
                                self.kind, FALLBACK_LAUNCH_OVERHEAD_S["gpu"])
                self._launch_overhead = stored
        return self._launch_overhead

    # ------------------------------------------------------------- builds & launches
    def build(self, source: str, options: str = "") -> cl.Program:
        """The program for ``source`` built with ``options``, from the program cache."""
        return self.programs.build(source, options)

    def enqueue_kernel(self, kernel: cl.Kernel, global_size: tuple[int, ...],
                       local_size: tuple[int, ...] | None, *args) -> cl.Event:
        """Set ``kernel``'s arguments, enqueue it on :attr:`queue` and record its event.

        Sizes are in work-items; ``global_size`` must be a multiple of ``local_size`` in
        each dimension. Returns the kernel's event. Thread-safe: setting the arguments and
        enqueueing is one step, so threads sharing this device (and its kernel objects)
        never launch a kernel with another thread's arguments.
        """
        with self._launch_lock:
            if args:
                kernel.set_args(*args)
            ev = cl.enqueue_nd_range_kernel(self.queue, kernel, global_size, local_size)
        stack = getattr(self._profiles, "stack", None)
        if stack:
            for prof in stack:
                prof.events.append(ev)
        return ev

    @contextmanager
    def profile(self) -> Iterator[Profile]:
        """Collect the events of kernels enqueued through :meth:`enqueue_kernel` inside."""
        stack = getattr(self._profiles, "stack", None)
        if stack is None:
            stack = self._profiles.stack = []
        prof = Profile()
        stack.append(prof)
        try:
            yield prof
        finally:
            stack.remove(prof)

    # ----------------------------------------------------------------------- memory
    def check_alloc(self, nbytes: int, what: str = "a buffer") -> None:
        """Raise :class:`DeviceMemoryError` if ``nbytes`` exceed the device's largest buffer."""
        if nbytes > self.info.max_alloc_bytes:
            raise DeviceMemoryError(
                f"{what} needs {nbytes} bytes, more than the largest buffer of "
                f"{self.info.name} ({self.info.max_alloc_bytes} bytes); use a smaller "
                "batch or picture, or another device")

    def alloc(self, nbytes: int, what: str = "a buffer") -> cl.Buffer | None:
        """A device buffer of ``nbytes`` bytes (None for 0).

        Raises :class:`DeviceMemoryError` if it does not fit the device.
        """
        if nbytes <= 0:
            return None
        self.check_alloc(nbytes, what)
        try:
            return cl.Buffer(self.context, cl.mem_flags.READ_WRITE, int(nbytes))
        except (cl.Error, MemoryError) as e:
            raise DeviceMemoryError(f"cannot allocate {what} of {nbytes} bytes on "
                                    f"{self.info.name}: {e}") from None

    def upload(self, array: np.ndarray, what: str = "an array") -> cl.Buffer:
        """Copy a C-contiguous array to a new device buffer (DeviceMemoryError if it does
        not fit)."""
        a = np.ascontiguousarray(array)
        buf = self.alloc(max(a.nbytes, 4), what)
        if a.nbytes:
            try:
                cl.enqueue_copy(self.queue, buf, a)
            except (cl.Error, MemoryError) as e:
                buf.release()
                raise DeviceMemoryError(f"cannot copy {what} of {a.nbytes} bytes to "
                                        f"{self.info.name}: {e}") from None
        return buf

    @property
    def host_unified_memory(self) -> bool:
        """True when the device works in the host's memory (OpenCL's
        ``CL_DEVICE_HOST_UNIFIED_MEMORY``: CPU devices such as PoCL's, integrated GPUs):
        buffers over host arrays (:meth:`wrap`) are then used without a copy."""
        try:
            return bool(self.cl_device.host_unified_memory)
        except (cl.Error, AttributeError):     # removed from OpenCL 3.0 drivers that lack it
            return False

    def wrap(self, array: np.ndarray, what: str = "an array",
             writable: bool = False) -> cl.Buffer:
        """A buffer over ``array``'s own memory (``USE_HOST_PTR``): on a device with
        :attr:`host_unified_memory` the kernels read and write the array itself, with no
        copy (PoCL does); elsewhere the driver may copy it in and out.

        ``array`` must be C-contiguous, non-empty, and writeable when ``writable``; it
        must stay alive and unchanged by the host until the runs on the buffer finished.
        A writable buffer's results are visible in ``array`` after :meth:`sync_host`.

        Raises
        ------
        TensorError
            ``array`` is not C-contiguous, is empty, or is read-only while ``writable``.
        DeviceMemoryError
            The driver cannot make the buffer.
        """
        if not array.flags.c_contiguous or array.nbytes == 0:
            raise TensorError(f"{what} must be a non-empty C-contiguous array to be wrapped "
                              "in a buffer; pass it to upload() instead")
        if writable and not array.flags.writeable:
            raise TensorError(f"{what} is read-only and cannot receive a result")
        self.check_alloc(array.nbytes, what)
        mf = cl.mem_flags
        flags = (mf.READ_WRITE if writable else mf.READ_ONLY) | mf.USE_HOST_PTR
        try:
            return cl.Buffer(self.context, flags, hostbuf=array)
        except (cl.Error, MemoryError) as e:
            raise DeviceMemoryError(f"cannot make a buffer over {what} of {array.nbytes} "
                                    f"bytes on {self.info.name}: {e}") from None

    def sync_host(self, buf: cl.Buffer, array: np.ndarray) -> None:
        """Make a :meth:`wrap` buffer's device writes visible in ``array`` (maps and unmaps
        it, as OpenCL requires; no copy on a device with :attr:`host_unified_memory`);
        waits for the queue."""
        mapped, _ = cl.enqueue_map_buffer(self.queue, buf, cl.map_flags.READ, 0,
                                          array.shape, array.dtype)
        if mapped.__array_interface__["data"][0] != array.__array_interface__["data"][0]:
            np.copyto(array, mapped)           # a driver that kept its own copy
        mapped.base.release()
        self.queue.finish()

    def download(self, buf: cl.Buffer, shape: tuple[int, ...],
                 dtype=np.float32) -> np.ndarray:
        """Copy a device buffer into a new array of ``shape`` (waits for the queue).

        Raises :class:`HostMemoryError` if the host cannot hold the array."""
        try:
            out = np.empty(shape, dtype=dtype)
        except MemoryError:
            nbytes = np.dtype(dtype).itemsize * int(np.prod(shape))
            raise HostMemoryError(f"the host cannot hold the {nbytes} bytes of an array of "
                                  f"{shape} copied from {self.info.name}") from None
        if out.nbytes:
            cl.enqueue_copy(self.queue, out, buf)
        return out


def _usable(info: DeviceInfo, cl_dev: cl.Device, store: Store,
            reasons: dict[str, str]) -> Device | None:
    """A :class:`Device` for ``info`` if its driver passed the probe (probing it now in a
    child process if needed: a device set aside on first contact warns once), else None
    with the reason noted in ``reasons`` under ``P:D``. No OpenCL context is made for a
    device before it passed."""
    v = ensure_verdict(info, store)
    if not v.usable:
        reasons[info.index] = v.reason
        return None
    return Device(cl_dev, info, store)


def _none_usable(what: str, reasons: dict[str, str], devices) -> DeviceError:
    by_index = {i.index: i for i, _ in devices}
    lines = "; ".join(f"{describe(by_index[ix])}: {why}" for ix, why in reasons.items())
    return DeviceError(f"no usable OpenCL {what}: every one was set aside by its first "
                       f"use ({lines}). 'wticonv devices' lists them; after fixing a driver, "
                       "'wticonv devices --probe' tries them again")


def select_device(spec: str | None = None, store: Store | None = None) -> Device:
    """Open the device named by ``spec`` (see module docstring), else ``WTICONV_DEVICE``.

    A device whose driver has no verdict on this host is probed first, in a child process
    (:mod:`wticonv.runtime.probe`); one that the probe sets aside is skipped by ``gpu``/``cpu``/
    default selection (with one warning when first found) and refused when named by
    ``P:D``.

    Raises
    ------
    DeviceError
        If ``spec`` is not a string, nothing matches, the named device is set aside, or
        every candidate is; the message lists the devices present or, for each set-aside
        device, why. In a forked child of a process that had opened a device
        (:func:`wticonv.runtime.forks.check_not_forked`).
    """
    check_not_forked()
    if spec is None:
        spec = os.environ.get("WTICONV_DEVICE") or None
    if spec is not None and not isinstance(spec, str):
        raise DeviceError(f"device {spec!r} is not a device spec: pass a string, 'gpu', 'cpu' "
                          "or 'PLATFORM:DEVICE' indices such as '0:0' (see 'wticonv "
                          "devices'), or a wticonv.Device")
    check_timeouts()
    store = store if store is not None else Store()
    devices = list_devices()
    listing = "; ".join(f"{i.index} {i.kind} {i.name!r} ({i.platform})" for i, _ in devices)
    want = (spec or "").strip().lower()
    reasons: dict[str, str] = {}
    if want in ("", "gpu"):
        gpus = [(i, d) for i, d in devices if i.kind == "gpu"]
        for info, cl_dev in gpus:
            dev = _usable(info, cl_dev, store, reasons)
            if dev is not None:
                return dev
        if want == "gpu":
            if gpus:
                raise _none_usable("GPU device", reasons, devices)
            raise DeviceError(f"no OpenCL GPU device found (WTICONV_DEVICE/--device 'gpu'); "
                              f"devices present: {listing}")
        want = "cpu"
    if want == "cpu":
        cpus = [(i, d) for i, d in devices if i.kind == "cpu"]
        if not cpus and not reasons:
            raise DeviceError(f"no OpenCL CPU device found; devices present: {listing}; "
                              f"{INSTALL_HINT}")
        usable = [dev for dev in (_usable(i, d, store, reasons) for i, d in cpus)
                  if dev is not None]
        if not usable:
            raise _none_usable("device" if spec in (None, "") else "CPU device", reasons,
                               devices)
        return max(usable, key=lambda dev: dev.peak_flops)
    parts = want.split(":")
    if len(parts) in (1, 2) and all(p.isdigit() for p in parts):
        p, d = int(parts[0]), int(parts[1]) if len(parts) == 2 else 0
        for info, cl_dev in devices:
            if (info.platform_index, info.device_index) == (p, d):
                dev = _usable(info, cl_dev, store, reasons)
                if dev is None:
                    raise DeviceError(f"OpenCL device {describe(info)} is set aside: "
                                      f"{reasons[info.index]}. Devices present: {listing}")
                return dev
        raise DeviceError(f"no OpenCL device {p}:{d}; devices present: {listing}")
    raise DeviceError(f"device {spec!r} is not understood: use 'gpu', 'cpu' or "
                      f"'PLATFORM:DEVICE' indices; devices present: {listing}")
