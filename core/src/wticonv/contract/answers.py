"""What a solver may answer and declare: one set of rules for the registry, selection and
the conformance kit.

The hook reference (docs/hooks.md, :mod:`wticonv.contract.hookspecs`) says what each query hook
returns; the functions here check one answer each and raise :class:`ContractError`
naming the hook, the value and the rule when it breaks one. The registry checks a
solver's declared attributes (``tolerance``, ``max_wti``, ``math``) when it loads the
solver (:func:`declared_tolerance`, :func:`declared_max_wti`, :func:`declared_math`);
selection checks every answer of every ranking (a solver that breaks a rule is set aside
for the problem with a :class:`~wticonv.SolverWarning`); the conformance kit calls every
hook itself on every corpus problem and fails on the first broken rule
(:mod:`wticonv.testing.answers`).
"""

from __future__ import annotations

import math
from numbers import Real
from typing import TYPE_CHECKING, Any

from wticonv.contract.hookspecs import WTI_UNKNOWN, Decline
from wticonv.errors import ContractError, PluginError

if TYPE_CHECKING:  # pragma: no cover
    from wticonv.problem.conv import ConvProblem

__all__ = ["DEFAULT_TOLERANCE", "DEFAULT_MAX_WTI", "TOLERANCE_LIMIT", "MAX_WTI_LIMIT",
           "KIT_TOLERANCE_LIMIT", "MATH_CLASSES", "DEFAULT_MATH", "FP32_ACCURATE",
           "CLASS_DEFAULT_TOLERANCE", "CLASS_KIT_TOLERANCE_LIMIT", "declared_math",
           "declared_scope",
           "math_allowed", "applicable_answer", "dynamic_answer", "workspace_answer",
           "wti_answer", "declared_tolerance", "declared_max_wti", "reduction_length",
           "tolerance_for"]

#: rms_range tolerance of a solver that declares none (fp32 sums of up to 1024 products,
#: against the float64 reference; grows with the reduction length, see
#: :func:`wticonv.solver_tolerance`).
DEFAULT_TOLERANCE = 1e-5
#: Largest WTI of a solver that declares no ``max_wti``: the direct algorithm's FLOPs at
#: the device's peak. Algorithms that do fewer multiplications declare their saving
#: (Winograd F(2x2, 3x3): 36/16 = 2.25; F(4x4, 3x3): 144/36 = 4).
DEFAULT_MAX_WTI = 1.0
#: A declared ``tolerance`` must be below this (rms_range is relative to the largest
#: magnitude: 1 accepts any output of the right size); checked at load time.
TOLERANCE_LIMIT = 1.0
#: A declared ``max_wti`` must be at most this (no convolution algorithm in use saves more
#: than 16x the direct multiplications; F(6x6, 3x3) saves 5.06x); checked at load time.
MAX_WTI_LIMIT = 16.0
#: The loosest ``tolerance`` the conformance kit's ``reference`` check accepts: 10 x that
#: of the loosest built-in solver (winograd.f4x3, 1e-4). A solver declaring more fails
#: ``reference`` (declare it as an expected failure, with the reason, if it is right).
KIT_TOLERANCE_LIMIT = 1e-3

#: The numerical classes a solver's results belong to (its ``math`` attribute), after
#: cuDNN's math types and PyTorch's ``allow_tf32``:
#:
#: - ``fp32``: FP32 multiplies and sums (every CUDA-core and CPU kernel);
#: - ``3xtf32``: tensor-core products of each FP32 operand split into a TF32 high and low
#:   part, three products summed (hi*hi + hi*lo + lo*hi), as CUTLASS's 3xTF32 GEMMs do: the
#:   dropped lo*lo term and the split's remainder are about 2^-22 of a product, FP32's own
#:   rounding (2^-24) within a few units, so it is held to FP32's tolerances;
#: - ``tf32``: one tensor-core product of operands rounded to TF32 (10 explicit mantissa
#:   bits, unit roundoff 2^-11 = 4.9e-4: NVIDIA A100 Tensor Core GPU Architecture
#:   whitepaper, 2020), faster and about 1000x less accurate.
MATH_CLASSES = ("fp32", "3xtf32", "tf32")
#: The class of a solver that declares none.
DEFAULT_MATH = "fp32"
#: The classes the fallback ranks by default (FP32-accurate); ``allow_tf32`` adds ``tf32``.
FP32_ACCURATE = frozenset({"fp32", "3xtf32"})
#: Default ``tolerance`` per class, for a solver that declares its class but no tolerance:
#: tf32's is 8 x the TF32 unit roundoff (2^-11): each product carries two roundings, and
#: on the kit's short sums of uniform(-1, 1) data, where terms cancel, a correct TF32
#: kernel (inputs rounded to nearest, FP32 sums) measured rms_range up to 1.6e-3.
CLASS_DEFAULT_TOLERANCE = {"fp32": DEFAULT_TOLERANCE, "3xtf32": DEFAULT_TOLERANCE,
                           "tf32": 4e-3}
