"""The NumPy API, named and shaped as PyTorch's convolution functions.

=============================  ==========================================
wticonv                        PyTorch
=============================  ==========================================
``conv2d(input, weight, ...)``  ``torch.nn.functional.conv2d``
``conv2d_input(input_size, weight, grad_output, ...)``  ``torch.nn.grad.conv2d_input``
``conv2d_weight(input, weight_size, grad_output, ...)``  ``torch.nn.grad.conv2d_weight``
=============================  ==========================================

Arrays are NCHW NumPy arrays: ``input`` N x C x H x W, ``weight`` K x C/groups x R x S,
``grad_output`` N x K x Ho x Wo. float32 is used as is; other floating dtypes are
converted to float32 (a copy); anything else is rejected. Results are new float32 arrays.

``padding`` is an int (all sides), ``(pad_h, pad_w)`` (symmetric), ONNX-style
``(top, left, bottom, right)``, or ``"valid"`` / ``"same"`` (as PyTorch: ``"same"`` needs
stride 1). Asymmetric padding is applied by padding the input on the host, so every solver
sees a symmetric problem.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .errors import TensorError
from .handle import Handle, get_handle
from .problem import ConvProblem

__all__ = ["conv2d", "conv2d_input", "conv2d_weight"]


def _pair(value, name: str) -> tuple[int, int]:
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return int(value), int(value)
    if isinstance(value, Sequence) and len(value) == 2 and all(
            isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in value):
        return int(value[0]), int(value[1])
    raise TensorError(f"{name}={value!r} must be an int or a pair of ints (height, width)")


def _pads(padding, r: int, s: int, stride: tuple[int, int],
          dilation: tuple[int, int]) -> tuple[int, int, int, int]:
    """(top, left, bottom, right) from any accepted ``padding``."""
    if isinstance(padding, str):
        if padding == "valid":
            return 0, 0, 0, 0
        if padding == "same":
            if stride != (1, 1):
                raise TensorError("padding='same' needs stride 1 (as in PyTorch); give "
                                  "explicit padding for strided convolutions")
            th, tw = dilation[0] * (r - 1), dilation[1] * (s - 1)
            return th // 2, tw // 2, th - th // 2, tw - tw // 2
        raise TensorError(f"padding={padding!r} is unknown: use 'valid', 'same', an int, "
                          "(pad_h, pad_w) or (top, left, bottom, right)")
    if isinstance(padding, Sequence) and len(padding) == 4:
        if not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool)
                   for v in padding):
            raise TensorError(f"padding={padding!r} must hold ints (top, left, bottom, right)")
        t, left, b, right = (int(v) for v in padding)
        return t, left, b, right
    ph, pw = _pair(padding, "padding")
    return ph, pw, ph, pw


def _as_f32(a, name: str, ndim: int = 4) -> np.ndarray:
    arr = np.asarray(a)
    if arr.dtype.kind != "f":
        raise TensorError(f"{name} has dtype {arr.dtype}; wticonv computes in float32: pass "
                          "a floating-point array (float32 avoids a copy)")
    if arr.ndim != ndim:
        raise TensorError(f"{name} has {arr.ndim} dimensions, shape {arr.shape}; expected "
                          f"{ndim} (NCHW)")
    return np.ascontiguousarray(arr, dtype=np.float32)


def _shape4(size, name: str) -> tuple[int, int, int, int]:
    if isinstance(size, (str, bytes)) or not isinstance(size, Sequence) and not hasattr(
            size, "__len__"):
        raise TensorError(f"{name}={size!r} must be a sequence of 4 ints (NCHW)")
    values = list(size)
    if len(values) != 4:
        raise TensorError(f"{name}={size!r} must have 4 entries (NCHW), it has {len(values)}")
    if not all(hasattr(v, "__index__") and not isinstance(v, bool) for v in values):
        raise TensorError(f"{name}={tuple(values)!r} must hold 4 integers (NCHW)")
    return tuple(int(v.__index__()) for v in values)  # type: ignore[return-value]


class _Geometry:
    """Problem geometry, with asymmetric padding turned into host-side input padding."""

    def __init__(self, x_shape, w_shape, stride, padding, dilation, groups, direction):
        n, c, h, w = x_shape
        k, cg, r, s = w_shape
        if isinstance(groups, bool) or not isinstance(groups, (int, np.integer)) or groups < 1:
            raise TensorError(f"groups={groups!r} must be a positive int")
        if cg * groups != c:
            raise TensorError(
                f"input has C={c} channels but weight {tuple(w_shape)} with groups={groups} "
                f"expects C = weight.shape[1] * groups = {cg * groups}")
        self.stride = _pair(stride, "stride")
        self.dilation = _pair(dilation, "dilation")
        t, left, b, right = _pads(padding, r, s, self.stride, self.dilation)
        if min(t, left, b, right) < 0:
            raise TensorError(f"padding={padding!r} must not be negative")
        sym_h, sym_w = min(t, b), min(left, right)
        self.extra = ((t - sym_h, b - sym_h), (left - sym_w, right - sym_w))
        self.orig_hw = (h, w)
        hh = h + sum(self.extra[0])
        ww = w + sum(self.extra[1])
        self.problem = ConvProblem(
            n=n, c=c, h=hh, w=ww, k=k, r=r, s=s, pad_h=sym_h, pad_w=sym_w,
            stride_h=self.stride[0], stride_w=self.stride[1], dilation_h=self.dilation[0],
            dilation_w=self.dilation[1], groups=int(groups), direction=direction)

    @property
    def asymmetric(self) -> bool:
        return any(self.extra[0]) or any(self.extra[1])

    def pad_input(self, x: np.ndarray) -> np.ndarray:
        if not self.asymmetric:
            return x
        return np.pad(x, ((0, 0), (0, 0), self.extra[0], self.extra[1]))

    def crop_input(self, dx: np.ndarray) -> np.ndarray:
        if not self.asymmetric:
            return dx
        (t, _), (left, _) = self.extra
        h, w = self.orig_hw
        return np.ascontiguousarray(dx[:, :, t:t + h, left:left + w])


def _check_dy(dy: np.ndarray, p: ConvProblem) -> None:
    if dy.shape != p.y_shape:
        raise TensorError(f"grad_output has shape {dy.shape} but the convolution produces "
                          f"{p.y_shape} (N, K, Ho, Wo)")


def _handle(handle: Handle | None) -> Handle:
    return handle if handle is not None else get_handle()


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1, *,
           solver: str | None = None, workspace_limit: int | None = None,
           handle: Handle | None = None) -> np.ndarray:
    """2-D convolution (forward), as ``torch.nn.functional.conv2d``.

    Parameters
    ----------
    input : array, N x C x H x W
    weight : array, K x C/groups x R x S
    bias : array of K, optional
        Added to every output pixel of channel k (on the host, in float32).
    stride, dilation : int or (int, int)
    padding : int, (int, int), (top, left, bottom, right), "valid" or "same"
    groups : int
    solver : str, optional
        Force a solver id (e.g. ``"direct.naive"``) instead of the immediate-mode choice.
    workspace_limit : int, optional
        Most device workspace to use, in bytes.
    handle : Handle, optional
        Device and solvers; the default handle when omitted.

    Returns
    -------
    numpy.ndarray, float32, N x K x Ho x Wo

    Raises
    ------
    TensorError
        Wrong dtype, number of dimensions, or shapes that do not fit together.
    ProblemError
        The geometry is invalid (e.g. output size < 1).
    NoApplicableSolverError, SolverNotFoundError, SolverNotApplicableError
        No solver can run it, or the forced one is unknown or declines.
    """
    x = _as_f32(input, "input")
    w = _as_f32(weight, "weight")
    geo = _Geometry(x.shape, w.shape, stride, padding, dilation, groups, "fwd")
    p = geo.problem
    if bias is not None:
        b = np.asarray(bias)
        if b.dtype.kind != "f" or b.shape != (p.k,):
            raise TensorError(f"bias must be a float array of shape ({p.k},), got dtype "
                              f"{b.dtype} and shape {b.shape}")
    y = _handle(handle).compute(p, x=geo.pad_input(x), w=w, workspace_limit=workspace_limit,
                                solver=solver)
    if bias is not None:
        y += np.asarray(bias, dtype=np.float32)[None, :, None, None]
    return y


def conv2d_input(input_size, weight, grad_output, stride=1, padding=0, dilation=1, groups=1,
                 *, solver: str | None = None, workspace_limit: int | None = None,
                 handle: Handle | None = None) -> np.ndarray:
    """Gradient of conv2d with respect to its input (backward data, ``bwd``).

    As ``torch.nn.grad.conv2d_input``. ``input_size`` is (N, C, H, W) of the input (it
    fixes H and W exactly where a stride leaves them ambiguous); ``grad_output`` is dy,
    N x K x Ho x Wo. Returns dx, float32, N x C x H x W. Raises as :func:`conv2d`.
    """
    shape = _shape4(input_size, "input_size")
    w = _as_f32(weight, "weight")
    dy = _as_f32(grad_output, "grad_output")
    geo = _Geometry(shape, w.shape, stride, padding, dilation, groups, "bwd")
    _check_dy(dy, geo.problem)
    dx = _handle(handle).compute(geo.problem, w=w, y=dy, workspace_limit=workspace_limit,
                                 solver=solver)
    return geo.crop_input(dx)


def conv2d_weight(input, weight_size, grad_output, stride=1, padding=0, dilation=1, groups=1,
                  *, solver: str | None = None, workspace_limit: int | None = None,
                  handle: Handle | None = None) -> np.ndarray:
    """Gradient of conv2d with respect to its weight (backward weights, ``wrw``).

    As ``torch.nn.grad.conv2d_weight``. ``weight_size`` is (K, C/groups, R, S);
    ``input`` is x, N x C x H x W; ``grad_output`` is dy, N x K x Ho x Wo. Returns dw,
    float32, K x C/groups x R x S. Raises as :func:`conv2d`.
    """
    x = _as_f32(input, "input")
    wshape = _shape4(weight_size, "weight_size")
    dy = _as_f32(grad_output, "grad_output")
    geo = _Geometry(x.shape, wshape, stride, padding, dilation, groups, "wrw")
    _check_dy(dy, geo.problem)
    return _handle(handle).compute(geo.problem, x=geo.pad_input(x), y=dy,
                                   workspace_limit=workspace_limit, solver=solver)
