"""The ``winograd.f4x3`` solver: F(4x4, 3x3), 3x3 filters, stride 1, dilation 1.

Same coverage as winograd.f2x3; 4 x fewer multiplications than the direct algorithm. The
transform uses the points 0, 1, -1, 1/2, -1/2 (transforms.py), which keep its entries at
most 4 in magnitude; the error stays within 1e-4 (rms_range).
"""

from __future__ import annotations

from .base import WinogradBase
from .f2x3 import covers_3x3
from .plan import Variant

__all__ = ["F4x3Solver", "solver", "solver_3xtf32"]


class F4x3Solver(WinogradBase):
    """Winograd F(4x4, 3x3)."""

    #: what it covers, for `wticonv solvers` (its declines say the rest)
    scope = "3x3 stride 1, no dilation, all directions"
    solver_id = "winograd.f4x3"
    tolerance = 1e-4
    #: Largest WTI it may report (conformance check "wti"): the multiplications the
    #: transform saves, F(4x4, 3x3): 16 x 9 products for 36 multiplications, 144/36.
    max_wti = 4.0

    def covers(self, problem):
        return covers_3x3(problem, Variant(4, 4, 3, 3))


solver = F4x3Solver()
solver_3xtf32 = F4x3Solver("3xtf32")
# No TF32 class: operands rounded to 11 bits after a transform whose entries reach 4 missed
# even the TF32 conformance limit (rms_range 1.2e-2 against 1e-2, a 3x3 backward-data edge
# shape on the H200, tests/test_edge_shapes.py); F(2x2, 3x3) in TF32 stays within 4e-3.
