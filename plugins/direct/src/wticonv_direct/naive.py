"""The ``direct.naive`` solver: the guaranteed last resort.

Applies to every valid problem (any stride, padding, dilation, groups, filter and picture
size), in all three directions, with no workspace. One compiled program serves every
problem (all sizes are kernel arguments), so it is dynamic.

WTI on GPUs: ``problem.flops / (peak x time)`` with the time of naive_wti.py, which
sees the kernels' serial reduction per work-item (few outputs with a long reduction are
latency-bound). On CPUs: the kernels modelled at 1 % of the device's peak FP32 rate
(:data:`NAIVE_WTI`) plus one launch (the device's measured launch overhead,
:func:`wticonv.runtime.kit.launch_overhead_s`: about 18 us on the development machines'
CPU, 11 us on the H200) and, where backward weights is split into a work-group per dw
element (naive_wrw_split), naive_wti.CPU_SPLIT_GROUP_S per work-group and core:

    WTI = flops / (peak x (overhead + flops / (peak x 0.01) + split groups))

so it is at most 0.01 on CPUs and, on problems so small that the launch dominates, lower
than a real solver that pays the same launch. 1 % is deliberately low so that any real
solver outranks it; the naive kernels reach roughly 0.1-3 % of peak, depending on the
layer and device. On devices that are neither CPUs nor GPUs
(:func:`wticonv.runtime.kit.modelled_kind`) the WTI is the constant 0.01: this solver is
the guaranteed last resort, so it never answers "unknown".
"""

from __future__ import annotations

from wticonv import hookimpl
from wticonv.runtime.kit import enqueue, modelled_kind, programs_of

from . import launch, naive_wti

__all__ = ["NaiveSolver", "solver"]

#: The modelled fraction of peak of the naive kernels on CPUs, the most direct.naive
#: reports there (see module docstring).
NAIVE_WTI = 0.01


class NaiveSolver:
    """Direct convolution by definition, one output element per work-item."""

    #: what it covers, for `wticonv solvers` (its declines say the rest)
    scope = "any problem, all directions: one output per work-item (the slow, sure fallback)"
    solver_id = "direct.naive"
    #: Hook API versions it was written for (wticonv.contract.hookspecs.HOOK_API_VERSION).
    hook_api = (1, 2)
    #: rms_range tolerance against the float64 reference (fp32 accumulation, no reordering).
    tolerance = 1e-5

    @hookimpl
    def is_applicable(self, problem, device):
        return True

    @hookimpl
    def is_dynamic(self):
        return True

    @hookimpl
    def get_wti(self, problem, device):
        kind = modelled_kind(device)
        if kind is None:
            return NAIVE_WTI
        if kind == "gpu":
            return problem.flops / (device.peak_flops * naive_wti.seconds(problem, device))
        seconds = naive_wti.cpu_seconds(problem, device, NAIVE_WTI)
        return problem.flops / (device.peak_flops * seconds)

    @hookimpl
    def workspace_size(self, problem, device):
        return 0

    @hookimpl
    def programs(self, problem, device):
        return programs_of([launch.plan(problem, device)])

    @hookimpl
    def run(self, problem, device, tensors, workspace):
        enqueue(device, [launch.plan(problem, device)],
                {"x": tensors.x, "w": tensors.w, "y": tensors.y})


solver = NaiveSolver()
