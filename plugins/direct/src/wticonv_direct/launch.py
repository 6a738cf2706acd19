"""Launch planning for direct.naive: which kernel, global and local sizes, arguments.

Kept apart from the hook functions (naive.py) so that it can be read, tested and reused
without the plugin machinery. The launch is a :class:`wticonv.runtime.kit.Launch` of
``kernels/naive.cl``; ``naive.py`` enqueues it with :func:`wticonv.runtime.kit.enqueue`.

Local sizes are fixed per kernel family (never derived from the problem), so PoCL, which
generates code per work-group size on first launch, compiles each kernel once.
"""

from __future__ import annotations

import numpy as np
from wticonv.runtime.kit import Launch, kernel_family, round_up

from .programs import KERNELS

__all__ = ["grid", "plan", "WRW_LOCAL", "BUILD_OPTIONS"]

#: Work-items per work-group in naive_wrw_split (DIRECT_NAIVE_WRW_LOCAL in naive.cl).
WRW_LOCAL = 64
#: Work-group size of the one-item-per-output kernels, per kernel family. 64 keeps PoCL's
#: work-group loops short and vectorisable; 256 is a common good size on GPUs.
_LOCAL = {"cpu": 64, "gpu": 256}
#: naive_wrw (serial reduction per dw element) is used when dw has at least this many
#: elements per compute unit; below it, the device would idle, and naive_wrw_split
#: (a work-group per dw element) is used instead.
_WRW_ITEMS_PER_CU = {"cpu": 256, "gpu": 2048}

#: The build options of naive.cl (the same for every problem).
BUILD_OPTIONS = f"-DDIRECT_NAIVE_WRW_LOCAL={WRW_LOCAL}"


def grid(problem, device) -> tuple[str, int, int]:
    """``(kernel name, global size, local size)`` of ``problem``'s launch on ``device``:
    one work-item per output element in fwd and bwd, per dw element in ``naive_wrw``, and
    a work-group of :data:`WRW_LOCAL` per dw element in ``naive_wrw_split``. The WTI model
    (naive_wti.py) reads the same figures."""
    p = problem
    kind = kernel_family(device)
    local = min(_LOCAL[kind], device.info.max_work_group_size)
    outputs = p.direct_work[0]          # y, dx or dw elements, by direction
    if p.direction != "wrw":
        return f"naive_{p.direction}", round_up(outputs, local), local
    if outputs >= _WRW_ITEMS_PER_CU[kind] * device.info.compute_units:
        return "naive_wrw", round_up(outputs, local), local
    return "naive_wrw_split", outputs * WRW_LOCAL, WRW_LOCAL


def plan(problem, device) -> Launch:
    """The launch that computes ``problem`` on ``device``.

    Every kernel takes (x, w, y) in that order, then the problem's sizes as ``int``;
    which tensor it writes depends on the direction (y in fwd, x in bwd, w in wrw).
    """
    p = problem
    name, items, local = grid(p, device)
    sizes = tuple(np.int32(v) for v in (p.n, p.c, p.h, p.w, p.k, p.r, p.s, p.ho, p.wo,
                                        p.pad_h, p.pad_w, p.stride_h, p.stride_w,
                                        p.dilation_h, p.dilation_w, p.groups))
    return KERNELS.launch("naive.cl", name, BUILD_OPTIONS, (items,), (local,),
                          ("x", "w", "y") + sizes)
