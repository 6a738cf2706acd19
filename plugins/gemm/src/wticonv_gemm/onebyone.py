"""The ``gemm.1x1`` solver: 1x1 convolutions as one GEMM on the tensors in place.

Applies to 1x1 filters with no padding and strides of 1 or 2 (any dilation: a 1x1
filter has no taps to dilate), every direction and group count, with no workspace: the
GEMM kernels read x and dy and write y, dx and dw through image-mapped columns (plan.py).
"""

from __future__ import annotations

from functools import lru_cache

from wticonv import Decline, hookimpl
from wticonv.runtime.kit import enqueue, kernel_family

from . import plan, wti

__all__ = ["OneByOneSolver", "solver"]

_INT32 = 2**31 - 1


@lru_cache(maxsize=512)
def _plan(problem, kind: str, compute_units: int, vector_width: int):
    return plan.plan_1x1(problem, kind, compute_units, vector_width)


class OneByOneSolver:
    """1x1 convolution as GEMM, no im2col, zero workspace."""

    solver_id = "gemm.1x1"
    #: Hook API versions it was written for (wticonv.contract.hookspecs.HOOK_API_VERSION).
    hook_api = (1, 2)
    #: rms_range against the float64 reference (fp32 sums of up to C or N*Ho*Wo terms).
    tolerance = 1e-5

    @hookimpl
    def is_applicable(self, problem, device):
        p = problem
        if p.r != 1 or p.s != 1:
            return Decline(f"only 1x1 filters (this one is {p.r}x{p.s})")
        if p.pad_h or p.pad_w:
            return Decline("only unpadded 1x1 convolutions")
        if p.stride_h > 2 or p.stride_w > 2:
            return Decline(f"only strides 1 and 2 (stride {p.stride_h}x{p.stride_w})")
        if p.n * p.ho * p.wo > _INT32:
            return Decline("more than 2^31 output pixels in the batch (a 32-bit GEMM width)")
        return True

    @hookimpl
    def is_dynamic(self):
        return True

    @hookimpl
    def workspace_size(self):
        return 0

    @hookimpl
    def get_wti(self, problem, device):
        return wti.wti(problem, _plan(problem, kernel_family(device), device.info.compute_units,
                                      device.info.vector_width), device)

    @hookimpl
    def run(self, problem, device, tensors, workspace):
        launches = _plan(problem, kernel_family(device), device.info.compute_units,
                         device.info.vector_width)
        enqueue(device, launches, {"x": tensors.x, "w": tensors.w, "y": tensors.y})


solver = OneByOneSolver()
