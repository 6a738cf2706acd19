"""The ``winograd.f2x3`` solver: F(2x2, 3x3), 3x3 filters, stride 1, dilation 1.

Any padding and group count; forward, backward data (forward with the filter flipped and
transposed) and backward weights (transforms plus a GEMM over the tiles). 2.25 x fewer
multiplications than the direct algorithm; transforms with entries of magnitude <= 1, so
the error stays within 2e-5 (rms_range) on every network layer tested.
"""

from __future__ import annotations

from functools import lru_cache

from wticonv import Decline

from .base import WinogradBase
from .plan import Variant

__all__ = ["F2x3Solver", "solver", "solver_3xtf32", "solver_tf32", "covers_3x3"]


@lru_cache(maxsize=64)
def _rxs_hint(problem) -> str:
    """``"; winograd.rxs takes it"`` when it does, else ``""`` (cached: f2x3, f4x3 and
    fused_f2x3 decline the same problems one after another)."""
    from .rxs import solver as rxs

    return "" if isinstance(rxs.covers(problem), Decline) else "; winograd.rxs takes it"


def covers_3x3(problem, variant: Variant):
    """``variant`` for a 3x3 stride-1 undilated problem, else the reason it is not one."""
    p = problem
    if (p.r, p.s) != (3, 3):
        return Decline(f"only 3x3 filters (this one is {p.r}x{p.s}{_rxs_hint(p)})")
    if p.stride_h != 1 or p.stride_w != 1:
        return Decline(f"only stride 1 (stride {p.stride_h}x{p.stride_w}{_rxs_hint(p)})")
    if p.dilation_h != 1 or p.dilation_w != 1:
        return Decline(f"only dilation 1 (dilation {p.dilation_h}x{p.dilation_w})")
    return variant


class F2x3Solver(WinogradBase):
    """Winograd F(2x2, 3x3)."""

    #: what it covers, for `wticonv solvers` (its declines say the rest)
    scope = "3x3 stride 1, no dilation, all directions"
    solver_id = "winograd.f2x3"
    tolerance = 2e-5
    #: Largest WTI it may report (conformance check "wti"): the multiplications the
    #: transform saves, F(2x2, 3x3): 4 x 9 products for 16 multiplications, 36/16.
    max_wti = 2.25

    def covers(self, problem):
        return covers_3x3(problem, Variant(2, 2, 3, 3))


solver = F2x3Solver()
solver_3xtf32 = F2x3Solver("3xtf32")
solver_tf32 = F2x3Solver("tf32")
