"""The NumPy API, named and shaped as PyTorch's convolution functions.

=============================  ==========================================
wticonv                        PyTorch
=============================  ==========================================
``conv2d(input, weight, ...)``  ``torch.nn.functional.conv2d``
``conv2d_input(input_size, weight, grad_output, ...)``  ``torch.nn.grad.conv2d_input``
``conv2d_weight(input, weight_size, grad_output, ...)``  ``torch.nn.grad.conv2d_weight``
=============================  ==========================================

Arrays are NCHW NumPy arrays: ``input`` N x C x H x W, ``weight`` K x C/groups x R x S,
``grad_output`` N x K x Ho x Wo. C-contiguous float32 is used as is; other floating
dtypes and other layouts (strided, reversed, transposed, Fortran order) are copied to
C-contiguous float32 in index order; anything else is rejected with a
:class:`~wticonv.TensorError` (see :func:`wticonv.problem.tensors.as_float32`). Results are new
float32 arrays.

Empty tensors (N, C, K, H or W of 0) give the exact result without running a solver:
an empty output where the output has a size of 0, zeros where the output's sums are
empty (e.g. dw when N = 0, y when C = 0). An output size Ho or Wo below 1 is a
:class:`~wticonv.ProblemError`, as in PyTorch. docs/reliability.md lists every case.

``padding`` is an int (all sides), ``(pad_h, pad_w)`` (symmetric), ONNX-style
``(top, left, bottom, right)``, or ``"valid"`` / ``"same"`` (as PyTorch: ``"same"`` needs
stride 1). Asymmetric padding is applied by padding the input on the host, so every solver
sees a symmetric problem.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set

import numpy as np

from wticonv.errors import ArgumentError, HostMemoryError, TensorError
from wticonv.handle import Handle, get_handle
from wticonv.problem.conv import ConvProblem, output_size
from wticonv.problem.tensors import as_float32
from wticonv.selection.ranking import allow_tf32_arg, workspace_limit_arg

__all__ = ["conv2d", "conv2d_input", "conv2d_weight"]

_W_AXES = "K x C/groups x R x S"


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


def _shape4(size, name: str) -> tuple[int, int, int, int]:
    """``input_size`` / ``weight_size`` as 4 non-negative ints."""
    axes = "(N, C, H, W)" if name == "input_size" else "(K, C/groups, R, S)"
    if isinstance(size, (Set, Mapping)):
        raise TensorError(f"{name}={size!r} is a {type(size).__name__}, not a sequence of "
                          f"sizes in order; pass a tuple of 4 ints {axes}")
    if isinstance(size, (str, bytes)) or not isinstance(size, Sequence) and not hasattr(
            size, "__len__"):
        raise TensorError(f"{name}={size!r} must be a sequence of 4 ints {axes}")
    values = list(size)
    if len(values) != 4:
        raise TensorError(f"{name}={size!r} must have 4 entries {axes}, it has {len(values)}")
    if not all(hasattr(v, "__index__") and not isinstance(v, bool) for v in values):
        raise TensorError(f"{name}={tuple(values)!r} must hold 4 integers {axes}")
    out = tuple(int(v.__index__()) for v in values)
    if min(out) < 0:
        raise TensorError(f"{name}={out!r} must not hold negative sizes")
    return out  # type: ignore[return-value]


def _fit(filt: int, dil: int, pad: int) -> int:
    """A picture size of at least 1 that the (dilated, padded) filter fits."""
    return max(1, dil * (filt - 1) + 1 - 2 * pad)


def _host(what: str, shape, make):
    """``make()``, with the host running out of memory a :class:`HostMemoryError`."""
    try:
        return make()
    except MemoryError:
        nbytes = 4 * int(np.prod(shape, dtype=object))
        raise HostMemoryError(f"the host cannot hold {what} {tuple(shape)} ({nbytes} bytes of "
                              "float32); use a smaller batch or picture") from None


class _Geometry:
    """Problem geometry, with asymmetric padding turned into host-side input padding.

    ``empty`` is True when N, C, K, H or W is 0: there is no problem to run
    (``problem`` is None) and the result is zeros of its shape (``x_shape``, ``w_shape``,
    ``y_shape``); every other rule is still checked, on a stand-in problem."""

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
        self.x_shape, self.w_shape = (n, c, h, w), (k, cg, r, s)
        self.empty = 0 in (n, c, k, h, w)
        g = int(groups)
        # An empty problem is checked as one with sizes of at least 1 (a stand-in); an
        # empty picture's output size is checked below, on its real size.
        stand_in = ConvProblem(
            n=max(n, 1), c=c or g, h=hh or _fit(r, self.dilation[0], sym_h),
            w=ww or _fit(s, self.dilation[1], sym_w), k=k or g, r=r, s=s,
            pad_h=sym_h, pad_w=sym_w, stride_h=self.stride[0], stride_w=self.stride[1],
            dilation_h=self.dilation[0], dilation_w=self.dilation[1], groups=g,
            direction=direction)
        ho = output_size("h", hh, sym_h, r, self.dilation[0], self.stride[0])
        wo = output_size("w", ww, sym_w, s, self.dilation[1], self.stride[1])
        self.y_shape = (n, k, ho, wo)
        self.problem = None if self.empty else stand_in

    @property
    def asymmetric(self) -> bool:
        return any(self.extra[0]) or any(self.extra[1])

    def pad_input(self, x: np.ndarray) -> np.ndarray:
        if not self.asymmetric:
            return x
        (t, b), (left, right) = self.extra
        n, c, h, w = x.shape
        return _host("the asymmetrically padded input", (n, c, h + t + b, w + left + right),
                     lambda: np.pad(x, ((0, 0), (0, 0), self.extra[0], self.extra[1])))

    def crop_input(self, dx: np.ndarray) -> np.ndarray:
        if not self.asymmetric:
            return dx
        (t, _), (left, _) = self.extra
        h, w = self.orig_hw
        return _host("the cropped result", self.x_shape,
                     lambda: np.ascontiguousarray(dx[:, :, t:t + h, left:left + w]))


def _check_dy(dy: np.ndarray, geo: _Geometry) -> None:
    if dy.shape != geo.y_shape:
        raise TensorError(f"grad_output has shape {dy.shape} but the convolution produces "
                          f"{geo.y_shape} (N, K, Ho, Wo)")


def _handle(handle: Handle | None) -> Handle:
    if handle is None:
        return get_handle()
    if not isinstance(handle, Handle):
        raise ArgumentError(f"handle={handle!r} is not a wticonv.Handle; create one with "
                            "wticonv.Handle(device) (device: 'gpu', 'cpu' or 'P:D')")
    return handle


def _run_or_empty(geo: _Geometry, handle, solver, workspace_limit, allow_tf32, out_shape,
                  **arrays):
    """Run the problem of ``geo``; for an empty one, check the handle, the solver id (that
    it is installed: no solver runs, so not whether it applies), the limit and
    ``allow_tf32`` as a run would, and return zeros of ``out_shape`` without running."""
    h, limit = _handle(handle), workspace_limit_arg(workspace_limit)
    allow_tf32_arg(allow_tf32)
    if geo.empty:
        if solver is not None:
            h.registry.get(solver)
        return _host("the result", out_shape, lambda: np.zeros(out_shape, np.float32))
    return h.compute(geo.problem, workspace_limit=limit, solver=solver,
                     allow_tf32=allow_tf32, **arrays)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1, *,
           solver: str | None = None, workspace_limit: int | None = None,
           handle: Handle | None = None, allow_tf32: bool | None = None) -> np.ndarray:
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
    allow_tf32 : bool, optional
        True also ranks solvers whose results are only TF32-accurate (10-bit mantissa;
        ``math = "tf32"``), as PyTorch's ``allow_tf32`` does; False only FP32-accurate
        ones (``fp32``, ``3xtf32``); None (default): the handle's ``allow_tf32`` (False
        unless set).

    Returns
    -------
    numpy.ndarray, float32, N x K x Ho x Wo
        Zeros (plus the bias) when C or H or W is 0; empty when N or K is 0.

    Raises
    ------
    TensorError
        Wrong dtype (not floating point), None or a masked array, finite values beyond
        float32's range, wrong number of dimensions, or shapes that do not fit together.
    ProblemError
        The geometry is invalid (e.g. output size < 1, a stride of 0).
    ArgumentError
        A negative or non-integer ``workspace_limit``, an ``allow_tf32`` that is not a
        bool, or a ``handle`` that is not one.
    HostMemoryError
        The host cannot hold a float32 copy of an input or the result.
    NoApplicableSolverError, SolverNotFoundError, SolverNotApplicableError
        No solver can run it, or the forced one is unknown or declines.
    """
    x = as_float32(input, "input")
    w = as_float32(weight, "weight", axes=_W_AXES)
    geo = _Geometry(x.shape, w.shape, stride, padding, dilation, groups, "fwd")
    k = geo.w_shape[0]
    if bias is not None:
        b = as_float32(bias, "bias", ndim=None)
        if b.shape != (k,):
            hint = (f"; for one value in every channel pass numpy.full({k}, value)"
                    if b.ndim == 0 else "")
            raise TensorError(f"bias must be a float array of shape ({k},), got dtype "
                              f"{np.asarray(bias).dtype} and shape {b.shape}{hint}")
    y = _run_or_empty(geo, handle, solver, workspace_limit, allow_tf32, geo.y_shape,
                      x=None if geo.empty else geo.pad_input(x), w=w)
    if bias is not None:
        y += b[None, :, None, None]
    return y


