"""The convolution problem: one 2-D convolution, described as MIOpen describes it.

A :class:`ConvProblem` always holds the *forward* geometry (input x of shape N x C x H x W,
filter w of shape K x C/groups x R x S, output y of shape N x K x Ho x Wo) plus the
direction to compute:

- ``fwd``: y = conv(x, w)
- ``bwd``: dx from dy and w (backward data)
- ``wrw``: dw from x and dy (backward weights)

Output size (the usual definition, e.g. MIOpen's ``ConvolutionDescriptor`` and PyTorch's
``Conv2d`` documentation)::

    Ho = floor((H + 2*pad_h - dilation_h*(R - 1) - 1) / stride_h) + 1
    Wo = floor((W + 2*pad_w - dilation_w*(S - 1) - 1) / stride_w) + 1
"""

from __future__ import annotations

import dataclasses
import functools
import operator
from dataclasses import dataclass

from wticonv.errors import KeyFormatError, ProblemError
from wticonv.problem.keys import format_key, parse_key_fields

__all__ = ["ConvProblem", "DIRECTIONS", "normalize_direction", "output_size", "parse_key"]

def output_size(axis: str, size: int, pad: int, filt: int, dil: int, stride: int) -> int:
    """Ho (``axis`` "h") or Wo ("w") of a picture ``size`` pixels long (0 allowed) with
    ``pad`` on each side, a ``filt``-tap filter dilated by ``dil`` and ``stride``.

    Raises
    ------
    ProblemError
        If the dilated filter is longer than the padded picture (an output below 1).
    """
    span = dil * (filt - 1) + 1
    if size + 2 * pad < span:
        raise ProblemError(
            f"invalid problem: output {axis} size < 1: the dilated filter spans {span} "
            f"pixels ({'r' if axis == 'h' else 's'}={filt}, dilation_{axis}={dil}) but the "
            f"padded input is only {size + 2 * pad} ({axis}={size}, pad_{axis}={pad}); "
            "enlarge the padding or shrink the filter")
    return (size + 2 * pad - span) // stride + 1


#: Directions in the field's order: forward, backward data, backward weights.
DIRECTIONS = ("fwd", "bwd", "wrw")

_DIRECTION_ALIASES = {
    "fwd": "fwd", "f": "fwd", "forward": "fwd", "1": "fwd",
    "bwd": "bwd", "b": "bwd", "backward": "bwd", "backward_data": "bwd", "2": "bwd",
    "wrw": "wrw", "w": "wrw", "backward_weights": "wrw", "4": "wrw",
}
_DTYPE_ALIASES = {"fp32": "fp32", "float32": "fp32", "float": "fp32"}
_INT32_MAX = 2**31 - 1
_SIZE_FIELDS = ("n", "c", "h", "w", "k", "r", "s")


def normalize_direction(direction: str) -> str:
    """Return ``"fwd"``, ``"bwd"`` or ``"wrw"`` for any accepted spelling.

    Accepted: the canonical names, MIOpen's key letters ``F``/``B``/``W``, MIOpenDriver's
    ``-F`` values ``1``/``2``/``4``, and ``forward``/``backward_data``/``backward_weights``.

    Raises
    ------
    ProblemError
        If the spelling is unknown.
    """
    d = _DIRECTION_ALIASES.get(str(direction).strip().lower())
    if d is None:
        raise ProblemError(
            f"invalid problem: direction={direction!r} is unknown; use one of fwd, bwd, wrw")
    return d