#: The loosest ``tolerance`` the kit's ``reference`` check accepts, per class: FP32's
#: :data:`KIT_TOLERANCE_LIMIT` for the FP32-accurate classes, 10 x tf32's default for
#: tf32.
CLASS_KIT_TOLERANCE_LIMIT = {"fp32": KIT_TOLERANCE_LIMIT, "3xtf32": KIT_TOLERANCE_LIMIT,
                             "tf32": 1e-2}


def _real(value: Any) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool)


def applicable_answer(value: Any) -> bool | Decline:
    """``is_applicable``'s answer: ``True``, ``False`` or a :class:`Decline` (NumPy bools
    are taken as bools).

    Raises
    ------
    ContractError
        For anything else (``None``, a string, a number): the hook must say yes or no.
    """
    if value is True or isinstance(value, (bool, Decline)):
        return value
    if type(value).__name__ == "bool_" and type(value).__module__ == "numpy":
        return bool(value)
    raise ContractError(f"is_applicable returned {value!r:.60}, not True, False or "
                        "Decline('reason')")


def dynamic_answer(value: Any) -> bool:
    """``is_dynamic``'s answer, which must be ``True`` or ``False`` exactly.

    Raises
    ------
    ContractError
        For anything else (``"yes"``, 1, None).
    """
    if isinstance(value, bool):
        return value
    raise ContractError(f"is_dynamic returned {value!r:.60}, not True or False")


def workspace_answer(value: Any) -> int:
    """``workspace_size``'s answer: a non-negative int number of bytes (a bool is not one).

    Raises
    ------
    ContractError
        For a negative number, a float, a bool, None or anything else.
    """
    if type(value) is int and value >= 0:         # the common case, first (selection)
        return value
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ContractError(f"workspace_size returned {value!r:.60}, not a non-negative int "
                            "(bytes)")
    return int(value)


def wti_answer(value: Any, max_wti: float = DEFAULT_MAX_WTI) -> float:
    """``get_wti``'s answer: a finite real number, either -2.0 (unknown) or between 0 and
    the solver's ``max_wti``.

    Raises
    ------
    ContractError
        For NaN, infinity, a negative value other than -2.0, a value above ``max_wti``, a
        bool, a string or anything else.
    """
    if type(value) is float and 0 <= value <= max_wti:   # the common case, first
        return value
    if not _real(value) or not math.isfinite(value) or (value < 0 and value != WTI_UNKNOWN):
        raise ContractError(f"get_wti returned {value!r:.60}, not a finite WTI >= 0 or -2.0 "
                            "(unknown)")
    if value > max_wti:
        raise ContractError(f"get_wti returned {value!r}, above the solver's max_wti "
                            f"{max_wti} (declare max_wti if its algorithm saves "
                            "multiplications)")
    return float(value)


def declared_math(solver_id: str, obj: Any) -> str:
    """The solver's ``math`` attribute (its numerical class, one of
    :data:`MATH_CLASSES`), or :data:`DEFAULT_MATH` when it declares none.

    Raises
    ------
    PluginError
        If it is not one of :data:`MATH_CLASSES` (e.g. ``"fp16"``, ``"TF32"`` or 32).
    """
    math_class = getattr(obj, "math", None)
    if math_class is None:
        return DEFAULT_MATH
    if not isinstance(math_class, str) or math_class not in MATH_CLASSES:
        raise PluginError(f"solver {solver_id!r} declares math = {math_class!r:.60}; it must "
                          f"be one of {', '.join(repr(c) for c in MATH_CLASSES)}: the "
                          "numerical class of its results ('fp32' for FP32 arithmetic)")
    return math_class


