"""Bad input through the Python API: each row of docs/reliability.md's "Bad input" table
gives the right result or one clear error (the CLI's rows: test_bad_input_cli.py)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import wticonv
from wticonv import (ArgumentError, ConvProblem, DeviceError, NoApplicableSolverError,
                     ProblemError, SolverNotApplicableError, SolverNotFoundError, TensorError,
                     reference, rms_range)

TOL = 1e-5
P = ConvProblem(2, 3, 8, 7, 4, 3, 3, pad_h=1, pad_w=1)


def rand(*shape, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)


X, W = rand(*P.x_shape, seed=1), rand(*P.w_shape, seed=2)
DY = rand(*P.y_shape, seed=3)


def _calls(x=X, w=W, dy=DY):
    """The three API functions on (x, w, dy), each with its float64 reference."""
    return {
        "fwd": (lambda: wticonv.conv2d(x, w, padding=1),
                lambda: reference(P, x=x, w=w)),
        "bwd": (lambda: wticonv.conv2d_input(P.x_shape, w, dy, padding=1),
                lambda: reference(P.with_direction("bwd"), w=w, y=dy)),
        "wrw": (lambda: wticonv.conv2d_weight(x, P.w_shape, dy, padding=1),
                lambda: reference(P.with_direction("wrw"), x=x, y=dy)),
    }


# ------------------------------------------------------------------------------ dtypes
@pytest.mark.parametrize("dtype", [np.float64, np.float16, np.longdouble, ">f4", ">f8"])
@pytest.mark.parametrize("direction", ["fwd", "bwd", "wrw"])
def test_other_float_dtypes_are_converted(dtype, direction):
    x, w, dy = (a.astype(dtype) for a in (X, W, DY))
    run, ref = _calls(x, w, dy)[direction]
    got = run()
    assert got.dtype == np.float32 and got.flags.c_contiguous
    assert rms_range(got, ref()) < TOL


@pytest.mark.parametrize("value, fragment", [
    (X.astype(np.int32), "input has dtype int32"),
    (X.astype(np.int64), "input has dtype int64"),
    (X > 0, "input has dtype bool"),
    (X.astype(object), "input has dtype object"),
    (X.astype(np.complex64), "input has dtype complex64"),
    (X.astype(str), "input has dtype <U"),
    (None, "input is None"),
    (np.ma.masked_array(X), "input is a masked array"),
    ([[[[1.0, 2.0], [3.0]]]], "input cannot be read as a NumPy array (ValueError"),
])
def test_non_float_input_is_refused(value, fragment):
    with pytest.raises(TensorError) as e:
        wticonv.conv2d(value, W, padding=1)
    assert fragment in str(e.value) and ("float32" in str(e.value) or "filled" in str(e.value))


def test_nested_lists_of_floats_are_read_as_arrays():
    y = wticonv.conv2d(X.tolist(), W.tolist(), padding=1)
    assert rms_range(y, reference(P, x=X, w=W)) < TOL


@pytest.mark.parametrize("name, call", [
    ("weight", lambda w: wticonv.conv2d(X, w, padding=1)),
    ("grad_output", lambda dy: wticonv.conv2d_input(P.x_shape, W, dy, padding=1)),
])
def test_non_float_weight_and_grad_output_are_refused(name, call):
    bad = (W if name == "weight" else DY).astype(np.int16)
    with pytest.raises(TensorError, match=f"{name} has dtype int16"):
        call(bad)


def test_float64_beyond_float32_range_is_refused():
    x = X.astype(np.float64)
    x[0, 0, 0, 0] = 1e39
    with pytest.raises(TensorError, match=r"1 finite value\(s\) beyond float32's range"):
        wticonv.conv2d(x, W, padding=1)


# ----------------------------------------------------------------------- layouts
def _layouts(a):
    """Views of the same values in other memory layouts: name -> (view, values)."""
    big = np.zeros((a.shape[0] + 1, a.shape[1] + 2, a.shape[2] + 3, a.shape[3] + 4),
                   np.float32)
    big[1:, 2:, 3:, 4:] = a
    flat = np.concatenate([np.zeros(5, np.float32), a.ravel()])
    raw = np.zeros(a.nbytes + 2, np.uint8)
    unaligned = np.frombuffer(raw.data, np.float32, a.size, offset=2).reshape(a.shape)
    raw[2:] = a.view(np.uint8).ravel()
    rev = np.ascontiguousarray(a[:, :, ::-1, ::-1])
    return {
        "reversed rows and columns": (rev[:, :, ::-1, ::-1], a),
        "negative strides": (a[:, :, ::-1], np.ascontiguousarray(a[:, :, ::-1])),
        "transposed": (np.ascontiguousarray(a.transpose(0, 1, 3, 2)).transpose(0, 1, 3, 2), a),
        "Fortran order": (np.asfortranarray(a), a),
        "strided view with offset": (big[1:, 2:, 3:, 4:], a),
        "contiguous view with offset": (flat[5:].reshape(a.shape), a),
        "every other element": (np.repeat(a, 2, axis=3)[:, :, :, ::2], a),
        "unaligned": (unaligned, a),
    }


@pytest.mark.parametrize("layout", list(_layouts(X)))
@pytest.mark.parametrize("direction, arg", [("fwd", "x"), ("fwd", "w"), ("bwd", "w"),
                                            ("bwd", "dy"), ("wrw", "x"), ("wrw", "dy")])
def test_any_layout_is_read_in_index_order(layout, direction, arg):
    arrays = {"x": X, "w": W, "dy": DY}
    view, values = _layouts(arrays[arg])[layout]
    assert np.array_equal(view, values)
    run, _ = _calls(**{**arrays, arg: view})[direction]
    _, ref = _calls(**{**arrays, arg: values})[direction]
    assert rms_range(run(), ref()) < TOL


def test_handle_compute_reads_any_layout(handle):
    got = handle.compute(P, x=X[:, :, ::-1], w=np.asfortranarray(W))
    assert rms_range(got, reference(P, x=np.ascontiguousarray(X[:, :, ::-1]), w=W)) < TOL


# ------------------------------------------------------------------------- shapes
@pytest.mark.parametrize("call, error, fragment", [
    (lambda: wticonv.conv2d(X[0], W, padding=1), TensorError,
     "input has 3 dimensions, shape (3, 8, 7); expected 4 (NCHW); for one unbatched"),
    (lambda: wticonv.conv2d(X, W[0], padding=1), TensorError, "weight has 3 dimensions"),
    (lambda: wticonv.conv2d(X[:, :2], W, padding=1), TensorError,
     "input has C=2 channels but weight (4, 3, 3, 3) with groups=1 expects C = "),
    (lambda: wticonv.conv2d(X, W, bias=rand(3), padding=1), TensorError,
     "bias must be a float array of shape (4,)"),
    (lambda: wticonv.conv2d_input(P.x_shape, W, DY[:, :, 1:], padding=1), TensorError,
     "grad_output has shape (2, 4, 7, 7) but the convolution produces (2, 4, 8, 7)"),
    (lambda: wticonv.conv2d_input((2, 3, 8), W, DY, padding=1), TensorError,
     "input_size=(2, 3, 8) must have 4 entries"),
    (lambda: wticonv.conv2d_input((2, 3, 8.0, 7), W, DY, padding=1), TensorError,
     "must hold 4 integers"),
    (lambda: wticonv.conv2d_input((2, -3, 8, 7), W, DY, padding=1), TensorError,
     "input_size=(2, -3, 8, 7) must not hold negative sizes"),
    (lambda: wticonv.conv2d_weight(X, (4, 3, 3), DY, padding=1), TensorError,
     "weight_size=(4, 3, 3) must have 4 entries"),
    (lambda: wticonv.conv2d_weight(X, (5, 3, 3, 3), DY, padding=1), TensorError,
     "grad_output has shape (2, 4, 8, 7) but the convolution produces (2, 5, 8, 7)"),
    (lambda: wticonv.conv2d(rand(1, 4, 5, 5), rand(3, 2, 3, 3), groups=2), ProblemError,
     "groups=2 must divide k=3"),
    (lambda: wticonv.conv2d(X, W, stride=0), ProblemError, "stride_h=0 must be a positive"),
    (lambda: wticonv.conv2d(X, W, dilation=(1, 0)), ProblemError, "dilation_w=0 must be"),
    (lambda: wticonv.conv2d(X, W, padding=-1), TensorError, "must not be negative"),
    (lambda: wticonv.conv2d(X, W, stride=(1, 2, 3)), TensorError, "must be an int or a pair"),
    (lambda: wticonv.conv2d(X[:, :, :2], W), ProblemError, "output h size < 1"),
    (lambda: wticonv.conv2d(X, rand(4, 3, 0, 3)), ProblemError, "r=0 must be a positive"),
])
def test_shapes_that_do_not_fit_are_one_clear_error(call, error, fragment):
    with pytest.raises(error) as e:
        call()
    assert fragment in str(e.value)


def test_handle_compute_checks_shape_and_dtype(handle):
    with pytest.raises(TensorError, match=r"array w must have shape \(4, 3, 3, 3\)"):
        handle.compute(P, x=X, w=W[:, :2])
    with pytest.raises(TensorError, match="array x has dtype int8"):
        handle.compute(P, x=X.astype(np.int8), w=W)


def test_handle_run_refuses_buffers_too_small_or_missing(handle):
    from wticonv import ConvTensors

    dev = handle.device
    x, w, y = dev.upload(X), dev.upload(W), dev.alloc(4 * int(np.prod(P.y_shape)))
    small = dev.alloc(16)
    try:
        with pytest.raises(TensorError, match=r"tensor y \(2, 4, 8, 7\) of .* needs 1792 "
                                              r"bytes, but its buffer holds 16"):
            handle.run(P, ConvTensors(x, w, small))
        with pytest.raises(TensorError, match="tensor w .* is None"):
            handle.run(P, ConvTensors(x, None, y))
        handle.run(P, ConvTensors(x, w, y))
        assert rms_range(dev.download(y, P.y_shape), reference(P, x=X, w=W)) < TOL
    finally:
        for b in (x, w, y, small):
            b.release()


# ------------------------------------------------------------------- empty tensors
# (x shape, w shape, padding) -> (y, dx, dw): "empty" or "zeros" of the direction's shape
EMPTY = {
    "N = 0": ((0, 3, 8, 7), (4, 3, 3, 3), 1, ("empty", "empty", "zeros")),
    "C = 0": ((2, 0, 8, 7), (4, 0, 3, 3), 1, ("zeros", "empty", "empty")),
    "K = 0": ((2, 3, 8, 7), (0, 3, 3, 3), 1, ("empty", "zeros", "empty")),
    "H = 0, padded to output 1": ((2, 3, 0, 7), (4, 3, 3, 3), 2, ("zeros", "empty", "zeros")),
    "W = 0, 1x1 filter, pad 1": ((2, 3, 8, 0), (4, 3, 1, 1), 1, ("zeros", "empty", "zeros")),
    "N = C = K = 0": ((0, 0, 8, 7), (0, 0, 3, 3), 1, ("empty", "empty", "empty")),
}


@pytest.mark.parametrize("case", list(EMPTY))
def test_empty_tensors_give_empty_or_zero_results(case):
    xs, ws, pad, kinds = EMPTY[case]
    p = ConvProblem(max(xs[0], 1), max(xs[1], 1), max(xs[2], 1), max(xs[3], 1),
                    max(ws[0], 1), ws[2], ws[3], pad_h=pad, pad_w=pad)
    ys = (xs[0], ws[0], p.ho if xs[2] else (2 * pad - ws[2]) + 1,
          p.wo if xs[3] else (2 * pad - ws[3]) + 1)
    x, w, dy = rand(*xs), rand(*ws) + 5, rand(*ys) + 5
    results = (wticonv.conv2d(x, w, padding=pad), wticonv.conv2d_input(xs, w, dy, padding=pad),
               wticonv.conv2d_weight(x, ws, dy, padding=pad))
    for got, shape, kind in zip(results, (ys, xs, ws), kinds):
        assert got.shape == shape and got.dtype == np.float32
        assert (got.size == 0) == (kind == "empty")
        assert not got.any()


def test_empty_forward_adds_the_bias():
    y = wticonv.conv2d(rand(2, 0, 5, 5), rand(3, 0, 3, 3), bias=np.array([1, 2, 3.0]))
    assert y.shape == (2, 3, 3, 3)
    assert np.array_equal(y[0, :, 1, 1], [1, 2, 3])


def test_empty_tensors_still_check_solver_limit_and_geometry():
    x0, w = rand(0, 3, 8, 7), W
    with pytest.raises(SolverNotFoundError, match="no solver 'x.y'"):
        wticonv.conv2d(x0, w, padding=1, solver="x.y")
    with pytest.raises(ArgumentError, match="workspace_limit=-1"):
        wticonv.conv2d(x0, w, padding=1, workspace_limit=-1)
    with pytest.raises(ProblemError, match="output h size < 1"):
        wticonv.conv2d(rand(2, 3, 0, 7), w, padding=1)
    with pytest.raises(ProblemError, match="groups=2 must divide k=3"):
        wticonv.conv2d(rand(0, 4, 5, 5), rand(3, 2, 3, 3), groups=2)
    assert wticonv.conv2d(x0, w, padding=1, solver="gemm.1x1").shape == (0, 4, 8, 7)


def test_handle_compute_refuses_empty_problems(handle):
    with pytest.raises(ProblemError, match="n=0 must be a positive integer"):
        handle.compute(ConvProblem(0, 3, 8, 7, 4, 3, 3), x=X[:0], w=W)


# -------------------------------------------------------------------- NaN and Inf
def _poison(a):
    """A copy with NaN, Inf and -Inf at even coordinates (which every stride-2 sample
    reaches)."""
    a = a.copy()
    _, c, h, w = a.shape
    a[0, 0, 0, 0] = np.nan
    a[-1, -1, 2 * (h // 4), 2 * (w // 4)] = np.inf
    a[0, c // 2, 2 * ((h - 1) // 2), 0] = -np.inf
    return a


LAYERS = {  # chosen on a CPU: direct.tiled, gemm.1x1 / naive, tiled / im2col, depthwise
    "3x3": ConvProblem(2, 8, 12, 11, 16, 3, 3, pad_h=1, pad_w=1),
    "1x1 stride 2": ConvProblem(2, 16, 9, 9, 8, 1, 1, stride_h=2, stride_w=2),
    "5x5 stride 2": ConvProblem(1, 6, 15, 13, 10, 5, 5, pad_h=2, pad_w=2, stride_h=2,
                                stride_w=2),
    "depthwise": ConvProblem(2, 8, 10, 10, 8, 3, 3, pad_h=1, pad_w=1, groups=8),
}
#: Winograd transforms mix a tile's pixels: a NaN or Inf input makes its whole output
#: tile non-finite (and +Inf and -Inf meeting there make NaN). The others are exact.
SPREADING = ("winograd.f2x3", "winograd.f4x3", "winograd.fused_f2x3", "winograd.rxs")
_OUT = {"fwd": "y", "bwd": "x", "wrw": "w"}


def _poisoned_run(handle, p, poisoned, solver=None):
    """(result, float64 reference, inputs) with NaN and Inf in the input ``poisoned``."""
    data = {"x": rand(*p.x_shape, seed=4), "w": rand(*p.w_shape, seed=5),
            "y": rand(*p.y_shape, seed=6)}
    data[poisoned] = _poison(data[poisoned])
    given = {k: v for k, v in data.items() if k != _OUT[p.direction]}
    got = handle.compute(p, solver=solver, **given)
    with np.errstate(invalid="ignore"):
        want = reference(p, **given)
    return got, want, given


def _never_hidden_and_finite_values_right(got, want):
    bad = ~np.isfinite(want)
    assert bad.any()                                   # the poison reached the reference
    assert not (np.isfinite(got) & bad).any()          # ... and the result, everywhere
    both = np.isfinite(got) & ~bad
    assert both.any() and rms_range(got[both], want[both]) < 1e-4


@pytest.mark.parametrize("layer", list(LAYERS))
@pytest.mark.parametrize("direction, poisoned", [("fwd", "x"), ("wrw", "x"), ("bwd", "y")])
def test_nan_and_inf_in_data_propagate(handle, layer, direction, poisoned):
    p = LAYERS[layer].with_direction(direction)
    got, want, _ = _poisoned_run(handle, p, poisoned)
    _never_hidden_and_finite_values_right(got, want)
    if handle.select(p).solver_id not in SPREADING:
        assert np.array_equal(np.isnan(got), np.isnan(want))
        assert np.array_equal(np.isinf(got), np.isinf(want))


@pytest.mark.parametrize("solver", ["direct.naive", "direct.tiled", "direct.depthwise",
                                    "gemm.im2col", "gemm.1x1", *SPREADING])
def test_nan_and_inf_in_data_with_every_solver(handle, solver):
    layers = {**LAYERS, "3x3 stride 2": ConvProblem(1, 4, 9, 11, 6, 3, 3, pad_h=1, pad_w=1,
                                                    stride_h=2, stride_w=2),
              "1x1": ConvProblem(2, 5, 6, 7, 3, 1, 1),
              "5x5": ConvProblem(2, 3, 9, 8, 4, 5, 5, pad_h=2, pad_w=2)}
    ran = 0
    for p0 in layers.values():
        for direction, poisoned in (("fwd", "x"), ("wrw", "x"), ("bwd", "y")):
            p = p0.with_direction(direction)
            try:
                handle.select(p, solver=solver)
            except SolverNotApplicableError:
                continue
            got, want, _ = _poisoned_run(handle, p, poisoned, solver)
            _never_hidden_and_finite_values_right(got, want)
            if solver not in SPREADING:
                assert np.array_equal(np.isnan(got), np.isnan(want))
            ran += 1
    assert ran >= 2


@pytest.mark.parametrize("layer", list(LAYERS))
@pytest.mark.parametrize("direction, poisoned", [("fwd", "w"), ("bwd", "w"), ("wrw", "y")])
def test_nan_and_inf_in_weights_are_never_hidden(handle, layer, direction, poisoned):
    """Every output a non-finite weight meets through a real input is non-finite (the
    float64 reference also multiplies the zero padding, 0 x NaN = NaN, which solvers may
    skip; Winograd tiles and direct.tiled's backward stride phases spread it further)."""
    p = LAYERS[layer].with_direction(direction)
    got, want, given = _poisoned_run(handle, p, poisoned)
    ones = {k: np.ones_like(v) for k, v in given.items()}
    ones[poisoned] = (~np.isfinite(given[poisoned])).astype(np.float32)
    reached = reference(p, **ones) > 0
    assert reached.any()
    assert not (np.isfinite(got) & reached).any()
    both = np.isfinite(got) & np.isfinite(want)
    assert both.any() and rms_range(got[both], want[both]) < 1e-4


def test_nan_in_bias_propagates():
    b = np.array([0.0, np.nan, np.inf, 1.0], np.float32)
    y = wticonv.conv2d(X, W, bias=b, padding=1)
    assert np.isnan(y[:, 1]).all() and np.isposinf(y[:, 2]).all()
    assert np.isfinite(y[:, [0, 3]]).all()


# ---------------------------------------------------- devices, handles, workspace
@pytest.mark.parametrize("spec, fragment", [
    ("9:9", "no OpenCL device 9:9; devices present: "),
    ("tpu", "device 'tpu' is not understood: use 'gpu', 'cpu' or 'PLATFORM:DEVICE'"),
    ("0:x", "device '0:x' is not understood"),
    (0, "device 0 is not a device spec: pass a string, 'gpu', 'cpu' or 'PLATFORM:DEVICE'"),
    (1.5, "device 1.5 is not a device spec"),
])
def test_unknown_device_is_a_device_error(spec, fragment):
    with pytest.raises(DeviceError) as e:
        wticonv.Handle(spec)
    assert fragment in str(e.value)


def test_unknown_device_in_the_environment(monkeypatch):
    from wticonv.device import select_device

    monkeypatch.setenv("WTICONV_DEVICE", "7:3")
    with pytest.raises(DeviceError, match="no OpenCL device 7:3"):
        select_device()


def test_missing_gpu_is_a_device_error():
    if any(info.kind == "gpu" for info, _ in wticonv.list_devices()):
        pytest.skip("this machine has a GPU")
    with pytest.raises(DeviceError, match="no OpenCL GPU device found"):
        wticonv.Handle("gpu")


def unusable_device(handle) -> str:
    """``P:D`` of a device whose driver cannot build kernels (recorded in the test store),
    or skip."""
    from wticonv.device import Device

    for info, cl_dev in wticonv.list_devices():
        if Device(cl_dev, info, handle.device.store).unusable_reason is not None:
            return info.index
    pytest.skip("every OpenCL device here builds kernels")


def test_device_that_cannot_build_kernels_is_a_device_error(handle):
    spec = unusable_device(handle)
    with pytest.raises(DeviceError) as e:
        wticonv.Handle(spec)
    assert f"OpenCL device {spec} " in str(e.value) and "cannot build kernels" in str(e.value)
    assert "install" in str(e.value) or "update" in str(e.value)


def test_a_handle_must_be_a_handle():
    with pytest.raises(ArgumentError, match="handle='cpu' is not a wticonv.Handle"):
        wticonv.conv2d(X, W, handle="cpu")


@pytest.mark.parametrize("limit", [-1, 1.5, "1000", True])
def test_bad_workspace_limit_is_an_argument_error(limit):
    with pytest.raises(ArgumentError, match="must be a non-negative integer number of bytes"):
        wticonv.conv2d(X, W, padding=1, workspace_limit=limit)


def test_numpy_integer_workspace_limit_is_accepted():
    y = wticonv.conv2d(X, W, padding=1, workspace_limit=np.int64(0))
    assert rms_range(y, reference(P, x=X, w=W)) < TOL


def test_forced_solver_under_its_minimum_names_the_minimum():
    # gemm.im2col's minimum: one image's column buffer, C x R x S x Ho x Wo floats
    need = 4 * P.c * P.r * P.s * P.ho * P.wo
    with pytest.raises(SolverNotApplicableError) as e:
        wticonv.conv2d(X, W, padding=1, workspace_limit=100, solver="gemm.im2col")
    assert (f"needs at least {need} bytes of workspace (one image's column buffer); "
            "the limit is 100") in str(e.value)
    y = wticonv.conv2d(X, W, padding=1, workspace_limit=need, solver="gemm.im2col")
    assert rms_range(y, reference(P, x=X, w=W)) < TOL


def test_limit_below_every_solvers_minimum_names_the_least(handle, monkeypatch):
    from wticonv.plugins import SolverRegistry

    monkeypatch.setenv("WTICONV_LOAD_PLUGINS", "wticonv-gemm,wticonv-winograd")
    monkeypatch.setenv("WTICONV_DISABLE_SOLVERS", "winograd.fused_f2x3")
    h = wticonv.Handle(handle.device, SolverRegistry())
    with pytest.raises(NoApplicableSolverError) as e:
        wticonv.conv2d(X, W, padding=1, workspace_limit=100, handle=h)
    found = re.search(r"the workspace limit of 100 bytes is below every solver's minimum: "
                      r"the least any needs is (\d+) bytes \(([\w.]+)\); raise the limit",
                      str(e.value))
    assert found, str(e.value)
    need, sid = int(found[1]), found[2]
    assert f"  {sid}: needs at least {need} bytes of workspace" in str(e.value)
    assert sid.startswith("winograd.")     # F(4x4, 3x3)'s tiles: less than im2col's columns
    with pytest.raises(NoApplicableSolverError):
        wticonv.conv2d(X, W, padding=1, workspace_limit=need - 1, handle=h)
    y = wticonv.conv2d(X, W, padding=1, workspace_limit=need, handle=h)
    assert rms_range(y, reference(P, x=X, w=W)) < 1e-4
