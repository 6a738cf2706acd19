"""wticonv from PyTorch: a custom op with autograd, a drop-in Conv2d, and replace_convs.

An optional extra (``pip install "wticonv[torch]"``); the root package ``wticonv`` does
not import it, so torch stays optional. docs/pytorch.md shows how to use it::

    import torch, torchvision, wticonv.torch
    model = torchvision.models.resnet18()
    print(wticonv.torch.replace_convs(model))   # every nn.Conv2d now runs on wticonv
    loss = model(torch.rand(2, 3, 224, 224)).sum()
    loss.backward()                              # backward data and weights: wticonv's

=================================  ================================================
``conv2d(input, weight, ...)``     :func:`torch.nn.functional.conv2d`, with autograd
``Conv2d(...)``                    :class:`torch.nn.Conv2d`
``replace_convs(model)``           swap a model's nn.Conv2d, in place; a report
``torch.ops.wticonv.conv2d``       the custom op (and ``conv2d_input``, ``conv2d_weight``)
``profile()``                      kernel, host and copy times of the convolutions
``thread_handle()``                the calling thread's :class:`wticonv.Handle`
=================================  ================================================
"""

from __future__ import annotations

from wticonv.torch.errors import LayerError, LayerInputError
from wticonv.torch.functional import conv2d
from wticonv.torch.handles import thread_handle
from wticonv.torch.modules import Conv2d, ReplaceReport, replace_convs
from wticonv.torch.ops import conv2d_input_op, conv2d_op, conv2d_weight_op
from wticonv.torch.timing import ConvTimes, profile

__all__ = ["conv2d", "Conv2d", "replace_convs", "ReplaceReport", "LayerError",
           "LayerInputError", "profile", "ConvTimes", "thread_handle", "conv2d_op",
           "conv2d_input_op", "conv2d_weight_op"]
