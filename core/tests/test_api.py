"""The NumPy API (conv2d, conv2d_input, conv2d_weight): results, padding forms, errors."""

from __future__ import annotations

import numpy as np
import pytest

import wticonv
from wticonv import (ConvProblem, ProblemError, SolverNotFoundError, TensorError, reference,
                     rms_range)

TOL = 1e-5
rng = np.random.default_rng(7)


def rand(*shape):
    return rng.uniform(-1, 1, shape).astype(np.float32)


def test_conv2d_with_bias_matches_reference():
    x, w, b = rand(2, 6, 9, 8), rand(4, 3, 3, 3), rand(4)
    y = wticonv.conv2d(x, w, b, stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=2)
    p = ConvProblem(2, 6, 9, 8, 4, 3, 3, pad_h=1, pad_w=2, stride_h=2, stride_w=1,
                    dilation_h=1, dilation_w=2, groups=2)
    ref = reference(p, x=x, w=w) + b[None, :, None, None]
    assert y.dtype == np.float32 and y.shape == p.y_shape
    assert rms_range(y, ref) < TOL


def _padded_ref(x, w, top, left, bottom, right):
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (top, bottom), (left, right)))
    n, c, h, ww = xp.shape
    return reference(ConvProblem(n, c, h, ww, w.shape[0], w.shape[2], w.shape[3]), x=xp, w=w)


def test_onnx_style_asymmetric_padding_all_directions():
    x, w = rand(1, 3, 7, 6), rand(5, 3, 2, 3)
    pads = (0, 2, 1, 0)  # top, left, bottom, right
    y = wticonv.conv2d(x, w, padding=pads, stride=2)
    xp = np.pad(x, ((0, 0), (0, 0), (0, 1), (2, 0)))
    p = ConvProblem(1, 3, 8, 8, 5, 2, 3, stride_h=2, stride_w=2)
    assert rms_range(y, reference(p, x=xp, w=w)) < TOL
    dy = rand(*y.shape)
    dx = wticonv.conv2d_input(x.shape, w, dy, stride=2, padding=pads)
    dxp = reference(p.with_direction("bwd"), w=w, y=dy)
    assert dx.shape == x.shape
    assert rms_range(dx, dxp[:, :, 0:7, 2:8]) < TOL
    dw = wticonv.conv2d_weight(x, w.shape, dy, stride=2, padding=pads)
    assert rms_range(dw, reference(p.with_direction("wrw"), x=xp, y=dy)) < TOL


def test_same_and_valid_padding_strings():
    x, w = rand(1, 2, 6, 5), rand(3, 2, 4, 3)
    y = wticonv.conv2d(x, w, padding="same")
    assert y.shape == (1, 3, 6, 5)  # PyTorch: top = total // 2, the extra row at the bottom
    assert rms_range(y, _padded_ref(x, w, 1, 1, 2, 1)) < TOL
    assert wticonv.conv2d(x, w, padding="valid").shape == (1, 3, 3, 3)
    with pytest.raises(TensorError, match="padding='same' needs stride 1"):
        wticonv.conv2d(x, w, padding="same", stride=2)


def test_conv2d_input_uses_input_size_to_resolve_stride_ambiguity():
    w = rand(4, 2, 3, 3)
    dy = rand(1, 4, 3, 3)
    for h in (7, 8):  # both give Ho = 3 with stride 2, pad 0
        dx = wticonv.conv2d_input((1, 2, h, h), w, dy, stride=2)
        p = ConvProblem(1, 2, h, h, 4, 3, 3, stride_h=2, stride_w=2, direction="bwd")
        assert dx.shape == (1, 2, h, h)
        assert rms_range(dx, reference(p, w=w, y=dy)) < TOL


def test_other_float_dtypes_are_converted():
    x, w = rand(1, 2, 5, 5).astype(np.float64), rand(3, 2, 3, 3).astype(np.float16)
    y = wticonv.conv2d(x, w)
    p = ConvProblem(1, 2, 5, 5, 3, 3, 3)
    assert y.dtype == np.float32
    assert rms_range(y, reference(p, x=x, w=w.astype(np.float32))) < TOL


def test_forced_solver():
    x, w = rand(1, 2, 5, 5), rand(3, 2, 3, 3)
    y = wticonv.conv2d(x, w, solver="direct.naive", workspace_limit=0)
    assert rms_range(y, reference(ConvProblem(1, 2, 5, 5, 3, 3, 3), x=x, w=w)) < TOL
    with pytest.raises(SolverNotFoundError, match="no solver 'gemm.nope'"):
        wticonv.conv2d(x, w, solver="gemm.nope")


