"""``wticonv.torch.Conv2d`` (a drop-in :class:`torch.nn.Conv2d`) and :func:`replace_convs`."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from wticonv.errors import ArgumentError
from wticonv.handle import Handle
from wticonv.torch import functional
from wticonv.torch.handles import handle_id

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
        The device and selection cache; by default the calling thread's. The attribute
        ``wticonv_handle`` may be set later (None: the thread's again).
    cast : bool
        Compute float16, bfloat16 and float64 in float32 (see :func:`wticonv.torch.conv2d`);
        False: they are refused.
    name : str
        The name errors give (:func:`replace_convs` gives the module's path in the model).

    Raises
    ------
    ValueError
        As :class:`torch.nn.Conv2d` (e.g. an unknown ``padding_mode``), and a
        ``padding`` of four values (which only :func:`wticonv.torch.conv2d` takes).
    ArgumentError (a ValueError)
        ``handle`` is not a :class:`wticonv.Handle`, ``cast`` not a bool, ``name`` not a
        str.
    LayerInputError, LayerError
        In ``forward`` and ``backward``: see :func:`wticonv.torch.conv2d`.

    Notes
    -----
    Copies: :func:`copy.copy` and :func:`copy.deepcopy` (and so
    :func:`torch.nn.utils.fusion.fuse_conv_bn_eval`) keep the handle (a device resource:
    the copy shares it). Pickling (``pickle``, ``torch.save(model)``) leaves the handle
    out: the unpickled module runs on the calling thread's handle until
    ``wticonv_handle`` is set again. ``torch.fx.symbolic_trace`` records the convolution
    as one call of :func:`wticonv.torch.functional.conv2d_by_id`, and ``torch.compile``
    traces it without a graph break, with or without a handle.
    """

    def __init__(self, *args, handle: Handle | None = None, cast: bool = False,
                 name: str = "", **kwargs) -> None:
        _check_options(handle, cast, name)
        super().__init__(*args, **kwargs)
        if not isinstance(self.padding, str) and len(self.padding) != 2:
            raise ValueError(f"padding={self.padding!r}: Conv2d takes an int, a pair "
                             "(pad_h, pad_w), 'valid' or 'same', as torch.nn.Conv2d; "
                             "wticonv.torch.conv2d takes (top, left, bottom, right)")
        self._set_wticonv(handle, cast, name)

    def _set_wticonv(self, handle: Handle | None, cast: bool, name: str) -> None:
        _check_options(handle, cast, name)
        self.wticonv_handle = handle
        self.wticonv_cast = cast
        self.wticonv_name = name

    @property
    def wticonv_handle(self) -> Handle | None:
        """The :class:`wticonv.Handle` the convolutions run on (None: the calling
        thread's). Setting it checks it, and looks its id up once, outside any traced
        code: ``forward`` passes the id only."""
        return self.__dict__.get("_wticonv_handle")

    @wticonv_handle.setter
    def wticonv_handle(self, handle: Handle | None) -> None:
        hid = _handle_id(handle, "wticonv_handle")
        self.__dict__["_wticonv_handle"] = handle
        self.__dict__["_wticonv_hid"] = hid

    @property
    def wticonv_cast(self) -> bool:
        """Whether float16, bfloat16 and float64 are computed in float32 (``cast=``);
        setting it checks it is a bool."""
        return self.__dict__.get("_wticonv_cast", False)

    @wticonv_cast.setter
    def wticonv_cast(self, cast: bool) -> None:
        _check_options(None, cast, "", "Conv2d.wticonv_cast = ...; Conv2d")
        self.__dict__["_wticonv_cast"] = cast

    @property
    def wticonv_name(self) -> str:
        """The name errors give this layer (``name=``); setting it checks it is a str."""
        return self.__dict__.get("_wticonv_name", "")

    @wticonv_name.setter
    def wticonv_name(self, name: str) -> None:
        _check_options(None, False, name, "Conv2d.wticonv_name = ...; Conv2d")
        self.__dict__["_wticonv_name"] = name

    def __getstate__(self) -> dict:
        # pickle and torch.save: the handle (an OpenCL device) stays out.
        state = nn.Module.__getstate__(self)
        state["_wticonv_handle"], state["_wticonv_hid"] = None, 0
        return state

    def __setstate__(self, state: dict) -> None:
        state = dict(state)
        state.pop("wticonv_handle", None)          # pickled before it was a property
        state.setdefault("_wticonv_handle", None)
        state.setdefault("_wticonv_hid", 0)
        super().__setstate__(state)

    # copy.copy and copy.deepcopy would go through __getstate__ (which leaves the handle
    # out); they keep it instead, and otherwise do what they do for any nn.Module.
    def __copy__(self) -> Conv2d:
        new = type(self).__new__(type(self))
        new.__setstate__(nn.Module.__getstate__(self))
        return new

    def __deepcopy__(self, memo: dict) -> Conv2d:
        new = type(self).__new__(type(self))
        memo[id(self)] = new
        new.__setstate__(copy.deepcopy(nn.Module.__getstate__(self), memo))
        return new

    @classmethod
    def from_conv(cls, conv: nn.Conv2d, *, handle: Handle | None = None, cast: bool = False,
                  name: str = "") -> Conv2d:
        """A :class:`Conv2d` that shares ``conv``'s parameters, buffers and hooks (no copy:
        an optimizer made for ``conv`` keeps training it).

        Raises
        ------
        ArgumentError
            As the constructor.
        """
        _check_options(handle, cast, name)
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
        return functional.conv2d_by_id(input, weight, bias, self.stride, padding,
                                       self.dilation, self.groups, self.wticonv_cast,
                                       self.wticonv_name, self._wticonv_hid)

    def extra_repr(self) -> str:
        extra = ", wticonv=True"
        if self.wticonv_name:
            extra += f", name={self.wticonv_name!r}"
        if self.wticonv_cast:
            extra += ", cast=True"
        if self.wticonv_handle is not None:
            extra += ", handle=set"
        return super().extra_repr() + extra


