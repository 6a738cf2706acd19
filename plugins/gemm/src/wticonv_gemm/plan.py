"""Launch plans of the GEMM solvers: a convolution as GEMMs plus im2col / col2im.

Notation: G groups, Cg = C/G, Kg = K/G, CRS = Cg*R*S, P = Ho*Wo, HW = H*W. A chunk is Nc
consecutive images; its column buffer (workspace) holds, per group, a CRS x (Nc*P)
row-major matrix (kernels/im2col.cl).

gemm.im2col, per chunk:
  fwd  im2col(x) -> col;  y[chunk] = w (Kg x CRS) . col (CRS x Nc*P), written into y's NCHW
  bwd  col = w^T (CRS x Kg) . dy[chunk] (Kg x Nc*P, read in place);  col2im(col) -> dx
  wrw  im2col(x) -> col;  dw (+)= sum over the chunk's images of dy_n (Kg x P) . col_n^T,
       accumulated over chunks (beta = 1 after the first); on CPUs, for pictures of up to
       ROWS_MAX_PICTURE output pixels, the buffer is written transposed (im2row: P x
       C*R*S per image), so that this GEMM reads both operands along its output
       (sgemm_nn) rather than along its short reduction (sgemm_nt)
  fwd on CPUs with a long reduction and few pixels (FWD_ROWS_*): im2row, then
       y = w . rows^T with both operands along the reduction (sgemm_nt)

gemm.1x1 (R = S = 1, no padding, stride 1 or 2): the same GEMMs on x, dy, y and dx in
place, no workspace; a strided backward-data pass first zeroes dx (the GEMM writes only
the pixels the stride reaches), and backward weights reduces over images and rows (a
two-level batch) so that strided pixels need no copy.

Every size, offset and stride is a Python int (exact) and reaches the kernels as a
64-bit argument where a tensor or the workspace can pass 2^31 elements.
"""

from __future__ import annotations

from functools import partial

import numpy as np
from wticonv.runtime.kit import Launch
from wticonv.runtime.kit import round_up as _round

from .sgemm import (
    KERNELS,
    ColMap,
    GemmOp,
    Operand,
    gemm_configs,
    gemm_launch,
    gpu_splits,
    most_gpu_splits,
    splitk_reduce_launch,
)

__all__ = ["col_bytes_per_image", "col_bytes", "col_ld", "row_ld", "chunk_images",
           "plan_im2col", "plan_1x1", "perf_configs", "IM2COL_LOCAL"]

#: Work-group size (dimension 0) of the im2col, col2im and fill kernels, per device kind.
IM2COL_LOCAL = {"cpu": 64, "gpu": 256}
#: The GPU col2im tests every filter tap for each dx element (N x C x H x W x R x S
#: iterations, most of them skipped at stride > 1); its launch charges 2 FLOPs a tap at
#: this fraction of peak, 4e11 taps/s on the H200: fitted to gemm.im2col's backward data
#: on the 658 filters larger than 1x1 of the H200 corpus measurements
#: (benchmarks/results/corpus-*-h200.csv), whose log(measured / predicted) spread fell
#: from 0.28 to 0.16 (median ratio 1.21 at stride 1 and 1.51 at stride 2-4 before, 1.06
#: and 1.04 after: strided 7x7 and 11x11 filters ran 2-3x slower than their traffic).
COL2IM_TAP_EFFICIENCY = 2 * 4e11 / 62.6e12
_F32 = 4
_INT32 = 2**31 - 1


