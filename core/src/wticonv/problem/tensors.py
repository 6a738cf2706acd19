"""The device tensors a solver's ``run`` hook receives, and the checks of the arrays and
buffers that become them."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import pyopencl as cl

from wticonv.errors import HostMemoryError, TensorError

__all__ = ["ConvTensors", "OUTPUT_TENSOR", "as_float32", "as_tensors", "check_buffers"]


class ConvTensors(NamedTuple):
    """Device buffers of one convolution, named as MIOpen names them.

    All are ``pyopencl.Buffer`` objects holding packed NCHW float32 data:

    - ``x``: N x C x H x W (input; dx in ``bwd``, where the solver writes it)
    - ``w``: K x C/groups x R x S (filter; dw in ``wrw``, where the solver writes it)
    - ``y``: N x K x Ho x Wo (output in ``fwd``; dy in ``bwd`` and ``wrw``, read only)

    The buffer written must not alias one read (see :func:`check_buffers`).
    """

    x: Any
    w: Any
    y: Any


def as_float32(array, name: str, ndim: int | None = 4, axes: str = "NCHW") -> np.ndarray:
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
    axes : str
        What the dimensions are, for the messages (``"NCHW"``; ``"K x C/groups x R x S"``
        for a weight).

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
    HostMemoryError
        The host cannot hold the float32 copy.
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
                if ndim == 4 and arr.ndim == 3 and axes == "NCHW" else "")
        raise TensorError(f"{name} has {arr.ndim} dimensions, shape {arr.shape}; expected "
                          f"{ndim} ({axes}){hint}")
    try:
        with np.errstate(over="ignore"):
            out = np.ascontiguousarray(arr, dtype=np.float32)
    except MemoryError:
        raise HostMemoryError(f"the host cannot hold a float32 copy of {name} {arr.shape} "
                              f"({4 * arr.size} bytes); pass float32 C-contiguous arrays "
                              "(they are not copied), or smaller ones") from None
    if arr.ndim == 0:  # ascontiguousarray makes a scalar 1-D
        out = out.reshape(())
    if arr.dtype.itemsize > 4 and out.size and not np.isfinite(out).all():
        lost = int((np.isinf(out) & np.isfinite(arr)).sum())
        if lost:
            raise TensorError(
                f"{name} has {lost} finite value(s) beyond float32's range (largest "
                f"{float(np.finfo(np.float32).max):.4g}), which would become infinite: "
                "wticonv computes in float32; scale the data down")
    return out


#: The tensor each direction writes (the others it reads): y, dx in x, dw in w.
OUTPUT_TENSOR = {"fwd": "y", "bwd": "x", "wrw": "w"}


def as_tensors(tensors) -> ConvTensors:
    """``tensors`` as :class:`ConvTensors`: a ConvTensors as it is, a plain tuple or list
    of three buffers read as (x, w, y).

    Raises
    ------
    TensorError
        Anything else; the message says what is expected.
    """
    if isinstance(tensors, ConvTensors):
        return tensors
    if isinstance(tensors, (tuple, list)) and len(tensors) == 3:
        return ConvTensors(*tensors)
    what = (f"a {type(tensors).__name__} of {len(tensors)}"
            if isinstance(tensors, (tuple, list)) else f"{type(tensors).__name__} {tensors!r:.60}")
    raise TensorError(f"tensors must be wticonv.ConvTensors(x, w, y) (or a tuple of the three) "
                      f"of device buffers (pyopencl.Buffer); got {what}")


def _extent(buf) -> tuple[int, int, int]:
    """(the cl_mem the bytes of ``buf`` belong to, first byte, end): a sub-buffer's are its
    parent's, from its offset."""
    parent = buf.get_info(cl.mem_info.ASSOCIATED_MEMOBJECT)
    if parent is None:
        return buf.int_ptr, 0, buf.size
    offset = buf.get_info(cl.mem_info.OFFSET)
    return parent.int_ptr, offset, offset + buf.size


def check_buffers(problem, tensors: ConvTensors) -> None:
    """Check that each buffer of ``tensors`` is a device buffer holding the bytes its tensor
    of ``problem`` needs (4 x elements), so that no kernel reads or writes past a buffer,
    and that the output's buffer shares no byte with an input's.

    The output (y in ``fwd``, x in ``bwd``, w in ``wrw``) must not be the buffer of an
    input, nor a sub-buffer overlapping one (a solver would overwrite its input while
    reading it). Buffers that share memory some other way (two buffers made with
    ``USE_HOST_PTR`` on one host array) cannot be seen and are not detected.

    Raises
    ------
    TensorError
        A buffer is missing (None), not a ``pyopencl`` memory object (a NumPy array, say),
        smaller than its tensor, or the output aliases an input; the message names it.
    """
    p = problem
    for name, shape in (("x", p.x_shape), ("w", p.w_shape), ("y", p.y_shape)):
        need = 4 * int(np.prod(shape))
        buf = getattr(tensors, name)
        if buf is None:
            raise TensorError(f"tensor {name} {shape} of {p.key} is None: it needs a device "
                              f"buffer of {need} bytes")
        if not isinstance(buf, cl.MemoryObjectHolder):
            raise TensorError(
                f"tensor {name} {shape} of {p.key} is a {type(buf).__module__}."
                f"{type(buf).__name__}, not a device buffer: Handle.run needs pyopencl.Buffer "
                f"objects of {need} bytes; for NumPy arrays use Handle.compute")
        size = getattr(buf, "size", None)
        if isinstance(size, int) and size < need:
            raise TensorError(f"tensor {name} {shape} of {p.key} needs {need} bytes, but its "
                              f"buffer holds {size}: allocate {need} bytes (4 per float32)")
    out = OUTPUT_TENSOR[p.direction]
    mem, start, end = _extent(getattr(tensors, out))
    for name in ("x", "w", "y"):
        if name == out:
            continue
        buf = getattr(tensors, name)
        other, o_start, o_end = _extent(buf)
        if other == mem and start < o_end and o_start < end:
            how = (f"is the same buffer as the input {name}"
                   if buf.int_ptr == getattr(tensors, out).int_ptr else
                   f"overlaps the input {name} (bytes {start}-{end} and {o_start}-{o_end} of "
                   "one buffer)")
            raise TensorError(
                f"the output tensor {out} of {p.key} ({p.direction} writes it) {how}: the "
                f"solver would overwrite {name} while reading it; give the output a buffer "
                "of its own")
