"""Launch planning for direct.chanvec: applicability, the build, the two launches.

Kept apart from the hook functions (chanvec.py). The launches are
:class:`wticonv.runtime.kit.Launch` objects of ``kernels/chanvec.cl``. Forward:
``chanvec_pack`` (the filters into the workspace, each block of output channels
contiguous) and ``chanvec_fwd`` (the convolution; a work-item per block of positions x
output channels; :func:`kb_fast` orders its grid). Backward data at stride 1:
``chanvec_pack_bwd_taps`` (the filters flipped and transposed; ``chanvec_pack_bwd`` for
1x1 filters and those of over 16 taps) and ``chanvec_fwd`` on dy (:func:`forward_view`).
Backward weights: ``chanvec_pack`` of dy (image by image, each block of
output channels contiguous per position) and ``chanvec_wrw`` (a work-item per block of
output channels x input channels of one filter tap; ``chanvec_wrw_slots`` for groups of
fewer input channels than a block has slots, which fills them with several filter
columns); where a block's packed dy is large, in chunks of rows, then ``chanvec_wrw_sum``
(:func:`wrw_chunks`). The build options depend only on K/G (C/G in backward data: which
of three register blocks) and, for chanvec_fwd, on whether a work-item runs 16 positions
(:func:`fwd_split`: the picture's size and the reduction's length against two fixed
thresholds): six builds at most. The blocks depend on the device's preferred float vector
(:func:`blocks`: AVX-512's 16 floats, or AVX2's 8 through :data:`NARROW_BLOCKS`).
"""

from __future__ import annotations

import dataclasses

import numpy as np
from wticonv.runtime.kit import Launch, kernel_family

from .programs import KERNELS

__all__ = ["BLOCKS", "NARROW_BLOCKS", "MIN_VECTOR_WIDTH", "blocks", "FWD_BLOCKS",
           "RUNS_MIN_PICTURE", "RUNS_MAX_REDUCTION", "fwd_split",
           "block", "kb_fast", "decline_reason", "forward_view", "workspace_bytes",
           "wrw_slots", "wrw_items", "wrw_chunks", "plan"]

#: ``(positions, vectors of 16 output channels)`` per work-item, the first whose channel
#: block divides K/G: 6 x 64 channels (24 accumulator vectors of AVX-512's 32), else 12 x 32
#: (24 too), else 12 x 16 (12: a vector per position; 24 x 16 was slower). Chosen by
#: `benchmarks/chanvec_fwd.py` on a 2-core AMD EPYC (Zen 4, PoCL 3.1): on ResNet-50's 7x7
#: and 14x14 layers 6 x 4 ran at 184-214 GFLOP/s; on ResNeXt-50's groups of 32 channels
#: 12 x 2 at 113-134 GFLOP/s, of 16 channels 12 x 1 at 82-111 (docs/performance.md).
BLOCKS = ((6, 4), (12, 2), (12, 1))
#: The blocks on CPUs whose preferred float vector is 8 wide (AVX2: 16 registers of 8
#: floats, where each float16 of the kernel takes two): 6 x 16 channels, 12 accumulator
#: registers. Chosen by `benchmarks/chanvec_fwd.py` on a 2-core AMD EPYC (Zen 3, AVX2,
#: PoCL 3.1), N=8, best of 2 interleaved rounds: ResNet-50's stem 28.7 ms (6 x 4, which
#: spills: 61.0; 3 x 2: 34.5; 12 x 1: 45.5), 64 -> 64 3x3 on 56x56 21.9 ms (41.5, 28.1,
#: 37.8), 512 -> 512 3x3 on 7x7 25.0 ms (39.5, 26.3, 41.9).
NARROW_BLOCKS = ((6, 1),)
#: Narrowest preferred float vector the kernel serves (:func:`blocks`).
MIN_VECTOR_WIDTH = 8