@pytest.mark.parametrize("call, fragment", [
    (lambda: wticonv.conv2d(np.ones((1, 2, 5, 5), np.int32), rand(3, 2, 3, 3)),
     "input has dtype int32"),
    (lambda: wticonv.conv2d(rand(2, 5, 5), rand(3, 2, 3, 3)), "input has 3 dimensions"),
    (lambda: wticonv.conv2d(rand(1, 4, 5, 5), rand(3, 2, 3, 3)),
     "input has C=4 channels but weight (3, 2, 3, 3) with groups=1 expects C"),
    (lambda: wticonv.conv2d(rand(1, 2, 5, 5), rand(3, 2, 3, 3), bias=rand(2)),
     "bias must be a float array of shape (3,)"),
    (lambda: wticonv.conv2d(rand(1, 2, 5, 5), rand(3, 2, 3, 3), padding=(1, 2, 3)),
     "padding=(1, 2, 3) must be an int or a pair"),
    (lambda: wticonv.conv2d(rand(1, 2, 5, 5), rand(3, 2, 3, 3), padding="full"),
     "padding='full' is unknown"),
    (lambda: wticonv.conv2d(rand(1, 2, 5, 5), rand(3, 2, 3, 3), groups=0),
     "groups=0 must be a positive int"),
    (lambda: wticonv.conv2d_input((1, 2, 5, 5), rand(3, 2, 3, 3), rand(1, 3, 4, 4)),
     "grad_output has shape (1, 3, 4, 4) but the convolution produces (1, 3, 3, 3)"),
    (lambda: wticonv.conv2d_weight(rand(1, 2, 5, 5), (3, 2, 3), rand(1, 3, 3, 3)),
     "weight_size=(3, 2, 3) must have 4 entries"),
])
def test_bad_input_is_a_clear_error(call, fragment):
    with pytest.raises(TensorError) as e:
        call()
    assert fragment in str(e.value)


def test_invalid_geometry_is_a_problem_error():
    with pytest.raises(ProblemError, match="output h size < 1"):
        wticonv.conv2d(rand(1, 2, 2, 5), rand(3, 2, 3, 3))


def test_explain_without_running(handle):
    sel = wticonv.explain(ConvProblem(1, 3, 8, 8, 4, 3, 3), handle=handle)
    naive = next(v for v in sel.verdicts if v.solver_id == "direct.naive")
    # 1 % of peak, less the launch's share on this tiny problem
    assert naive.applicable and 0 < naive.wti < 0.01 and naive.workspace == 0


def test_compute_checks_its_arrays(handle):
    p = ConvProblem(4, 3, 6, 6, 2, 3, 3)
    x, w = rand(4, 3, 6, 6), rand(2, 3, 3, 3)
    with pytest.raises(TensorError, match="needs the array x of shape"):
        handle.compute(p, w=w)
    with pytest.raises(TensorError, match=r"array x must have shape \(4, 3, 6, 6\)"):
        handle.compute(p, x=x[:1], w=w)


def test_tensor_larger_than_the_device_is_a_clear_error(handle):
    from wticonv import DeviceMemoryError

    side = int((handle.device.info.max_alloc_bytes // 4) ** 0.5) + 2
    p = ConvProblem(1, 1, side, side, 1, 1, 1)
    with pytest.raises(DeviceMemoryError, match="more than the largest buffer"):
        handle.compute(p, x=np.zeros((1, 1, 1, 1), np.float32), w=np.ones((1, 1, 1, 1),
                                                                          np.float32))


def test_fallback_reports_the_solver_that_ran():
    from wticonv import Handle, SolverWarning, hookimpl
    from wticonv.measuring.bench import measure
    from wticonv.contract.registry import SolverRegistry

    calls = []

    class Broken:
        solver_id = "broken.run"
        max_wti = 5.0                # it claims to beat every solver (and is allowed to)

        @hookimpl
        def is_applicable(self):
            return True

        @hookimpl
        def is_dynamic(self):
            return True

        @hookimpl
        def get_wti(self):
            return 5.0

        @hookimpl
        def workspace_size(self):
            return 0

        @hookimpl
        def run(self, problem):
            calls.append(problem.key)
            raise RuntimeError("kernel exploded")

    reg = SolverRegistry()
    reg.register(Broken())
    h = Handle(wticonv.get_handle().device, reg)
    p = ConvProblem(2, 3, 8, 8, 4, 3, 3, pad_h=1, pad_w=1)
    with pytest.warns(SolverWarning, match="kernel exploded"):
        m = measure(h, p, iterations=3)
    assert m.solver_id != "broken.run" and m.verdict.solver_id == m.solver_id
    assert m.verdict.wti != 5.0 and m.ok
    assert calls == [p.key]
