"""The ``example.direct`` solver: forward convolution, one work-item per output element.

Applies to every forward problem (any filter, stride, padding, dilation and groups) whose
output has fewer than 2^31 elements; declines backward data and backward weights. Dynamic:
every size is a kernel argument, so one build serves every shape. No workspace.

WTI: a constant guess, :data:`WTI`, for a first version; replace it with a model of the
kernel's time (see wticonv's docs/wti-models.md), or return -2.0 (unknown).
"""

from __future__ import annotations

import functools

import numpy as np

from wticonv import Decline, hookimpl
from wticonv.runtime.kernelfiles import read_kernel

#: Work-items per work-group.
LOCAL = 64
#: Predicted fraction of the device's peak FP32 rate (a guess: one multiply-add per load).
WTI = 0.005


@functools.lru_cache(maxsize=16)
def _kernel(device):
    """The conv_fwd kernel for ``device``, built once (device.build caches the program on
    disk too) and kept: retrieving it again per run costs time. read_kernel puts a #line
    directive first, so that build errors name kernels/example.cl and the line."""
    return device.build(read_kernel("wticonv_example", "kernels", "example.cl")).conv_fwd


class DirectSolver:
    """Forward convolution, one output element per work-item."""

    solver_id = "example.direct"
    hook_api = (1, 2)              # the wticonv hook API versions it was written for
    tolerance = 1e-5               # rms_range against wticonv's float64 reference

    @hookimpl
    def is_applicable(self, problem, device):
        if problem.direction != "fwd":
            return Decline("forward only")
        if problem.n * problem.k * problem.ho * problem.wo >= 2**31:
            return Decline("the output has 2^31 elements or more")
        return True

    @hookimpl
    def is_dynamic(self):
        return True

    @hookimpl
    def get_wti(self, problem, device):
        return WTI

    @hookimpl
    def workspace_size(self, problem, device):
        return 0

    @hookimpl
    def run(self, problem, device, tensors, workspace):
        p = problem
        kernel = _kernel(device)
        total = p.n * p.k * p.ho * p.wo
        i32 = np.int32
        device.enqueue_kernel(kernel, (-(-total // LOCAL) * LOCAL,), (LOCAL,),
                              tensors.x, tensors.w, tensors.y,
                              *(i32(v) for v in (p.n, p.c, p.h, p.w, p.k, p.r, p.s, p.ho,
                                                 p.wo, p.pad_h, p.pad_w, p.stride_h,
                                                 p.stride_w, p.dilation_h, p.dilation_w,
                                                 p.groups)))


solver = DirectSolver()
