"""wticonv-winograd: Winograd minimal-filtering solvers for wticonv.

Solvers: ``winograd.f2x3`` and ``winograd.f4x3`` (3x3, stride 1), ``winograd.rxs`` (other
filters in 3-tap pieces, 3x3 stride 2 forward in phases) and ``winograd.fused_f2x3``
(F(2x2, 3x3) fwd and bwd in one kernel, no workspace). Transforms are derived in
transforms.py; the batched multiply is wticonv-gemm's SGEMM.
"""

__version__ = "0.2.2"
