"""The device tensors a solver's ``run`` hook receives."""

from __future__ import annotations

from typing import Any, NamedTuple

__all__ = ["ConvTensors"]


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
