"""Measure a device's peak FP32 rate and memory bandwidth with two small kernels.

The figures are what every WTI model is relative to: a WTI of 1.0 means the device's
measured ``peak_flops``. They are measured once per device (device + driver version) and
kept in the store (:mod:`wticonv.db.store`).

Method (kernels in ``kernels/peak.cl``):

- *peak FP32 FLOP/s*: every work-item runs independent float16 multiply-add chains (16
  on AVX-512 CPUs, 8 on narrower ones, 4 on GPUs; float16 fills an AVX-512 register), each
  multiply-add one fused instruction where the device has FMA units, as in the solvers'
  kernels (``WTICONV_MAD``, kernels/common.h; the store's ``FIGURES_METHOD`` 2); the
  loop count is a kernel argument, raised until one launch lasts at least ``target_ms``;
  the best of :data:`PEAK_LAUNCHES` launches counts.
- *bandwidth (bytes/s)*: a float4 copy kernel over a buffer of 64 MiB on CPUs and
  256 MiB on GPUs (well past the last-level caches); 2 x bytes / time, the median of
  :data:`BANDWIDTH_LAUNCHES` launches after one that warms up the page mappings. (The best
  of 3 read 57 GB/s once on the 2-core Zen 4 guest where eight further measurements read
  29.6-33.6: a fresh cache then ranked the solvers that move the most data, Winograd's
  transforms, 1.8x too fast.)
- *launch overhead (s)*: the median queued-to-end time of :data:`OVERHEAD_LAUNCHES`
  launches of an empty kernel (``kernels/launch.cl``), each waited for; the seconds every
  launch of a plan costs beyond its work in the WTI models (wticonv.runtime.kit).

Times come from OpenCL profiling events.
"""

from __future__ import annotations

import importlib.resources
from typing import TYPE_CHECKING

import numpy as np
import pyopencl as cl

if TYPE_CHECKING:  # pragma: no cover
    from wticonv.contract.protocols import DeviceLike as Device

__all__ = ["measure_device_figures", "measure_bandwidth", "measure_peak_flops",
           "measure_launch_overhead", "OVERHEAD_LAUNCHES", "BANDWIDTH_LAUNCHES",
           "PEAK_LAUNCHES"]

#: Launches of the empty kernel whose median is the launch overhead: 200 take about 4 ms
#: on a CPU through PoCL and 2 ms on a GPU, and their median moved by under 1 us between
#: runs on the development machines (the constants it replaced were measured so).
OVERHEAD_LAUNCHES = 200
#: Timed launches of the peak kernel (each at least ``target_ms``) whose best is the peak:
#: 7 rather than 3, since on the 2-core Zen 4 guest the best of 3 read 117 and 165 GFLOP/s
#: at the start of two calibrations (the device's peak there: 224-235), and the probes of
#: the second, timed at full speed, fitted factors 1.13-1.42x too high for the solvers
#: whose time is arithmetic (benchmarks/results/evaluate-test-n4-cpu-zen4-13/).
PEAK_LAUNCHES = 7
#: Timed launches of the copy kernel whose median is the bandwidth (64 MiB each way on a
#: CPU: about 4 ms a launch at 30 GB/s).
BANDWIDTH_LAUNCHES = 5

#: Independent float16 chains per work-item, per device kind: 16 keep both FMA pipes of an
#: AVX-512 core busy (8 measured 30 % less on the development machines' Zen 5 cores); 4
#: (64 registers) keep a GPU's register file from limiting occupancy. "cpu-narrow": CPUs
#: whose preferred float vector is narrower than 16 (AVX2: 16 ymm registers, which 16
#: float16 chains overflow): 8 measured 35 GFLOP/s against 16's 25 on a 2-core Zen 1 EPYC.
_CHAINS = {"cpu": 16, "cpu-narrow": 8, "gpu": 4}


def _chains(device: Device) -> int:
    if device.kind != "cpu":
        return _CHAINS["gpu"]
    return _CHAINS["cpu" if device.info.vector_width >= 16 else "cpu-narrow"]