def _handle_id(handle, what: str) -> int:
    try:
        return handle_id(handle)
    except ArgumentError as e:
        raise ArgumentError(f"wticonv.torch: {what}: {e}") from None


def _check_options(handle, cast, name, where: str = "Conv2d") -> None:
    """The keyword arguments of Conv2d and replace_convs, checked at once (not at the
    first forward).

    Raises
    ------
    ArgumentError
        ``handle`` is not a :class:`wticonv.Handle` (or None), ``cast`` not a bool,
        ``name`` not a str.
    """
    _handle_id(handle, f"{where}(handle=...)")
    if not isinstance(cast, bool):
        raise ArgumentError(f"wticonv.torch: {where}(cast={cast!r:.40}): cast must be True "
                            "or False")
    if not isinstance(name, str):
        raise ArgumentError(f"wticonv.torch: {where}(name={name!r:.40}): name must be a str "
                            "(the name errors give)")


@dataclass
class ReplaceReport:
    """What :func:`replace_convs` did.

    A module used at several places (``model.a is model.b``) is one module: each of its
    names is listed where the first one is (all in ``replaced``, or in ``left``, or in
    ``already``), and ``shared`` maps each later name to the first, which errors give.

    Attributes
    ----------
    replaced : list of str
        The names (paths in the model) of the convolutions now run by wticonv.
    left : dict
        Name -> why it was left alone (a subclass of nn.Conv2d, whose forward may
        differ; parameters that are not float32 without ``cast``; the model itself).
    already : list of str
        Those that were wticonv's Conv2d already.
    already_given : list of str
        What those layers took from this call: ``"cast=True"`` and ``"handle"`` where
        given (the other options of a layer already wticonv's stay as they were).
    shared : dict
        Name -> the first name of the same module, for every name but the first of a
        module found at several places.

    ``count`` counts modules, ``len(replaced)`` names: a module at three places is one
    of ``count`` and three of ``replaced``.
    """

    replaced: list[str] = field(default_factory=list)
    left: dict[str, str] = field(default_factory=dict)
    already: list[str] = field(default_factory=list)
    already_given: list[str] = field(default_factory=list)
    shared: dict[str, str] = field(default_factory=dict)

    @property
    def count(self) -> int:
        """How many convolutions (modules, each counted once) were replaced."""
        return sum(1 for name in self.replaced if name not in self.shared)

    def __str__(self) -> str:
        left = [name for name in self.left if name not in self.shared]
        already = [name for name in self.already if name not in self.shared]
        lines = [f"wticonv.torch.replace_convs: {self.count} replaced, {len(left)} left "
                 f"alone, {len(already)} already wticonv's"
                 + (f" (given {' and '.join(self.already_given)})"
                    if already and self.already_given else "")]
        lines += [f"  left alone: {name or '(the model)'}: {self.left[name]}" for name in left]
        places: dict[str, list[str]] = {}
        for name, first in self.shared.items():
            places.setdefault(first, [first]).append(name)
        lines += [f"  one module at {len(names)} places: {', '.join(names)} (errors name it "
                  f"{names[0]!r})" for names in places.values()]
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


