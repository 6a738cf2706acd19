"""``wticonv.torch.conv2d``: :func:`torch.nn.functional.conv2d` on wticonv, with autograd.

:func:`conv2d` checks its keyword arguments and turns the handle into the id the ops
take, then calls :func:`conv2d_by_id`, which takes plain values only (numbers, strings,
tensors). ``torch.fx.symbolic_trace`` records that one as one call (it is registered with
:func:`torch.fx.wrap`), where it would otherwise trace into it with Proxy objects;
``torch.compile`` traces through both (nothing in them takes a lock or leaves Python).
"""

from __future__ import annotations

import operator
from collections.abc import Sequence

import torch

from wticonv.errors import WticonvError
from wticonv.handle import Handle
from wticonv.torch import timing
from wticonv.torch.errors import input_error, layer_error
from wticonv.torch.handles import handle_id
from wticonv.torch.ops import conv2d_op
from wticonv.torch.shapes import check_problem
from wticonv.torch.tensors import check_castable, check_dtypes

__all__ = ["conv2d", "conv2d_by_id", "pads"]


def _index(v):
    """``v`` as an int if torch would take it as one (an int, a NumPy integer, a 0-d
    integer tensor: anything with ``__index__``, not a bool), else None."""
    if isinstance(v, (bool, str, Sequence)):   # sequences first: torch.compile's tracer
        return None                             # (torch 2.11) does not catch the TypeError
    try:
        return operator.index(v)
    except TypeError:
        return None


def _ints(value, lengths: tuple[int, ...]) -> tuple[int, ...] | None:
    """``value`` as a tuple of ints of one of ``lengths``, or None."""
    if isinstance(value, Sequence) and not isinstance(value, str) and len(value) in lengths:
        out = tuple(_index(v) for v in value)
        if None not in out:
            return out
    return None


def _pair(value, name: str, layer: str) -> tuple[int, int]:
    one = _index(value)
    if one is not None:
        return one, one
    pair = _ints(value, (1, 2))
    if pair is not None:
        return (pair[0], pair[0]) if len(pair) == 1 else pair
    raise input_error(f"{name}={value!r} must be an int or a pair of ints (height, width)",
                      layer)


def pads(padding, kernel: tuple[int, int], stride: tuple[int, int],
         dilation: tuple[int, int], layer: str = "") -> tuple[int, int, int, int]:
    """(top, left, bottom, right) from ``padding``: an int, (pad_h, pad_w), (top, left,
    bottom, right), ``"valid"`` or ``"same"`` (stride 1; an odd total puts the extra row
    and column at the bottom and right, as PyTorch does).

    Raises
    ------
    LayerInputError
        An unknown string, ``"same"`` with a stride, a negative or non-int value.
    """
    if isinstance(padding, str):
        if padding == "valid":
            return 0, 0, 0, 0
        if padding == "same":
            if stride != (1, 1):
                raise input_error("padding='same' is not supported for strided convolutions "
                                  "(as in PyTorch)", layer)
            th, tw = dilation[0] * (kernel[0] - 1), dilation[1] * (kernel[1] - 1)
            return th // 2, tw // 2, th - th // 2, tw - tw // 2
        raise input_error(f"padding={padding!r} is unknown: use 'valid', 'same', an int, "
                          "(pad_h, pad_w) or (top, left, bottom, right)", layer)
    out = _ints(padding, (4,))
    if out is None:
        ph, pw = _pair(padding, "padding", layer)
        out = (ph, pw, ph, pw)
    if min(out) < 0:
        raise input_error(f"padding={padding!r} must not be negative", layer)
    return out  # type: ignore[return-value]


def conv2d(input: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None,
           stride=1, padding=0, dilation=1, groups: int = 1, *,
           handle: Handle | None = None, cast: bool = False,
           layer: str = "") -> torch.Tensor:
    """2-D convolution as :func:`torch.nn.functional.conv2d`, run by wticonv, with autograd
    (backward data and backward weights are wticonv's too, and so are their gradients).

    Parameters
    ----------
    input : Tensor, N x C x H x W (or C x H x W, unbatched, as torch)
    weight : Tensor, K x C/groups x R x S
    bias : Tensor of K, optional
    stride, dilation : int or (int, int)
    padding : int, (int, int), (top, left, bottom, right), "valid" or "same"
    groups : int
    handle : wticonv.Handle, optional
        The device and selection cache to use; by default the calling thread's
        (:func:`wticonv.torch.thread_handle`).
    cast : bool
        False (default): tensors must be float32. True: float16, bfloat16 and float64
        tensors are computed in float32 and the result cast back to ``input``'s dtype
        (other dtypes are refused, as are tensors of different dtypes).
    layer : str
        The name error messages give.

    Returns
    -------
    Tensor, N x K x Ho x Wo, on ``input``'s device, ``input``'s dtype (float32 inside an
    autocast region without ``cast``), channels_last where ``input`` or ``weight`` is (as
    torch). A CPU float32 tensor reaches a CPU (PoCL) device without a copy; another
    device's tensors go through host copies (docs/pytorch.md gives their measured cost).

    Raises
    ------
    LayerInputError (RuntimeError and ValueError)
        A dtype other than float32 without ``cast``, one that ``cast`` cannot compute,
        tensors of different dtypes, a bad argument, shapes that do not fit, an invalid
        geometry (output size below 1...).
    LayerError (RuntimeError)
        No solver could run the problem, or the device failed (a DeviceError as its
        ``__cause__`` in a forked child: use the ``spawn`` start method).
    """
    if not isinstance(layer, str):
        raise input_error(f"layer={layer!r:.60} must be a str (the name errors give)", "")
    if not isinstance(cast, bool):
        raise input_error(f"cast={cast!r:.60} must be True or False", layer)
    try:
        hid = handle_id(handle)
    except WticonvError as e:
        raise layer_error(e, layer, "fwd") from e
    return conv2d_by_id(input, weight, bias, stride, padding, dilation, groups, cast, layer,
                        hid)


