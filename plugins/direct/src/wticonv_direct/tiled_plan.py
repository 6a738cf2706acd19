"""Launch planning for direct.tiled: the index maps of each direction, kernels, grid sizes,
splits and workspace.

Every direction is described to the kernels (``kernels/tiled_gpu.cl`` and
``kernels/tiled_cpu.cl``) as the same blocked sum ``out(m, p) = sum_q A(m, q) * B(q, p)``
with affine index maps (:class:`Maps`); see the header of tiled_gpu.cl for the formulas.
Kept apart from the hook functions (tiled.py) so that it can be read and tested without
the plugin machinery. Nothing here depends on a problem's sizes except kernel arguments,
grid sizes and the split count: build options are fixed per device kind.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

import numpy as np
from wticonv.runtime.kit import Launch
from wticonv.runtime.kit import round_up as _up

from .programs import KERNELS
from .tiled_groups import dot_tile, group_tiles
from .tiled_maps import Maps, maps

__all__ = ["Maps", "Launch", "Plan", "GpuTile", "GPU_TILES", "CpuParams", "CPU", "maps", "plan",
           "INT32_MAX"]

INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class GpuTile:
    """One build of tiled_gpu.cl: a work-group computes ``mwg`` channels x ``nwg``
    positions, each of its ``(mwg / mwi) x (nwg / nwi)`` work-items ``mwi`` x ``nwi``
    of them, staging ``kwg`` reduction indices per step. ``name`` keys the WTI model's
    efficiency and occupancy (tiled_wti.py)."""

    name: str
    mwg: int
    nwg: int
    mwi: int
    nwi: int
    kwg: int = 16

    @property
    def local(self) -> tuple[int, int, int]:
        return (self.nwg // self.nwi, self.mwg // self.mwi, 1)

    def options(self, a_kfast: bool, b_kfast: bool, idx32: bool) -> str:
        """Build options; ``*_kfast``: consecutive work-items load along q (coalesced
        when that operand is contiguous along the reduction); ``idx32``: every tensor has
        fewer than 2^31 elements (32-bit offsets along the reduction)."""
        return (f"-DTILED_MWG={self.mwg} -DTILED_NWG={self.nwg} -DTILED_KWG={self.kwg} "
                f"-DTILED_MWI={self.mwi} -DTILED_NWI={self.nwi} "
                f"-DTILED_A_KFAST={int(a_kfast)} -DTILED_B_KFAST={int(b_kfast)} "
                f"-DTILED_IDX32={int(idx32)}")


#: The GPU builds the planner chooses from by predicted time (tiled_wti.py). Measured on
#: the H200 (TFLOP/s, ResNet-50 layers at N=32): 128 x 128 blocks (8 x 8 per work-item)
#: reach 19-23 where the reduction is split (small pictures, backward weights) but waste
#: half of each block when K = 64; 64 x 128 and 64 x 64 reach 13-17 on large pictures;
#: 16 x 256 serves 16 channels or fewer; 64 x 128 with 8 reduction indices per step
#: wastes less of a short reduction (ResNet-50's first layer: C x R x S = 147).
GPU_TILES = (GpuTile("64x64", 64, 64, 4, 4), GpuTile("64x128", 64, 128, 4, 8),
             GpuTile("64x128k8", 64, 128, 4, 8, kwg=8), GpuTile("128x128", 128, 128, 8, 8),
             GpuTile("16x256", 16, 256, 4, 4))


@dataclass(frozen=True)
class CpuParams:
    """Block sizes of tiled_cpu.cl (its macros): ``mr`` channels x ``vw`` lanes per
    tiled_conv work-item (``gather_mr`` when lanes load element by element, spreading each
    such load over more multiply-adds), ``dot_m`` x ``dot_n`` dot products per tiled_dot
    work-item, staged ``chunk`` vectors at a time."""

    vw: int = 16
    mr: int = 16
    gather_mr: int = 24
    dot_m: int = 32
    dot_n: int = 32
    chunk: int = 4

    def options(self, mr: int) -> str:
        return (f"-DTILED_VW={self.vw} -DTILED_MR={mr} -DTILED_DOT_MR={self.dot_m} "
                f"-DTILED_DOT_NR={self.dot_n} -DTILED_DOT_CHUNK={self.chunk}")


#: CPU blocks: 16 lanes (AVX-512), chosen by timing ResNet-50's layers on the development
#: machines' Zen 5 cores (benchmarks/direct_solvers.py).
CPU = CpuParams()
#: CPU fwd/bwd blocks for picture rows too narrow for 16 lanes (7 wide, as in ResNet-50's
#: last stage): 8 lanes kept within a row (7 of 8 used, strided vector loads) instead of
#: 16 lanes loaded element by element, 1.4x faster there (88 against 64 GFLOP/s).
CPU_NARROW = CpuParams(vw=8, mr=24, gather_mr=24)
#: For 4 channels or fewer per group (fwd/bwd), GPUs run tiled_cpu.cl's tiled_conv with
#: these blocks, one work-item per block, 64 per work-group: the backward-data pass of
#: ResNet-50's first layer (C = 3) takes 2.0 ms there against 5.0 ms with 16 x 256 blocks.
GPU_LANES = CpuParams(vw=8, mr=4, gather_mr=4)
GPU_LANES_LOCAL = 64
#: Work-groups (GPU) or work-items (CPU) per compute unit below which the reduction is
#: split into parts (partial sums in the workspace, added by tiled_reduce.cl).
MIN_BLOCKS_PER_CU = {"gpu": 4, "cpu": 8}
#: Smallest reduction length a GPU split may have.
MIN_SPLIT_Q = 256


@dataclass(frozen=True)
class Plan:
    """Launches in order, the workspace they use (bytes), and what the WTI model reads."""

    launches: tuple[Launch, ...]
    workspace_bytes: int
    splits: int
    variant: str         # GPU tile name, or CPU lane mode ("flat", "rows", "gather", "dot")
    blocks: int          # work-groups (GPU) or work-items (CPU) of the largest launch
    padded_flops: float  # multiply-adds x 2 including the blocks' padding
    traffic_bytes: int   # inputs read and output written once, workspace written and read
    reduction: int = 0   # the longest reduction (q indices) of its launches
    phases: int = 1      # stride phases (bwd at stride > 1: one launch each)

    @property
    def n_launches(self) -> int:
        return len(self.launches)



def _cpu_lanes(mp: Maps, dot: bool, vw: int) -> str:
    """How the CPU kernels map lanes: ``"flat"`` (VW consecutive positions crossing picture
    rows, loaded as one vector: the source rows follow each other with no gap), ``"rows"``
    (lanes stay within a row, the row's last block partly empty: strided or cropped rows
    still load as vectors) or ``"gather"`` (flat, element by element: rows so short that
    a partly empty last block would waste more than a quarter of the lanes)."""
    if dot:   # lanes over q = (n, ho, wo)
        width, gapless = mp.Q2, mp.wq == 1 and mp.hq * mp.SW == mp.Q2
    else:     # lanes over p = (n, oh, ow)
        width, gapless = mp.P2, mp.wp == 1 and mp.hp * mp.SW == mp.P2
    if gapless:
        return "flat"
    per_row = -(-width // vw)
    return "gather" if width / (per_row * vw) < 0.75 else "rows"


def _cpu_row_blocks(mp: Maps, dot: bool, vw: int) -> int:
    """Blocks per row for row-aligned lanes (see :func:`_cpu_lanes`), else 0."""
    width = mp.Q2 if dot else mp.P2
    return -(-width // vw) if _cpu_lanes(mp, dot, vw) == "rows" else 0


def _args(mp: Maps, out: str, qs: int, o_split: int, lens: dict, row_blocks: int) -> tuple:
    v = vars(mp)
    i32 = lambda *ks: tuple(np.int32(v[k]) for k in ks)  # noqa: E731
    i64 = lambda *ks: tuple(np.int64(v[k]) for k in ks)  # noqa: E731
    return (mp.a, mp.s, out, *i32("M", "P", "P1", "P2", "Q", "Q1", "Q2"), np.int32(qs),
            np.int32(mp.G), *i64("a_g", "a_0", "a_ms", "a_qa", "a_qb", "a_qc"),
            *i32("SH", "SW"), *i64("s_g", "s_pa", "s_qa"),
            *i32("hp", "h0", "hq", "wp", "w0", "wq"), np.int64(mp.o_g), np.int64(o_split),
            *i64("o_ms", "o_pa", "o_pb", "o_pc", "o_0"), np.int64(lens[mp.a]),
            np.int64(lens[mp.s]), np.int32(row_blocks))


def _lens(p) -> dict:
    return {"x": p.n * p.c * p.h * p.w, "y": p.n * p.k * p.ho * p.wo,
            "w": p.k * (p.c // p.groups) * p.r * p.s}


def _finish(p, launches, splits, variant, blocks, flops, lens, packed: int = 0,
            steps: int = 0) -> Plan:
    """The plan, with the split's reduction appended; ``packed``: elements of the largest
    packed copy of A (CPU fwd/bwd), which the workspace holds when there is no split;
    ``steps``: reduction steps a CPU work-item runs per set-up of its lanes when more than
    its maps' longest reduction (grouped row tiles, tiled_groups.group_tiles)."""
    out = {"fwd": "y", "bwd": "x", "wrw": "w"}[p.direction]
    ws = 4 * lens[out] * splits if splits > 1 else 4 * packed
    if splits > 1:
        count = lens[out]
        launches.append(KERNELS.launch("tiled_reduce.cl", "tiled_reduce", "", (_up(count, 64),),
                               (64,), ("ws", out, np.int64(count), np.int32(splits),
                                       np.int64(count))))
    traffic = 4 * sum(lens.values()) + 2 * ws
    mps = maps(p)
    return Plan(tuple(launches), ws, splits, variant, blocks, flops, traffic,
                max(steps, max(mp.Q for mp in mps)), len(mps))


