"""Launch plans of the Winograd solvers: transforms (kernels/winograd.cl) plus the batched
multiply (wticonv-gemm's SGEMM, one GEMM per transformed position).

Every direction is a "forward-like" Winograd pass over some input tensor with some filter:

- fwd: input x (I = C/G channels per group), filter w, output y (O = K/G);
- bwd: input dy (I = K/G), the filter flipped and transposed, output dx (O = C/G), padding
  R-1-pad (the backward-data pass of a stride-1 convolution is a forward convolution);
- wrw: the input transform of x and the transform of dy's tiles, a GEMM reducing over the
  tiles, then the filter-gradient transform.

Filters other than RH x RW are cut into pieces (:class:`Piece`), each served by the same
transform, whose products are summed by the GEMM (the pieces' channels are stacked along
its reduction). Workspace layout (floats, each region 16-byte aligned):
fwd/bwd [U | V | M], wrw [V | Z | dU | split-K partial sums]; V, M and Z hold one chunk
of images.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from wticonv.runtime.kit import KernelLibrary, Launch
from wticonv.runtime.kit import round_up as _round
from wticonv_gemm import params as gemm_params
from wticonv_gemm import sgemm

from .transforms import winograd_transform

__all__ = ["KERNELS", "Variant", "Piece", "Geometry", "Layout", "geometry", "workspace_layout",
           "plan", "one_image_bytes", "pieces_table", "index_limit_reason"]

_F32 = 4
#: The transform kernels move data slower than a plain copy: on the development machines'
#: CPU (PoCL) they reached 8-15 GB/s of the 40 GB/s copy bandwidth, so the WTI model
#: charges their traffic 3x there; on the NVIDIA H200 they moved 1.6-5 TB/s (caches help)
#: against 4.2 TB/s for a copy, so 1x.
TRANSFORM_COST = {"cpu": 3, "gpu": 1}
_SRC = "winograd.cl"
#: CPU-only kernels (explicit vectors, work-groups of one); GPUs never build this file.
_SRC_CPU = "winograd_cpu.cl"
#: The plugin's kernel files (kernels/*.cl, with kernels/winograd_common.h spliced in).
KERNELS = KernelLibrary("wticonv_winograd")
_LOCAL = {"cpu": 64, "gpu": 256}
_INT32 = 2**31 - 1


@dataclass(frozen=True)
class Variant:
    """F(mh x mw, rh x rw): output tile and filter piece sizes per axis."""

    mh: int
    mw: int
    rh: int
    rw: int

    @property
    def ah(self) -> int:
        return self.mh + self.rh - 1

    @property
    def aw(self) -> int:
        return self.mw + self.rw - 1

    @property
    def positions(self) -> int:
        """Transformed positions per tile (AH x AW): the number of GEMMs."""
        return self.ah * self.aw

    @property
    def options(self) -> str:
        """Build options: sizes and the transform matrices (transforms.py)."""
        return _variant_options(self.mh, self.mw, self.rh, self.rw)


@functools.cache
def _variant_options(mh: int, mw: int, rh: int, rw: int) -> str:
    """Variant.options, computed once per variant (exact fractions to float text is slow,
    and selection asks for it on every new problem)."""
    def flat(t, name):
        return ",".join(f"{v!r}f" for row in t.floats(name) for v in row)

    th, tw = winograd_transform(mh, rh), winograd_transform(mw, rw)
    return (f"-DWINO_MH={mh} -DWINO_MW={mw} -DWINO_RH={rh} "
            f"-DWINO_RW={rw} -DWINO_BTH={flat(th, 'BT')} -DWINO_GH={flat(th, 'G')} "
            f"-DWINO_ATH={flat(th, 'AT')} -DWINO_BTW={flat(tw, 'BT')} "
            f"-DWINO_GW={flat(tw, 'G')} -DWINO_ATW={flat(tw, 'AT')}")


@dataclass(frozen=True)
class Piece:
    """A part of the filter served by one transform: taps (fr0 + fsh*a, fc0 + fsw*b) for
    a < RH, b < RW, whose input patch starts at row sh*(tile row) + offh (columns alike)."""

    fr0: int
    fc0: int
    fsh: int
    fsw: int
    offh: int
    offw: int


@dataclass(frozen=True)
class Geometry:
    """A forward-like Winograd pass: sizes per group, pieces, input sampling stride."""

    n: int
    groups: int
    I: int          # input channels per group
    O: int          # output channels per group
    H: int
    W: int
    Ho: int
    Wo: int
    R: int
    S: int
    sh: int
    sw: int
    pieces: tuple[Piece, ...]
    #: Input rows [0, hl) and columns [0, wl) are read; the rest of H x W reaches no output
    #: (a tile's transform would mix a NaN there into its outputs), so it reads as zero.
    hl: int = 0
    wl: int = 0

    def tiles(self, v: Variant) -> tuple[int, int]:
        return -(-self.Ho // v.mh), -(-self.Wo // v.mw)


def _axis_pieces(size: int, pad: int, r: int, stride: int) -> list[tuple[int, int, int]]:
    """(first tap, tap step, input offset) of the pieces along one axis."""
    if stride == 2:  # phases: even taps then odd taps, input sampled every 2nd pixel
        return [(ph, 2, ph - pad) for ph in range(2) if ph < size]
    return [(a0, 1, a0 - pad) for a0 in range(0, size, r)]


@functools.lru_cache(maxsize=4096)
def geometry(p, v: Variant) -> Geometry:
    """The forward-like pass of problem ``p`` (any direction) for variant ``v`` (cached:
    selection asks for it several times per solver)."""
    g = p.groups
    if p.direction == "bwd":  # dx = conv(dy, flipped w^T), padding R-1-pad
        ph, pw = p.r - 1 - p.pad_h, p.s - 1 - p.pad_w
        rows = _axis_pieces(p.r, ph, v.rh, 1)
        cols = _axis_pieces(p.s, pw, v.rw, 1)
        pieces = tuple(Piece(a, b, fa, fb, oa, ob) for a, fa, oa in rows for b, fb, ob in cols)
        # dx row i reads dy rows i + pad - (R-1) .. i + pad
        return Geometry(p.n, g, p.k // g, p.c // g, p.ho, p.wo, p.h, p.w, p.r, p.s, 1, 1,
                        pieces, min(p.ho, p.h + p.pad_h), min(p.wo, p.w + p.pad_w))
    rows = _axis_pieces(p.r, p.pad_h, v.rh, p.stride_h)
    cols = _axis_pieces(p.s, p.pad_w, v.rw, p.stride_w)
    pieces = tuple(Piece(a, b, fa, fb, oa, ob) for a, fa, oa in rows for b, fb, ob in cols)
    # output row i reads input rows stride*i - pad .. stride*i - pad + R-1
    hl = min(p.h, (p.ho - 1) * p.stride_h - p.pad_h + p.r)
    wl = min(p.w, (p.wo - 1) * p.stride_w - p.pad_w + p.s)
    return Geometry(p.n, g, p.c // g, p.k // g, p.h, p.w, p.ho, p.wo, p.r, p.s, p.stride_h,
                    p.stride_w, pieces, max(0, hl), max(0, wl))


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
    du_off: int
    part_off: int
    floats: int

    @property
    def bytes(self) -> int:
        return self.floats * _F32


def _layout(p, v: Variant, geo: Geometry, nc: int, kind: str, cu: int) -> Layout:
    A, G = v.positions, geo.groups
    th, tw = geo.tiles(v)
    T = nc * th * tw
    PI = len(geo.pieces) * geo.I
    if p.direction == "wrw":
        v_off = 0
        z_off = _align(v_off + A * G * PI * T)
        du_off = _align(z_off + A * G * geo.O * T)
        splits = 1
        if kind != "cpu":
            q = _images_per_term(kind, nc, th * tw)
            splits = sgemm.gpu_splits(geo.O, PI, q * th * tw, nc // q, A * G, cu)
        part_off = _align(du_off + A * G * geo.O * PI)
        end = part_off + (splits * A * G * geo.O * PI if splits > 1 else 0)
        return Layout(nc, splits, 0, v_off, z_off, du_off, part_off, end)
    u_off = 0
    v_off = _align(A * G * geo.O * PI)
    m_off = _align(v_off + A * G * PI * T)
    end = m_off + A * G * geo.O * T
    return Layout(nc, 1, u_off, v_off, m_off, 0, 0, end)


def workspace_layout(p, v: Variant, kind: str, cu: int, room: int) -> Layout | None:
    """The layout with the most images per chunk whose workspace fits ``room`` bytes (and
    32-bit tile counts), or None if not even one image fits."""
    geo = geometry(p, v)
    th, tw = geo.tiles(v)
    hi = min(p.n, _INT32 // max(1, th * tw))
    lo = 0
    if hi:
        whole = _layout(p, v, geo, hi, kind, cu)
        if kind == "cpu" or p.direction != "wrw":  # no split-K: the bytes grow with the chunk
            if whole.bytes <= room:
                return whole
        else:  # every chunk the search would try fits with the most partial sums: take hi
            s = sgemm.most_gpu_splits(geo.O, len(geo.pieces) * geo.I, v.positions * geo.groups, cu)
            du = v.positions * geo.groups * geo.O * len(geo.pieces) * geo.I
            if (whole.part_off + (s * du if s > 1 else 0)) * _F32 <= room:
                return whole
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if _layout(p, v, geo, mid, kind, cu).bytes <= room:
            lo = mid
        else:
            hi = mid - 1
    return _layout(p, v, geo, lo, kind, cu) if lo else None


def index_limit_reason(p, v: Variant) -> str | None:
    """Why the transform kernels' 32-bit indices cannot address problem ``p`` with variant
    ``v`` (None when they can): they count the filters (O x I per group), the transformed
    input channels (pieces x I) and one image's tiles in ints."""
    geo = geometry(p, v)
    th, tw = geo.tiles(v)
    if geo.O * geo.I > _INT32 or len(geo.pieces) * geo.I > _INT32:
        return (f"{geo.O} x {geo.I} filters per group pass 2^31 (the transforms index them "
                "in 32 bits)")
    if th * tw > _INT32:
        return f"one image has {th * tw} tiles, past 2^31 (32-bit tile indices)"
    return None


