"""Kernel objects of the direct plugin's ``.cl`` files, built once per device and options.

Programs come from the device's program cache (``device.build``: one build per source and
option set, persisted across processes where the driver allows); the ``pyopencl.Kernel``
objects are kept here per device, so that a launch never re-creates them. Build options
must never depend on a problem's sizes (N, C, H, W, K, R, S, strides...): those are kernel
arguments, which is what makes the solvers dynamic.
"""

from __future__ import annotations

import threading
import weakref

import pyopencl as cl
from wticonv.runtime.kernelfiles import read_kernel

__all__ = ["kernel_source", "kernel", "LAUNCH_OVERHEAD_S", "device_kind", "round_up"]

#: Seconds per kernel launch, per device kind: an empty kernel's queued-to-end time
#: (median of 200), 18 us through PoCL 3.1 on the development machines' 2-core EPYC CPU
#: and 11 us through NVIDIA's OpenCL driver on the H200. Used by the WTI models.
LAUNCH_OVERHEAD_S = {"cpu": 18e-6, "gpu": 11e-6}

_sources: dict[str, str] = {}
_kernels: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def round_up(n: int, m: int) -> int:
    """``n`` rounded up to a multiple of ``m`` (grid sizes to work-group multiples)."""
    return -(-n // m) * m


def device_kind(device) -> str:
    """``"gpu"`` for GPUs, ``"cpu"`` for everything else (CPUs, accelerators)."""
    return "gpu" if device.kind == "gpu" else "cpu"


def kernel_source(file: str) -> str:
    """The OpenCL C source of ``kernels/<file>`` in this package.

    Raises:
        FileNotFoundError: no such file in ``wticonv_direct/kernels``.
    """
    with _lock:
        if file not in _sources:
            # a #line directive first: build errors name this file and line
            _sources[file] = read_kernel("wticonv_direct", "kernels", file)
        return _sources[file]


def kernel(device, file: str, name: str, options: str = "") -> cl.Kernel:
    """The kernel ``name`` of ``kernels/<file>`` built with ``options`` on ``device``."""
    source = kernel_source(file)
    with _lock:
        per_device = _kernels.get(device)
        if per_device is None:
            per_device = _kernels[device] = {}
        key = (file, options, name)
        k = per_device.get(key)
        if k is None:
            k = per_device[key] = cl.Kernel(device.build(source, options), name)
        return k