def declared_scope(obj: Any) -> str:
    """What the solver covers, in one line, for ``wticonv solvers``: its ``scope``
    attribute when it is a non-empty string (e.g. ``"3x3 stride 1, no dilation, all
    directions"``), else the first sentence of its class's docstring, else "". Display
    only: nothing is refused."""
    scope = getattr(obj, "scope", None)
    if isinstance(scope, str) and scope.strip():
        return " ".join(scope.split())
    doc = " ".join((type(obj).__doc__ or "").split())
    return doc.split(". ")[0].rstrip(".") if doc else ""


def math_allowed(math_class: str, allow_tf32: bool) -> bool:
    """Whether the fallback may rank a solver of ``math_class``: the FP32-accurate classes
    always, ``tf32`` only with ``allow_tf32``."""
    return math_class in FP32_ACCURATE or (allow_tf32 and math_class == "tf32")


def declared_tolerance(solver_id: str, obj: Any) -> float:
    """The solver's ``tolerance`` attribute (rms_range against the float64 reference), or
    its class's default (:data:`CLASS_DEFAULT_TOLERANCE`: :data:`DEFAULT_TOLERANCE` for
    FP32-accurate solvers) when it declares none.

    Raises
    ------
    PluginError
        If it is not a finite real number in (0, :data:`TOLERANCE_LIMIT`), e.g.
        ``"tight"``, ``-1.0`` or ``2.0``.
    """
    tol = getattr(obj, "tolerance", None)
    if tol is None:
        return CLASS_DEFAULT_TOLERANCE[declared_math(solver_id, obj)]
    if not _real(tol) or not math.isfinite(tol) or not 0 < tol < TOLERANCE_LIMIT:
        raise PluginError(f"solver {solver_id!r} declares tolerance = {tol!r:.60}; it must be "
                          f"a number between 0 and {TOLERANCE_LIMIT} (exclusive), the "
                          "rms_range its results meet against the float64 reference, e.g. "
                          f"{DEFAULT_TOLERANCE}")
    return float(tol)


def declared_max_wti(solver_id: str, obj: Any) -> float:
    """The solver's ``max_wti`` attribute (the largest WTI it may report), or
    :data:`DEFAULT_MAX_WTI` when it declares none.

    Raises
    ------
    PluginError
        If it is not a finite real number in (0, :data:`MAX_WTI_LIMIT`].
    """
    cap = getattr(obj, "max_wti", None)
    if cap is None:
        return DEFAULT_MAX_WTI
    if not _real(cap) or not math.isfinite(cap) or not 0 < cap <= MAX_WTI_LIMIT:
        raise PluginError(f"solver {solver_id!r} declares max_wti = {cap!r:.60}; it must be a "
                          f"number above 0 and at most {MAX_WTI_LIMIT}: the ratio of the "
                          "direct algorithm's multiplications to its own (1.0 for direct "
                          "and GEMM solvers, 2.25 for Winograd F(2x2, 3x3))")
    return float(cap)


def reduction_length(problem: ConvProblem) -> int:
    """How many products each output element of ``problem`` sums, at most: C/groups x R x
    S for fwd, K/groups x ceil(R/stride_h) x ceil(S/stride_w) for bwd, N x Ho x Wo for
    wrw."""
    p = problem
    if p.direction == "fwd":
        return (p.c // p.groups) * p.r * p.s
    if p.direction == "bwd":
        return (p.k // p.groups) * -(-p.r // p.stride_h) * -(-p.s // p.stride_w)
    return p.n * p.ho * p.wo


def tolerance_for(registry, solver_id: str, problem=None) -> float:
    """The rms_range tolerance of ``solver_id`` in ``registry`` on ``problem``.

    The solver's declared ``tolerance`` (else :data:`DEFAULT_TOLERANCE`) holds for sums of
    up to 1024 products; beyond, it grows as sqrt(length / 1024) (:func:`reduction_length`),
    as the rounding error of a float32 sum of random terms does. E.g. a backward-weights
    pass over 2 x 499 x 496 pixels allows 22 x the base tolerance. ``problem`` None: the
    base tolerance.
    """
    base = declared_tolerance(solver_id, registry.get(solver_id).obj)
    if problem is None:
        return base
    return base * max(1.0, math.sqrt(reduction_length(problem) / 1024))
