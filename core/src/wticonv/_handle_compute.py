"""The NumPy path of :meth:`wticonv.handle.Handle.compute`: host arrays checked and
converted, copied to (or wrapped as) device buffers, run, and the result brought back.

Private to :mod:`wticonv.handle`, which re-exports ``_host_empty``. This module does not
import :mod:`wticonv.handle` (no cycle): it gets the handle, and the function that
converts arrays to float32, from :meth:`Handle.compute`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from wticonv.errors import HostMemoryError, TensorError
from wticonv.problem.conv import ConvProblem
from wticonv.problem.tensors import OUTPUT_TENSOR, ConvTensors


def compute_on_host(handle: Any, p: ConvProblem, given: dict[str, np.ndarray | None],
                    as_float32: Callable[..., np.ndarray], workspace_limit: int | None,
                    solver: str | None, perf_config: str | None,
                    allow_tf32: bool | None) -> np.ndarray:
    """Run ``p`` on ``handle`` with the host arrays ``given`` (``{"x": ..., "w": ...,
    "y": ...}``; the output's is ignored) and return the result as a new float32 array.

    ``as_float32`` is :func:`wticonv.problem.tensors.as_float32` as
    :mod:`wticonv.handle` names it at the call. The errors are those
    :meth:`Handle.compute` lists (but for the fork check and the problem's parsing, done
    before).
    """
    dev = handle.device
    shapes = {"x": p.x_shape, "w": p.w_shape, "y": p.y_shape}
    out_name = OUTPUT_TENSOR[p.direction]
    arrays = {}
    for name, shape in shapes.items():
        dev.check_alloc(4 * int(np.prod(shape)), f"tensor {name} {shape}")
        if name == out_name:
            continue
        a = given[name]
        if a is None:
            raise TensorError(f"{p.direction} of {p.key} needs the array {name} of shape "
                              f"{shape}")
        try:
            a = as_float32(a, f"array {name}", ndim=None)
        except MemoryError:
            nbytes = 4 * int(np.prod(shape))
            raise HostMemoryError(f"the host cannot hold a float32 copy of array {name} "
                                  f"{shape} of {p.key} ({nbytes} bytes); use a smaller "
                                  "batch, or pass float32 C-contiguous arrays (they are "
                                  "not copied)") from None
        if a.shape != shape:
            raise TensorError(f"array {name} must have shape {shape} for {p.key}; got "
                              f"shape {a.shape}")
        arrays[name] = a
    bufs = {}
    shared = handle.zero_copy and getattr(dev, "host_unified_memory", False)
    out = None
    try:
        for name, shape in shapes.items():
            if name == out_name and shared:
                out = _host_empty(shape, f"the result {name}", p)
                bufs[name] = dev.wrap(out, f"tensor {name}", writable=True)
            elif name == out_name:
                bufs[name] = dev.alloc(4 * int(np.prod(shape)), f"tensor {name}")
            elif shared and arrays[name].flags.writeable:   # pyopencl needs writeable
                bufs[name] = dev.wrap(arrays[name], f"tensor {name}")
            else:
                bufs[name] = dev.upload(arrays[name], f"tensor {name}")
        handle.run(p, ConvTensors(bufs["x"], bufs["w"], bufs["y"]),
                   workspace_limit=workspace_limit, solver=solver, perf_config=perf_config,
                   allow_tf32=allow_tf32)
        if out is not None:
            dev.sync_host(bufs[out_name], out)
            return out
        return dev.download(bufs[out_name], shapes[out_name])
    finally:
        for b in bufs.values():
            if b is not None:
                b.release()


def _host_empty(shape, what: str, p: ConvProblem) -> np.ndarray:
    """A new float32 array of ``shape`` (HostMemoryError if the host cannot hold it)."""
    try:
        return np.empty(shape, np.float32)
    except MemoryError:
        raise HostMemoryError(f"the host cannot hold {what} {shape} of {p.key} "
                              f"({4 * int(np.prod(shape))} bytes)") from None
