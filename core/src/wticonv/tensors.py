"""The device tensors a solver's ``run`` hook receives, and the checks of the arrays and
buffers that become them."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from .errors import TensorError

__all__ = ["ConvTensors", "as_float32", "check_buffers"]


class ConvTensors(NamedTuple):
    """Device buffers of one convolution, named as MIOpen names them.

    All are ``pyopencl.Buffer`` objects holding packed NCHW float32 data:

    - ``x``: N x C x H x W (input; dx in ``bwd``, where the solver writes it)
    - ``w``: K x C/groups x R x S (filter; dw in ``wrw``, where the solver writes it)
    - ``y``: N x K x Ho x Wo (output in ``fwd``; dy in ``bwd`` and ``wrw``, read only)
    """

    x: Any
    w: Any
    y: Any


def as_float32(array, name: str, ndim: int | None = 4) -> np.ndarray:
    """``array`` as a C-contiguous float32 NumPy array, read in index order.

    float32 C-contiguous arrays are returned as they are; any other layout (strided,
    negative strides such as ``x[:, :, ::-1]``, transposed, Fortran order, views with an
    offset, the other byte order) and other floating dtypes (float16, float64,
    longdouble) are copied into one. Nested sequences of floats are accepted as NumPy
    reads them.

    Parameters
    ----------
    array : array-like
    name : str
        What the array is (``"input"``, ``"weight"``...), for the messages.
    ndim : int or None
        The number of dimensions it must have (None: any).

    Returns
    -------
    numpy.ndarray, float32, C-contiguous, the shape of ``array``

    Raises
    ------
    TensorError
        ``array`` is None, a masked array (its mask would be ignored) or cannot be read
        as an array (ragged nested lists); its dtype is not floating point (bool,
        integers, complex, object, strings); it has finite values beyond float32's range
        (about 3.4e38, which would become infinite); or it has another number of
        dimensions than ``ndim``.
    """
    if array is None:
        raise TensorError(f"{name} is None; pass a NumPy array of float32")
    if isinstance(array, np.ma.MaskedArray):
        raise TensorError(f"{name} is a masked array, whose mask wticonv would ignore; pass "
                          f"{name}.filled(0) (or another fill value) instead")
    try:
        arr = np.asarray(array)
    except Exception as e:  # noqa: BLE001 - ragged lists, tensors that refuse, ...
        raise TensorError(f"{name} cannot be read as a NumPy array ({type(e).__name__}: "
                          f"{e}); pass a NumPy array of float32") from None
    if arr.dtype.kind != "f":
        raise TensorError(f"{name} has dtype {arr.dtype}; wticonv computes in float32: pass "
                          "a floating-point array (float32 avoids a copy), e.g. "
                          f"{name}.astype(numpy.float32)")
    if ndim is not None and arr.ndim != ndim:
        hint = (f"; for one unbatched picture (C x H x W) pass {name}[None]"
                if ndim == 4 and arr.ndim == 3 else "")
        raise TensorError(f"{name} has {arr.ndim} dimensions, shape {arr.shape}; expected "
                          f"{ndim} (NCHW){hint}")
    with np.errstate(over="ignore"):
        out = np.ascontiguousarray(arr, dtype=np.float32)
    if arr.dtype.itemsize > 4 and out.size and not np.isfinite(out).all():
        lost = int((np.isinf(out) & np.isfinite(arr)).sum())
        if lost:
            raise TensorError(
                f"{name} has {lost} finite value(s) beyond float32's range (largest "
                f"{float(np.finfo(np.float32).max):.4g}), which would become infinite: "
                "wticonv computes in float32; scale the data down")
    return out


def check_buffers(problem, tensors: ConvTensors) -> None:
    """Check that each buffer of ``tensors`` holds the bytes its tensor of ``problem``
    needs (4 x elements), so that no kernel reads or writes past a buffer.

    Raises
    ------
    TensorError
        A buffer is missing (None) or smaller than its tensor; the message names it.
    """
    p = problem
    for name, shape in (("x", p.x_shape), ("w", p.w_shape), ("y", p.y_shape)):
        need = 4 * int(np.prod(shape))
        buf = getattr(tensors, name)
        if buf is None:
            raise TensorError(f"tensor {name} {shape} of {p.key} is None: it needs a device "
                              f"buffer of {need} bytes")
        size = getattr(buf, "size", None)
        if isinstance(size, int) and size < need:
            raise TensorError(f"tensor {name} {shape} of {p.key} needs {need} bytes, but its "
                              f"buffer holds {size}: allocate {need} bytes (4 per float32)")