def blocks(width: int) -> tuple[tuple[int, int], ...]:
    """The register blocks for a CPU whose preferred float vector holds ``width`` floats
    (OpenCL's ``CL_DEVICE_PREFERRED_VECTOR_WIDTH_FLOAT``): :data:`BLOCKS` from 16,
    :data:`NARROW_BLOCKS` from :data:`MIN_VECTOR_WIDTH`, none below (SSE's and NEON's
    16 registers of 4 floats would spill any block)."""
    if width >= 16:
        return BLOCKS
    return NARROW_BLOCKS if width >= MIN_VECTOR_WIDTH else ()

#: chanvec_fwd's own split of a work-item, per block of :data:`BLOCKS` (whose positions
#: are backward weights' slots): ``(positions, sub-blocks)``, the work-item running its
#: sub-blocks one after the other and writing their 16 positions as one vector per
#: output channel (CHANVEC_SUB in kernels/chanvec.cl). Chosen by `benchmarks/chanvec_fwd.py`
#: (2-core Zen 4, PoCL 3.1, N=8, best of 2-4 interleaved rounds, against one block of
#: 6 x 4, 12 x 2 or 12 x 1): 4 x 4 blocks, 4 a work-item, 0.70x the time on ResNet-50's
#: stem, 0.87-1.02x on its other forward layers (56x56 to 7x7, 1x1 and 3x3); 4 x 2, 4 a
#: work-item, 0.85-0.92x on five layers of 32-channel blocks (ResNeXt-50's groups of 32,
#: K = 96 and 480); 8 x 1, 2 a work-item, 0.49-0.73x on four of 16-channel blocks.
FWD_BLOCKS = {(6, 4): (4, 4), (12, 2): (4, 4), (12, 1): (8, 2),
              # AVX2: 4 x 16, 4 a work-item (Zen 3 as above: 64 -> 64 3x3 on 56x56 22.2
              # ms against 21.9 in one block, the stem 30.7 against 28.7, 256 -> 64 1x1
              # on 56x56 13.6 against 14.4)
              (6, 1): (4, 4)}
#: ... but only where the output pictures hold at least :data:`RUNS_MIN_PICTURE` positions
#: or the reduction (C/G x R x S) is at most :data:`RUNS_MAX_REDUCTION`: elsewhere one
#: block of the block's own positions a work-item (fewer passes over the filters per
#: multiply-add) paid. The whole solver, packing included, 16 positions against one
#: block (Zen 4, best of 3 interleaved rounds x 5 runs, N=8): 0.77 on the stem, 0.94-0.97
#: on 3x3 layers on 56x56 and 28x28, 0.86 on 256 -> 1024 1x1 on 14x14 (reduction 256),
#: 0.78-0.85 on ResNeXt's groups (144 and 288); but 1.06-1.11 on 1x1 layers of 1024
#: channels on 14x14, 1.03-1.10 on 512 -> 512 3x3 and 2048 -> 512 1x1 on 7x7 (1.00-1.02
#: at reductions of 512, and on 28x28 with 512 channels).
RUNS_MIN_PICTURE = 28 * 28
RUNS_MAX_REDUCTION = 288
#: The packing passes' cost in the WTI model, as bytes moved at the device's bandwidth per
#: float packed: 8 (read and written once) x the factor. chanvec_pack (filters forward,
#: dy in backward weights) transposes 16 x 16 blocks in registers: on a 2-core Zen 4
#: (PoCL 3.1, 33 GB/s measured) it packed 9.4 MB of filters (512 x 4608) in 0.39-0.73 ms
#: timed alone, the source warm in the caches, but in 1.1-1.7 ms within the solver's runs
#: on a network's layer, the filters cold (2-3x the bandwidth figure's time); the
#: element-by-element transpose it replaced took 1.70 ms alone, and 4.0 was fitted to it.
#: Replayed on the nine test networks of run -14 (benchmarks/results/
#: evaluate-test-n4-cpu-zen4-14, its own calibration refitted under each value), 4.0 /
#: 2.0 / 1.0: within 10 % 92.8 / 93.2 / 93.9 %, time-weighted geomean 1.0130 / 1.0131 /
#: 1.0123, worst case 2.36 / 2.36 / 1.89x; but at 1.0 the refitted calibration put
#: chanvec on ResNet-50's 512 -> 512 3x3 layer at N=1, where its packing is a third of its
#: 3.6 ms, against gemm.im2col's 1.7-2.1 ms: 2.0, as measured in place.
PACK_BYTES_FACTOR = 2.0
#: ... chanvec_pack_bwd_taps (backward data's filters of 2 to 16 taps, transposed in
#: registers through 16-float runs that hold one channel's taps: 512 x 512 3x3 filters,
#: 9.4 MB, in 1.1 ms within the solver's runs, 1.9x the bandwidth figure's time; 1x1
#: filters are copied 16 channels at a time, at :data:`PACK_BYTES_FACTOR`) ...
PACK_TAPS_BYTES_FACTOR = 2.0
#: ... and chanvec_pack_bwd for filters of over 16 taps (element by element: 4.0 as
#: fitted with direct.chanvec's constants, wticonv_direct.chanvec).
PACK_BWD_BYTES_FACTOR = 4.0
#: Backward weights: the packed dy of one block of output channels above which the rows
#: (n, oh) run in chunks, each chunk's packed dy about :data:`WRW_CHUNK_BYTES` (a share of
#: a core's 1 MiB L2 on the Zen 4 it was tried on): every work-item of a chunk (each tap,
#: each block of input channels) then reads it from cache, where each streamed all of dy
#: from memory (ResNet-50's stem: 28 work-items x 25.7 MB), and a sum pass adds the
#: chunks' partial dw. Not where the partial dws would pass :data:`WRW_PARTIALS_BYTES`.
#: The stem's backward weights at N=8 (48 chunks): 13.1 ms against 13.7-14.2 in one, best
#: of 3 interleaved rounds twice (Zen 4); 56x56 layers (13 chunks) within 4 % either way.
WRW_CHUNK_ABOVE_BYTES = 4 << 20
WRW_CHUNK_BYTES = 512 << 10
WRW_PARTIALS_BYTES = 16 << 20