def conv2d_input(input_size, weight, grad_output, stride=1, padding=0, dilation=1, groups=1,
                 *, solver: str | None = None, workspace_limit: int | None = None,
                 handle: Handle | None = None, allow_tf32: bool | None = None) -> np.ndarray:
    """Gradient of conv2d with respect to its input (backward data, ``bwd``).

    As ``torch.nn.grad.conv2d_input``. ``input_size`` is (N, C, H, W) of the input (it
    fixes H and W exactly where a stride leaves them ambiguous); ``grad_output`` is dy,
    N x K x Ho x Wo. Returns dx, float32, N x C x H x W (zeros when K is 0, empty when N,
    C, H or W is 0). Raises as :func:`conv2d`.
    """
    shape = _shape4(input_size, "input_size")
    w = as_float32(weight, "weight", axes=_W_AXES)
    dy = as_float32(grad_output, "grad_output")
    geo = _Geometry(shape, w.shape, stride, padding, dilation, groups, "bwd")
    _check_dy(dy, geo)
    dx = _run_or_empty(geo, handle, solver, workspace_limit, allow_tf32, shape, w=w, y=dy)
    return dx if geo.empty else geo.crop_input(dx)


def conv2d_weight(input, weight_size, grad_output, stride=1, padding=0, dilation=1, groups=1,
                  *, solver: str | None = None, workspace_limit: int | None = None,
                  handle: Handle | None = None, allow_tf32: bool | None = None) -> np.ndarray:
    """Gradient of conv2d with respect to its weight (backward weights, ``wrw``).

    As ``torch.nn.grad.conv2d_weight``. ``weight_size`` is (K, C/groups, R, S);
    ``input`` is x, N x C x H x W; ``grad_output`` is dy, N x K x Ho x Wo. Returns dw,
    float32, K x C/groups x R x S (zeros when N, H or W is 0, empty when K or C is 0).
    Raises as :func:`conv2d`.
    """
    x = as_float32(input, "input")
    wshape = _shape4(weight_size, "weight_size")
    dy = as_float32(grad_output, "grad_output")
    geo = _Geometry(x.shape, wshape, stride, padding, dilation, groups, "wrw")
    _check_dy(dy, geo)
    return _run_or_empty(geo, handle, solver, workspace_limit, allow_tf32, wshape,
                         x=None if geo.empty else geo.pad_input(x), y=dy)
