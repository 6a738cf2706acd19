"""Launch planning for direct.naive: which kernel, global and local sizes, arguments.

Kept apart from the hook functions (naive.py) so that it can be read, tested and reused
without the plugin machinery.

Local sizes are fixed per device kind (never derived from the problem), so PoCL, which
generates code per work-group size on first launch, compiles each kernel once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import programs
from .programs import round_up as _round_up

__all__ = ["Launch", "plan", "enqueue", "WRW_LOCAL", "kernel_source"]

#: Work-items per work-group in naive_wrw_split (DIRECT_NAIVE_WRW_LOCAL in naive.cl).
WRW_LOCAL = 64
#: Work-group size of the one-item-per-output kernels, per device kind. 64 keeps PoCL's
#: work-group loops short and vectorisable; 256 is a common good size on GPUs.
_LOCAL = {"cpu": 64, "gpu": 256}
#: naive_wrw (serial reduction per dw element) is used when dw has at least this many
#: elements per compute unit; below it, the device would idle, and naive_wrw_split
#: (a work-group per dw element) is used instead.
_WRW_ITEMS_PER_CU = {"cpu": 256, "gpu": 2048}

_BUILD_OPTIONS = f"-DDIRECT_NAIVE_WRW_LOCAL={WRW_LOCAL}"


def kernel_source() -> str:
    """The OpenCL C source of the naive kernels (``kernels/naive.cl``)."""
    return programs.kernel_source("naive.cl")


@dataclass(frozen=True)
class Launch:
    """One kernel launch: kernel name, global and local sizes (work-items)."""

    kernel: str
    global_size: int
    local_size: int


def plan(problem, device) -> Launch:
    """The launch that computes ``problem`` on ``device``."""
    p = problem
    kind = "gpu" if device.kind == "gpu" else "cpu"
    local = min(_LOCAL[kind], device.info.max_work_group_size)
    if p.direction == "fwd":
        return Launch("naive_fwd", _round_up(p.n * p.k * p.ho * p.wo, local), local)
    if p.direction == "bwd":
        return Launch("naive_bwd", _round_up(p.n * p.c * p.h * p.w, local), local)
    dw_elems = p.k * (p.c // p.groups) * p.r * p.s
    if dw_elems >= _WRW_ITEMS_PER_CU[kind] * device.info.compute_units:
        return Launch("naive_wrw", _round_up(dw_elems, local), local)
    return Launch("naive_wrw_split", dw_elems * WRW_LOCAL, WRW_LOCAL)


def enqueue(problem, device, tensors) -> None:
    """Enqueue the kernel of :func:`plan` on ``device.queue``.

    Every kernel takes (x, w, y) in that order; which of them it writes depends on the
    direction (y in fwd, x in bwd, w in wrw).
    """
    p = problem
    launch = plan(p, device)
    sizes = [np.int32(v) for v in (p.n, p.c, p.h, p.w, p.k, p.r, p.s, p.ho, p.wo, p.pad_h,
                                   p.pad_w, p.stride_h, p.stride_w, p.dilation_h,
                                   p.dilation_w, p.groups)]
    device.enqueue_kernel(programs.kernel(device, "naive.cl", launch.kernel, _BUILD_OPTIONS),
                          (launch.global_size,),
                          (launch.local_size,), tensors.x, tensors.w, tensors.y, *sizes)
