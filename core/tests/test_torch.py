"""wticonv.torch's ops against PyTorch's own convolutions: every direction and its
autograd, torch.library.opcheck, the fake implementations, dtypes and casts, memory
layouts, host copies. Conv2d and replace_convs: test_torch_modules.py; threads, profiles,
training and whole models: test_torch_training.py.

Skipped without torch (``pip install "wticonv[torch]"``; ``make test`` installs it). The
CUDA test needs a CUDA device.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402
import wticonv  # noqa: E402
import wticonv.torch as wt  # noqa: E402
from wticonv.problem.reference import rms_range  # noqa: E402
from wticonv.torch.functional import pads  # noqa: E402


def _problem(x_shape, w_shape, stride, pad4, dilation, groups, direction):
    """The ConvProblem wticonv runs (asymmetric padding becomes host-side padding)."""
    n, c, h, w = x_shape
    k, _, r, s = w_shape
    t, left, b, right = pad4
    ph, pw = min(t, b), min(left, right)
    return wticonv.ConvProblem(
        n=n, c=c, h=h + t + b - 2 * ph, w=w + left + right - 2 * pw, k=k, r=r, s=s,
        pad_h=ph, pad_w=pw, stride_h=stride[0], stride_w=stride[1], dilation_h=dilation[0],
        dilation_w=dilation[1], groups=groups, direction=direction)


def _tolerance(problem) -> float:
    """The rms_range tolerance of the solver wticonv chooses for ``problem``."""
    h = wt.thread_handle()
    return wticonv.solver_tolerance(h, h.select(problem).chosen.solver_id, problem)


def _pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


CASES = {
    "3x3": ((2, 3, 7, 9), (4, 3, 3, 3), 1, 1, 1, 1),
    "stride2": ((2, 4, 9, 8), (6, 4, 3, 3), 2, 1, 1, 1),
    "stride3_rect": ((1, 3, 11, 10), (2, 3, 1, 5), (3, 2), (0, 2), 1, 1),
    "dilation2": ((1, 3, 10, 10), (5, 3, 3, 3), 1, 2, 2, 1),
    "groups2": ((2, 4, 6, 6), (6, 2, 3, 3), 1, 1, 1, 2),
    "depthwise": ((2, 8, 7, 7), (8, 1, 3, 3), 1, 1, 1, 8),
    "asymmetric": ((1, 3, 6, 5), (4, 3, 3, 2), 1, (1, 0, 2, 1), 1, 1),
    "same_even": ((1, 2, 6, 6), (3, 2, 4, 4), 1, "same", 1, 1),
    "picture1x1": ((2, 5, 1, 1), (3, 5, 1, 1), 1, 0, 1, 1),
    "picture1x1_pad": ((2, 4, 1, 1), (3, 4, 3, 3), 1, 1, 1, 1),
    "strided_1x1": ((2, 6, 5, 5), (4, 6, 1, 1), 2, 0, 1, 1),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_direction_matches_torch(case):
    xs, ws, stride, padding, dilation, groups = CASES[case]
    g = torch.Generator().manual_seed(len(case))
    x = torch.randn(xs, generator=g)
    w = torch.randn(ws, generator=g)
    b = torch.randn(ws[0], generator=g)
    st, dil = _pair(stride), _pair(dilation)
    pad4 = pads(padding, ws[2:], st, dil)
    t, left, bot, right = pad4
    # float64 references: torch.nn.functional.conv2d and torch.nn.grad on the padded input
    x64, w64 = x.double(), w.double()
    xp = F.pad(x64, (left, right, t, bot))
    ref_y = F.conv2d(xp, w64, b.double(), st, 0, dil, groups)
    dy = torch.randn(ref_y.shape, generator=g)
    ref_dx = torch.nn.grad.conv2d_input(xp.shape, w64, dy.double(), st, 0, dil, groups)
    ref_dx = ref_dx[:, :, t:t + xs[2], left:left + xs[3]]
    ref_dw = torch.nn.grad.conv2d_weight(xp, ws, dy.double(), st, 0, dil, groups)

    xr, wr, br = (v.clone().requires_grad_() for v in (x, w, b))
    y = wt.conv2d(xr, wr, br, stride, padding, dilation, groups)
    assert y.dtype == torch.float32 and y.shape == ref_y.shape
    dx, dw, db = torch.autograd.grad(y, (xr, wr, br), dy)
    for got, ref, d in ((y, ref_y, "fwd"), (dx, ref_dx, "bwd"), (dw, ref_dw, "wrw")):
        tol = _tolerance(_problem(xs, ws, st, pad4, dil, groups, d))
        err = rms_range(got.detach().double().numpy(), ref.numpy())
        assert got.shape == ref.shape
        assert err <= tol, f"{case} {d}: rms_range {err:.2e} > tolerance {tol:.2e}"
    assert torch.allclose(db.double(), dy.double().sum((0, 2, 3)), rtol=1e-5, atol=1e-5)


def test_grad_ops_match_torch_nn_grad():
    """The gradient ops by themselves, as torch.nn.grad.conv2d_input / conv2d_weight."""
    g = torch.Generator().manual_seed(3)
    x, w = torch.randn(2, 4, 8, 7, generator=g), torch.randn(6, 2, 3, 3, generator=g)
    dy = torch.randn(2, 6, 4, 4, generator=g)
    args = ([2, 2], [1, 1, 1, 1], [1, 1], 2, "g", 0)
    dx = wt.conv2d_input_op(w, dy, list(x.shape), *args)
    dw = wt.conv2d_weight_op(x, dy, list(w.shape), *args)
    ref_dx = torch.nn.grad.conv2d_input(x.shape, w.double(), dy.double(), 2, 1, 1, 2)
    ref_dw = torch.nn.grad.conv2d_weight(x.double(), w.shape, dy.double(), 2, 1, 1, 2)
    assert rms_range(dx.double().numpy(), ref_dx.numpy()) < 1e-5
    assert rms_range(dw.double().numpy(), ref_dw.numpy()) < 1e-5


@pytest.mark.parametrize("bias", [True, False])
def test_opcheck(bias):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, 4, 6, 5, generator=g, requires_grad=True)
    w = torch.randn(6, 2, 3, 3, generator=g, requires_grad=True)
    b = torch.randn(6, generator=g, requires_grad=True) if bias else None
    args = (x, w, b, [1, 2], [1, 0, 2, 1], [1, 1], 2, "opcheck", 0)
    torch.library.opcheck(wt.conv2d_op, args)
    dy = torch.randn(2, 6, 7, 2, generator=g)
    torch.library.opcheck(wt.conv2d_input_op, (w.detach(), dy, [2, 4, 6, 5]) + args[3:])
    torch.library.opcheck(wt.conv2d_weight_op, (x.detach(), dy, [6, 2, 3, 3]) + args[3:])


def test_fake_tensors_propagate_shapes():
    with torch.device("meta"):
        x, w = torch.empty(3, 4, 17, 9), torch.empty(8, 4, 3, 3)
    y = wt.conv2d(x, w, None, 2, (1, 0, 2, 1), 1)
    assert y.device.type == "meta" and tuple(y.shape) == (3, 8, 9, 4)


def test_cpu_float32_tensors_reach_the_device_without_a_copy(monkeypatch):
    from wticonv.runtime.device import Device

    if not wt.thread_handle().device.host_unified_memory:
        pytest.skip("the device does not work in host memory")
    wrapped, uploaded = [], []
    real_wrap, real_upload = Device.wrap, Device.upload

    def wrap(self, array, what="an array", writable=False):
        wrapped.append((array.__array_interface__["data"][0], writable))
        return real_wrap(self, array, what, writable)

    def upload(self, array, what="an array"):
        uploaded.append(what)
        return real_upload(self, array, what)

    monkeypatch.setattr(Device, "wrap", wrap)
    monkeypatch.setattr(Device, "upload", upload)
    x, w = torch.randn(2, 3, 8, 8), torch.randn(4, 3, 3, 3)
    y = wt.conv2d(x, w, padding=1)
    inputs = {ptr for ptr, writable in wrapped if not writable}
    outputs = [ptr for ptr, writable in wrapped if writable]
    assert inputs == {x.data_ptr(), w.data_ptr()}
    assert outputs == [y.data_ptr()]         # the kernels wrote the output tensor itself
    assert uploaded == []


def test_other_dtypes_are_refused_unless_cast():
    x, w = torch.randn(1, 2, 5, 5, dtype=torch.float64), torch.randn(3, 2, 3, 3,
                                                                      dtype=torch.float64)
    with pytest.raises(wt.LayerInputError, match=r"layer 'head'.*float64.*cast=True"):
        wt.conv2d(x, w, layer="head")
    y = wt.conv2d(x, w, cast=True)
    assert y.dtype == torch.float64
    assert rms_range(y.numpy(), F.conv2d(x, w).numpy()) < 1e-5
    with pytest.raises(RuntimeError, match="int64"):
        wt.conv2d(torch.ones(1, 2, 5, 5, dtype=torch.int64), w.float())


def test_cast_refuses_what_it_cannot_compute_and_mixed_dtypes():
    w = torch.randn(3, 2, 3, 3)
    for dtype in (torch.complex64, torch.int64, torch.bool):
        x = torch.ones(1, 2, 5, 5, dtype=dtype)
        with pytest.raises(wt.LayerInputError,
                           match=rf"layer 'c'.*input is {dtype}; cast=True computes float16"):
            wt.conv2d(x, w.to(dtype), cast=True, layer="c")
    with pytest.raises(wt.LayerInputError, match="not complex, integer or bool ones"):
        wt.conv2d(torch.ones(1, 2, 5, 5, dtype=torch.complex64), w.to(torch.complex64))
    x = torch.randn(1, 2, 5, 5)
    with pytest.raises(RuntimeError):
        F.conv2d(x, w.double())                    # torch refuses mixed dtypes too
    for cast in (False, True):
        with pytest.raises(wt.LayerInputError,
                           match=r"input is torch.float32 but weight is torch.float64.*one "
                                 r"dtype.*weight.float\(\)"):
            wt.conv2d(x, w.double(), cast=cast)
        with pytest.raises(wt.LayerInputError, match="but bias is torch.float16"):
            wt.conv2d(x, w, torch.zeros(3, dtype=torch.float16), cast=cast)
    # a layer's float32 weight and an integer or float64 input: convert the input
    for dtype in (torch.int32, torch.uint8, torch.float64):
        with pytest.raises(wt.LayerInputError, match=rf"input is {dtype} but weight is "
                                                     r"torch.float32.*\(x.float\(\)\)"):
            wt.Conv2d(2, 3, 3, name="c")(torch.ones(1, 2, 5, 5, dtype=dtype))
    with pytest.raises(wt.LayerInputError, match="bias must be a tensor of K elements or "
                                                 "None, got list"):
        wt.conv2d(x, w, [0.0] * 3)
    # what cast=True takes: computed in float32, returned in the input's dtype
    for dtype, bound in ((torch.float16, 2e-3), (torch.bfloat16, 1e-2), (torch.float64, 1e-6)):
        xd, wd = x.to(dtype), w.to(dtype)
        y = wt.conv2d(xd, wd, cast=True)
        ref = F.conv2d(xd.double(), wd.double())
        assert y.dtype == dtype and rms_range(y.double().numpy(), ref.numpy()) < bound


# (op, make the arguments, what the error says): what the ops refuse, and their fakes too
_REFUSED = {
    "channels": ("conv2d", lambda: ((2, 5, 8, 8), (4, 3, 3, 3), None, 1), r"has C=5 channels"),
    "too_small": ("conv2d", lambda: ((1, 3, 2, 2), (4, 3, 5, 5), None, 1),
                  r"ProblemError: invalid problem: output h size < 1"),
    "k_groups": ("conv2d", lambda: ((2, 4, 8, 8), (3, 2, 3, 3), None, 2),
                 r"groups=2 must divide k=3"),
    "bias": ("conv2d", lambda: ((2, 3, 8, 8), (4, 3, 3, 3), (5,), 1),
             r"bias must have shape \(4,\)"),
    "bwd_dy": ("conv2d_input", lambda: ((2, 3, 9, 9), (4, 3, 3, 3), (2, 4, 6, 6), 1),
               r"\(backward data\).*grad_output has shape \(2, 4, 6, 6\)"),
    "bwd_channels": ("conv2d_input", lambda: ((2, 5, 8, 8), (4, 3, 3, 3), (2, 4, 6, 6), 1),
                     r"\(backward data\).*has C=5 channels"),
    "bwd_dtype": ("conv2d_input", lambda: ((2, 3, 8, 8), (4, 3, 3, 3), (2, 4, 6, 6), 1,
                                           torch.float64), r"weight is torch.float64"),
    "wrw_dy": ("conv2d_weight", lambda: ((2, 3, 8, 8), (4, 3, 2, 2), (2, 4, 6, 6), 1),
               r"\(backward weights\).*grad_output has shape"),
    "wrw_dtype": ("conv2d_weight", lambda: ((2, 3, 8, 8), (4, 3, 3, 3), (2, 4, 6, 6), 1,
                                            torch.float16), r"input is torch.float16"),
}


@pytest.mark.parametrize("case", sorted(_REFUSED))
def test_fakes_refuse_what_the_ops_refuse(case):
    """A meta tensor (the fake implementation, as torch.compile runs it) gets the error
    the op raises on real tensors, not an output of negative or zero size."""
    op, make, match = _REFUSED[case]
    xs, ws, third, groups, *dtype = make()
    dtype = dtype[0] if dtype else torch.float32
    geo = ([1, 1], [0, 0, 0, 0], [1, 1], groups, "blk.conv", 0)
    errors = []
    for device in ("cpu", "meta"):
        x, w = torch.ones(xs, device=device), torch.ones(ws, device=device)
        with pytest.raises(wt.LayerInputError, match=match) as e:
            if op == "conv2d":
                b = None if third is None else torch.ones(third, device=device)
                torch.ops.wticonv.conv2d(x, w, b, *geo)
            elif op == "conv2d_input":
                torch.ops.wticonv.conv2d_input(w.to(dtype), torch.ones(third, device=device),
                                               list(xs), *geo)
            else:
                torch.ops.wticonv.conv2d_weight(x.to(dtype), torch.ones(third, device=device),
                                                list(ws), *geo)
        assert e.value.layer == "blk.conv"
        errors.append(str(e.value))
    assert errors[0] == errors[1]


def test_double_backward_matches_torch():
    """A gradient penalty: the gradient ops' own gradients are the three ops again."""
    g = torch.Generator().manual_seed(11)
    x0, w0 = torch.randn(2, 4, 7, 6, generator=g), torch.randn(6, 2, 3, 3, generator=g)
    b0, m = torch.randn(6, generator=g), torch.randn(6, 2, 3, 3, generator=g)

    def grads(conv, dtype):
        x, w, b = (t.to(dtype, copy=True).requires_grad_() for t in (x0, w0, b0))
        y = conv(x, w, b, stride=2, padding=1, groups=2)
        gx, gw = torch.autograd.grad((y ** 2).sum(), (x, w), create_graph=True)
        ((gx ** 2).sum() + (gw * m.to(dtype)).sum()).backward()
        return x.grad, w.grad, b.grad

    ours, ref = grads(wt.conv2d, torch.float32), grads(F.conv2d, torch.float64)
    for got, want in zip(ours, ref, strict=True):
        assert rms_range(got.double().numpy(), want.numpy()) < 1e-5