#: chanvec_fwd's work order: every channel block of a position block in turn (KB_FAST),
#: instead of every position block of a channel block, where the filters (all of them,
#: K x C x R x S floats) are at most :data:`KB_FAST_FILTER_BYTES` and the input at least
#: :data:`KB_FAST_INPUT_BYTES`, groups 1 and several channel blocks. Position blocks
#: first re-read the input once per channel block (ResNet-50's 256 -> 512 1x1 stride-2
#: layer at N=8: 25.7 MB x 8), channel blocks first re-read the filters from cache.
#: Measured on a 2-core AMD EPYC (Zen 4, PoCL 3.1), the kernel alone, best of 3
#: interleaved rounds, N=8: 0.80-0.89x the time on ResNet-50's 256 -> 512 1x1 stride 2
#: (filters 0.5 MB, input 25.7 MB), 512 -> 256 1x1 on 28x28, 256 -> 128 1x1 on 56x56
#: and 256 -> 256 3x3 stride 2 on 28x28 (filters 2.4 MB); 0.97-1.00 on 128 -> 128 3x3
#: stride 2 on 56x56 and 512 -> 1024 1x1 stride 2 on 28x28 (2 MB); 1.02-1.03 where the
#: input is under 4 MB or the filters 4 MB and more (the 7x7 layers), left as they were.
KB_FAST_FILTER_BYTES = 5 << 19
KB_FAST_INPUT_BYTES = 4 << 20


def kb_fast(problem, width: int = 16) -> bool:
    """Whether chanvec_fwd runs ``problem`` (a forward problem: backward data's
    :func:`forward_view`) channel blocks first (:data:`KB_FAST_FILTER_BYTES`)."""
    p = problem
    _, kv = block(p, width)
    return (p.groups == 1 and p.k > 16 * kv
            and 4 * p.k * p.c * p.r * p.s <= KB_FAST_FILTER_BYTES
            and 4 * p.n * p.c * p.h * p.w >= KB_FAST_INPUT_BYTES)


def block(problem, width: int = 16) -> tuple[int, int] | None:
    """``(positions, vectors)`` of the register block for ``problem`` on a CPU of
    ``width``-float vectors (:func:`blocks`; every function below that takes ``width``
    means this one), or None if no channel block divides K/G (C/G in backward data, whose
    outputs are dx's channels) or the vectors are too narrow."""
    kg = (problem.c if problem.direction == "bwd" else problem.k) // problem.groups
    return next(((pb, kv) for pb, kv in blocks(width) if kg % (16 * kv) == 0), None)