@dataclass(frozen=True)
class ConvProblem:
    """One 2-D convolution problem (immutable, hashable).

    Parameters
    ----------
    n, c, h, w : int
        Batch size, input channels, input height and width (x is N x C x H x W).
    k, r, s : int
        Output channels, filter height and filter width (w is K x C/groups x R x S).
    pad_h, pad_w : int
        Zero padding added on both sides of each axis, in pixels (>= 0).
    stride_h, stride_w, dilation_h, dilation_w : int
        Filter stride and dilation per axis (>= 1).
    groups : int
        Number of groups; must divide both C and K. ``groups == C == K`` is depthwise.
    direction : str
        ``"fwd"``, ``"bwd"`` or ``"wrw"`` (aliases: see :func:`normalize_direction`).
    dtype : str
        Element type; only ``"fp32"`` is supported.
    layout : str
        Memory layout of x, w and y; only ``"NCHW"`` (packed, row-major) is supported.

    Raises
    ------
    ProblemError
        If any field breaks its rule; the message names the field, the value and the rule.
    """

    n: int
    c: int
    h: int
    w: int
    k: int
    r: int
    s: int
    pad_h: int = 0
    pad_w: int = 0
    stride_h: int = 1
    stride_w: int = 1
    dilation_h: int = 1
    dilation_w: int = 1
    groups: int = 1
    direction: str = "fwd"
    dtype: str = "fp32"
    layout: str = "NCHW"

    def __post_init__(self) -> None:
        def bad(field: str, rule: str) -> ProblemError:
            return ProblemError(
                f"invalid problem: {field}={getattr(self, field)!r} {rule}")

        for f in dataclasses.fields(self):
            if f.type != "int":
                continue
            v = getattr(self, f.name)
            if isinstance(v, bool) or not hasattr(v, "__index__"):
                raise bad(f.name, "must be an integer")
            object.__setattr__(self, f.name, int(v.__index__()))
        for name in _SIZE_FIELDS + ("stride_h", "stride_w", "dilation_h", "dilation_w",
                                    "groups"):
            if getattr(self, name) < 1:
                raise bad(name, "must be a positive integer (>= 1)")
        for name in ("pad_h", "pad_w"):
            if getattr(self, name) < 0:
                raise bad(name, "must not be negative (zero padding, in pixels)")
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.type == "int" and v > _INT32_MAX:
                raise bad(f.name, f"exceeds {_INT32_MAX}, the largest size a kernel argument holds")
        if self.c % self.groups:
            raise ProblemError(
                f"invalid problem: groups={self.groups} must divide c={self.c} "
                "(c % groups == 0)")
        if self.k % self.groups:
            raise ProblemError(
                f"invalid problem: groups={self.groups} must divide k={self.k} "
                "(k % groups == 0)")
        object.__setattr__(self, "direction", normalize_direction(self.direction))
        dt = _DTYPE_ALIASES.get(str(self.dtype).lower())
        if dt is None:
            raise bad("dtype", "is not supported; wticonv computes in fp32 only")
        object.__setattr__(self, "dtype", dt)
        if str(self.layout).upper() != "NCHW":
            raise bad("layout", "is not supported; wticonv uses packed NCHW tensors only")
        object.__setattr__(self, "layout", "NCHW")
        output_size("h", self.h, self.pad_h, self.r, self.dilation_h, self.stride_h)
        output_size("w", self.w, self.pad_w, self.s, self.dilation_w, self.stride_w)

    def __hash__(self) -> int:
        # The dataclass's hash of the fields, computed once: the solvers' plan caches are
        # keyed on the problem, and ranking a new one looks it up some 20 times.
        h = self.__dict__.get("_hash")
        if h is None:
            h = self.__dict__["_hash"] = hash(_fields_of(self))
        return h

    def __getstate__(self) -> dict:
        # str hashes differ between processes: a pickled problem recomputes its hash.
        return {k: v for k, v in self.__dict__.items() if k != "_hash"}

    # ----------------------------------------------------------------- derived sizes
    @functools.cached_property
    def ho(self) -> int:
        """Output height Ho (see module docstring)."""
        return (self.h + 2 * self.pad_h - self.dilation_h * (self.r - 1) - 1) // self.stride_h + 1

    @functools.cached_property
    def wo(self) -> int:
        """Output width Wo (see module docstring)."""
        return (self.w + 2 * self.pad_w - self.dilation_w * (self.s - 1) - 1) // self.stride_w + 1

    @property
    def x_shape(self) -> tuple[int, int, int, int]:
        """Shape of x (and dx): (N, C, H, W)."""
        return (self.n, self.c, self.h, self.w)

    @property
    def w_shape(self) -> tuple[int, int, int, int]:
        """Shape of w (and dw): (K, C/groups, R, S)."""
        return (self.k, self.c // self.groups, self.r, self.s)

    @property
    def y_shape(self) -> tuple[int, int, int, int]:
        """Shape of y (and dy): (N, K, Ho, Wo)."""
        return (self.n, self.k, self.ho, self.wo)

    @functools.cached_property
    def flops(self) -> int:
        """FLOPs of the direct algorithm, the same in every direction (computed once).

        ``2 * N * K * Ho * Wo * (C / groups) * R * S`` (one multiply and one add per filter
        tap). WTI and GFLOP/s figures are counted against this number.
        """
        return 2 * self.n * self.k * self.ho * self.wo * (self.c // self.groups) * self.r * self.s

    @property
    def direct_work(self) -> tuple[int, float]:
        """``(outputs, reduction)`` of the direction's direct product: how many output
        elements it computes and how long each one's sum is. fwd: N K Ho Wo outputs of
        C/g R S taps; bwd: N C H W of K/g R S / (stride_h stride_w) (the taps that meet a
        dy element); wrw: K C/g R S of N Ho Wo. Models of parallelism (the learned
        correction's features, direct.naive's GPU model) read it."""
        cg, kg = self.c // self.groups, self.k // self.groups
        if self.direction == "fwd":
            return self.n * self.k * self.ho * self.wo, cg * self.r * self.s
        if self.direction == "bwd":
            return (self.n * self.c * self.h * self.w,
                    kg * self.r * self.s / (self.stride_h * self.stride_w))
        return self.k * cg * self.r * self.s, self.n * self.ho * self.wo

    @property
    def is_depthwise(self) -> bool:
        """True when groups == C (each group sees one input channel)."""
        return self.groups == self.c and self.groups > 1

    # --------------------------------------------------------------------- variants
    def with_direction(self, direction: str) -> ConvProblem:
        """The same geometry in another direction."""
        return dataclasses.replace(self, direction=direction)

    def with_batch(self, n: int) -> ConvProblem:
        """The same problem with batch size ``n``."""
        return dataclasses.replace(self, n=n)

    # ------------------------------------------------------------------------ keys
    @property
    def key(self) -> str:
        """The find-db key, in MIOpen's format (``ProblemDescription::Serialize``).

        ``C-H-W-RxS-K-Ho-Wo-N-PHxPW-UxV-LxJ-BIAS-LAYOUT-TYPE-DIR`` then ``_gG`` when
        groups > 1. For ``bwd`` and ``wrw`` MIOpen's "in" tensor is y, so the first and
        third groups swap: ``K-Ho-Wo-RxS-C-H-W-...``. Example: ResNet-50's 3x3 layer at
        N=16, forward, is ``64-56-56-3x3-64-56-56-16-1x1-1x1-1x1-0-NCHW-FP32-F``.
        """
        return format_key(self)

    @classmethod
    def from_key(cls, key: str) -> ConvProblem:
        """Parse a find-db key (see :attr:`key`). Raises :class:`KeyFormatError`."""
        return parse_key(key)

    def describe(self) -> str:
        """A short human-readable summary, e.g. ``fwd 16x64x56x56 * 64x64x3x3 pad 1 stride 1``."""
        pad = f"{self.pad_h}" if self.pad_h == self.pad_w else f"{self.pad_h}x{self.pad_w}"
        st = (f"{self.stride_h}" if self.stride_h == self.stride_w
              else f"{self.stride_h}x{self.stride_w}")
        text = (f"{self.direction} {self.n}x{self.c}x{self.h}x{self.w} * "
                f"{self.k}x{self.c // self.groups}x{self.r}x{self.s} pad {pad} stride {st}")
        if self.dilation_h != 1 or self.dilation_w != 1:
            text += f" dilation {self.dilation_h}x{self.dilation_w}"
        if self.groups != 1:
            text += f" groups {self.groups}"
        return text


def parse_key(key: str) -> ConvProblem:
    """Parse a find-db key in MIOpen's format (:mod:`wticonv.problem.keys`) back into a
    :class:`ConvProblem`.

    Raises
    ------
    KeyFormatError
        If the text does not follow the format, names an unsupported layout or data type,
        or its output size disagrees with the size computed from the other fields.
    """
    fields, (ho, wo), text = parse_key_fields(key)
    try:
        p = ConvProblem(**fields)
    except ProblemError as e:
        raise KeyFormatError(f"find-db key {text!r} describes an {e}") from None
    if (p.ho, p.wo) != (ho, wo):
        raise KeyFormatError(
            f"find-db key {text!r} is inconsistent: its output size is {ho}x{wo} but the "
            f"input size, filter, padding, stride and dilation give {p.ho}x{p.wo}")
    return p


_FIELD_NAMES = tuple(f.name for f in dataclasses.fields(ConvProblem))
#: The fields' values in order (a C getter: hashing a new problem is on selection's path).
_fields_of = operator.attrgetter(*_FIELD_NAMES)
