"""The ``example.direct`` solver: forward convolution, one work-item per output element.

Applies to every forward problem (any filter, stride, padding, dilation and groups) whose
output has fewer than 2^31 elements; declines backward data and backward weights. Dynamic:
every size is a kernel argument, so one build serves every shape. No workspace.

Host code uses wticonv's host kit (:mod:`wticonv.runtime.kit`): :data:`KERNELS` reads
``kernels/*.cl`` (build errors name the file and line) and keeps the built kernels per
device; :func:`plan` describes the launch; ``enqueue`` runs it with the tensors bound, and
``programs_of`` names its program so that the core can compile it ahead.

WTI: the kernel modelled at :data:`EFFICIENCY` of the device's peak FP32 rate, plus the
device's measured launch overhead, on CPUs and GPUs; -2.0 (unknown) on other devices. A
first guess: replace it with a model of the kernel's time (see wticonv's
docs/wti-models.md).
"""

from __future__ import annotations

import numpy as np

from wticonv import WTI_UNKNOWN, Decline, hookimpl
from wticonv.runtime.kit import (KernelLibrary, Launch, enqueue, launch_overhead_s,
                                 modelled_kind, programs_of, round_up)

#: The plugin's kernel files (src/wticonv_example/kernels/).
KERNELS = KernelLibrary("wticonv_example")
#: Work-items per work-group.
LOCAL = 64
#: Predicted fraction of the device's peak FP32 rate the kernel reaches (a guess: one
#: multiply-add per load).
EFFICIENCY = 0.005


def plan(problem) -> Launch:
    """The launch of ``example.cl``'s ``conv_fwd`` that computes ``problem``: one work-item
    per output element, the sizes as ``int`` arguments after the tensors x, w and y."""
    p = problem
    sizes = tuple(np.int32(v) for v in (p.n, p.c, p.h, p.w, p.k, p.r, p.s, p.ho, p.wo,
                                        p.pad_h, p.pad_w, p.stride_h, p.stride_w,
                                        p.dilation_h, p.dilation_w, p.groups))
    total = p.n * p.k * p.ho * p.wo
    return KERNELS.launch("example.cl", "conv_fwd", "", (round_up(total, LOCAL),), (LOCAL,),
                          ("x", "w", "y") + sizes, flops=p.flops, efficiency=EFFICIENCY)


class DirectSolver:
    """Forward convolution, one output element per work-item."""

    solver_id = "example.direct"
    hook_api = (1, 2)              # the wticonv hook API versions it was written for
    tolerance = 1e-5               # rms_range against wticonv's float64 reference
    math = "fp32"                  # numerical class: fp32, 3xtf32 or tf32 (tensor cores)

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
        if modelled_kind(device) is None:      # neither a CPU nor a GPU: not modelled
            return WTI_UNKNOWN
        seconds = launch_overhead_s(device) + problem.flops / (device.peak_flops * EFFICIENCY)
        return problem.flops / (device.peak_flops * seconds)

    @hookimpl
    def workspace_size(self, problem, device):
        return 0

    @hookimpl
    def programs(self, problem, device):       # optional: lets the core compile ahead
        return programs_of([plan(problem)])

    @hookimpl
    def run(self, problem, device, tensors, workspace):
        enqueue(device, [plan(problem)], {"x": tensors.x, "w": tensors.w, "y": tensors.y})


solver = DirectSolver()