def decline_reason(problem, device) -> str:
    """Why direct.chanvec does not run ``problem`` on ``device`` ("" when it does)."""
    p = problem
    if kernel_family(device) != "cpu":
        return ("a CPU kernel (vectors of 16 output channels, one work-item per block): "
                "the GPU solvers serve GPUs")
    if p.dilation_h != 1 or p.dilation_w != 1:
        return "no dilation (direct.tiled and gemm.im2col take dilated layers)"
    if p.is_depthwise:
        return "depthwise (groups = C): direct.depthwise serves it"
    if p.direction == "bwd" and (p.stride_h != 1 or p.stride_w != 1):
        return ("backward data at stride 1 only (there it is the forward kernel on dy); "
                "the other solvers serve strided backward data")
    if p.direction == "bwd" and (p.pad_h > p.r - 1 or p.pad_w > p.s - 1):
        return (f"backward data with padding {p.pad_h}x{p.pad_w} beyond the filter "
                f"{p.r}x{p.s} (at most R-1 x S-1); the other solvers serve it")
    if device.info.vector_width < MIN_VECTOR_WIDTH:     # before the channels: no block fits
        return ("needs 8- or 16-float vectors (AVX2, AVX-512): on narrower ones its "
                f"accumulators would spill (this device prefers {device.info.vector_width})")
    if block(p, device.info.vector_width) is None:    # K/G (C/G) not a multiple of 16
        if p.direction == "bwd":
            cg = p.c // p.groups
            return (f"C/G = {cg} input channel{'s' if cg != 1 else ''} a group: backward "
                    "data needs a multiple of 16 (dx's channels fill vectors of 16)")
        kg = p.k // p.groups
        return (f"K/G = {kg} output channel{'s' if kg != 1 else ''} a group: needs a "
                "multiple of 16 (vectors of 16)")
    return ""


def forward_view(problem):
    """The forward problem that backward data at stride 1 is: dy (N x K x Ho x Wo)
    convolved with the flipped, transposed filters (C output channels, K/G input channels
    a group, R x S) at padding R-1-pad_h x S-1-pad_w gives dx (N x C x H x W), since
    dx[c][h][w] = sum over k, r, s of dy[k][h + pad_h - r][w + pad_w - s] w[k][c][r][s].
    ``problem`` itself in the other directions. Needs stride 1 and padding at most
    R-1 x S-1 (:func:`decline_reason`)."""
    p = problem
    if p.direction != "bwd":
        return p
    return dataclasses.replace(p, c=p.k, h=p.ho, w=p.wo, k=p.c, pad_h=p.r - 1 - p.pad_h,
                               pad_w=p.s - 1 - p.pad_w, direction="fwd")


