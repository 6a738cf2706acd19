"""The ``winograd.fused_f2x3`` solver: F(2x2, 3x3) in one kernel, with no workspace.

Covers what winograd.f2x3 covers in the forward and backward-data directions (3x3,
stride 1, dilation 1, any padding and groups). Transforms, multiply and output transform
run in one work-group (kernels/fused.cl), so it needs no workspace and one launch: it pays
off where the workspace is limited or absent, and on small problems where the unfused
plan's four launches and its round trips through global memory dominate. Its multiply
reads its operands from local memory, so on large layers the unfused solvers, whose
multiply is a register-blocked SGEMM, rank above it (the WTI model tells them apart).

WTI: the launch's predicted time (its multiply's padded FLOPs at fused_plan.EFFICIENCY,
its traffic, the launch overhead) or, on GPUs, its latency floor where that is longer: a
work-group runs its input channels in steps one after another
(:func:`wticonv_winograd.fused_plan.serial_seconds`), so few output channels over many
input channels take far longer than their FLOPs.
"""

from __future__ import annotations

from functools import lru_cache

from wticonv import WTI_UNKNOWN, Decline, hookimpl
from wticonv.runtime.kit import (
    enqueue,
    kernel_family,
    launch_overhead_s,
    modelled_kind,
    programs_of,
)
from wticonv_gemm import sgemm

from .f2x3 import covers_3x3
from .fused_plan import fused_plan, limit_reason, serial_seconds
from .plan import Variant

__all__ = ["FusedF2x3Solver", "solver"]

_VARIANT = Variant(2, 2, 3, 3)


@lru_cache(maxsize=1024)
def _plan(problem, kind: str):
    return fused_plan(problem, _VARIANT, kind)


@lru_cache(maxsize=1024)
def _floor_s(problem, kind: str, compute_units: int) -> float:
    (launch,) = _plan(problem, kind)
    return serial_seconds(problem, _VARIANT, kind, compute_units, launch)


class FusedF2x3Solver:
    """Fused Winograd F(2x2, 3x3), fwd and bwd, zero workspace."""

    #: what it covers, for `wticonv solvers` (its declines say the rest)
    scope = "3x3 stride 1, no dilation, fwd and bwd, no workspace"
    solver_id = "winograd.fused_f2x3"
    #: Hook API versions it was written for (wticonv.contract.hookspecs.HOOK_API_VERSION).
    hook_api = (1, 2)
    tolerance = 2e-5
    #: Largest WTI it may report (conformance check "wti"): the multiplications the
    #: transform saves, F(2x2, 3x3): 36/16.
    max_wti = 2.25

    def covers(self, problem):
        """The variant for ``problem``, or a :class:`wticonv.Decline` with the reason."""
        if problem.direction == "wrw":
            unfused = covers_3x3(problem, _VARIANT)
            hint = ("" if isinstance(unfused, Decline)
                    else " (winograd.f2x3 and winograd.f4x3 cover this shape)")
            return Decline(f"backward weights is not fused{hint}")
        v = covers_3x3(problem, _VARIANT)
        too_large = None if isinstance(v, Decline) else limit_reason(problem, v)
        return Decline(too_large) if too_large else v

    @hookimpl
    def is_applicable(self, problem, device, workspace_limit):
        v = self.covers(problem)
        return v if isinstance(v, Decline) else True

    @hookimpl
    def is_dynamic(self):
        return True

    @hookimpl
    def workspace_size(self, problem, device, workspace_limit):
        return 0

    @hookimpl
    def get_wti(self, problem, device, workspace_limit):
        if modelled_kind(device) is None:
            return WTI_UNKNOWN
        kind = kernel_family(device)
        launches = _plan(problem, kind)
        t = max(sgemm.predict_seconds(launches, device), launch_overhead_s(device)
                + _floor_s(problem, kind, device.info.compute_units))
        return problem.flops / (device.peak_flops * t)

    @hookimpl
    def programs(self, problem, device):
        return programs_of(_plan(problem, kernel_family(device)))

    @hookimpl
    def run(self, problem, device, tensors, workspace):
        enqueue(device, _plan(problem, kernel_family(device)),
                {"x": tensors.x, "w": tensors.w, "y": tensors.y})


solver = FusedF2x3Solver()
