"""Find-db keys in MIOpen's format, written and parsed.

Format (MIOpen ``src/conv/problem_description.cpp``, ``ProblemDescription::Serialize``)::

    InC-InH-InW-RxS-OutC-OutH-OutW-N-PadHxPadW-StrideHxStrideW-DilHxDilW-Bias-Layout-Type-Dir[_gG]

"In" is x for the forward direction and y for the two backward directions (MIOpen
builds its backward problem descriptions with x and y swapped), so a backward key starts
with K, Ho, Wo. ``Dir`` is ``F``, ``B`` or ``W``; ``_gG`` follows when groups > 1. wticonv
writes bias 0 (bias is applied outside the convolution) and accepts 0 or 1 when parsing.
"""

from __future__ import annotations

import re

from wticonv.errors import KeyFormatError

__all__ = ["format_key", "parse_key_fields"]

_DIR_LETTER = {"fwd": "F", "bwd": "B", "wrw": "W"}
_KEY_RE = re.compile(
    r"^(?P<ic>\d+)-(?P<ih>\d+)-(?P<iw>\d+)-(?P<r>\d+)x(?P<s>\d+)-(?P<oc>\d+)-(?P<oh>\d+)-"
    r"(?P<ow>\d+)-(?P<n>\d+)-(?P<ph>\d+)x(?P<pw>\d+)-(?P<sh>\d+)x(?P<sw>\d+)-"
    r"(?P<dh>\d+)x(?P<dw>\d+)-(?P<bias>[01])-(?P<layout>[A-Za-z]+)-(?P<type>[A-Za-z0-9]+)-"
    r"(?P<dir>[FBW])(?:_g(?P<g>\d+))?$"
)
_EXAMPLE = "64-56-56-3x3-64-56-56-16-1x1-1x1-1x1-0-NCHW-FP32-F"


def format_key(p) -> str:
    """Return the MIOpen-format find-db key of problem ``p`` (a
    :class:`~wticonv.problem.conv.ConvProblem`; see module docstring)."""
    if p.direction == "fwd":
        head = f"{p.c}-{p.h}-{p.w}-{p.r}x{p.s}-{p.k}-{p.ho}-{p.wo}"
    else:
        head = f"{p.k}-{p.ho}-{p.wo}-{p.r}x{p.s}-{p.c}-{p.h}-{p.w}"
    key = (f"{head}-{p.n}-{p.pad_h}x{p.pad_w}-{p.stride_h}x{p.stride_w}-"
           f"{p.dilation_h}x{p.dilation_w}-0-{p.layout}-{p.dtype.upper()}-"
           f"{_DIR_LETTER[p.direction]}")
    if p.groups != 1:
        key += f"_g{p.groups}"
    return key


def parse_key_fields(key: str) -> tuple[dict, tuple[int, int], str]:
    """The fields of a find-db key: ``(fields, (ho, wo), text)``, where ``fields`` are
    :class:`~wticonv.problem.conv.ConvProblem`'s keyword arguments, ``(ho, wo)`` the
    output size the key states (for the caller to check against the computed one) and
    ``text`` the stripped key. :func:`wticonv.problem.parse_key` builds the problem.

    Raises
    ------
    KeyFormatError
        If the text does not follow the format.
    """
    text = str(key).strip()
    m = _KEY_RE.match(text)
    if m is None:
        raise KeyFormatError(
            f"cannot parse find-db key {text!r}: expected MIOpen's format "
            f"C-H-W-RxS-K-Ho-Wo-N-PHxPW-UxV-LxJ-BIAS-LAYOUT-TYPE-DIR[_gG], e.g. {_EXAMPLE}")
    g = {name: (int(v) if v is not None and v.isdigit() else v)
         for name, v in m.groupdict().items()}
    direction = {"F": "fwd", "B": "bwd", "W": "wrw"}[g["dir"]]
    if direction == "fwd":
        c, h, w, k, ho, wo = g["ic"], g["ih"], g["iw"], g["oc"], g["oh"], g["ow"]
    else:
        k, ho, wo, c, h, w = g["ic"], g["ih"], g["iw"], g["oc"], g["oh"], g["ow"]
    fields = dict(n=g["n"], c=c, h=h, w=w, k=k, r=g["r"], s=g["s"], pad_h=g["ph"],
                  pad_w=g["pw"], stride_h=g["sh"], stride_w=g["sw"], dilation_h=g["dh"],
                  dilation_w=g["dw"], groups=g["g"] if g["g"] is not None else 1,
                  direction=direction, dtype=str(g["type"]).lower(), layout=g["layout"])
    return fields, (ho, wo), text
