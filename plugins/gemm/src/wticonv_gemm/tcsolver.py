"""What the GEMM solvers of each numerical class declare, and where they apply.

A GEMM solver comes in three classes (``math``, wticonv.contract.answers.MATH_CLASSES):
``fp32`` runs the CUDA-core or CPU SGEMM everywhere; ``3xtf32`` and ``tf32`` run the
tensor-core SGEMM (kernels/nv/sgemm_tc.cl, tensorcore.py) and apply only where
:func:`wticonv.runtime.kit.tensor_cores` holds. Their ids are the FP32 solver's with the
class appended (``gemm.1x1_3xtf32``).
"""

from __future__ import annotations

from wticonv import Decline
from wticonv.runtime.kit import tensor_cores

__all__ = ["declare", "decline", "FP32_TOLERANCE", "MAX_WTI"]

#: rms_range against the float64 reference of the FP32 and 3xTF32 GEMMs (fp32 sums of up
#: to C*R*S or N*Ho*Wo terms; 3xTF32 is held to FP32's tolerance). TF32 solvers declare
#: none and take their class's default (wticonv.contract.answers.CLASS_DEFAULT_TOLERANCE).
FP32_TOLERANCE = 1e-5
#: Largest WTI per class (a fraction of the FP32 peak): the tensor cores' dense TF32 rate
#: over the FP32 rate, 494.7 / 66.9 = 7.4 TFLOP/s on the H100 SXM, whose arithmetic the
#: H200 shares (NVIDIA H100 Tensor Core GPU datasheet, 2023), and a third of it for
#: 3xTF32 (three products per multiply-add).
MAX_WTI = {"fp32": 1.0, "3xtf32": 7.4 / 3, "tf32": 7.4}


def declare(solver, base_id: str, math: str) -> None:
    """Sets ``solver``'s ``solver_id``, ``math``, ``tolerance`` and ``max_wti`` for class
    ``math``; raises ValueError for a class not in :data:`MAX_WTI`."""
    if math not in MAX_WTI:
        raise ValueError(f"no GEMM solver class {math!r}: use one of {', '.join(MAX_WTI)}")
    solver.solver_id = base_id if math == "fp32" else f"{base_id}_{math}"
    solver.math = math
    solver.tolerance = None if math == "tf32" else FP32_TOLERANCE
    solver.max_wti = MAX_WTI[math]


def decline(math: str, device) -> Decline | None:
    """A :class:`wticonv.Decline` when class ``math`` needs tensor cores that ``device``
    lacks, else None."""
    if math == "fp32" or tensor_cores(device):
        return None
    return Decline(f"{math} runs on tensor cores: NVIDIA's OpenCL on a GPU of compute "
                   f"capability 8.0 or newer ({device.info.name} is not one)")