def col_bytes_per_image(p) -> int:
    """Workspace bytes of one image's column buffer: G * CRS * P * 4."""
    return p.groups * (p.c // p.groups) * p.r * p.s * p.ho * p.wo * _F32


def col_ld(p, kind: str, nc: int) -> int:
    """Row stride, in elements, of the column buffer of a chunk of ``nc`` images: its
    ``nc * Ho * Wo`` columns on GPUs and for rows under 256 columns (under 1 KiB apart, they
    spread over the cache sets anyway); on CPUs from 256 columns on, that rounded up to an
    odd multiple of 16 (64-byte rows). Consecutive rows of the buffer are the k steps of
    the GEMM: at a stride that is a multiple of 4 KiB (8 images of 112 x 112 pixels: 100352
    floats) every row falls in the same sets of the CPU's caches, and the GEMM's panel of
    B is evicted as it is read; an odd multiple of 64 bytes spreads the rows over all the
    sets. Measured on a 2-core Xeon (AVX-512, PoCL 3.1): sgemm_nn 1024 x 1024 x 1024 took
    15.1 ms at B's row stride of 1024 floats, 7.3 ms at 1008 (1020 x 1008 x 1024)."""
    J = nc * p.ho * p.wo
    return _odd16(J) if kind == "cpu" and J >= 256 else J


def _odd16(n: int) -> int:
    ld = _round(n, 16)
    return ld + 16 if (ld // 16) % 2 == 0 else ld


#: The largest output picture (Ho * Wo pixels) whose CPU backward weights go through the
#: row buffer: the column buffer's sgemm_nt reduces along the picture, in vectors, with
#: one horizontal sum per output at the end, so it pays on long reductions only.
#: Interleaved runs, 2-core Xeon, gemm.im2col on ResNet-50's backward-weights layers at
#: N=8, with sgemm_nt's blocking (params.CPU_NT_KC), columns over rows: 1.6-3.6x at 7x7
#: pixels, 1.1-1.9x at 14x14, 0.48-0.89x at 28x28, 0.91-0.97x at 56x56; the geometric
#: middle between 14x14 and 28x28 is about 500 pixels.
ROWS_MAX_PICTURE = 512


#: CPU forward through the row buffer: where the GEMM's reduction (C/G x R x S) has at
#: least :data:`FWD_ROWS_MIN_REDUCTION` steps and the problem at most
#: :data:`FWD_ROWS_MAX_COLUMNS` output pixels (N x Ho x Wo, the GEMM's columns), the
#: filters are read in place along their reduction by sgemm_nt, against each pixel's row,
#: instead of sgemm_nn's tiles of 32 columns, whose copies of the filters' rows a few
#: columns cannot repay. Interleaved runs (2-core AMD EPYC, Zen 4, PoCL 3.1, best of 3
#: processes x 5 runs), row buffer over column buffer: ResNet-50's 512 -> 512 3x3 layers
#: on 7x7 outputs 0.44-0.54 at N=1 (49 columns, a reduction of 4608), 0.78 at N=4 and 8;
#: 2048 -> 512 1x1 on 7x7 0.81 (N=1) and 0.92 (N=8); 1024 -> 256 1x1 and 256 -> 256 3x3
#: on 14x14 at N=1 0.92-0.95; but 512 -> 2048 1x1 on 7x7 (a reduction of 512) 1.54, and
#: 128 -> 128 3x3 on 28x28 at N=1 (784 columns) 1.05.
FWD_ROWS_MIN_REDUCTION = 1024
FWD_ROWS_MAX_COLUMNS = 512


def _rows(p, kind: str) -> bool:
    """Whether the chunk's buffer is the transposed row buffer: CPU backward weights on
    pictures of at most :data:`ROWS_MAX_PICTURE` output pixels, CPU forward as
    :data:`FWD_ROWS_MIN_REDUCTION` says."""
    if kind != "cpu":
        return False
    if p.direction == "wrw":
        return p.ho * p.wo <= ROWS_MAX_PICTURE
    return (p.direction == "fwd" and p.n * p.ho * p.wo <= FWD_ROWS_MAX_COLUMNS
            and (p.c // p.groups) * p.r * p.s >= FWD_ROWS_MIN_REDUCTION)


def row_ld(p) -> int:
    """Row stride, in elements, of the CPU's row buffer (backward weights: one row of
    C*R*S inputs per output pixel): rounded as :func:`col_ld` rounds from 256 elements on
    (at most 6 % more), C*R*S below (where rounding would add up to half again, and rows
    under 1 KiB apart spread over the cache sets anyway)."""
    crs = p.c * p.r * p.s
    return _odd16(crs) if crs >= 256 else crs


def col_bytes(p, kind: str, nc: int) -> int:
    """Workspace bytes of the buffer of a chunk of ``nc`` images on a device of ``kind``:
    G * CRS * :func:`col_ld` * 4 (``nc`` x :func:`col_bytes_per_image` on GPUs); for
    backward weights on CPUs, the row buffer's ``nc`` * Ho * Wo * :func:`row_ld` * 4."""
    if _rows(p, kind):
        return nc * p.ho * p.wo * row_ld(p) * _F32
    return p.groups * (p.c // p.groups) * p.r * p.s * col_ld(p, kind, nc) * _F32


def _splits(p, kind: str, compute_units: int, nc: int) -> int:
    """Split-K layers of the backward-weights GEMM of a chunk of ``nc`` images (GPU only)."""
    if kind == "cpu" or p.direction != "wrw":
        return 1
    kg, crs = p.k // p.groups, (p.c // p.groups) * p.r * p.s
    return gpu_splits(kg, crs, p.ho * p.wo, nc, p.groups, compute_units)


def _total_bytes(p, kind: str, compute_units: int, nc: int) -> int:
    s = _splits(p, kind, compute_units, nc)
    partial = s * p.k * (p.c // p.groups) * p.r * p.s * _F32 if s > 1 else 0
    return col_bytes(p, kind, nc) + partial


def im2col_layout(p, kind: str, compute_units: int, room: int) -> tuple[int, int, int]:
    """``(images per chunk, split-K layers, workspace bytes)`` of the largest chunk whose
    column buffer (plus split-K partial sums on GPUs) fits ``room`` bytes; ``(0, 1, 0)``
    when not even one image fits. Deterministic: the workspace size it returns, given
    back as ``room``, gives the same layout."""
    lo, hi = 0, min(p.n, room // col_bytes_per_image(p), _INT32 // (p.ho * p.wo))
    if kind == "cpu" or p.direction != "wrw":  # no split-K: hi column buffers fit,
        if hi and col_bytes(p, kind, hi) <= room:   # unless the CPU's row padding is over
            lo = hi
    elif hi:  # every chunk the search would try fits with the most partial sums: take hi
        kg, crs = p.k // p.groups, (p.c // p.groups) * p.r * p.s
        s = most_gpu_splits(kg, crs, p.groups, compute_units)
        if hi * col_bytes_per_image(p) + (s * p.k * crs * _F32 if s > 1 else 0) <= room:
            lo = hi
    while lo < hi:  # the total grows with the chunk: binary search for the largest fit
        mid = (lo + hi + 1) // 2
        if _total_bytes(p, kind, compute_units, mid) <= room:
            lo = mid
        else:
            hi = mid - 1
    if lo == 0:
        return 0, 1, 0
    return lo, _splits(p, kind, compute_units, lo), _total_bytes(p, kind, compute_units, lo)


def chunk_images(p, workspace_bytes: int) -> int:
    """Images per chunk that fit ``workspace_bytes`` (at most N, at least 0)."""
    return min(p.n, workspace_bytes // col_bytes_per_image(p))


def _chunk_args(p, src: str, dst: str, n0: int, nc: int, ld: int | None = None) -> tuple:
    """Arguments of im2col / col2im for images n0 .. n0 + nc - 1 (the CPU kernels' also
    the column buffer's row stride ``ld``)."""
    head = (src, dst, np.int32(n0), np.int32(nc)) + (() if ld is None else (np.int64(ld),))
    return (*head,
            *[np.int32(v) for v in (p.c, p.h, p.w, p.r, p.s, p.ho, p.wo, p.pad_h, p.pad_w,
                                    p.stride_h, p.stride_w, p.dilation_h, p.dilation_w,
                                    p.groups)])


#: The CPU passes that write the buffers element by element move their bytes slower than
#: the device's bandwidth: im2row_cpu (a transposition: one buffer row per output pixel)
#: ran 2.1-4.8x its traffic's time (median 2.8) on eight backward-weights layers of
#: ResNet-50 (N=8) and ShuffleNet-v2 (N=4) with 7x7 and 14x14 pictures, and im2col_cpu
#: 1.0-1.3x at stride 1 (2-core Xeon, 25 GB/s measured, each pass timed alone, best of
#: 5). At stride 2 im2col_cpu ran 2.2-2.4x reading x element by element, and 1.4-1.8x
#: (median 1.7) since it takes 8 outputs from the even lanes of one 16-wide load
#: (ResNet-50's conv1 and two 3x3 stride-2 layers at N=8, two runs each, the same day:
#: benchmarks/col_pass_times.py).
ROW_PASS_FACTOR = 2.8
STRIDED_COL_PASS_FACTOR = 1.7


def _im2col(p, kind: str, n0: int, nc: int) -> Launch:
    """Writes the chunk's column buffer (on CPUs for backward weights its row buffer),
    reads x (cost: both, once; on CPUs times :data:`ROW_PASS_FACTOR` for the row buffer,
    :data:`STRIDED_COL_PASS_FACTOR` for a column buffer at a stride over 1)."""
    rows = p.c * p.r * p.s  # G * Cg*R*S
    args = partial(_chunk_args, p, "x", "ws", n0, nc)
    traffic = col_bytes_per_image(p) * nc + nc * p.c * p.h * p.w * _F32
    if _rows(p, kind):
        return KERNELS.launch("im2col.cl", "im2row_cpu", "", (nc, p.ho), (1, 1),
                              partial(args, row_ld(p)),
                              bytes=int(traffic * ROW_PASS_FACTOR))
    if kind == "cpu":
        if p.stride_h > 1 or p.stride_w > 1:
            traffic = int(traffic * STRIDED_COL_PASS_FACTOR)
        return KERNELS.launch("im2col.cl", "im2col_cpu", "", (nc, rows), (1, 1),
                              partial(args, col_ld(p, kind, nc)), bytes=traffic)
    local = IM2COL_LOCAL[kind]
    return KERNELS.launch("im2col.cl", "im2col", "", (_round(p.ho * p.wo, local), nc, p.c),
                  (local, 1, 1), args, bytes=traffic)


def _col2im(p, kind: str, n0: int, nc: int) -> Launch:
    """Reads the chunk's column buffer, writes dx (cost: both, once; on GPUs also its tap
    loop, :data:`COL2IM_TAP_EFFICIENCY`)."""
    args = partial(_chunk_args, p, "ws", "x", n0, nc)
    traffic = col_bytes_per_image(p) * nc + nc * p.c * p.h * p.w * _F32
    if kind == "cpu":
        return KERNELS.launch("im2col.cl", "col2im_cpu", "", (nc, p.c), (1, 1),
                              partial(args, col_ld(p, kind, nc)), bytes=traffic)
    local = IM2COL_LOCAL[kind]
    taps = nc * p.c * p.h * p.w * p.r * p.s
    return KERNELS.launch("im2col.cl", "col2im", "", (_round(p.h * p.w, local), nc, p.c),
                  (local, 1, 1), args, flops=2 * taps, efficiency=COL2IM_TAP_EFFICIENCY,
                  bytes=traffic)


def _gemm(kind: str, compute_units: int, vector_width: int, math: str, config: str | None,
          ops: list | None):
    """The GEMM launcher of a plan: :func:`gemm_launch` with the plan's device figures,
    class and tuning name; each op also appended to ``ops`` when given."""
    def gemm(op: GemmOp) -> Launch:
        if ops is not None:
            ops.append(op)
        return gemm_launch(op, kind, compute_units, vector_width=vector_width, math=math,
                           config=config)
    return gemm


def plan_im2col(p, kind: str, compute_units: int, workspace_bytes: int,
                vector_width: int = 16, math: str = "fp32", config: str | None = None,
                ops: list | None = None) -> list[Launch]:
    """The launches of gemm.im2col for problem ``p`` given ``workspace_bytes`` (chunks and
    split-K as :func:`im2col_layout` decides); ``vector_width`` is a CPU's preferred float
    vector width, ``math`` the GEMMs' numerical class and ``config`` their tuning name
    (:func:`gemm_launch`, :func:`wticonv_gemm.sgemm.gemm_configs`); ``ops``, when given,
    receives every GEMM op of the plan.

    Raises ValueError if not even one image's column buffer fits, or for an unknown
    ``config``.
    """
    gemm = _gemm(kind, compute_units, vector_width, math, config, ops)
    nc_max, splits, _ = im2col_layout(p, kind, compute_units, workspace_bytes)
    if nc_max < 1:
        raise ValueError(f"gemm.im2col needs at least {col_bytes_per_image(p)} bytes of "
                         f"workspace for {p.key}, got {workspace_bytes}")
    g, cg, kg = p.groups, p.c // p.groups, p.k // p.groups
    crs, P = cg * p.r * p.s, p.ho * p.wo
    y_cols = ColMap(P=P, Wo=P, ns=p.k * P, hs=0, ws=1)
    out: list[Launch] = []
    for n0 in range(0, p.n, nc_max):
        nc = min(nc_max, p.n - n0)
        J, ld = nc * P, col_ld(p, kind, nc)
        col = Operand("ws", gs=crs * ld, ks=ld, ms=ld, cols=ColMap())
        if p.direction == "fwd" and _rows(p, kind):
            # y[chunk][g] = w[g] (Kg x CRS) . rows^T: pixel j's row (ld apart) holds its
            # C*R*S inputs, group g's from g CRS on; both operands along the reduction
            out.append(_im2col(p, kind, n0, nc))
            op = GemmOp(kg, J, crs, a=Operand("w", gs=kg * crs, ms=crs, ks=1),
                        b=Operand("ws", gs=crs, ks=1, cols=ColMap.strided(row_ld(p))),
                        c=Operand("y", off=n0 * p.k * P, gs=kg * P, ms=P, cols=y_cols),
                        groups=g)
            out.append(gemm(op))
        elif p.direction == "fwd":
            out.append(_im2col(p, kind, n0, nc))
            op = GemmOp(kg, J, crs, a=Operand("w", gs=kg * crs, ms=crs, ks=1),
                        b=col, c=Operand("y", off=n0 * p.k * P, gs=kg * P, ms=P, cols=y_cols),
                        groups=g)
            out.append(gemm(op))
        elif p.direction == "bwd":
            op = GemmOp(crs, J, kg, a=Operand("w", gs=kg * crs, ms=1, ks=crs),
                        b=Operand("y", off=n0 * p.k * P, gs=kg * P, ks=P, cols=y_cols),
                        c=col, groups=g)
            out.append(gemm(op))
            out.append(_col2im(p, kind, n0, nc))
        elif _rows(p, kind):
            # dw[g] (+)= sum over the chunk's images n of dy_n[g] (Kg x P) . row_n[g] (P x
            # CRS): row_n's rows are its pixels (ld apart), group g's columns start at g CRS
            out.append(_im2col(p, kind, n0, nc))
            rl = row_ld(p)
            op = GemmOp(kg, crs, P,
                        a=Operand("y", off=n0 * p.k * P, gs=kg * P, bs=p.k * P, ms=P, ks=1),
                        b=Operand("ws", gs=crs, bs=P * rl, ks=rl, cols=ColMap()),
                        c=Operand("w", gs=kg * crs, ms=crs, cols=ColMap()),
                        groups=g, nb=nc, beta=int(n0 > 0))
            out.append(gemm(op))
        else:
            out.append(_im2col(p, kind, n0, nc))
            a = Operand("y", off=n0 * p.k * P, gs=kg * P, bs=p.k * P, ms=P, ks=1)
            b = Operand("ws", gs=crs * ld, bs=P, ks=1, cols=ColMap.strided(ld))
            s = min(splits, nc)
            if s > 1:
                # partial sums of each split in the workspace after the column buffer
                part_off = col_bytes(p, kind, nc_max) // _F32
                dw = p.k * crs
                c = Operand("ws", off=part_off, gs=kg * crs, ms=crs, cols=ColMap())
                op = GemmOp(kg, crs, P, a=a, b=b, c=c, groups=g, nb=nc, splits=s, c_ss=dw)
                out.append(gemm(op))
                out.append(splitk_reduce_launch("ws", part_off, "w", dw, s, int(n0 > 0)))
            else:
                op = GemmOp(kg, crs, P, a=a, b=b,
                            c=Operand("w", gs=kg * crs, ms=crs, cols=ColMap()),
                            groups=g, nb=nc, beta=int(n0 > 0))
                out.append(gemm(op))
    return out


def plan_1x1(p, kind: str, compute_units: int, vector_width: int = 16,
             math: str = "fp32", config: str | None = None,
             ops: list | None = None) -> list[Launch]:
    """The launches of gemm.1x1 for problem ``p`` (1x1 filter, no padding, stride 1 or 2);
    ``vector_width``, ``math``, ``config`` and ``ops`` as for :func:`plan_im2col`."""
    gemm = _gemm(kind, compute_units, vector_width, math, config, ops)
    g, cg, kg = p.groups, p.c // p.groups, p.k // p.groups
    P, hw = p.ho * p.wo, p.h * p.w
    pix = ColMap(P=P, Wo=p.wo, ns=p.c * hw, hs=p.stride_h * p.w, ws=p.stride_w)  # x / dx
    y_cols = ColMap(P=P, Wo=P, ns=p.k * P, hs=0, ws=1)                           # y / dy
    N = p.n * P
    if p.direction == "fwd":
        op = GemmOp(kg, N, cg, a=Operand("w", gs=kg * cg, ms=cg, ks=1),
                    b=Operand("x", gs=cg * hw, ks=hw, cols=pix),
                    c=Operand("y", gs=kg * P, ms=P, cols=y_cols), groups=g)
        return [gemm(op)]
    if p.direction == "bwd":
        out = []
        if p.stride_h > 1 or p.stride_w > 1:
            local = IM2COL_LOCAL[kind]
            count = p.n * p.c * hw
            out.append(KERNELS.launch("im2col.cl", "zero_fill", "", (_round(count, local),),
                                      (local,),
                              ("x", np.int64(count)), bytes=count * _F32))
        op = GemmOp(cg, N, kg, a=Operand("w", gs=kg * cg, ms=1, ks=cg),
                    b=Operand("y", gs=kg * P, ks=P, cols=y_cols),
                    c=Operand("x", gs=cg * hw, ms=hw, cols=pix), groups=g)
        out.append(gemm(op))
        return out
    if p.stride_h == 1 and p.stride_w == 1:
        # wrw, stride 1: dw[k][c] = sum_n sum_p dy[n][k][p] * x[n][c][p]  (k of the GEMM = p)
        op = GemmOp(kg, cg, P, a=Operand("y", gs=kg * P, bs=p.k * P, ms=P, ks=1),
                    b=Operand("x", gs=cg * hw, bs=p.c * hw, ks=1, cols=ColMap.strided(hw)),
                    c=Operand("w", gs=kg * cg, ms=cg, cols=ColMap()), groups=g, nb=p.n)
        return [gemm(op)]
    # wrw, strided: a two-level reduction over images n and output rows ho of
    #   sum_wo dy[n][k][ho][wo] * x[n][c][ho*u][wo*v]   (k of the GEMM = wo)
    op = GemmOp(kg, cg, p.wo,
                a=Operand("y", gs=kg * P, bs=p.k * P, bs2=p.wo, ms=P, ks=1),
                b=Operand("x", gs=cg * hw, bs=p.c * hw, bs2=p.stride_h * p.w, ks=p.stride_w,
                          cols=ColMap.strided(hw)),
                c=Operand("w", gs=kg * cg, ms=cg, cols=ColMap()),
                groups=g, nb=p.n * p.ho, nb2=p.ho)
    return [gemm(op)]


def perf_configs(ops: list[GemmOp], kind: str, compute_units: int, vector_width: int = 16,
                 math: str = "fp32", wgmma: bool = False) -> list[str]:
    """The perf configs of a plan whose GEMM ops are ``ops`` (the ``ops`` list of
    :func:`plan_1x1` or :func:`plan_im2col`): the tuning names
    (:func:`wticonv_gemm.sgemm.gemm_configs`) of its largest GEMM but the heuristics' own
    choice (tuning times that as the default; listed too, the same kernel would be timed
    twice and a record kept for a gain that is only noise), each run on every GEMM of the
    plan; empty where there is no other (nothing to tune). The names are the GEMM's: the
    plan's workspace, chunks and split-K do not depend on them."""
    if not ops:
        return []
    main = max(ops, key=lambda op: op.flops)
    return gemm_configs(main, kind, compute_units, vector_width, math, wgmma)[1:]