def test_channels_last_in_channels_last_out():
    g = torch.Generator().manual_seed(2)
    x, w = torch.randn(2, 3, 8, 7, generator=g), torch.randn(4, 3, 3, 3, generator=g)
    cl = torch.channels_last
    for xi, wi in ((x.to(memory_format=cl), w), (x, w.to(memory_format=cl)), (x, w)):
        y, ref = wt.conv2d(xi, wi, padding=1), F.conv2d(xi, wi, padding=1)
        assert y.stride() == ref.stride()
        assert rms_range(y.numpy(), ref.numpy()) < 1e-5
    assert wt.conv2d(x.to(memory_format=cl), w).is_contiguous(memory_format=cl)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_tensors_go_through_host_copies():
    g = torch.Generator().manual_seed(5)
    x = torch.randn(2, 4, 9, 9, generator=g).cuda().requires_grad_()
    w = torch.randn(6, 4, 3, 3, generator=g).cuda().requires_grad_()
    with wt.profile() as t:
        y = wt.conv2d(x, w, padding=1)
        y.sum().backward()
    assert y.device.type == "cuda" and x.grad.device.type == "cuda"
    assert t.copy_ms > 0
    with torch.no_grad():
        y_ref = F.conv2d(x.double(), w.double(), padding=1)
    assert rms_range(y.detach().cpu().double().numpy(), y_ref.cpu().numpy()) < 1e-5
