"""The custom ops: ``wticonv::conv2d`` and its two gradients, with autograd.

============================  =============================================
op                            computes (wticonv's NumPy API)
============================  =============================================
``wticonv::conv2d``           y = conv(x, w) + b (:func:`wticonv.conv2d`)
``wticonv::conv2d_input``     dx from w, dy (:func:`wticonv.conv2d_input`)
``wticonv::conv2d_weight``    dw from x, dy (:func:`wticonv.conv2d_weight`)
============================  =============================================

Registered with :func:`torch.library.custom_op` (PyTorch 2.4+), each with a fake
implementation (shapes and dtypes only, for meta tensors, FakeTensor and
``torch.compile``) that checks what the op checks (:func:`wticonv.torch.shapes.check_problem`)
and raises the same :class:`~wticonv.torch.errors.LayerInputError`. Each has a backward
(:func:`torch.library.register_autograd`) made of the three ops: ``wticonv::conv2d``'s
calls the two gradient ops (and sums dy for the bias); the gradient ops are bilinear, so
theirs are the other two ops again (double backward, e.g. gradient penalties). Inside an
autocast region (:func:`torch.library.register_autocast`, CPU and CUDA) their floating
inputs other than float64 are cast to float32, and the result is float32.

Arguments, in schema order: tensors (NCHW float32: x N x C x H x W, w K x C/groups x R x
S, dy N x K x Ho x Wo, b of K); ``stride`` and ``dilation`` (2 ints), ``padding`` (4
ints: top, left, bottom, right), ``groups``, ``layer`` (the name errors give),
``handle`` (an id from :func:`wticonv.torch.handles.handle_id`, 0: the calling thread's
handle; an autograd graph keeps the handle alive until its backward has run). Most users
call :func:`wticonv.torch.conv2d` or :class:`wticonv.torch.Conv2d`.

Errors: wticonv's errors surface as :class:`~wticonv.torch.errors.LayerError` (a
RuntimeError) or :class:`~wticonv.torch.errors.LayerInputError` (also a ValueError),
naming the layer.
"""

from __future__ import annotations

import numpy as np
import torch

import wticonv.api as api
from wticonv.errors import WticonvError
from wticonv.torch import timing
from wticonv.torch.errors import layer_error
from wticonv.torch.handles import lookup, resolve
from wticonv.torch.shapes import check_problem, output_hw
from wticonv.torch.tensors import check_devices, check_float32, from_host, to_host

__all__ = ["conv2d_op", "conv2d_input_op", "conv2d_weight_op", "output_hw"]

Tensor = torch.Tensor


def _geometry(stride, padding, dilation):
    return dict(stride=tuple(stride), padding=tuple(padding), dilation=tuple(dilation))


def _run(direction: str, layer: str, handle: int, device: torch.device, fn, *tensors):
    """Run ``fn(handle, *arrays)`` on the tensors' host arrays; the result as a tensor on
    ``device``, with wticonv's errors as :class:`LayerError` and the times recorded."""
    profiling = bool(timing.active())
    t0 = timing.now()
    arrays, copy_s = [], 0.0
    for t in tensors:
        if t is None:
            arrays.append(None)
            continue
        a, dt = to_host(t)
        arrays.append(a)
        copy_s += dt
    try:
        h = resolve(handle)
        if profiling:
            with h.device.profile() as prof:
                out = fn(h, *arrays)
            kernel_ms = prof.kernel_ms
        else:
            out, kernel_ms = fn(h, *arrays), 0.0
    except WticonvError as e:
        raise layer_error(e, layer, direction) from e
    y, dt = from_host(np.asarray(out, np.float32), device)
    copy_s += dt
    if profiling:
        timing.add(direction, timing.now() - t0, kernel_ms, copy_s)
    return y


