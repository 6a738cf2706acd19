"""The Winograd solvers' tensor-core classes off the GPU: ids, declared attributes,
declines and plans (their results are checked on an NVIDIA GPU in tests/test_gpu.py)."""

from __future__ import annotations

import pytest
from wticonv import ConvProblem, Decline
from wticonv_winograd import f2x3, f4x3, rxs
from wticonv_winograd import plan as wplan
from wticonv_winograd.plan import Variant

P = ConvProblem


def test_classes_are_installed_with_their_ids(handle):
    ids = set(handle.registry.ids())
    for base in ("winograd.f2x3", "winograd.rxs"):
        for math in ("3xtf32", "tf32"):
            assert handle.registry.get(f"{base}_{math}").math == math
    assert handle.registry.get("winograd.f4x3_3xtf32").math == "3xtf32"
    # F(4x4, 3x3) in TF32 missed the TF32 conformance limit: not offered
    assert "winograd.f4x3_tf32" not in ids
    assert not hasattr(f4x3, "solver_tf32")


def test_declared_tolerance_and_max_wti():
    # 3xTF32 keeps the FP32 solver's tolerance, TF32 the class default (declares none)
    assert f2x3.solver_3xtf32.tolerance == f2x3.solver.tolerance == 2e-5
    assert f4x3.solver_3xtf32.tolerance == f4x3.solver.tolerance == 1e-4
    assert f2x3.solver_tf32.tolerance is None
    # the transform's saving times the tensor cores' speed-up, within the core's 16
    assert f2x3.solver_3xtf32.max_wti == pytest.approx(2.25 * 7.4 / 3)
    assert f4x3.solver_3xtf32.max_wti == pytest.approx(4.0 * 7.4 / 3)
    assert rxs.solver_tf32.max_wti == 16.0 < 2.25 * 7.4
    # the FP32 solvers are unchanged
    assert (f2x3.solver.solver_id, f2x3.solver.math, f2x3.solver.max_wti) == (
        "winograd.f2x3", "fp32", 2.25)


def test_an_unknown_class_is_refused():
    with pytest.raises(ValueError, match="no Winograd solver class 'fp16'"):
        f2x3.F2x3Solver("fp16")


def test_they_decline_without_tensor_cores(handle):
    """PoCL (every CI machine) has none: a Decline that says what is needed; a GPU with
    tensor cores runs them."""
    from wticonv.runtime.kit import tensor_cores

    p = P(2, 8, 8, 8, 8, 3, 3, pad_h=1, pad_w=1)
    for solver in (f2x3.solver_3xtf32, f4x3.solver_3xtf32, rxs.solver_tf32):
        no = solver.is_applicable(p, handle.device, None)
        if tensor_cores(handle.device):    # rxs leaves 3x3 stride 1 to f2x3 and f4x3
            assert no is True if solver is not rxs.solver_tf32 else "f4x3" in no.reason
            continue
        assert isinstance(no, Decline) and "compute capability 8.0" in no.reason
    assert f2x3.solver.is_applicable(p, handle.device, None) is True


@pytest.mark.parametrize("direction", ["fwd", "bwd", "wrw"])
def test_the_batched_multiply_runs_on_the_tensor_core_kernel(direction):
    q = P(8, 64, 28, 28, 64, 3, 3, pad_h=1, pad_w=1).with_direction(direction)
    v = Variant(4, 4, 3, 3)
    layout = wplan.workspace_layout(q, v, "gpu", 132, 2**30)
    for math, split in (("3xtf32", "1"), ("tf32", "0")):
        gemms = [la for la in wplan.plan(q, v, "gpu", 132, layout, 16, math)
                 if la.kernel.startswith("sgemm")]
        assert gemms and all(la.file == "nv/sgemm_tc.cl" for la in gemms), math
        assert all(f"-DTC_SPLIT={split}" in la.options for la in gemms)
    fp32 = [la for la in wplan.plan(q, v, "gpu", 132, layout) if la.kernel.startswith("sgemm")]
    assert fp32 and all(la.file == "sgemm_gpu.cl" for la in fp32)
