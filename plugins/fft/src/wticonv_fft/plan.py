"""Launch plans of the FFT solver: tile transforms (kernels/fft.cl) around one real
batched GEMM per frequency bin (wticonv-gemm's SGEMM).

A T x T tile's real 2-D DFT has ``bins(T) = T * (T/2 + 1)`` distinct bins. A complex
product per bin is one real GEMM on block matrices: with X = Xr + i Xi (channels x tiles)
and a filter spectrum W, conj(W) X = [[Wr, Wi], [-Wi, Wr]] [Xr; Xi] (rows: the real
then the imaginary parts of the outputs). So every direction is a batched SGEMM over
the bins, 4x the real multiply-adds of one complex GEMM, which the SGEMM (and on NVIDIA
GPUs with tensor cores its 3xTF32 kernel) runs at its best tiles.

Every direction is a pass of this method (Mathieu, Henaff & LeCun 2014, "Fast training of
convolutional networks through FFTs"; overlap-save tiling as in Vasilache et al. 2015,
"Fast convolutional nets with fbfft"):

- fwd: tiles of x (I = C input channels), filter w, output y (O = K): each T x T input
  tile gives the first (T-R+1) x (T-S+1) outputs of its circular correlation exactly;
- bwd: tiles of dy (I = K), the filter flipped and transposed, output dx (O = C), tile
  origin pad - (R-1) (the backward-data pass of a stride-1 convolution is a forward one);
- wrw: tiles of x and of dy (dy's (T-R+1) x (T-S+1) block zero-padded to T x T), a GEMM
  reducing over the tiles per bin (conj(DY) X), then the inverse DFT at the R x S taps.

Workspace layout (floats, regions 16-byte aligned): fwd/bwd [U | V | M], U the filters'
block matrices (4 O I per bin), V the input tiles' spectra (2 I per tile and bin), M the
outputs' (2 O per tile and bin); wrw [V | Z | dW | split-K partial sums], Z dy's spectra
in the two block rows (4 O per tile and bin), dW 2 O I per bin. V, M and Z hold one chunk
of images.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from wticonv.runtime.kit import KernelLibrary, Launch
from wticonv.runtime.kit import round_up as _round
from wticonv_gemm import sgemm

__all__ = ["KERNELS", "TILES", "TRANSFORM_COST", "FILTER_EFFICIENCY", "Pass", "Layout", "bins",
           "pass_of", "workspace_layout", "one_image_bytes", "plan", "index_limit_reason",
           "tile_options"]

_F32 = 4
_SRC = "fft.cl"
#: The plugin's kernel files (kernels/*.cl).
KERNELS = KernelLibrary("wticonv_fft")
#: Tile sides the kernels are built for (powers of two: the radix-2 transforms).
TILES = (8, 16, 32)
#: Work-items per work-group of the tile transforms (FFT_PAIRS tiles x T rows), by kind
#: and tile side. (512 on GPUs for T = 8 and 16, more tiles per group, measured 0-50 %
#: slower on the H200 than 256.)
_GROUP = {"cpu": {8: 64, 16: 64, 32: 64}, "gpu": {8: 256, 16: 256, 32: 256}}
_LOCAL = {"cpu": 16, "gpu": 64}       # work-group of the filter kernels
_INT32 = 2**31 - 1
#: Cost of the tile transforms (fft_tiles, ifft_tiles) as a multiple of their traffic
#: (each float of the picture and of the spectra read or written once, at the measured
#: bandwidth), by device kind, kernel and tile side; their butterflies hide under it. The
#: factors are above 1 because the reads gather overlapping tiles and the writes scatter
#: one value per bin, FFT_PAIRS tiles contiguous (fewer at larger T). Fitted
#: by tools/fit_fft_costs.py to per-launch times of benchmarks/fft_launches.py on the
#: calibration probes and the development networks (docs/wti-models.md, "FFT").
TRANSFORM_COST = {
    "gpu": {"fft_tiles": {8: 1.42, 16: 1.32, 32: 2.31},
            "ifft_tiles": {8: 1.23, 16: 3.39, 32: 6.4}},
    "cpu": {"fft_tiles": {8: 8.21, 16: 14.1, 32: 14.6},
            "ifft_tiles": {8: 6.73, 16: 11.8, 32: 14.9}},
}
#: Efficiency (fraction of the FP32 peak) of the filter transforms (fft_filter,
#: fft_filter_grad): direct sums over the taps and bins, separable by axis, in scalar code;
#: their traffic (filters and spectra once) is charged as well. Fitted as TRANSFORM_COST.
FILTER_EFFICIENCY = {
    "gpu": {"fft_filter": 0.168, "fft_filter_grad": 0.093},
    "cpu": {"fft_filter": 0.053, "fft_filter_grad": 0.033},
}


def bins(t: int) -> int:
    """Distinct bins of a real t x t DFT: t rows of t/2 + 1 (Hermitian symmetry)."""
    return t * (t // 2 + 1)


def tile_options(t: int, kind: str) -> str:
    """Build options of the kernels for tile side ``t`` on a device of ``kind``."""
    return (f"-DFFT_T={t} -DFFT_LOG2T={t.bit_length() - 1} "
            f"-DFFT_PAIRS={_GROUP[kind][t] // t}")


@dataclass(frozen=True)
class Pass:
    """The sizes of a problem's FFT pass with tile side ``t``: I and O channels, the
    source picture (H, W) and the tiled picture (Ho, Wo: the output for fwd and bwd,
    dy for wrw), tile origin offsets, outputs per tile (mh, mw) and the filter's
    addressing for fwd/bwd (``w[wbase + o*so + i*si + r*sr + s*ss]``)."""

    t: int
    n: int
    I: int
    O: int
    H: int
    W: int
    Ho: int
    Wo: int
    R: int
    S: int
    org_h: int
    org_w: int
    wstrides: tuple[int, int, int, int, int]

    @property
    def mh(self) -> int:
        return self.t - self.R + 1

    @property
    def mw(self) -> int:
        return self.t - self.S + 1

    @property
    def tiles(self) -> tuple[int, int]:
        return -(-self.Ho // self.mh), -(-self.Wo // self.mw)

    @property
    def bins(self) -> int:
        return bins(self.t)


@functools.lru_cache(maxsize=4096)
def pass_of(p, t: int) -> Pass:
    """The FFT pass of problem ``p`` (stride 1, dilation 1, one group) with tile ``t``."""
    R, S = p.r, p.s
    if p.direction == "bwd":
        # dx[i] = sum_r dy[i + pad - (R-1) + r'] w[R-1-r'], over the flipped, transposed w
        return Pass(t, p.n, p.k, p.c, p.ho, p.wo, p.h, p.w, R, S, p.pad_h - (R - 1),
                    p.pad_w - (S - 1), ((R - 1) * S + S - 1, R * S, p.c * R * S, -S, -1))
    return Pass(t, p.n, p.c, p.k, p.h, p.w, p.ho, p.wo, R, S, -p.pad_h, -p.pad_w,
                (0, p.c * R * S, R * S, S, 1))


def _align(n: int) -> int:
    return -(-n // 4) * 4


@dataclass(frozen=True)
class Layout:
    """Workspace regions (float offsets) for chunks of ``nc`` images."""

    nc: int
    splits: int
    u_off: int
    v_off: int
    m_off: int
    dw_off: int
    part_off: int
    floats: int

    @property
    def bytes(self) -> int:
        return self.floats * _F32


def _images_per_term(kind: str, nc: int, tiles: int) -> int:
    """Images per batch term of the backward-weights GEMM: the whole chunk on CPUs; on
    GPUs the fewest (a divisor of nc) giving at least 32 tiles, so split-K has terms."""
    if kind == "cpu":
        return nc
    for q in range(1, nc + 1):
        if nc % q == 0 and q * tiles >= 32:
            return q
    return nc


def _layout(p, ps: Pass, nc: int, kind: str, cu: int) -> Layout:
    B, I, O = ps.bins, ps.I, ps.O
    th, tw = ps.tiles
    T = nc * th * tw
    if p.direction == "wrw":
        z_off = _align(B * I * 2 * T)
        dw_off = _align(z_off + B * 4 * O * T)
        part_off = _align(dw_off + B * 2 * O * I)
        splits = 1
        if kind != "cpu":
            q = _images_per_term(kind, nc, th * tw)
            splits = sgemm.gpu_splits(2 * O, I, 2 * q * th * tw, nc // q, B, cu)
        end = part_off + (splits * B * 2 * O * I if splits > 1 else 0)
        return Layout(nc, splits, 0, 0, z_off, dw_off, part_off, end)
    v_off = _align(B * 4 * O * I)
    m_off = _align(v_off + B * 2 * I * T)
    return Layout(nc, 1, 0, v_off, m_off, 0, 0, m_off + B * 2 * O * T)


def workspace_layout(p, t: int, kind: str, cu: int, room: int) -> Layout | None:
    """The layout with the most images per chunk whose workspace fits ``room`` bytes (and
    32-bit tile counts), or None if not even one image fits."""
    ps = pass_of(p, t)
    th, tw = ps.tiles
    hi = min(p.n, _INT32 // max(1, 4 * th * tw))
    if hi and _layout(p, ps, hi, kind, cu).bytes <= room:
        return _layout(p, ps, hi, kind, cu)
    lo = 0
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if _layout(p, ps, mid, kind, cu).bytes <= room:
            lo = mid
        else:
            hi = mid - 1
    return _layout(p, ps, lo, kind, cu) if lo else None


def one_image_bytes(p, t: int, kind: str, cu: int) -> int:
    """Workspace bytes of a one-image chunk (the least the solver can work with)."""
    return _layout(p, pass_of(p, t), 1, kind, cu).bytes


def index_limit_reason(p, t: int) -> str | None:
    """Why the kernels' 32-bit indices cannot address problem ``p`` with tile ``t`` (None
    when they can): filter pairs (O x I) and one image's tiles are counted in ints."""
    ps = pass_of(p, t)
    th, tw = ps.tiles
    if ps.O * ps.I > _INT32 // 4:
        return f"{ps.O} x {ps.I} filters pass 2^29 (the transforms index them in 32 bits)"
    if 4 * th * tw > _INT32:
        return f"one image has {th * tw} tiles, past 2^29 (32-bit tile indices)"
    return None


