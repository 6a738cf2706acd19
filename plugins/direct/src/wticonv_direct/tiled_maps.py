"""The affine index maps of direct.tiled (:class:`Maps`): every direction as the blocked
sum ``out(m, p) = sum_q A(m, q) * B(q, p)`` that kernels/tiled_gpu.cl and tiled_cpu.cl
compute, with the offsets of A, the gathered source of B and the output per index (see
the header of tiled_gpu.cl for the formulas). Backward data at stride > 1 is one map per
stride phase. Planning (tiled_plan.py) reads them.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from functools import lru_cache

__all__ = ["Maps", "maps"]


@dataclass(frozen=True)
class Maps:
    """The affine index maps of one launch (names as in tiled_gpu.cl's header).

    ``a``, ``s`` and ``o`` name the buffers (``"x"``, ``"w"``, ``"y"`` or ``"ws"``) that
    play A, S (the gathered source of B) and the output. All offsets are in elements.
    """

    a: str
    s: str
    o: str
    M: int
    P: int
    P1: int
    P2: int
    Q: int
    Q1: int
    Q2: int
    G: int
    a_g: int
    a_0: int
    a_ms: int
    a_qa: int
    a_qb: int
    a_qc: int
    SH: int
    SW: int
    s_g: int
    s_pa: int
    s_qa: int
    hp: int
    h0: int
    hq: int
    wp: int
    w0: int
    wq: int
    o_g: int
    o_ms: int
    o_pa: int
    o_pb: int
    o_pc: int
    o_0: int


_FIELDS = tuple(f.name for f in dataclasses.fields(Maps))


def _new_maps(*values) -> Maps:
    """``Maps(*values)`` without the frozen dataclass's 34 ``__setattr__`` calls (a third
    of the time: selection plans every new problem's maps)."""
    mp = object.__new__(Maps)
    mp.__dict__.update(zip(_FIELDS, values, strict=True))
    return mp


def _bwd_taps(phase: int, pad: int, stride: int, dil: int, taps: int):
    """Filter taps r = r0 + t*step that reach dx positions phase + i*stride, and the dy
    offset of tap t: oh = i + d0 + t*dq. Returns (count, d0, dq, r0, step)."""
    step = stride // math.gcd(stride, dil)
    r0 = next((r for r in range(min(taps, step)) if (phase + pad - r * dil) % stride == 0),
              None)
    if r0 is None:
        return 0, 0, 0, 0, step
    count = (taps - r0 + step - 1) // step
    return count, (phase + pad - r0 * dil) // stride, -(step * dil) // stride, r0, step


#: Maps of one image per geometry (every field of the problem but N): see :func:`maps`.
_ONE_IMAGE: dict[tuple, tuple[Maps, ...]] = {}


@lru_cache(maxsize=4096)
def maps(p) -> tuple[Maps, ...]:
    """The launches' index maps for problem ``p``: one for fwd and wrw, one per non-empty
    stride phase for bwd (stride_h x stride_w at most). Cached per problem; a new batch
    size of a known geometry copies the maps of one image, N times the one field that
    counts images (P for fwd and bwd, Q for wrw: the same int :func:`_maps` computes)."""
    key = (p.c, p.h, p.w, p.k, p.r, p.s, p.pad_h, p.pad_w, p.stride_h, p.stride_w,
           p.dilation_h, p.dilation_w, p.groups, p.direction)
    one = _ONE_IMAGE.get(key)
    if one is None:
        if len(_ONE_IMAGE) >= 4096:
            _ONE_IMAGE.clear()
        one = _ONE_IMAGE[key] = tuple(_maps(p, 1))
    field, n, out = "Q" if p.direction == "wrw" else "P", p.n, []
    for mp in one:
        new = object.__new__(Maps)
        d = new.__dict__
        d.update(mp.__dict__)
        d[field] = n * d[field]
        out.append(new)
    return tuple(out)


def _maps(p, n: int) -> list[Maps]:
    """The maps of ``p`` with batch size ``n`` (every other size from ``p``)."""
    cg, kg, g = p.c // p.groups, p.k // p.groups, p.groups
    rs, hw, ohw = p.r * p.s, p.h * p.w, p.ho * p.wo
    if p.direction == "fwd":
        return [_new_maps("w", "x", "y", kg, n * ohw, p.ho, p.wo, cg * rs, p.r, p.s, g,
                          kg * cg * rs, 0, cg * rs, rs, p.s, 1,
                          p.h, p.w, cg * hw, p.c * hw, hw,
                          p.stride_h, -p.pad_h, p.dilation_h, p.stride_w, -p.pad_w, p.dilation_w,
                          kg * ohw, ohw, p.k * ohw, p.wo, 1, 0)]
    if p.direction == "wrw":
        return [_new_maps("y", "x", "w", kg, cg * rs, p.r, p.s, n * ohw, p.ho, p.wo, g,
                          kg * ohw, 0, ohw, p.k * ohw, p.wo, 1,
                          p.h, p.w, cg * hw, hw, p.c * hw,
                          p.dilation_h, -p.pad_h, p.stride_h, p.dilation_w, -p.pad_w, p.stride_w,
                          kg * cg * rs, cg * rs, rs, p.s, 1, 0)]
    out = []
    for a in range(p.stride_h):
        hp_ = (p.h - a + p.stride_h - 1) // p.stride_h
        if hp_ <= 0:
            continue
        rv, dh0, dhq, r0, rstep = _bwd_taps(a, p.pad_h, p.stride_h, p.dilation_h, p.r)
        for b in range(p.stride_w):
            wp_ = (p.w - b + p.stride_w - 1) // p.stride_w
            if wp_ <= 0:
                continue
            sv, dw0, dwq, s0, sstep = _bwd_taps(b, p.pad_w, p.stride_w, p.dilation_w, p.s)
            out.append(_new_maps("w", "y", "x", cg, n * hp_ * wp_, hp_, wp_,
                                 kg * rv * sv, max(rv, 1), max(sv, 1), g,
                                 kg * cg * rs, r0 * p.s + s0, rs, cg * rs, rstep * p.s, sstep,
                                 p.ho, p.wo, kg * ohw, p.k * ohw, ohw,
                                 1, dh0, dhq, 1, dw0, dwq,
                                 cg * hw, hw, p.c * hw, p.stride_h * p.w, p.stride_w,
                                 a * p.w + b))
    return out
