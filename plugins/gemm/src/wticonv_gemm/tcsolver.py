"""What the GEMM solvers of each numerical class declare (where they decline: the core kit's
:func:`wticonv.runtime.kit.tensor_core_decline`).

A GEMM solver comes in three classes (``math``, wticonv.contract.answers.MATH_CLASSES):
``fp32`` runs the CUDA-core or CPU SGEMM everywhere; ``3xtf32`` and ``tf32`` run the
tensor-core SGEMM (kernels/nv/sgemm_tc.cl, tensorcore.py) and apply only where
:func:`wticonv.runtime.kit.tensor_cores` holds. Their ids are the FP32 solver's with the
class appended (``gemm.1x1_3xtf32``).
"""

from __future__ import annotations

from wticonv.runtime.kit import TENSOR_CORE_SPEEDUP, tensor_core_scope

__all__ = ["declare", "FP32_TOLERANCE"]

#: rms_range against the float64 reference of the FP32 and 3xTF32 GEMMs (fp32 sums of up
#: to C*R*S or N*Ho*Wo terms; 3xTF32 is held to FP32's tolerance). TF32 solvers declare
#: none and take their class's default (wticonv.contract.answers.CLASS_DEFAULT_TOLERANCE).
FP32_TOLERANCE = 1e-5


def declare(solver, base_id: str, math: str) -> None:
    """Sets ``solver``'s ``solver_id``, ``math``, ``tolerance`` and ``max_wti`` (the FP32
    GEMM's 1.0 times the class's :data:`wticonv.runtime.kit.TENSOR_CORE_SPEEDUP`) for
    class ``math``; raises ValueError for another class."""
    if math not in TENSOR_CORE_SPEEDUP:
        raise ValueError(f"no GEMM solver class {math!r}: use one of "
                         f"{', '.join(TENSOR_CORE_SPEEDUP)}")
    solver.solver_id = base_id if math == "fp32" else f"{base_id}_{math}"
    solver.math = math
    solver.tolerance = None if math == "tf32" else FP32_TOLERANCE
    solver.max_wti = TENSOR_CORE_SPEEDUP[math]
    solver.scope = tensor_core_scope(type(solver).scope, math)

