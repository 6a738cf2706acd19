"""The ``winograd.rxs`` solver: filters other than 3x3 cut into pieces (MIOpen's "RxS").

Covered (dilation 1, any padding and groups):

- stride 1, every direction, filters from 1x2 up to 15x15 other than 3x3 and 1x1: each
  axis longer than 1 is cut into 3-tap pieces (zero taps pad the last one) served by
  F(2, 3); an axis of 1 tap uses no transform along it (F(2, 1)). E.g. 5x5 = 4 pieces,
  7x7 = 9, 1x7 = 3, 7x1 = 3. The pieces' products are summed by one GEMM per position.
- 3x3 with stride 2, forward only: the input and the filter are split into the four
  stride-1 phases (even/odd rows x even/odd columns); the phases' 2x2, 2x1, 1x2 and 1x1
  filters are served by F(2x2, 2x2) and summed the same way.

Declined: dilation > 1, strides other than these, 1x1 filters (no transform can save a
multiplication there), filters over 15 taps per axis.
"""

from __future__ import annotations

from wticonv import Decline

from .base import WinogradBase
from .plan import Variant

__all__ = ["RxSSolver", "solver", "solver_3xtf32", "solver_tf32"]

MAX_TAPS = 15


class RxSSolver(WinogradBase):
    """Winograd on filter pieces: RxS stride-1 filters, 3x3 stride-2 forward."""

    #: what it covers, for `wticonv solvers` (its declines say the rest)
    scope = ("stride-1 filters up to 15 taps an axis but 1x1 and 3x3, and 3x3 stride 2 "
             "forward; no dilation")
    solver_id = "winograd.rxs"
    tolerance = 2e-5
    #: Largest WTI it may report (conformance check "wti"): the multiplications the
    #: transform saves, pieces served by F(2x2, 3x3) or F(2x2, 2x2), at most 36/16.
    max_wti = 2.25

    def covers(self, problem):
        p = problem
        if p.dilation_h != 1 or p.dilation_w != 1:
            return Decline(f"only dilation 1 (dilation {p.dilation_h}x{p.dilation_w})")
        if (p.stride_h, p.stride_w) == (2, 2) and (p.r, p.s) == (3, 3):
            if p.direction != "fwd":
                return Decline("3x3 stride 2 is covered forward only")
            return Variant(2, 2, 2, 2)
        if p.stride_h != 1 or p.stride_w != 1:
            return Decline(f"stride {p.stride_h}x{p.stride_w}: only stride 1, or 3x3 with "
                           "stride 2 forward")
        if (p.r, p.s) == (3, 3):
            return Decline("3x3 stride 1 is winograd.f2x3's and winograd.f4x3's")
        if (p.r, p.s) == (1, 1):
            return Decline("1x1 filters: no transform saves a multiplication")
        if p.r > MAX_TAPS or p.s > MAX_TAPS:
            return Decline(f"filters over {MAX_TAPS} taps per axis ({p.r}x{p.s})")
        return Variant(2, 2, 1 if p.r == 1 else 3, 1 if p.s == 1 else 3)


solver = RxSSolver()
solver_3xtf32 = RxSSolver("3xtf32")
solver_tf32 = RxSSolver("tf32")
