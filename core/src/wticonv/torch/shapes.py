"""The checks of a convolution's shapes and geometry, shared by the ops and their fakes.

:func:`check_problem` applies the rules of wticonv's NumPy API (:mod:`wticonv.api`: the
channels fit the weight and groups, groups divide K, the output is at least 1x1, the
bias has K values, dy has the output's shape) to tensor shapes, and raises what the API
raises (:class:`~wticonv.errors.TensorError`, :class:`~wticonv.errors.ProblemError`) as a
:class:`~wticonv.torch.errors.LayerInputError` naming the layer and the direction. The
functional calls it before the op, the ops before running, and their fake
implementations instead of running: eager mode, meta tensors and ``torch.compile`` then
refuse the same problems with the same message. Sizes may be SymInts (``torch.compile``
with dynamic shapes): the checks only compare and add them, which records guards.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from wticonv.errors import ProblemError, TensorError
from wticonv.torch.errors import input_error, layer_error

__all__ = ["output_hw", "check_geometry", "check_problem"]


def output_hw(h, w, r, s, stride, padding, dilation):
    """(Ho, Wo) of a convolution (the formula of torch.nn.Conv2d's documentation);
    ``padding`` is (top, left, bottom, right)."""
    t, left, b, right = padding
    ho = (h + t + b - dilation[0] * (r - 1) - 1) // stride[0] + 1
    wo = (w + left + right - dilation[1] * (s - 1) - 1) // stride[1] + 1
    return ho, wo


def _ints(values) -> bool:
    """Ints, or SymInts (``padding="same"`` of a weight with dynamic shapes)."""
    return all(isinstance(v, (int, torch.SymInt)) and not isinstance(v, bool) for v in values)


def check_geometry(stride, padding, dilation, groups, layer: str, direction: str) -> None:
    """``stride`` and ``dilation`` 2 ints >= 1, ``padding`` 4 ints >= 0 (top, left,
    bottom, right; SymInts too), ``groups`` an int >= 1.

    Raises
    ------
    LayerInputError
        Otherwise (ProblemError's rules of :class:`wticonv.ConvProblem`).
    """
    wrong = [f"{name}={list(v)} needs {n} ints{what}"
             for name, v, n, what in (("stride", stride, 2, ""), ("dilation", dilation, 2, ""),
                                      ("padding", padding, 4,
                                       " (top, left, bottom, right)"))
             if len(v) != n or not _ints(list(v))]
    if wrong:
        raise input_error("; ".join(wrong), layer, direction)
    rules = [("stride_h", stride[0], 1), ("stride_w", stride[1], 1),
             ("dilation_h", dilation[0], 1), ("dilation_w", dilation[1], 1),
             ("padding top", padding[0], 0), ("padding left", padding[1], 0),
             ("padding bottom", padding[2], 0), ("padding right", padding[3], 0)]
    if not isinstance(groups, int) or isinstance(groups, bool):
        _fail(ProblemError(f"invalid problem: groups={groups!r} must be an integer"), layer,
              direction)
    rules.append(("groups", groups, 1))
    for name, value, least in rules:
        if value < least:
            rule = "a positive integer (>= 1)" if least else "not negative"
            _fail(ProblemError(f"invalid problem: {name}={value} must be {rule}"), layer,
                  direction)


def _fail(e: Exception, layer: str, direction: str):
    raise layer_error(e, layer, direction) from e


def _shape(shape, what: str, axes: str, layer: str, direction: str) -> tuple:
    shape = tuple(shape)
    if len(shape) != 4:
        _fail(TensorError(f"{what} must have 4 dimensions ({axes}); got shape {shape}"),
              layer, direction)
    for v in shape:
        if v < 0:
            _fail(TensorError(f"{what} {shape} must not hold negative sizes"), layer,
                  direction)
    return shape


def check_problem(x_shape: Sequence, w_shape: Sequence, stride, padding, dilation,
                  groups: int, layer: str, direction: str, *, bias_shape=None,
                  dy_shape=None) -> tuple:
    """Check a convolution's shapes as wticonv's NumPy API does; return the output's
    shape (N, K, Ho, Wo).

    Parameters
    ----------
    x_shape : N x C x H x W (the input, or ``input_size`` of backward data)
    w_shape : K x C/groups x R x S (the weight, or ``weight_size`` of backward weights)
    stride, dilation : 2 ints; padding : 4 ints (top, left, bottom, right); groups : int
    layer, direction : str
        What the error names.
    bias_shape : sequence, optional
        Must be (K,).
    dy_shape : sequence, optional
        grad_output's shape, which must be the output's (backward data and weights).

    Raises
    ------
    LayerInputError
        A bad geometry (:func:`check_geometry`), shapes that are not 4-D or hold a
        negative size, C != weight.shape[1] * groups, groups not dividing K, an output
        size below 1, a bias not of K values, dy not of the output's shape. Its
        ``__cause__`` is the :class:`~wticonv.errors.TensorError` or
        :class:`~wticonv.errors.ProblemError` that wticonv's API raises for the same.
    """
    check_geometry(stride, padding, dilation, groups, layer, direction)
    n, c, h, w = _shape(x_shape, "input", "N x C x H x W", layer, direction)
    k, cg, r, s = _shape(w_shape, "weight", "K x C/groups x R x S", layer, direction)
    if cg * groups != c:
        _fail(TensorError(f"input has C={c} channels but weight {tuple(w_shape)} with "
                          f"groups={groups} expects C = weight.shape[1] * groups = "
                          f"{cg * groups}"), layer, direction)
    if k % groups != 0:
        _fail(ProblemError(f"invalid problem: groups={groups} must divide k={k} "
                           "(k % groups == 0)"), layer, direction)
    for axis, size, filt, dil, before, after in (
            ("h", h, r, dilation[0], padding[0], padding[2]),
            ("w", w, s, dilation[1], padding[1], padding[3])):
        span = dil * (filt - 1) + 1
        if size + before + after < span:
            _fail(ProblemError(
                f"invalid problem: output {axis} size < 1: the dilated filter spans {span} "
                f"pixels ({'r' if axis == 'h' else 's'}={filt}, dilation_{axis}={dil}) but "
                f"the padded input is only {size + before + after} ({axis}={size}, padding "
                f"{before} and {after}); enlarge the padding or shrink the filter"),
                layer, direction)
    ho, wo = output_hw(h, w, r, s, stride, padding, dilation)
    if bias_shape is not None and (len(bias_shape) != 1 or bias_shape[0] != k):
        _fail(TensorError(f"bias must have shape ({k},) (K), got {tuple(bias_shape)}"), layer,
              direction)
    out = (n, k, ho, wo)
    if dy_shape is not None and (len(dy_shape) != 4 or any(
            dy_shape[i] != out[i] for i in range(4))):
        _fail(TensorError(f"grad_output has shape {tuple(dy_shape)} but the convolution "
                          f"produces {out} (N, K, Ho, Wo)"), layer, direction)
    return out
