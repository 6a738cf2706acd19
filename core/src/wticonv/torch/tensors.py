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

__all__ = ["CASTABLE", "check_float32", "check_castable", "check_devices", "check_dtypes",
           "to_host", "from_host"]


#: The dtypes ``cast=True`` computes in float32 (torch.nn.functional.conv2d's floating
#: dtypes; complex, integer and bool tensors have no float32 meaning).
CASTABLE = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def check_float32(t: torch.Tensor, what: str, layer: str, direction: str = "fwd") -> None:
    """Refuse a tensor that is not a dense float32 one.

    Raises
    ------
    LayerInputError
        ``t``'s dtype is not float32 (the message says to pass ``cast=True`` for the
        dtypes it takes, and to convert others), or its layout is not strided (sparse,
        mkldnn).
    """
    if t.layout != torch.strided:
        raise input_error(f"{what} has layout {t.layout}; wticonv needs a dense tensor "
                          f"({what}.to_dense())", layer, direction)
    if t.dtype == torch.float32:
        return
    if t.dtype in CASTABLE:
        raise input_error(f"{what} is {t.dtype}; wticonv computes in float32: pass "
                          "cast=True (wticonv.torch.conv2d, Conv2d, replace_convs; on a "
                          "wticonv layer already built: layer.wticonv_cast = True, or "
                          "replace_convs(model, cast=True) again) to compute in float32 "
                          "and cast the result back, or convert the model with .float()",
                          layer, direction)
    raise input_error(f"{what} is {t.dtype}; wticonv convolves float32 tensors (and float16, "
                      "bfloat16, float64 with cast=True), not complex, integer or bool ones: "
                      f"convert it ({what}.float())", layer, direction)


def check_castable(t: torch.Tensor, what: str, layer: str) -> None:
    """Refuse a tensor whose dtype ``cast=True`` cannot compute (not in :data:`CASTABLE`).

    Raises
    ------
    LayerInputError
        ``t`` is complex, integer or bool.
    """
    if t.dtype not in CASTABLE:
        raise input_error(f"{what} is {t.dtype}; cast=True computes float16, bfloat16, "
                          "float32 and float64 tensors in float32, not complex, integer or "
                          f"bool ones: convert it ({what}.float())", layer)


def check_devices(input: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                  layer: str, names: tuple[str, str, str] = ("input", "weight", "bias"),
                  direction: str = "fwd") -> None:
    """One device for input, weight and bias, as :func:`torch.nn.functional.conv2d`
    requires; a meta input (shapes only) takes weights on any device, as torch's does.
    ``names``: what the three are called in messages (the ops' backward passes check
    grad_output against weight or input), ``direction`` the pass errors name.

    Raises
    ------
    LayerInputError
        Weights or bias on another device than the input, or on the meta device (no data)
        with a real input.
    """
    first = names[0]
    tensors = [(names[1], weight)] + ([(names[2], bias)] if bias is not None else [])
    for what, t in tensors:
        if input.device.type == "meta":
            break   # shapes only: torch gives a meta result whatever the weights' device
        if t.device.type == "meta":
            raise input_error(f"{what} is on the meta device (it holds no data) but the "
                              f"{first} is on {input.device}: materialize the parameters "
                              f"first (model.to_empty(device='{input.device}'), then "
                              "load_state_dict), or pass a meta input for shapes only", layer,
                              direction)
        if t.device != input.device:
            raise input_error(f"{first} is on {input.device} but {what} is on {t.device}: a "
                              "convolution's tensors need one device (torch.nn.functional."
                              f"conv2d raises too); move the model (model.to('{input.device}'))"
                              " or the input", layer, direction)


def check_dtypes(input: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                 cast: bool, layer: str) -> None:
    """The devices and dtypes of a forward call: one device and one floating dtype for
    input, weight and bias (as :func:`torch.nn.functional.conv2d` requires), float32
    unless ``cast``, and with ``cast`` one of :data:`CASTABLE`.

    Raises
    ------
    LayerInputError
        Tensors on different devices (a meta input takes weights anywhere, as torch's
        does; meta weights with real input are refused), a dtype ``cast=True`` cannot
        compute (complex, integer, bool), tensors of different dtypes (torch raises a
        RuntimeError for both too), a dtype other than float32 without ``cast``, or a
        layout other than strided.
    """
    check_devices(input, weight, bias, layer)
    tensors = [("input", input), ("weight", weight)] + (
        [("bias", bias)] if bias is not None else [])
    if cast:
        for what, t in tensors:
            check_castable(t, what, layer)
    for what, t in tensors[1:]:
        if t.dtype != input.dtype:
            if t.dtype == torch.float32:
                fix = "convert the input (x.float())"
            elif input.dtype == torch.float32:
                fix = f"convert the {what} ({what}.float()) or the model (model.float())"
            else:
                fix = ("convert both to float32 (x.float(), model.float()), or one to the "
                       "other's floating dtype and pass cast=True")
            raise input_error(f"input is {input.dtype} but {what} is {t.dtype}: a "
                              "convolution's tensors need one dtype (torch.nn.functional."
                              f"conv2d raises too); {fix}", layer)
    for what, t in tensors:
        if cast:
            if t.layout != torch.strided:
                check_float32(t, what, layer)
        else:
            check_float32(t, what, layer)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def to_host(t: torch.Tensor) -> tuple[np.ndarray, float]:
    """``t`` as a float32 NumPy array, and the seconds spent copying it to the host (0.0
    for a contiguous CPU tensor: the array shares its memory; a non-contiguous one is
    copied to NCHW, and that copy counted)."""
    t = t.detach()
    if t.device.type == "cpu":
        if t.is_contiguous():
            return t.numpy(), 0.0
        t0 = timing.now()
        host = t.contiguous()            # channels_last or strided: an NCHW copy
        return host.numpy(), timing.now() - t0
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
