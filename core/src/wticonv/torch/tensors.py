"""Tensors to NumPy arrays and back, with as few copies as possible.

A CPU float32 tensor becomes a NumPy array over its own memory
(:meth:`torch.Tensor.numpy`; a non-contiguous one is first made contiguous, by torch), and
wticonv's NumPy API uses a C-contiguous float32 array as it is; on a handle with
``zero_copy`` and a device in host memory (PoCL on a CPU) the kernels then read the
tensor itself (:meth:`wticonv.runtime.device.Device.wrap`), and the result array becomes
the output tensor without a copy (:func:`torch.from_numpy`). A tensor on another device
(CUDA...) is copied to the host and its result back: :mod:`wticonv.torch.timing` counts
those copies.
"""

from __future__ import annotations

import numpy as np
import torch

from wticonv.torch import timing
from wticonv.torch.errors import input_error

__all__ = ["check_float32", "to_host", "from_host"]


def check_float32(t: torch.Tensor, what: str, layer: str, direction: str = "fwd") -> None:
    """Refuse a tensor that is not float32 or is complex/quantized/sparse.

    Raises
    ------
    LayerInputError
        ``t``'s dtype is not float32 (the message says to pass ``cast=True``), or its
        layout is not strided (sparse, mkldnn).
    """
    if t.layout != torch.strided:
        raise input_error(f"{what} has layout {t.layout}; wticonv needs a dense tensor "
                          f"({what}.to_dense())", layer, direction)
    if t.dtype != torch.float32:
        raise input_error(f"{what} is {t.dtype}; wticonv computes in float32: pass "
                          "cast=True (wticonv.torch.conv2d, Conv2d, replace_convs) to "
                          "compute in float32 and cast the result back, or convert the "
                          "model with .float()", layer, direction)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def to_host(t: torch.Tensor) -> tuple[np.ndarray, float]:
    """``t`` as a float32 NumPy array, and the seconds spent copying it to the host (0.0
    for a CPU tensor: the array shares its memory)."""
    t = t.detach()
    if t.device.type == "cpu":
        return t.contiguous().numpy(), 0.0
    t0 = timing.now()
    _sync(t.device)
    host = t.to("cpu", copy=True).contiguous()
    return host.numpy(), timing.now() - t0


def from_host(a: np.ndarray, device: torch.device) -> tuple[torch.Tensor, float]:
    """NumPy result ``a`` as a tensor on ``device``, and the seconds the copy took (0.0 on
    the CPU: the tensor shares the array's memory)."""
    t = torch.from_numpy(a)
    if device.type == "cpu":
        return t, 0.0
    t0 = timing.now()
    out = t.to(device)
    _sync(device)
    return out, timing.now() - t0