def _give(conv: Conv2d, name: str, cast: bool, handle: Handle | None) -> None:
    """What :func:`replace_convs` asks of a layer that is wticonv's already: its path as
    its name if it has none, ``cast`` when True, ``handle`` when given."""
    if not conv.wticonv_name and name:     # built unnamed: errors name its path
        conv.wticonv_name = name
    if cast:                               # asked for again: the layer takes it
        conv.wticonv_cast = True
    if handle is not None:
        conv.wticonv_handle = handle


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
        For every replaced layer; by default the calling thread's. Given, the layers
        that were wticonv's already take it too.
    cast : bool
        See :class:`Conv2d`. True: the layers that were wticonv's already take it too (a
        model replaced earlier, then converted with ``.half()`` or ``.double()``).

    Returns
    -------
    ReplaceReport

    Raises
    ------
    TypeError
        ``model`` is not a :class:`torch.nn.Module`.
    ArgumentError (a ValueError)
        ``handle`` is not a :class:`wticonv.Handle`, or ``cast`` not a bool (checked
        before the model is changed).
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"replace_convs needs a torch.nn.Module, got {type(model).__name__}")
    _check_options(handle, cast, "", "replace_convs")
    report = ReplaceReport()
    given = (["cast=True"] if cast else []) + (["handle"] if handle is not None else [])
    if isinstance(model, Conv2d):        # wticonv's already: it takes what was asked
        _give(model, "", cast, handle)
        report.already.append("")
        report.already_given = given
        return report
    if isinstance(model, nn.Conv2d):
        report.left[""] = ("the model itself is a Conv2d and cannot be replaced in place; "
                           "use wticonv.torch.Conv2d.from_conv(model)")
        return report
    first: dict[int, str] = {}            # id of a convolution seen -> its first name
    done: dict[int, nn.Module] = {}       # id of a replaced nn.Conv2d -> its Conv2d
    for parent_name, parent in list(model.named_modules(remove_duplicate=False)):
        for child_name, child in list(parent._modules.items()):   # with repeats
            if child is None or not isinstance(child, nn.Conv2d):
                continue
            name = f"{parent_name}.{child_name}" if parent_name else child_name
            seen = first.get(id(child))
            if seen is not None:          # one module, at another place
                if id(child) in done:
                    setattr(parent, child_name, done[id(child)])
                report.shared[name] = seen
                if seen in report.left:
                    report.left[name] = report.left[seen]
                else:
                    (report.replaced if seen in report.replaced else report.already).append(
                        name)
                continue
            first[id(child)] = name
            if isinstance(child, Conv2d):
                _give(child, name, cast, handle)
                report.already.append(name)
                continue
            why = _refusal(child, cast)
            if why is not None:
                report.left[name] = why
                continue
            new = Conv2d.from_conv(child, handle=handle, cast=cast, name=name)
            done[id(child)] = new
            first[id(new)] = name
            setattr(parent, child_name, new)
            report.replaced.append(name)
    if report.already:
        report.already_given = given
    return report