def _source() -> str:
    return importlib.resources.files("wticonv").joinpath("kernels/peak.cl").read_text()


def _event_seconds(ev: cl.Event) -> float:
    ev.wait()
    return (ev.profile.end - ev.profile.start) * 1e-9


def measure_peak_flops(device: Device, target_ms: float = 30.0) -> float:
    """Peak FP32 rate of ``device`` in FLOP/s (see module docstring)."""
    chains = _chains(device)
    prg = device.build(_source(), f"-DWTICONV_PEAK_CHAINS={chains}")
    kernel = cl.Kernel(prg, "peak_fma")    # a new kernel object, not the cached attribute
    local = 64 if device.kind == "cpu" else 256
    local = min(local, device.info.max_work_group_size)
    groups_per_cu = 4 if device.kind == "cpu" else 16
    global_size = device.info.compute_units * groups_per_cu * local
    out = cl.Buffer(device.context, cl.mem_flags.WRITE_ONLY, global_size * 4)
    iters = 16
    best = 0.0
    runs = 0
    while runs < PEAK_LAUNCHES:
        kernel.set_args(out, np.int32(iters), np.float32(0.999), np.float32(0.001))
        ev = cl.enqueue_nd_range_kernel(device.queue, kernel, (global_size,), (local,))
        t = _event_seconds(ev)
        if t * 1e3 < target_ms and iters < 2**24:
            iters *= max(2, min(16, int(target_ms / max(t * 1e3, 1e-3))))
            continue
        best = max(best, global_size * iters * chains * 16 * 2 / t)
        runs += 1
    out.release()
    return best


def measure_bandwidth(device: Device) -> float:
    """Memory bandwidth of ``device`` in bytes/s (see module docstring)."""
    prg = device.build(_source())
    nbytes = (64 if device.kind == "cpu" else 256) * 2**20
    nbytes = min(nbytes, device.info.max_alloc_bytes // 2 // 4096 * 4096)
    mf = cl.mem_flags
    src = cl.Buffer(device.context, mf.READ_ONLY, nbytes)
    dst = cl.Buffer(device.context, mf.WRITE_ONLY, nbytes)
    cl.enqueue_fill_buffer(device.queue, src, np.float32(1.0), 0, nbytes).wait()
    local = 64 if device.kind == "cpu" else 256
    local = min(local, device.info.max_work_group_size)
    n4 = nbytes // 16
    n4 -= n4 % local
    kernel = cl.Kernel(prg, "stream_copy")
    kernel.set_args(src, dst)
    rates = []
    for _ in range(1 + BANDWIDTH_LAUNCHES):
        ev = cl.enqueue_nd_range_kernel(device.queue, kernel, (n4,), (local,))
        rates.append(2.0 * n4 * 16 / _event_seconds(ev))
    src.release()
    dst.release()
    return float(np.median(rates[1:]))     # the first warmed up the page mappings


def measure_launch_overhead(device: Device, launches: int = OVERHEAD_LAUNCHES) -> float:
    """Seconds per kernel launch on ``device``: the median queued-to-end time of
    ``launches`` launches of an empty kernel, one work-item each, each waited for (one
    launch before them, not counted, lets the driver finish compiling the kernel)."""
    text = importlib.resources.files("wticonv").joinpath("kernels/launch.cl").read_text()
    kernel = cl.Kernel(device.build(text), "launch_empty")
    times = []
    for i in range(launches + 1):
        ev = cl.enqueue_nd_range_kernel(device.queue, kernel, (1,), (1,))
        ev.wait()
        if i:
            times.append((ev.profile.end - ev.profile.queued) * 1e-9)
    return float(np.median(times))


def measure_device_figures(device: Device) -> tuple[float, float]:
    """``(peak_flops, bandwidth)`` of ``device``, in FLOP/s and bytes/s."""
    return measure_peak_flops(device), measure_bandwidth(device)