# FX records conv2d_by_id as one call_function node (its arguments are plain values, so
# the traced GraphModule's code is valid Python) instead of tracing into it with Proxies.
torch.fx.wrap("conv2d_by_id")


def _autocast(device: torch.device) -> bool:
    """Inside an autocast region for ``device`` (the ops' autocast rule: CPU and CUDA)."""
    return device.type in ("cpu", "cuda") and torch.is_autocast_enabled(device.type)


def _channels_last(t: torch.Tensor) -> bool:
    return not t.is_contiguous() and t.is_contiguous(memory_format=torch.channels_last)


def conv2d_by_id(input: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                 stride, padding, dilation, groups: int, cast: bool, layer: str,
                 handle_id: int) -> torch.Tensor:
    """:func:`conv2d` with the handle given by its id (:func:`wticonv.torch.handles.handle_id`,
    0: the calling thread's): what :class:`wticonv.torch.Conv2d` calls, and what
    ``torch.fx`` records. Arguments, result and errors as :func:`conv2d`'s."""
    if not isinstance(input, torch.Tensor) or not isinstance(weight, torch.Tensor):
        raise input_error(f"input and weight must be tensors, got {type(input).__name__} "
                          f"and {type(weight).__name__}", layer)
    if bias is not None and not isinstance(bias, torch.Tensor):
        raise input_error(f"bias must be a tensor of K elements or None, got "
                          f"{type(bias).__name__}", layer)
    g = _index(groups)
    if g is None or g < 1:
        raise input_error(f"groups={groups!r} must be a positive int", layer)
    groups = g
    unbatched = input.dim() == 3
    if unbatched:
        input = input.unsqueeze(0)
    if input.dim() != 4 or weight.dim() != 4:
        raise input_error(f"input must be N x C x H x W (or C x H x W) and weight K x "
                          f"C/groups x R x S; got shapes {tuple(input.shape)} and "
                          f"{tuple(weight.shape)}", layer)
    st, dil = _pair(stride, "stride", layer), _pair(dilation, "dilation", layer)
    pad = pads(padding, (weight.shape[2], weight.shape[3]), st, dil, layer)
    if not _autocast(input.device):
        check_dtypes(input, weight, bias, cast, layer)
    elif cast:      # autocast: its rule (float32) makes the dtypes match, not torch's check
        for what, t in (("input", input), ("weight", weight), ("bias", bias)):
            if t is not None:       # (the devices: the op checks them, under autocast too)
                check_castable(t, what, layer)
    if not torch.jit.is_tracing():     # its sizes are traced tensors (the op checks again)
        check_problem(input.shape, weight.shape, st, pad, dil, groups, layer, "fwd",
                      bias_shape=None if bias is None else bias.shape)
    dtype = input.dtype
    channels_last = _channels_last(input) or _channels_last(weight)
    # (torch.compile traces this function: no lock, no clock inside its graphs)
    profiling = not torch.compiler.is_compiling() and bool(timing.active())
    t0 = timing.now() if profiling else 0.0
    if cast:
        input, weight = input.float(), weight.float()
        bias = None if bias is None else bias.float()
    if profiling and cast:
        timing.add_copy(timing.now() - t0)
    y = conv2d_op(input, weight, bias, list(st), list(pad), list(dil), groups, layer,
                  handle_id)
    t0 = timing.now() if profiling else 0.0
    if channels_last:
        y = y.contiguous(memory_format=torch.channels_last)
    if cast and y.dtype != dtype:
        y = y.to(dtype)
    if profiling and (channels_last or cast):
        timing.add_copy(timing.now() - t0)
    return y.squeeze(0) if unbatched else y