def _transform(kind: str, kernel: str, t: int, floats: int) -> dict:
    """The cost fields of a tile transform moving ``floats`` floats."""
    return {"bytes": round(_F32 * TRANSFORM_COST[kind][kernel][t] * floats)}


def plan(p, t: int, kind: str, cu: int, layout: Layout, vector_width: int = 16,
         math: str = "fp32") -> list[Launch]:
    """The launches of problem ``p`` with tile ``t`` in the workspace ``layout``; the
    batched multiply in numerical class ``math`` (:func:`wticonv_gemm.sgemm.gemm_launch`).
    Buffers: ``"x"``, ``"w"``, ``"y"`` and ``"ws"``."""
    ps = pass_of(p, t)
    B, I, O = ps.bins, ps.I, ps.O
    th, tw = ps.tiles
    opts = tile_options(t, kind)
    pairs = _GROUP[kind][t] // t
    local = _LOCAL[kind]
    eff = FILTER_EFFICIENCY[kind]
    i32, i64 = np.int32, np.int64
    out: list[Launch] = []
    if p.direction != "wrw":
        wbase, so, si, sr, ss = ps.wstrides
        out.append(KERNELS.launch(
            _SRC, "fft_filter", opts, (_round(O * I, local), t // 2 + 1), (local, 1),
            lambda: ("w", "ws", i64(layout.u_off), i32(O), i32(I), i32(p.r), i32(p.s),
                     i64(wbase), i64(so), i64(si), i64(sr), i64(ss)),
            flops=O * I * (t // 2 + 1) * p.r * (4 * p.s + 8 * t), efficiency=eff["fft_filter"],
            bytes=_F32 * (O * I * p.r * p.s + 4 * B * O * I)))
    src = {"fwd": "x", "bwd": "y", "wrw": "x"}[p.direction]
    dst = {"fwd": "y", "bwd": "x"}.get(p.direction)
    for n0 in range(0, p.n, layout.nc):
        nc = min(layout.nc, p.n - n0)
        T = nc * th * tw
        grid = (_round(T, pairs), t)
        if p.direction != "wrw":
            out.append(KERNELS.launch(
                _SRC, "fft_tiles", opts, grid + (I,), (pairs, t, 1),
                lambda n0=n0, nc=nc, T=T: (
                    src, i32(n0), i32(nc), i32(I), i32(ps.H), i32(ps.W), i32(th), i32(tw),
                    i32(ps.mh), i32(ps.mw), i32(ps.org_h), i32(ps.org_w), i32(t), i32(t),
                    "ws", i64(layout.v_off), i64(2 * I * T), i64(T), i64(I * T), i64(0),
                    i32(T), i32(0), i64(0)),
                **_transform(kind, "fft_tiles", t, nc * I * ps.H * ps.W + 2 * B * I * T)))
            op = sgemm.GemmOp(
                2 * O, T, 2 * I,
                a=sgemm.Operand("ws", off=layout.u_off, gs=4 * O * I, ms=2 * I, ks=1),
                b=sgemm.Operand("ws", off=layout.v_off, gs=2 * I * T, ks=T,
                                cols=sgemm.ColMap()),
                c=sgemm.Operand("ws", off=layout.m_off, gs=2 * O * T, ms=T,
                                cols=sgemm.ColMap()),
                groups=B)
            out.append(sgemm.gemm_launch(op, kind, cu, vector_width=vector_width, math=math))
            out.append(KERNELS.launch(
                _SRC, "ifft_tiles", opts, grid + (O,), (pairs, t, 1),
                lambda n0=n0, nc=nc, T=T: (
                    "ws", i64(layout.m_off), i64(2 * O * T), i64(T), i64(O * T), dst,
                    i32(n0), i32(nc), i32(O), i32(ps.Ho), i32(ps.Wo), i32(th), i32(tw),
                    i32(ps.mh), i32(ps.mw)),
                **_transform(kind, "ifft_tiles", t, 2 * B * O * T + nc * O * ps.Ho * ps.Wo)))
            continue
        # backward weights: rows of V (x, channel c) and Z (dy, channel k) hold the chunk's
        # tiles as batch terms of q images, each [real parts | imaginary parts]
        q = _images_per_term(kind, nc, th * tw)
        kt = q * th * tw
        out.append(KERNELS.launch(
            _SRC, "fft_tiles", opts, grid + (I,), (pairs, t, 1),
            lambda n0=n0, nc=nc, T=T, kt=kt: (
                "x", i32(n0), i32(nc), i32(I), i32(ps.H), i32(ps.W), i32(th), i32(tw),
                i32(ps.mh), i32(ps.mw), i32(ps.org_h), i32(ps.org_w), i32(t), i32(t),
                "ws", i64(layout.v_off), i64(2 * I * T), i64(2 * T), i64(kt), i64(2 * kt),
                i32(kt), i32(0), i64(0)),
            **_transform(kind, "fft_tiles", t, nc * I * ps.H * ps.W + 2 * B * I * T)))
        out.append(KERNELS.launch(
            _SRC, "fft_tiles", opts, grid + (O,), (pairs, t, 1),
            lambda n0=n0, nc=nc, T=T, kt=kt: (
                "y", i32(n0), i32(nc), i32(O), i32(ps.Ho), i32(ps.Wo), i32(th), i32(tw),
                i32(ps.mh), i32(ps.mw), i32(0), i32(0), i32(ps.mh), i32(ps.mw),
                "ws", i64(layout.m_off), i64(4 * O * T), i64(2 * T), i64(kt), i64(2 * kt),
                i32(kt), i32(1), i64(2 * O * T)),
            **_transform(kind, "fft_tiles", t, nc * O * ps.Ho * ps.Wo + 4 * B * O * T)))
        a = sgemm.Operand("ws", off=layout.m_off, gs=4 * O * T, bs=2 * kt, ms=2 * T, ks=1)
        b = sgemm.Operand("ws", off=layout.v_off, gs=2 * I * T, bs=2 * kt, ks=1,
                          cols=sgemm.ColMap.strided(2 * T))
        s = min(layout.splits, nc // q)
        dw = B * 2 * O * I
        if s > 1:
            c = sgemm.Operand("ws", off=layout.part_off, gs=2 * O * I, ms=I,
                              cols=sgemm.ColMap())
            op = sgemm.GemmOp(2 * O, I, 2 * kt, a=a, b=b, c=c, groups=B, nb=nc // q,
                              splits=s, c_ss=dw)
            out.append(sgemm.gemm_launch(op, kind, cu, vector_width=vector_width, math=math))
            out.append(sgemm.splitk_reduce_launch("ws", layout.part_off, "ws", dw, s,
                                                  int(n0 > 0), c_off=layout.dw_off))
        else:
            c = sgemm.Operand("ws", off=layout.dw_off, gs=2 * O * I, ms=I,
                              cols=sgemm.ColMap())
            op = sgemm.GemmOp(2 * O, I, 2 * kt, a=a, b=b, c=c, groups=B, nb=nc // q,
                              beta=int(n0 > 0))
            out.append(sgemm.gemm_launch(op, kind, cu, vector_width=vector_width, math=math))
    if p.direction == "wrw":
        out.append(KERNELS.launch(
            _SRC, "fft_filter_grad", opts, (_round(O * I, local), p.r), (local, 1),
            lambda: ("ws", i64(layout.dw_off), "w", i32(O), i32(I), i32(p.r), i32(p.s)),
            flops=O * I * p.r * (t // 2 + 1) * (8 * t + 4 * p.s),
            efficiency=eff["fft_filter_grad"],
            bytes=_F32 * (2 * B * O * I + O * I * p.r * p.s)))
    return out