def _check_fwd(input, weight, bias, stride, padding, dilation, groups, layer):
    check_devices(input, weight, bias, layer)
    for t, what in ((input, "input"), (weight, "weight"), (bias, "bias")):
        if t is not None:
            check_float32(t, what, layer)
    return check_problem(input.shape, weight.shape, stride, padding, dilation, groups, layer,
                         "fwd", bias_shape=None if bias is None else bias.shape)


@torch.library.custom_op("wticonv::conv2d", mutates_args=())
def conv2d_op(input: Tensor, weight: Tensor, bias: Tensor | None, stride: list[int],
              padding: list[int], dilation: list[int], groups: int, layer: str,
              handle: int) -> Tensor:
    """y = conv2d(input, weight) + bias on wticonv: N x K x Ho x Wo, float32."""
    _check_fwd(input, weight, bias, stride, padding, dilation, groups, layer)
    geo = _geometry(stride, padding, dilation)
    return _run("fwd", layer, handle, input.device,
                lambda h, x, w, b: api.conv2d(x, w, b, groups=groups, handle=h, **geo),
                input, weight, bias)


@conv2d_op.register_fake
def _conv2d_fake(input, weight, bias, stride, padding, dilation, groups, layer, handle):
    shape = _check_fwd(input, weight, bias, stride, padding, dilation, groups, layer)
    return input.new_empty(shape)


def _check_bwd(weight, grad_output, input_size, stride, padding, dilation, groups, layer):
    check_devices(grad_output, weight, None, layer, ("grad_output", "weight", ""), "bwd")
    check_float32(weight, "weight", layer, "bwd")
    check_float32(grad_output, "grad_output", layer, "bwd")
    check_problem(input_size, weight.shape, stride, padding, dilation, groups, layer, "bwd",
                  dy_shape=grad_output.shape)


@torch.library.custom_op("wticonv::conv2d_input", mutates_args=())
def conv2d_input_op(weight: Tensor, grad_output: Tensor, input_size: list[int],
                    stride: list[int], padding: list[int], dilation: list[int], groups: int,
                    layer: str, handle: int) -> Tensor:
    """dx of conv2d (backward data) on wticonv: ``input_size`` (N x C x H x W), float32."""
    _check_bwd(weight, grad_output, input_size, stride, padding, dilation, groups, layer)
    geo = _geometry(stride, padding, dilation)
    return _run("bwd", layer, handle, grad_output.device,
                lambda h, w, dy: api.conv2d_input(tuple(input_size), w, dy, groups=groups,
                                                  handle=h, **geo),
                weight, grad_output)


@conv2d_input_op.register_fake
def _conv2d_input_fake(weight, grad_output, input_size, stride, padding, dilation, groups,
                       layer, handle):
    _check_bwd(weight, grad_output, input_size, stride, padding, dilation, groups, layer)
    return grad_output.new_empty(tuple(input_size))


def _check_wrw(input, grad_output, weight_size, stride, padding, dilation, groups, layer):
    check_devices(grad_output, input, None, layer, ("grad_output", "input", ""), "wrw")
    check_float32(input, "input", layer, "wrw")
    check_float32(grad_output, "grad_output", layer, "wrw")
    check_problem(input.shape, weight_size, stride, padding, dilation, groups, layer, "wrw",
                  dy_shape=grad_output.shape)


@torch.library.custom_op("wticonv::conv2d_weight", mutates_args=())
def conv2d_weight_op(input: Tensor, grad_output: Tensor, weight_size: list[int],
                     stride: list[int], padding: list[int], dilation: list[int], groups: int,
                     layer: str, handle: int) -> Tensor:
    """dw of conv2d (backward weights) on wticonv: ``weight_size`` (K x C/groups x R x S),
    float32."""
    _check_wrw(input, grad_output, weight_size, stride, padding, dilation, groups, layer)
    geo = _geometry(stride, padding, dilation)
    return _run("wrw", layer, handle, grad_output.device,
                lambda h, x, dy: api.conv2d_weight(x, tuple(weight_size), dy, groups=groups,
                                                   handle=h, **geo),
                input, grad_output)


