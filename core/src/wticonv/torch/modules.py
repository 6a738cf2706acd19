"""``wticonv.torch.Conv2d`` (a drop-in :class:`torch.nn.Conv2d`) and :func:`replace_convs`."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from wticonv.handle import Handle
from wticonv.torch.functional import conv2d

__all__ = ["Conv2d", "ReplaceReport", "replace_convs"]


class Conv2d(nn.Conv2d):
    """:class:`torch.nn.Conv2d` whose convolutions (forward and both gradients) run on
    wticonv.

    The constructor is ``torch.nn.Conv2d``'s (the same parameters, ``weight`` K x
    C/groups x R x S and ``bias`` of K, the same ``state_dict`` keys, so checkpoints load
    either way), plus three keyword-only arguments.

    Parameters
    ----------
    *args, **kwargs
        As :class:`torch.nn.Conv2d`. ``padding``: int, pair, ``"same"`` or ``"valid"``.
        ``padding_mode``: ``"zeros"`` is wticonv's own padding; ``"reflect"``,
        ``"replicate"`` and ``"circular"`` pad the input with :func:`torch.nn.functional.pad`
        first (a copy on the host, as torch itself does) and run an unpadded convolution.
    handle : wticonv.Handle, optional
        The device and selection cache; by default the calling thread's.
    cast : bool
        Compute other floating dtypes in float32 (see :func:`wticonv.torch.conv2d`);
        False: they are refused.
    name : str
        The name errors give (:func:`replace_convs` gives the module's path in the model).

    Raises
    ------
    ValueError
        As :class:`torch.nn.Conv2d` (e.g. an unknown ``padding_mode``).
    LayerInputError, LayerError
        In ``forward`` and ``backward``: see :func:`wticonv.torch.conv2d`.
    """

    def __init__(self, *args, handle: Handle | None = None, cast: bool = False,
                 name: str = "", **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._set_wticonv(handle, cast, name)

    def _set_wticonv(self, handle: Handle | None, cast: bool, name: str) -> None:
        self.wticonv_handle = handle
        self.wticonv_cast = bool(cast)
        self.wticonv_name = name

    @classmethod
    def from_conv(cls, conv: nn.Conv2d, *, handle: Handle | None = None, cast: bool = False,
                  name: str = "") -> Conv2d:
        """A :class:`Conv2d` that shares ``conv``'s parameters, buffers and hooks (no copy:
        an optimizer made for ``conv`` keeps training it)."""
        new = copy.copy(conv)
        new.__class__ = cls
        new._set_wticonv(handle, cast, name)
        return new

    def _conv_forward(self, input: torch.Tensor, weight: torch.Tensor,
                      bias: torch.Tensor | None) -> torch.Tensor:
        padding = self.padding
        if self.padding_mode != "zeros":
            input = F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode)
            padding = 0
        return conv2d(input, weight, bias, self.stride, padding, self.dilation, self.groups,
                      handle=self.wticonv_handle, cast=self.wticonv_cast,
                      layer=self.wticonv_name)

    def extra_repr(self) -> str:
        return super().extra_repr() + ", wticonv=True"


@dataclass
class ReplaceReport:
    """What :func:`replace_convs` did.

    Attributes
    ----------
    replaced : list of str
        The names (paths in the model) of the convolutions now run by wticonv.
    left : dict
        Name -> why it was left alone (a subclass of nn.Conv2d, whose forward may
        differ; parameters that are not float32 without ``cast``; the model itself).
    already : list of str
        Those that were wticonv's Conv2d already.
    """

    replaced: list[str] = field(default_factory=list)
    left: dict[str, str] = field(default_factory=dict)
    already: list[str] = field(default_factory=list)

    @property
    def count(self) -> int:
        """How many convolutions were replaced."""
        return len(self.replaced)

    def __str__(self) -> str:
        lines = [f"wticonv.torch.replace_convs: {self.count} replaced, {len(self.left)} left "
                 f"alone, {len(self.already)} already wticonv's"]
        lines += [f"  left alone: {name or '(the model)'}: {why}"
                  for name, why in self.left.items()]
        return "\n".join(lines)


def _refusal(conv: nn.Module, cast: bool) -> str | None:
    """Why ``conv`` (an nn.Conv2d) cannot be replaced, or None."""
    if type(conv) is not nn.Conv2d:
        return (f"{type(conv).__module__}.{type(conv).__qualname__} is a subclass of "
                "nn.Conv2d, whose forward may differ")
    if not cast:
        for pname, p in conv.named_parameters(recurse=False):
            if p.dtype != torch.float32:
                return f"its {pname} is {p.dtype}, not float32 (pass cast=True)"
    return None


def replace_convs(model: nn.Module, *, handle: Handle | None = None,
                  cast: bool = False) -> ReplaceReport:
    """Swap every :class:`torch.nn.Conv2d` of ``model`` for a :class:`Conv2d` sharing its
    parameters, in place.

    Each is named by its path in the model (``"layer1.0.conv1"``), which errors give. A
    module used at several places is replaced by one Conv2d everywhere. Subclasses of
    nn.Conv2d (their forward may differ), parameters that are not float32 (unless
    ``cast``) and ``model`` itself being a Conv2d are left alone, and said why.

    Parameters
    ----------
    model : torch.nn.Module
    handle : wticonv.Handle, optional
        For every replaced layer; by default the calling thread's.
    cast : bool
        See :class:`Conv2d`.

    Returns
    -------
    ReplaceReport

    Raises
    ------
    TypeError
        ``model`` is not a :class:`torch.nn.Module`.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"replace_convs needs a torch.nn.Module, got {type(model).__name__}")
    report = ReplaceReport()
    if isinstance(model, nn.Conv2d):
        report.left[""] = ("the model itself is a Conv2d and cannot be replaced in place; "
                           "use wticonv.torch.Conv2d.from_conv(model)")
        return report
    done: dict[int, nn.Module] = {}
    for parent_name, parent in list(model.named_modules(remove_duplicate=False)):
        for child_name, child in list(parent._modules.items()):   # with repeats
            name = f"{parent_name}.{child_name}" if parent_name else child_name
            if isinstance(child, Conv2d):
                if id(child) not in done:
                    report.already.append(name)
                continue
            if child is None or not isinstance(child, nn.Conv2d):
                continue
            if id(child) in done:
                setattr(parent, child_name, done[id(child)])
                continue
            why = _refusal(child, cast)
            if why is not None:
                report.left[name] = why
                continue
            new = Conv2d.from_conv(child, handle=handle, cast=cast, name=name)
            done[id(child)] = new
            done[id(new)] = new
            setattr(parent, child_name, new)
            report.replaced.append(name)
    return report