def _gpu_plan(p, tile: GpuTile, splits: int, lens: dict) -> Plan:
    """direct.tiled on a GPU with ``tile`` blocks and the reduction cut in ``splits``."""
    launches, blocks, flops = [], 0, 0.0
    mps = maps(p)
    for mp in mps:
        nm, npos = -(-mp.M // tile.mwg), -(-mp.P // tile.nwg)
        qs = _up(-(-mp.Q // splits), tile.kwg) if splits > 1 else mp.Q
        out = "ws" if splits > 1 else mp.o
        o_split = lens[mp.o] if splits > 1 else 0
        local = tile.local
        gsize = (npos * local[0], nm * local[1], mp.G * splits)
        a_kfast = mp.a_qc == 1 and mp.a_ms != 1
        b_kfast = p.direction == "wrw" and mp.wq == 1
        idx32 = max(lens.values()) < INT32_MAX
        launches.append(KERNELS.launch("tiled_gpu.cl", "tiled_conv",
                               tile.options(a_kfast, b_kfast, idx32),
                               gsize, local,
                               functools.partial(_args, mp, out, max(qs, 1), o_split, lens, 0)))
        blocks = max(blocks, nm * npos * mp.G * splits)
        flops += 2.0 * _up(mp.M, tile.mwg) * _up(mp.P, tile.nwg) * _up(mp.Q, tile.kwg) * mp.G
    return _finish(p, launches, splits, tile.name, blocks, flops, lens)


#: The output tensor of each direction.
_OUT = {"fwd": "y", "bwd": "x", "wrw": "w"}


def _tile_cost(shapes: list, tile: GpuTile) -> tuple[int, float, int]:
    """``(blocks, padded_flops, reduction)`` of ``_gpu_plan(p, tile, 1, lens)`` from the
    ``(M, P, Q, G)`` of each of ``p``'s maps: a split into ``s`` parts has ``s`` times the
    blocks and the same padded multiply-adds and reduction."""
    blocks, flops, reduction = 0, 0.0, 0
    mwg, nwg, kwg = tile.mwg, tile.nwg, tile.kwg
    for m, pos, q, g in shapes:
        nm, npos = -(-m // mwg), -(-pos // nwg)
        blocks = max(blocks, nm * npos * g)
        # nm * mwg = _up(M, mwg), as _gpu_plan counts them
        flops += 2.0 * (nm * mwg) * (npos * nwg) * (-(-q // kwg) * kwg) * g
        reduction = max(reduction, q)
    return blocks, flops, reduction


class _GpuCost:
    """What the WTI model reads of ``_gpu_plan(p, tile, splits, lens)`` (the same values),
    computed without building its launches (as the planner costs its candidates)."""

    __slots__ = ("variant", "blocks", "padded_flops", "traffic_bytes", "reduction", "splits",
                 "phases", "n_launches")

    def __init__(self, p, tile: GpuTile, splits: int, lens: dict) -> None:
        mps = maps(p)
        self.variant, self.splits, self.phases = tile.name, splits, len(mps)
        blocks, self.padded_flops, self.reduction = _tile_cost(
            [(mp.M, mp.P, mp.Q, mp.G) for mp in mps], tile)
        self.blocks = blocks * splits
        ws = 4 * lens[_OUT[p.direction]] * splits if splits > 1 else 0
        self.traffic_bytes = 4 * sum(lens.values()) + 2 * ws
        self.n_launches = len(mps) + (splits > 1)


class _GpuPlan:
    """The chosen GPU plan, as :class:`Plan` reads (same attributes), whose launches are
    built on first use: ranking a new problem needs only its costs, and the launches'
    arguments are a third of the planning time; a run builds them once (the plan is
    cached with the problem)."""

    __slots__ = ("_p", "_tile", "_lens", "_launches", "variant", "blocks", "padded_flops",
                 "traffic_bytes", "reduction", "splits", "phases", "n_launches",
                 "workspace_bytes")

    def __init__(self, p, tile: GpuTile, lens: dict, blocks: int, padded_flops: float,
                 traffic_bytes: int, reduction: int, splits: int, phases: int,
                 workspace_bytes: int) -> None:
        self._p, self._tile, self._lens, self._launches = p, tile, lens, None
        self.variant, self.blocks, self.padded_flops = tile.name, blocks, padded_flops
        self.traffic_bytes, self.reduction, self.splits = traffic_bytes, reduction, splits
        self.phases, self.n_launches = phases, phases + (splits > 1)
        self.workspace_bytes = workspace_bytes

    @property
    def launches(self) -> tuple[Launch, ...]:
        """The launches (built on first use; the same as :func:`_gpu_plan`'s)."""
        if self._launches is None:
            self._launches = _gpu_plan(self._p, self._tile, self.splits, self._lens).launches
        return self._launches


#: CPU fwd/bwd pack the filter when the reduction has at least PACK_MIN_Q indices and
#: the positions make at least PACK_MIN_BLOCKS vector blocks (measured, see _cpu_plan).
#: 144 (256 until 2026-12-07): forward with and without packing, best of 6 interleaved
#: rounds on a 2-core Zen 4 at N=8, packed / unpacked: ResNet-50's stem (3 -> 64, 7x7
#: stride 2, a reduction of 147) 0.83, 3x3 layers of 16 channels (144) 0.88 and 0.94,
#: 5x5 of 8 channels (200) 0.87, 3x3 stride 2 of 24 (216) 0.96, 1x1 of 192 (192) 0.70;
#: at 128 (1x1 of 128 channels) 0.95 and 1.08.
PACK_MIN_Q = 144
PACK_MIN_BLOCKS = 256


def _pack(mp: Maps, mb: int, options: str) -> tuple[Maps, Launch, int]:
    """The launch that packs ``mp``'s A into the workspace for tiled_conv (blocks of ``mb``
    channels, each one sequential run over q with its ``mb`` channels consecutive), the
    maps that read the packed copy, and its size in elements."""
    nblk, q = -(-mp.M // mb), max(mp.Q, 1)
    total = mp.G * nblk * q * mb
    launch = KERNELS.launch("tiled_cpu.cl", "tiled_pack_a", options, (_up(total, 64),), (64,),
                    (mp.a, "ws", np.int32(mp.M), np.int32(nblk), np.int32(q),
                     np.int32(mp.Q1), np.int32(mp.Q2),
                     *(np.int64(getattr(mp, k))
                       for k in ("a_g", "a_0", "a_ms", "a_qa", "a_qb", "a_qc")),
                     np.int64(total)))
    packed = dataclasses.replace(mp, a="ws", a_g=nblk * q * mb, a_0=0, a_ms=q,
                                 a_qa=mp.Q1 * mp.Q2 * mb, a_qb=mp.Q2 * mb, a_qc=mb)
    return packed, launch, total


def _cpu_plan(p, splits_wanted: int, lens: dict, prm: CpuParams = CPU,
              gpu_local: int = 0, workspace_limit: int | None = None,
              pack: bool | None = None, auto_narrow: bool = True) -> Plan:
    """direct.tiled with tiled_cpu.cl's kernels and blocks ``prm``; wrw reductions cut into
    ``splits_wanted`` parts at most (whole images). ``gpu_local`` > 0 runs tiled_conv in
    work-groups of that many work-items (GPUs; fwd and bwd only). On CPUs, fwd and bwd
    first pack A (the filter) into the workspace when it is long along the reduction and
    reused by many position blocks (:data:`PACK_MIN_Q`, :data:`PACK_MIN_BLOCKS`) and
    ``workspace_limit`` allows: 1.2-1.35x faster on ResNet-50's 56x56 and 28x28 layers,
    slower where packing costs more than it saves (7x7 pictures, short filters).
    ``pack`` True or False overrides that heuristic (perf configs); ``auto_narrow`` False
    keeps ``prm`` for every map instead of switching gathered 16-lane rows to 8 lanes."""
    launches, blocks, flops, variant = [], 0, 0.0, "dot"
    splits, packed_max, steps = 1, 0, 0
    mps = maps(p)
    if pack is None:
        pack = not gpu_local and p.direction != "wrw" and all(
            mp.Q >= PACK_MIN_Q and mp.P >= PACK_MIN_BLOCKS * prm.vw
            and (mp.G == 1 or mp.M >= prm.mr) for mp in mps)
        if pack and workspace_limit is not None:
            # The packed plan's exact workspace must fit; otherwise plan without packing.
            packed = _cpu_plan(p, splits_wanted, lens, prm, gpu_local, None, True)
            pack = packed.workspace_bytes <= workspace_limit
            if pack:
                return packed
    pack = pack and not gpu_local and p.direction != "wrw"
    base_prm = prm
    for mp in mps:
        dot = p.direction == "wrw"
        qs, out, o_split = mp.Q, mp.o, 0
        prm = base_prm
        if (auto_narrow and not dot and not gpu_local
                and _cpu_lanes(mp, False, prm.vw) == "gather"
                and _cpu_lanes(mp, False, CPU_NARROW.vw) == "rows"):
            prm = CPU_NARROW
        if dot:
            mb, pb = dot_tile(mp, prm.dot_m, prm.dot_n)
            per = -(-p.n // max(1, min(splits_wanted, p.n)))
            splits = -(-p.n // per)
            if splits > 1:
                qs, out, o_split = per * mp.Q1 * mp.Q2, "ws", lens[mp.o]
            row_blocks = _cpu_row_blocks(mp, True, prm.vw)
            npos, padded_p = -(-mp.P // pb), _up(mp.P, pb)
        else:
            variant = _cpu_lanes(mp, False, prm.vw)
            mb, pb = (prm.gather_mr if variant == "gather" else prm.mr), prm.vw
            if prm.vw == CPU_NARROW.vw:
                variant = "rows8"
            row_blocks = _cpu_row_blocks(mp, False, prm.vw)
            npos = mp.P // mp.P2 * row_blocks if row_blocks else -(-mp.P // pb)
            padded_p = npos * pb
        gt, shares = 1, 0
        if not dot and not gpu_local and variant != "gather" and len(mps) == 1:
            gt, mb, shares = group_tiles(mp, mb, npos)
        nm = -(-mp.M // mb)
        options = (dataclasses.replace(prm, dot_m=mb, dot_n=pb).options(prm.mr) if dot
                   else prm.options(mb))
        gsize, lsize = (nm, npos, mp.G * splits), (1, 1, 1)
        if gt > 1:
            tiles = -(-mp.G // gt)
            options += f" -DTILED_GT={gt}"
            gsize = (shares, npos, 1)
            steps = max(steps, mp.Q * -(-tiles // shares))
        if gpu_local:
            options += " -DTILED_ONE_ITEM_GROUPS=0"
            gsize, lsize = (nm, _up(npos, gpu_local), mp.G), (1, gpu_local, 1)
            variant = "lanes"
        arg_lens = lens
        if pack and gt == 1:
            options += " -DTILED_A_PACKED=1"
            mp, pack_launch, total = _pack(mp, mb, options)
            launches.append(pack_launch)
            packed_max = max(packed_max, total)
            arg_lens = {**lens, "ws": total}
        launches.append(KERNELS.launch("tiled_cpu.cl", "tiled_dot" if dot else "tiled_conv",
                               options, gsize, lsize,
                               functools.partial(_args, mp, out, qs, o_split, arg_lens,
                                                 row_blocks)))
        if gt > 1:
            blocks = max(blocks, shares * npos)
            flops += 2.0 * mb * tiles * padded_p * mp.Q
        else:
            blocks = max(blocks, nm * npos * mp.G * splits)
            flops += 2.0 * _up(mp.M, mb) * padded_p * mp.Q * mp.G
    return _finish(p, launches, splits, variant, blocks, flops, lens, packed_max, steps)


def _gpu_split(p, tile: GpuTile, compute_units: int, most: int) -> int:
    """Parts the GPU plan with ``tile`` splits the reduction into to fill the device (1:
    no split); ``most`` parts fit the workspace limit."""
    base = _GpuCost(p, tile, 1, _lens(p))
    return _split_for(base.blocks, base.reduction, compute_units, most)


def _split_for(blocks: int, q: int, compute_units: int, most: int) -> int:
    """Reduction parts for an unsplit GPU grid of ``blocks`` work-groups reducing over ``q``
    indices (see :func:`_gpu_split`)."""
    want = MIN_BLOCKS_PER_CU["gpu"] * compute_units
    if blocks < want and q >= 2 * MIN_SPLIT_Q and most >= 2:
        return max(1, min(-(-want // blocks), q // MIN_SPLIT_Q, most))
    return 1


def _most_splits(p, lens: dict, workspace_limit: int | None) -> int:
    out_bytes = 4 * lens[{"fwd": "y", "bwd": "x", "wrw": "w"}[p.direction]]
    return (workspace_limit // out_bytes) if workspace_limit is not None else 1 << 30


def plan(p, kind: str, compute_units: int, workspace_limit: int | None = None,
         peak_flops: float = 1e12, bandwidth: float = 1e11,
         launch_s: float | None = None) -> Plan:
    """The launches that compute problem ``p`` on a device of ``kind`` (``"cpu"`` or
    ``"gpu"``) with ``compute_units``, using at most ``workspace_limit`` bytes of workspace
    (None: no limit).

    On GPUs every tile build (:data:`GPU_TILES`), unsplit and (but for bwd at stride > 1)
    split so as to fill the device, is costed with the WTI model (``peak_flops`` in FLOP/s
    and ``bandwidth`` in bytes/s, the device's measured figures, ``launch_s`` its seconds
    per launch, None for the kit's fallback constant) and the fastest is returned. On CPUs, only
    backward weights is split (by whole images) when its blocks cannot fill the cores.
    This is direct.tiled's default perf config; :mod:`wticonv_direct.tiled_configs` plans
    the others.
    """
    from . import tiled_wti

    lens = _lens(p)
    most = _most_splits(p, lens, workspace_limit)
    want = MIN_BLOCKS_PER_CU[kind] * compute_units
    if kind == "cpu":
        splits = 1
        if p.direction == "wrw":
            mp = maps(p)[0]
            blocks = -(-mp.M // CPU.dot_m) * -(-mp.P // CPU.dot_n) * mp.G
            splits = max(1, min(most, -(-want // blocks))) if blocks < want else 1
        return _cpu_plan(p, splits, lens, workspace_limit=workspace_limit)
    # Cost every candidate from its sizes alone (tiled_wti.seconds of the values its plan
    # would hold, in the order: lanes, then each tile unsplit and split; the first of equal
    # times wins); build the launches of the fastest.
    mps = maps(p)
    shapes, phases = [(mp.M, mp.P, mp.Q, mp.G) for mp in mps], len(mps)
    traffic, out_bytes = 4 * sum(lens.values()), 4 * lens[_OUT[p.direction]]
    seconds = tiled_wti.seconds
    best, best_t = None, float("inf")
    if p.direction != "wrw" and mps[0].M <= GPU_LANES.mr:
        lanes = _cpu_plan(p, 1, lens, GPU_LANES, GPU_LANES_LOCAL)
        t = tiled_wti.plan_seconds(lanes, kind, compute_units, peak_flops, bandwidth,
                                   launch_s)
        if t < best_t:
            best, best_t = lanes, t
    for tile in GPU_TILES:
        blocks, flops, q = _tile_cost(shapes, tile)
        t = seconds(kind, tile.name, blocks, flops, traffic, q, 1, phases, compute_units,
                    peak_flops, bandwidth, launch_s)
        if t < best_t:
            best, best_t = (tile, blocks, flops, traffic, q, 1, 0), t
        # No split across stride phases: each phase's split writes and re-reads a whole
        # dx-sized slice; ResNet-50's stride-2 bwd ran 1.5-2.9x slower split (H200, N=32).
        splits = _split_for(blocks, q, compute_units, most)
        if splits > 1 and phases == 1:
            ws = out_bytes * splits
            t = seconds(kind, tile.name, blocks * splits, flops, traffic + 2 * ws, q, splits,
                        phases + 1, compute_units, peak_flops, bandwidth, launch_s)
            if t < best_t:
                best, best_t = (tile, blocks * splits, flops, traffic + 2 * ws, q, splits,
                                ws), t
    if type(best) is not tuple:
        return best
    tile, blocks, flops, traffic, q, splits, ws = best
    return _GpuPlan(p, tile, lens, blocks, flops, traffic, q, splits, phases, ws)