def one_image_bytes(p, v: Variant, kind: str, cu: int) -> int:
    """Workspace bytes of a one-image chunk (the least the solver can work with)."""
    return _layout(p, v, geometry(p, v), 1, kind, cu).bytes


def _images_per_term(kind: str, nc: int, tiles: int) -> int:
    """Images per batch term of the backward-weights GEMM: all of the chunk on CPUs (one
    long reduction); on GPUs the fewest (a divisor of nc) giving at least 64 tiles, so
    split-K has terms to share out without starving each term's reduction."""
    if kind == "cpu":
        return nc
    for q in range(1, nc + 1):
        if nc % q == 0 and q * tiles >= 64:
            return q
    return nc


def plan(p, v: Variant, kind: str, cu: int, layout: Layout, vector_width: int = 16,
         math: str = "fp32") -> list[Launch]:
    """The launches of problem ``p`` with variant ``v`` in the workspace ``layout``; the
    batched multiply in numerical class ``math`` (:func:`wticonv_gemm.sgemm.gemm_launch`).

    Buffers: ``"x"``, ``"w"``, ``"y"``, ``"ws"`` and ``"pc"`` (the pieces table, 6 int32
    per piece: see :func:`pieces_table`).
    """
    geo = geometry(p, v)
    A, G, O, I = v.positions, geo.groups, geo.O, geo.I
    P = len(geo.pieces)
    PI = P * I
    th, tw = geo.tiles(v)
    local = _LOCAL[kind]
    opts = v.options
    cost = round(_F32 * TRANSFORM_COST[kind])  # bytes charged per float moved
    i32, i64 = np.int32, np.int64
    out: list[Launch] = []
    src_in = {"fwd": "x", "bwd": "y", "wrw": "x"}[p.direction]
    dst_out = {"fwd": "y", "bwd": "x"}.get(p.direction)
    if p.direction != "wrw":
        if p.direction == "fwd":
            wbase, so, si, sr, ss = 0, I * p.r * p.s, p.r * p.s, p.s, 1
        else:  # flipped and transposed: w'[c][k][r][s] = w[k][c][R-1-r][S-1-s]
            wbase, so, si, sr, ss = (p.r - 1) * p.s + p.s - 1, p.r * p.s, O * p.r * p.s, -p.s, -1
        wgs = O * I * p.r * p.s
        if kind == "cpu":  # vectors across the filters, one work-item each (winograd_cpu.cl)
            vw = gemm_params.cpu_configs(vector_width)[0].vw   # 16, 8 or 4, as the GEMM's
            file, kernel = _SRC_CPU, "filter_transform_vec"
            fopts, fglobal, flocal = f"{opts} -DWINO_VW={vw}", (O * -(-I // vw), P, G), (1, 1, 1)
        else:
            file, kernel = _SRC, "filter_transform"
            fopts, fglobal, flocal = opts, (_round(O * I, local), P, G), (local, 1, 1)
        out.append(KERNELS.launch(file, kernel, fopts, fglobal, flocal,
                          lambda: ("w", "ws", i64(layout.u_off), i32(O), i32(I), i32(G),
                                   i32(P), i32(p.r), i32(p.s), i64(wbase), i64(wgs), i64(so),
                                   i64(si), i64(sr), i64(ss), "pc"),
                          bytes=cost * (G * O * I * p.r * p.s + A * G * O * PI)))
    for n0 in range(0, p.n, layout.nc):
        nc = min(layout.nc, p.n - n0)
        T = nc * th * tw
        out.append(KERNELS.launch(_SRC, "input_transform", opts,
                          (_round(T, local), PI, G), (local, 1, 1),
                          lambda n0=n0, nc=nc: (
                              src_in, "ws", i64(layout.v_off), i32(n0), i32(nc), i32(I), i32(G),
                              i32(geo.H), i32(geo.W), i32(geo.hl), i32(geo.wl), i32(th),
                              i32(tw), i32(P), i32(geo.sh), i32(geo.sw), "pc"),
                          bytes=cost * (A * G * PI * T + nc * G * I * geo.H * geo.W)))
        if p.direction == "wrw":
            out.append(KERNELS.launch(_SRC, "grad_transform", opts,
                              (_round(T, local), O, G), (local, 1, 1),
                              lambda n0=n0, nc=nc: (
                                  "y", "ws", i64(layout.m_off), i32(n0), i32(nc), i32(O),
                                  i32(G), i32(p.ho), i32(p.wo), i32(th), i32(tw)),
                              bytes=cost * (A * G * O * T + nc * G * O * p.ho * p.wo)))
            # The reduction runs over the chunk's tiles, contiguous across its images; GPUs
            # cut it into batch terms of q images (for split-K), CPUs keep it whole.
            q = _images_per_term(kind, nc, th * tw)
            kt = q * th * tw
            a = sgemm.Operand("ws", off=layout.m_off, gs=O * T, bs=kt, ms=T, ks=1)
            b = sgemm.Operand("ws", off=layout.v_off, gs=PI * T, bs=kt, ks=1,
                        cols=sgemm.ColMap.strided(T))
            s = min(layout.splits, nc // q)
            du = A * G * O * PI
            if s > 1:
                c = sgemm.Operand("ws", off=layout.part_off, gs=O * PI, ms=PI, cols=sgemm.ColMap())
                op = sgemm.GemmOp(O, PI, kt, a=a, b=b, c=c, groups=A * G, nb=nc // q, splits=s,
                            c_ss=du)
                out.append(sgemm.gemm_launch(op, kind, cu, vector_width=vector_width,
                                                  math=math))
                out.append(sgemm.splitk_reduce_launch("ws", layout.part_off, "ws", du, s,
                                                int(n0 > 0), c_off=layout.du_off))
            else:
                c = sgemm.Operand("ws", off=layout.du_off, gs=O * PI, ms=PI, cols=sgemm.ColMap())
                op = sgemm.GemmOp(O, PI, kt, a=a, b=b, c=c, groups=A * G, nb=nc // q,
                            beta=int(n0 > 0))
                out.append(sgemm.gemm_launch(op, kind, cu, vector_width=vector_width,
                                                  math=math))
        else:
            op = sgemm.GemmOp(O, T, PI,
                        a=sgemm.Operand("ws", off=layout.u_off, gs=O * PI, ms=PI, ks=1),
                        b=sgemm.Operand("ws", off=layout.v_off, gs=PI * T, ks=T,
                                        cols=sgemm.ColMap()),
                        c=sgemm.Operand("ws", off=layout.m_off, gs=O * T, ms=T,
                                        cols=sgemm.ColMap()),
                        groups=A * G)
            out.append(sgemm.gemm_launch(op, kind, cu, vector_width=vector_width,
                                                  math=math))
            out.append(KERNELS.launch(_SRC, "output_transform", opts,
                              (_round(T, local), O, G), (local, 1, 1),
                              lambda n0=n0, nc=nc: (
                                  "ws", i64(layout.m_off), dst_out, i32(n0), i32(nc), i32(O),
                                  i32(G), i32(geo.Ho), i32(geo.Wo), i32(th), i32(tw)),
                              bytes=cost * (A * G * O * T + nc * G * O * geo.Ho * geo.Wo)))
    if p.direction == "wrw":
        out.append(KERNELS.launch(_SRC, "filter_grad_transform", opts,
                          (_round(O * I, local), P, G), (local, 1, 1),
                          lambda: ("ws", i64(layout.du_off), "w", i32(O), i32(I), i32(G),
                                   i32(P), i32(p.r), i32(p.s), "pc"),
                          bytes=cost * (A * G * O * PI + G * O * I * p.r * p.s)))
    return out


def pieces_table(p, v: Variant) -> np.ndarray:
    """The pieces table of problem ``p``: int32, 6 per piece (see kernels/winograd.cl)."""
    geo = geometry(p, v)
    return np.array([[pc.fr0, pc.fc0, pc.fsh, pc.fsw, pc.offh, pc.offw]
                     for pc in geo.pieces], dtype=np.int32)