@conv2d_weight_op.register_fake
def _conv2d_weight_fake(input, grad_output, weight_size, stride, padding, dilation, groups,
                        layer, handle):
    _check_wrw(input, grad_output, weight_size, stride, padding, dilation, groups, layer)
    return grad_output.new_empty(tuple(weight_size))


# Autograd. Every op is linear in each of its two tensors (y = conv(x, w): <dy, y> =
# <dx, x> = <dw, w>), so each one's gradients are two of the three ops:
#   y  = conv2d(x, w)           -> dx = conv2d_input(w, dy),  dw = conv2d_weight(x, dy)
#   dx = conv2d_input(w, dy)    -> for g of x's shape: dw = conv2d_weight(g, dy),
#                                  d(dy) = conv2d(g, w)
#   dw = conv2d_weight(x, dy)   -> for g of w's shape: dx = conv2d_input(g, dy),
#                                  d(dy) = conv2d(x, g)
# ctx.handle keeps an explicit handle alive until the backward has run (the ops find it
# by id, through a lookup that holds no reference).

def _save(ctx, a: Tensor, b: Tensor, rest) -> None:
    stride, padding, dilation, groups, layer, handle = rest
    ctx.save_for_backward(a, b)
    ctx.args = (stride, padding, dilation, groups, layer, handle)
    ctx.handle = lookup(handle)


def _setup_conv2d(ctx, inputs, output):
    input, weight, bias = inputs[:3]
    _save(ctx, input, weight, inputs[3:])
    ctx.has_bias = bias is not None


def _backward_conv2d(ctx, grad_output):
    input, weight = ctx.saved_tensors
    grad_output = grad_output.contiguous()
    dx = dw = db = None
    if ctx.needs_input_grad[0]:
        dx = conv2d_input_op(weight, grad_output, list(input.shape), *ctx.args)
    if ctx.needs_input_grad[1]:
        dw = conv2d_weight_op(input, grad_output, list(weight.shape), *ctx.args)
    if ctx.has_bias and ctx.needs_input_grad[2]:
        db = grad_output.sum((0, 2, 3))
    return dx, dw, db, None, None, None, None, None, None


def _setup_gradient(ctx, inputs, output):
    _save(ctx, inputs[0], inputs[1], inputs[3:])


def _backward_input(ctx, g):
    weight, grad_output = ctx.saved_tensors
    g = g.contiguous()
    dw = ddy = None
    if ctx.needs_input_grad[0]:
        dw = conv2d_weight_op(g, grad_output, list(weight.shape), *ctx.args)
    if ctx.needs_input_grad[1]:
        ddy = conv2d_op(g, weight, None, *ctx.args)
    return dw, ddy, None, None, None, None, None, None, None


def _backward_weight(ctx, g):
    input, grad_output = ctx.saved_tensors
    g = g.contiguous()
    dx = ddy = None
    if ctx.needs_input_grad[0]:
        dx = conv2d_input_op(g, grad_output, list(input.shape), *ctx.args)
    if ctx.needs_input_grad[1]:
        ddy = conv2d_op(input, g, None, *ctx.args)
    return dx, ddy, None, None, None, None, None, None, None


conv2d_op.register_autograd(_backward_conv2d, setup_context=_setup_conv2d)
conv2d_input_op.register_autograd(_backward_input, setup_context=_setup_gradient)
conv2d_weight_op.register_autograd(_backward_weight, setup_context=_setup_gradient)

#: Whether the ops have their autocast rule (torch.library.register_autocast: recent
#: torch; without it, autocast's bfloat16/float16 activations are refused as outside).
AUTOCAST = hasattr(torch.library, "register_autocast")
for _op in (conv2d_op, conv2d_input_op, conv2d_weight_op) if AUTOCAST else ():
    for _device_type in ("cpu", "cuda"):
        torch.library.register_autocast(_op, _device_type, torch.float32)
