"""The ``direct.naive`` solver: the guaranteed last resort.

Applies to every valid problem (any stride, padding, dilation, groups, filter and picture
size), in all three directions, with no workspace. One compiled program serves every
problem (all sizes are kernel arguments), so it is dynamic.

WTI: a constant 0.01, i.e. 1 % of the device's peak FP32 rate. It is deliberately low so
that any real solver that applies outranks it; it is not a prediction of its speed (the
naive kernels reach roughly 1-5 % of peak, depending on the layer and device).
"""

from __future__ import annotations

from wticonv import hookimpl

from . import launch

__all__ = ["NaiveSolver", "solver"]

#: The WTI direct.naive reports for every problem (see module docstring).
NAIVE_WTI = 0.01


class NaiveSolver:
    """Direct convolution by definition, one output element per work-item."""

    solver_id = "direct.naive"
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
        return NAIVE_WTI

    @hookimpl
    def workspace_size(self, problem, device):
        return 0

    @hookimpl
    def run(self, problem, device, tensors, workspace):
        launch.enqueue(problem, device, tensors)


solver = NaiveSolver()
