"""Bad input through the Python API: each row of docs/reliability.md's "Bad input" table
gives the right result or one clear error (the CLI's rows: test_bad_input_cli.py)."""

from __future__ import annotations

import re

import numpy as np
import pyopencl as cl
import pytest

import wticonv
import wticonv.problem
from wticonv import (ArgumentError, ConvProblem, ConvTensors, DeviceError, HostMemoryError,
                     NoApplicableSolverError, ProblemError, SolverNotApplicableError,
                     SolverNotFoundError, TensorError, reference, rms_range)

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


@pytest.mark.parametrize("call, error, message", [
    (lambda: wticonv.conv2d(rand(2, 3, 0, 7), W), ProblemError,  # h=0, not a stand-in's 1
     "invalid problem: output h size < 1: the dilated filter spans 3 pixels (r=3, "
     "dilation_h=1) but the padded input is only 0 (h=0, pad_h=0); enlarge the padding or "
     "shrink the filter"),
    (lambda: wticonv.conv2d(X, W[0]), TensorError,
     "weight has 3 dimensions, shape (3, 3, 3); expected 4 (K x C/groups x R x S)"),
    (lambda: wticonv.conv2d(X, W, bias=0.0, padding=1), TensorError,
     "bias must be a float array of shape (4,), got dtype float64 and shape (); for one "
     "value in every channel pass numpy.full(4, value)"),
    (lambda: wticonv.conv2d_input({2, 3, 8, 7}, W, DY), TensorError, "input_size={8, 2, 3, "
     "7} is a set, not a sequence of sizes in order; pass a tuple of 4 ints (N, C, H, W)"),
    (lambda: wticonv.conv2d_input(frozenset({7}), W, DY), TensorError,
     "input_size=frozenset({7}) is a frozenset, not a sequence of sizes in order; pass a "
     "tuple of 4 ints (N, C, H, W)"),
    (lambda: wticonv.conv2d_weight(X, dict(k=4, c=3, r=3, s=3), DY), TensorError,
     "weight_size={'k': 4, 'c': 3, 'r': 3, 's': 3} is a dict, not a sequence of sizes in "
     "order; pass a tuple of 4 ints (K, C/groups, R, S)"),
])
def test_messages_say_what_was_given(call, error, message):
    with pytest.raises(error) as e:
        call()
    assert str(e.value) == message


def test_handle_compute_checks_shape_and_dtype(handle):
    with pytest.raises(TensorError, match=r"array w must have shape \(4, 3, 3, 3\)"):
        handle.compute(P, x=X, w=W[:, :2])
    with pytest.raises(TensorError, match="array x has dtype int8"):
        handle.compute(P, x=X.astype(np.int8), w=W)


def test_handle_run_refuses_buffers_too_small_or_missing(handle):
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


