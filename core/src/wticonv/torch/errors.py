"""The errors of :mod:`wticonv.torch`: what wticonv refuses, as PyTorch reports it.

PyTorch's own convolutions raise :class:`RuntimeError` for arguments that do not fit
(wrong channels, dtype, output size below 1). :class:`LayerError` is one, and names the
layer (the module name that :func:`wticonv.torch.replace_convs` gave it, or the ``name=``
of :class:`wticonv.torch.Conv2d`) and the direction; the wticonv error is its
``__cause__``. :class:`LayerInputError` (also a :class:`ValueError`, as wticonv's input
errors are) is raised for bad input: shapes, dtypes, geometry, arguments.
"""

from __future__ import annotations

import torch

from wticonv.errors import WticonvError

__all__ = ["LayerError", "LayerInputError", "layer_error"]

_DIRECTION = {"fwd": "forward", "bwd": "backward data", "wrw": "backward weights"}


class LayerError(RuntimeError):
    """wticonv could not run a layer's convolution.

    Attributes
    ----------
    layer : str
        The layer's name ("" when it has none).
    direction : str
        ``"fwd"``, ``"bwd"`` or ``"wrw"``.
    """

    def __init__(self, message: str, layer: str = "", direction: str = "fwd") -> None:
        super().__init__(message)
        self.layer = layer
        self.direction = direction


class LayerInputError(LayerError, ValueError):
    """A layer's tensors or arguments are refused (shape, dtype, geometry, arguments)."""


def _where(layer: str, direction: str) -> str:
    name = f"layer {layer!r}" if layer else "an unnamed layer"
    return f"wticonv.torch: {name} ({_DIRECTION.get(direction, direction)})"


# torch.compile does not trace the making of these errors (a graph break, so that without
# fullgraph the error is raised by the code run eagerly, as it is); with fullgraph=True,
# Dynamo reports the break with this reason.
_UNTRACED = ("wticonv.torch refuses this convolution; run it without fullgraph=True (or "
             "eagerly) to see its LayerInputError")


def _untraced(fn):
    try:
        return torch.compiler.disable(fn, reason=_UNTRACED)
    except TypeError:                   # a torch whose disable() takes no reason
        return torch.compiler.disable(fn)


@_untraced
def layer_error(e: Exception, layer: str, direction: str) -> LayerError:
    """``e`` (a :class:`wticonv.WticonvError`) as the :class:`LayerError` to raise from it:
    :class:`LayerInputError` for wticonv's input errors (ValueError subclasses)."""
    cls = LayerInputError if isinstance(e, ValueError) else LayerError
    kind = type(e).__name__ if isinstance(e, WticonvError) else "error"
    return cls(f"{_where(layer, direction)}: {kind}: {e}", layer, direction)


@_untraced
def input_error(message: str, layer: str, direction: str = "fwd") -> LayerInputError:
    """A :class:`LayerInputError` with ``message`` and the layer's name in front."""
    return LayerInputError(f"{_where(layer, direction)}: {message}", layer, direction)
