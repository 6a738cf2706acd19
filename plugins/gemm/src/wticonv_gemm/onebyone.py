"""The ``gemm.1x1`` solvers: 1x1 convolutions as one GEMM on the tensors in place.

Applies to 1x1 filters with no padding and strides of 1 or 2 (any dilation: a 1x1
filter has no taps to dilate), every direction and group count, with no workspace: the
GEMM kernels read x and dy and write y, dx and dw through image-mapped columns (plan.py).
Tunable: its perf configs are the GEMM's blockings or tiles (plan.perf_configs).

Three solvers, one per numerical class (wticonv.contract.answers.MATH_CLASSES):
``gemm.1x1`` (FP32, every device), and on GPUs with tensor cores
(:func:`wticonv.runtime.kit.tensor_cores`) ``gemm.1x1_3xtf32`` (FP32-accurate) and
``gemm.1x1_tf32`` (TF32, ranked only with ``allow_tf32``).
"""

from __future__ import annotations

from functools import lru_cache

from wticonv import Decline, hookimpl
from wticonv.runtime.kit import (
    enqueue,
    kernel_family,
    programs_of,
    tensor_core_decline,
    wgmma,
)

from . import plan, tcsolver, wti

__all__ = ["OneByOneSolver", "solver", "solver_3xtf32", "solver_tf32"]

_INT32 = 2**31 - 1


@lru_cache(maxsize=1024)
def _plan(problem, kind: str, compute_units: int, vector_width: int, math: str,
          config: str | None = None):
    return plan.plan_1x1(problem, kind, compute_units, vector_width, math, config)


@lru_cache(maxsize=1024)
def _configs(problem, kind: str, compute_units: int, vector_width: int, math: str,
             wgmma: bool) -> tuple[str, ...]:
    ops: list = []
    plan.plan_1x1(problem, kind, compute_units, vector_width, math, ops=ops)
    return tuple(plan.perf_configs(ops, kind, compute_units, vector_width, math, wgmma))


def _launches(problem, device, math: str, perf_config: str | None):
    return _plan(problem, kernel_family(device), device.info.compute_units,
                 device.info.vector_width, math, perf_config)


class OneByOneSolver:
    """1x1 convolution as GEMM, no im2col, zero workspace, in numerical class ``math``
    (``"fp32"``, ``"3xtf32"`` or ``"tf32"``; see :mod:`wticonv_gemm.tcsolver`)."""

    #: Hook API versions it was written for (wticonv.contract.hookspecs.HOOK_API_VERSION).
    hook_api = (2,)

    #: what it covers, for `wticonv solvers` (its declines say the rest)
    scope = "unpadded 1x1 filters at stride 1 or 2, all directions, no workspace"

    def __init__(self, math: str = "fp32") -> None:
        tcsolver.declare(self, "gemm.1x1", math)

    @hookimpl
    def is_applicable(self, problem, device):
        p = problem
        if (no := tensor_core_decline(self.math, device)) is not None:
            return no
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
    def get_wti(self, problem, device, perf_config):
        return wti.wti(problem, _launches(problem, device, self.math, perf_config), device)

    @hookimpl
    def perf_configs(self, problem, device):
        """The GEMM's blockings (CPUs) or tiles (GPUs): wticonv_gemm.sgemm.gemm_configs."""
        if self.is_applicable(problem, device) is not True:
            return []
        return list(_configs(problem, kernel_family(device), device.info.compute_units,
                             device.info.vector_width, self.math,
                             self.math != "fp32" and wgmma(device)))

    @hookimpl
    def programs(self, problem, device, perf_config):
        return programs_of(_launches(problem, device, self.math, perf_config))

    @hookimpl
    def run(self, problem, device, tensors, workspace, perf_config):
        enqueue(device, _launches(problem, device, self.math, perf_config),
                {"x": tensors.x, "w": tensors.w, "y": tensors.y})


solver = OneByOneSolver()
solver_3xtf32 = OneByOneSolver("3xtf32")
solver_tf32 = OneByOneSolver("tf32")