def test_handle_run_refuses_an_output_aliasing_an_input(handle):
    dev, pb = handle.device, P.with_direction("bwd")
    align = dev.cl_device.mem_base_addr_align // 8
    b, bw, big = dev.alloc(1792), dev.upload(W), dev.alloc(8192)
    y = big.get_sub_region(-(-1344 // align) * align, 1792)    # just past x's 1344 bytes

    def x_at(offset):
        return big.get_sub_region(offset, 1344)

    try:
        with pytest.raises(TensorError, match=r"output tensor y of .*-F \(fwd writes it\) is "
                                              r"the same buffer as the input x: the solver"):
            handle.run(P, ConvTensors(b, bw, b))
        with pytest.raises(TensorError, match=r"output tensor x of .*-B \(bwd writes it\) is "
                                              r"the same buffer as the input y"):
            handle.run(pb, (b, bw, b))
        with pytest.raises(TensorError, match=rf"overlaps the input x \(bytes {align}-"
                                              rf"{align + 1792} and 0-1344 of one buffer\)"):
            handle.run(P, ConvTensors(x_at(0), bw, big.get_sub_region(align, 1792)))
        dev.queue.finish()
        cl.enqueue_copy(dev.queue, x_at(0), X)
        handle.run(P, ConvTensors(x_at(0), bw, y))     # disjoint sub-buffers: right result
        assert rms_range(dev.download(y, P.y_shape), reference(P, x=X, w=W)) < TOL
    finally:
        for buf in (b, bw, big):
            buf.release()


KEY = "3-8-7-3x3-4-6-5-2-0x0-1x1-1x1-0-NCHW-FP32-F"


def test_handle_methods_take_a_find_db_key_and_a_tuple_of_buffers(handle):
    p = wticonv.problem.parse_key(KEY)
    assert handle.select(KEY) is handle.select(p)
    assert rms_range(handle.compute(KEY, x=X, w=W), reference(p, x=X, w=W)) < TOL
    dev = handle.device
    bufs = (dev.upload(X), dev.upload(W), dev.alloc(4 * int(np.prod(p.y_shape))))
    try:
        assert handle.run(KEY, bufs).solver_id == handle.select(p).chosen.solver_id
        assert rms_range(dev.download(bufs[2], p.y_shape), reference(p, x=X, w=W)) < TOL
        with pytest.raises(ArgumentError, match=r"selection='gemm.im2col' is not a wticonv."
                                                r"Selection .*; to force a solver, pass "
                                                r"solver='gemm.im2col'"):
            handle.run(p, ConvTensors(*bufs), selection="gemm.im2col")
        with pytest.raises(ArgumentError, match=r"selection is of problem .*-1-0x0.*, not of "):
            handle.run(p, bufs, selection=handle.select(p.with_batch(1)))
        with pytest.raises(TensorError, match=r"tensors must be wticonv.ConvTensors\(x, w, y\)"
                                              r" .*of device buffers .*; got a tuple of 2"):
            handle.run(p, bufs[:2])
        with pytest.raises(TensorError, match=r"tensor x \(2, 3, 8, 7\) of .* is a numpy."
                                              r"ndarray, not a device buffer: Handle.run needs "
                                              r"pyopencl.Buffer .*use Handle.compute"):
            handle.run(p, ConvTensors(X, W, np.zeros(p.y_shape, np.float32)))
    finally:
        for buf in bufs:
            buf.release()


@pytest.mark.parametrize("call, error, fragment", [
    (lambda h: h.select(None), ProblemError, "problem must be a wticonv.ConvProblem (e.g. "
     "ConvProblem(n=16, c=64, h=56, w=56, k=64, r=3, s=3, pad_h=1, pad_w=1)) or a find-db "
     "key string; got NoneType None"),
    (lambda h: h.select({"n": 1}), ProblemError, "or a find-db key string; got dict {'n': 1}"),
    (lambda h: h.compute("3-8-7", x=X, w=W), ProblemError, "cannot parse find-db key '3-8-7'"),
    (lambda h: h.select(P, solver=5), ArgumentError, "solver=5 must be a string"),
    (lambda h: h.select(P, workspace_limit=-1), ArgumentError, "workspace_limit=-1 must be"),
    (lambda h: wticonv.Handle(h.device, registry=5), ArgumentError,
     "registry=5 is not a wticonv.contract.registry.SolverRegistry; omit it for every installed solver"),
])
def test_handle_methods_refuse_wrong_argument_types(handle, call, error, fragment):
    with pytest.raises(error) as e:
        call(handle)
    assert fragment in str(e.value)


@pytest.mark.parametrize("bad", [True, 1.0])
def test_a_bad_workspace_limit_is_refused_even_when_it_equals_a_remembered_one(handle, bad):
    """True == 1.0 == 1: the limit is checked before the remembered selections are."""
    p = ConvProblem(2, 3, 8, 7, 4, 3, 3, pad_h=1, pad_w=1)
    h = wticonv.Handle(handle.device)
    h.select(p, workspace_limit=1)
    with pytest.raises(ArgumentError, match="must be a non-negative integer"):
        h.select(p, workspace_limit=bad)


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


BIG = 2**24           # a 2**24 x 2**24 picture: 2**50 bytes, past any host's address space


def test_host_memory_for_results_and_copies_is_a_host_memory_error():
    with pytest.raises(HostMemoryError) as e:       # an empty problem's zeros (K = 0)
        wticonv.conv2d_input((1, 1, BIG, BIG), rand(0, 1, 1, 1), rand(1, 0, BIG, BIG))
    assert str(e.value) == (f"the host cannot hold the result (1, 1, {BIG}, {BIG}) "
                            f"({4 * BIG**2} bytes of float32); use a smaller batch or picture")
    huge = np.broadcast_to(np.zeros(1), (1, 1, BIG, BIG))          # float64, no memory
    with pytest.raises(HostMemoryError, match=rf"the host cannot hold a float32 copy of "
                                              rf"input \(1, 1, {BIG}, {BIG}\) \({4 * BIG**2} "
                                              r"bytes\); pass float32 C-contiguous arrays"):
        wticonv.conv2d(huge, rand(1, 1, 1, 1))

def test_handle_compute_refuses_empty_problems(handle):
    with pytest.raises(ProblemError, match="n=0 must be a positive integer"):
        handle.compute(ConvProblem(0, 3, 8, 7, 4, 3, 3), x=X[:0], w=W)


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
    from wticonv.runtime.device import select_device

    monkeypatch.setenv("WTICONV_DEVICE", "7:3")
    with pytest.raises(DeviceError, match="no OpenCL device 7:3"):
        select_device()


def test_missing_gpu_is_a_device_error():
    if any(info.kind == "gpu" for info, _ in wticonv.list_devices()):
        pytest.skip("this machine has a GPU")
    with pytest.raises(DeviceError, match="no OpenCL GPU device found"):
        wticonv.Handle("gpu")


def set_aside_device(handle, tmp_path, monkeypatch) -> str:
    """``P:D`` of the default device, set aside by a stored probe verdict in a fresh cache
    directory that WTICONV_CACHE_DIR now names."""
    from wticonv.runtime.probe import verdict_key
    from wticonv.db.store import Store

    Store(tmp_path).put_device_verdict(
        verdict_key(handle.device.info), False,
        "the probe kernel computed wrong values; fix: update the device's OpenCL driver")
    monkeypatch.setenv("WTICONV_CACHE_DIR", str(tmp_path))
    return handle.device.info.index


def test_a_set_aside_device_is_a_device_error(handle, tmp_path, monkeypatch):
    spec = set_aside_device(handle, tmp_path, monkeypatch)
    with pytest.raises(DeviceError) as e:
        wticonv.Handle(spec)
    assert f"OpenCL device {spec} " in str(e.value)
    assert "is set aside: the probe kernel computed wrong values" in str(e.value)
    assert "fix: update the device's OpenCL driver" in str(e.value)


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
    # gemm.im2col's minimum: one image's column buffer, C x R x S x Ho x Wo floats (in
    # whole panels of columns on CPUs)
    from wticonv.runtime.kit import kernel_family
    from wticonv_gemm import plan

    need = plan.col_bytes(P, kernel_family(wticonv.get_handle().device), 1)
    assert need >= 4 * P.c * P.r * P.s * P.ho * P.wo
    with pytest.raises(SolverNotApplicableError) as e:
        wticonv.conv2d(X, W, padding=1, workspace_limit=100, solver="gemm.im2col")
    assert (f"needs at least {need} bytes of workspace (one image's column buffer); "
            "the limit is 100") in str(e.value)
    y = wticonv.conv2d(X, W, padding=1, workspace_limit=need, solver="gemm.im2col")
    assert rms_range(y, reference(P, x=X, w=W)) < TOL


def test_limit_below_every_solvers_minimum_names_the_least(handle, monkeypatch):
    from wticonv.contract.registry import SolverRegistry

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