def workspace_bytes(problem, width: int = 16) -> int:
    """Bytes of the packed filters, K x C/G x R x S floats (forward and backward data), or
    of the packed dy, N x K x Ho x Wo floats, and in chunks of rows their partial dws,
    chunks x K x C/G x R x S floats (backward weights, :func:`wrw_chunks`)."""
    p = problem
    if p.direction == "wrw":
        chunks, _ = wrw_chunks(p, width)
        partials = chunks * p.k * (p.c // p.groups) * p.r * p.s if chunks > 1 else 0
        return 4 * (p.n * p.k * p.ho * p.wo + partials)
    return 4 * p.k * (p.c // p.groups) * p.r * p.s


def wrw_chunks(problem, width: int = 16) -> tuple[int, int]:
    """``(chunks, rows a chunk)`` of chanvec_wrw's rows (n, oh): one chunk of every row
    unless one block of output channels' packed dy passes :data:`WRW_CHUNK_ABOVE_BYTES`;
    then chunks of about :data:`WRW_CHUNK_BYTES` of it, as many as their partial dws fit
    in :data:`WRW_PARTIALS_BYTES`."""
    p = problem
    _, kv = block(p, width)
    rows = p.n * p.ho
    row_bytes = 4 * 16 * kv * p.wo
    dw_bytes = 4 * p.k * (p.c // p.groups) * p.r * p.s
    if rows * row_bytes <= WRW_CHUNK_ABOVE_BYTES:
        return 1, rows
    chunks = min(-(-rows * row_bytes // WRW_CHUNK_BYTES), WRW_PARTIALS_BYTES // dw_bytes)
    if chunks <= 1:
        return 1, rows
    per = -(-rows // chunks)
    return -(-rows // per), per


def wrw_slots(problem, width: int = 16) -> tuple[int, int, int]:
    """chanvec_wrw's split of a work-item's PB slots: ``(channel_blocks, filter_rows x
    column_blocks, real share)``. A slot block holds CB = min(C/G, PB) input channels at
    QS = PB // CB neighbouring filter columns (QS > 1 only for groups of fewer channels
    than slots, as the 3-channel stem); the real share is the share of the slots that
    are real channels and columns, not repeats."""
    p = problem
    pb, _ = block(p, width)
    cg = p.c // p.groups
    cb = min(cg, pb)
    qs = pb // cb
    ns = -(-p.s // qs)
    nc = -(-cg // cb)
    return nc, p.r * ns, cg * p.s / (nc * ns * pb)


def wrw_items(problem, width: int = 16) -> int:
    """Work-items of chanvec_wrw: blocks of output channels x blocks of slots
    (:func:`wrw_slots`)."""
    p = problem
    _, kv = block(p, width)
    nc, taps, _ = wrw_slots(p, width)
    return (p.k // (16 * kv)) * nc * taps


def fwd_split(problem, width: int = 16) -> tuple[int, int]:
    """chanvec_fwd's ``(positions a block, blocks a work-item)`` for the forward problem
    ``problem`` (backward data's :func:`forward_view`): :data:`FWD_BLOCKS` where
    :data:`RUNS_MIN_PICTURE` or :data:`RUNS_MAX_REDUCTION` says so, else one block of
    the register block's positions."""
    p = problem
    pb, kv = block(p, width)
    if (p.ho * p.wo >= RUNS_MIN_PICTURE
            or (p.c // p.groups) * p.r * p.s <= RUNS_MAX_REDUCTION):
        return FWD_BLOCKS[(pb, kv)]
    return pb, 1


def _options(pb: int, kv: int, split: tuple[int, int] | None = None) -> str:
    """The build options of block ``(pb, kv)``; with chanvec_fwd's ``split`` (positions,
    blocks a work-item) where it runs more than one block a work-item."""
    opts = f"-DCHANVEC_PB={pb} -DCHANVEC_KV={kv}"
    if split is None or split[1] == 1:
        return opts
    return f"{opts} -DCHANVEC_FPB={split[0]} -DCHANVEC_SUB={split[1]}"


def plan(problem, efficiency: float, width: int = 16) -> list[Launch]:
    """The two launches that compute ``problem`` on a CPU of ``width``-float vectors (see
    the module docstring); the convolution's FLOPs charged at ``efficiency`` x peak, the
    packing pass's bytes (read and written once) at the device's bandwidth."""
    p = problem
    pb, kv = block(p, width)
    if p.direction == "wrw":
        return _plan_wrw(p, pb, kv, _options(pb, kv), efficiency, width)
    opts = _options(pb, kv, fwd_split(forward_view(p), width))
    if p.direction == "bwd":
        return _plan_bwd(p, pb, kv, opts, efficiency, width)
    crs = (p.c // p.groups) * p.r * p.s
    total = p.k * crs
    # arguments built only when the plan runs (ranking reads the costs alone)
    pack = KERNELS.launch("chanvec.cl", "chanvec_pack", opts,
                          (-(-crs // 16), p.k // (16 * kv)), (1, 1),
                          lambda: ("w", "ws", np.int32(p.k), np.int32(crs)),
                          bytes=int(PACK_BYTES_FACTOR * 8 * total))
    return [pack, _fwd(p, p, pb, kv, opts, ("x", "ws", "y"), efficiency, width)]


def _plan_bwd(p, pb: int, kv: int, opts: str, efficiency: float,
              width: int) -> list[Launch]:
    f = forward_view(p)
    kg, rs = p.k // p.groups, p.r * p.s
    q = kg * rs
    sizes = (np.int32(p.c // p.groups), np.int32(kg), np.int32(rs))
    factor = (PACK_BYTES_FACTOR if rs == 1 else PACK_TAPS_BYTES_FACTOR if rs <= 16
              else PACK_BWD_BYTES_FACTOR)
    packed = int(factor * 8 * p.c * q)
    if 1 < rs <= 16:    # a block of 16 channels' taps transposed in registers
        pack = KERNELS.launch("chanvec.cl", "chanvec_pack_bwd_taps", opts, (kg, p.c // 16),
                              (1, 1), lambda: ("w", "ws") + sizes + (np.int64(p.c * q),),
                              bytes=packed)
    else:
        pack = KERNELS.launch("chanvec.cl", "chanvec_pack_bwd", opts,
                              (-(-q // 16), p.c // 16), (1, 1),
                              lambda: ("w", "ws") + sizes, bytes=packed)
    return [pack, _fwd(f, p, pb, kv, opts, ("y", "ws", "x"), efficiency, width)]


def _fwd(f, p, pb: int, kv: int, opts: str, buffers: tuple, efficiency: float,
         width: int) -> Launch:
    """chanvec_fwd on the forward problem ``f`` (``p`` itself, or backward data's
    :func:`forward_view`), reading and writing ``buffers`` (input, packed filters,
    output), its grid in the order :func:`kb_fast` picks; ``p``'s FLOPs."""
    fast = kb_fast(f, width)
    fpb, sub = fwd_split(f, width)
    grid = (-(-(f.n * f.ho * f.wo) // (fpb * sub)), f.k // (16 * kv))
    return KERNELS.launch("chanvec.cl", "chanvec_fwd", opts, grid[::-1] if fast else grid,
                          (1, 1), lambda: buffers + _sizes(f) + (np.int32(fast),),
                          flops=p.flops, efficiency=efficiency)


def _plan_wrw(p, pb: int, kv: int, opts: str, efficiency: float,
              width: int) -> list[Launch]:
    hwo = p.ho * p.wo
    pack = KERNELS.launch("chanvec.cl", "chanvec_pack", opts,
                          (-(-hwo // 16), p.k // (16 * kv), p.n), (1, 1, 1),
                          lambda: ("y", "ws", np.int32(p.k), np.int32(hwo)),
                          bytes=int(PACK_BYTES_FACTOR * 8 * p.n * p.k * hwo))
    nc, taps, _ = wrw_slots(p, width)
    chunks, rows = wrw_chunks(p, width)
    total = p.k * (p.c // p.groups) * p.r * p.s
    packed = p.n * p.k * hwo
    # groups of fewer channels than slots fill them with several filter columns
    name = "chanvec_wrw_slots" if p.c // p.groups < pb else "chanvec_wrw"
    # one chunk writes dw; several, their partial dws after the packed dy, then summed
    out, off, step = ("w", 0, 0) if chunks == 1 else ("ws", packed, total)
    conv = KERNELS.launch("chanvec.cl", name, opts, (nc * taps, p.k // (16 * kv), chunks),
                          (1, 1, 1),
                          lambda: ("x", "ws", out) + _sizes(p)
                          + (np.int32(rows), np.int64(off), np.int64(step)),
                          flops=p.flops, efficiency=efficiency)
    if chunks == 1:
        return [pack, conv]
    add = KERNELS.launch("chanvec.cl", "chanvec_wrw_sum", opts, (-(-total // 16),), (1,),
                         lambda: ("ws", "w", np.int64(packed), np.int32(chunks),
                                  np.int64(total)),
                         bytes=4 * (chunks + 1) * total)
    return [pack, conv, add]


def _sizes(p) -> tuple:
    """chanvec_fwd's size arguments, as the kernel's ints."""
    return tuple(np.int32(v) for v in (p.n, p.c, p.h, p.w, p.k, p.r, p.s, p.ho, p.wo,
                                       p.stride_h, p.stride_w, p.pad_h, p.pad_w, p.groups))
