"""Kernel parameters of the SGEMM kernels, per device class, and the heuristic that picks
them.

CPUs (PoCL): ``sgemm_nn`` with GEMM_MR rows x 32 columns per work-item (12 x 32: 24 of the
32 AVX-512 registers hold the tile; 14 rows spill and ran 2.5x slower), ``sgemm_nt``
with blocks of up to 4 x 8 tiles of 4 x 4 dot products per work-item, the reduction in
chunks of 256 steps (kernels/sgemm_cpu.cl). One set of parameters for
every shape.

GPUs: ``sgemm`` (kernels/sgemm_gpu.cl), a local-memory tiled kernel. A small set of tile
configurations; for each GEMM the heuristic picks the one with the best predicted
efficiency (``gpu_config``): the configuration's measured efficiency on a large square
GEMM times the fraction of its tiles that is useful work (tile remainders in M and N)
times the fraction of the device the grid fills (work-groups per compute unit).

Every configuration is one build, reused for every size (sizes are kernel arguments).
The efficiencies are measured (see docs/wti-models.md): SGEMM 4096^3 on the NVIDIA H200
through its OpenCL driver (float4 loads, pipelined: 128x128x8 29.5 TFLOP/s, 64x64x8 with
8x8 work-items 26.9, 128x64x16 25.4, against a measured peak of 62.6), and 1024^3 on the
development machines' 2-core AMD EPYC through PoCL 3.1 (388 GFLOP/s of 469 for sgemm_nn;
sgemm_nt about 150 GFLOP/s on backward-weights shapes, 210-230 GFLOP/s of 479 on the
2-core Xeon since its blocking).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

__all__ = ["CpuConfig", "GpuConfig", "CPU_NN", "CPU_NT", "GPU_CONFIGS", "gpu_config",
           "efficiency", "cpu_configs", "cpu_nn_efficiency", "cpu_nt_efficiency",
           "cpu_nn_blocks", "blocks_within", "CPU_NN_ITEMS_PER_CU", "CPU_NN_KC",
           "CPU_NN_MAX_BLOCKS",
           "CPU_GATHER_FACTOR", "CPU_SCATTER_FACTOR", "cpu_nt_blocks", "CPU_NT_KC",
           "CPU_NT_MAX_TILES",
           "CPU_NT_MAX_BLOCKS"]


@dataclass(frozen=True)
class CpuConfig:
    """Register tile of a CPU kernel: ``mr`` rows x ``nr`` columns per work-item, vectors
    of ``vw`` floats."""

    mr: int
    nr: int
    #: Fraction of the measured peak reached on a large GEMM (measured, see module doc).
    efficiency: float
    vw: int = 16

    @property
    def options(self) -> str:
        return (f"-DGEMM_VW={self.vw} -DGEMM_MR={self.mr} -DGEMM_KC={CPU_NN_KC} "
                f"-DGEMM_APACK_ROWS={CPU_NN_MAX_BLOCKS[0] * self.mr} "
                f"-DGEMM_NT_MR=4 -DGEMM_NT_NR=4 -DGEMM_NT_KC={CPU_NT_KC} "
                f"-DGEMM_NT_MAXB={CPU_NT_MAX_TILES}")


@dataclass(frozen=True)
class GpuConfig:
    """Tile of the GPU kernel: ``mwg`` x ``nwg`` per work-group, ``kwg`` per local tile,
    ``mdimc`` x ``ndimc`` work-items."""

    mwg: int
    nwg: int
    kwg: int
    mdimc: int
    ndimc: int
    #: Fraction of the measured peak reached on a 4096^3 GEMM (measured, see module doc).
    efficiency: float

    def options(self, a_kfast: bool, b_kfast: bool, vec: bool = False) -> str:
        return _gpu_options(self, a_kfast, b_kfast, vec)

    def vec_ok(self) -> bool:
        """Whether the float4-load variant exists for this tile (loads divisible by 4)."""
        threads = self.mdimc * self.ndimc
        return (self.kwg % 4 == 0 and (self.mwg * self.kwg // threads) % 4 == 0
                and (self.nwg * self.kwg // threads) % 4 == 0)


@lru_cache(maxsize=64)
def _gpu_options(cfg: GpuConfig, a_kfast: bool, b_kfast: bool, vec: bool) -> str:
    """GpuConfig.options, formatted once per configuration and flags."""
    return (f"-DGEMM_MWG={cfg.mwg} -DGEMM_NWG={cfg.nwg} -DGEMM_KWG={cfg.kwg} "
            f"-DGEMM_MDIMC={cfg.mdimc} -DGEMM_NDIMC={cfg.ndimc} "
            f"-DGEMM_A_KFAST={int(a_kfast)} -DGEMM_B_KFAST={int(b_kfast)} "
            f"-DGEMM_VEC={int(vec)}")


CPU_NN = CpuConfig(mr=12, nr=32, efficiency=0.75)
CPU_NT = CpuConfig(mr=4, nr=4, efficiency=0.49)
#: Set-up time of one CPU work-item (column offsets, load modes, stores), seconds, measured
#: with K = 1 on the development machines: 0.26-0.56 us for sgemm_nn, 0.13 us for sgemm_nt.
CPU_NN_ITEM_S = 0.4e-6
CPU_NT_ITEM_S = 0.13e-6


#: Reduction steps per chunk of ``sgemm_nn`` (the kernel's ``GEMM_KC``, its default there):
#: the chunk's panel of B, KC x 32 floats (32 KiB), copied to private memory, stays in a
#: core's L1 cache while the work-item's row blocks pass over it. Measured on a 2-core Xeon
#: (AVX-512, 48 KiB L1), interleaved runs: dw of ResNet-50's 128 -> 128 3x3 stride-2 layer
#: at N=8 (a reduction of 6272 steps) 23.0 ms unchunked, 16.9 ms with 256; four layers of
#: shorter reductions 0.97-1.03x.
CPU_NN_KC = 256

#: Work-items per compute unit that ``sgemm_nn``'s grid keeps at least, when its work-items
#: take blocks of several tiles each (:func:`cpu_nn_blocks`): enough for PoCL to balance
#: them over the cores. 8 against 16 on nine ResNet-50 layers at N=8 (2-core Xeon,
#: interleaved runs): 0.97-1.18x, geometric mean 1.04.
CPU_NN_ITEMS_PER_CU = 8

#: The largest block of ``sgemm_nn`` tiles one work-item takes: row blocks (its rows of A
#: that a chunk reads, 16 x 12 x 256 floats = 192 KiB, stay in the L2 cache across its
#: column blocks) and column blocks (each panel of B copied once per chunk and reused by
#: the row blocks). Standalone runs of the kernel's loop structure on a 2-core Xeon
#: (AVX-512): 1020 x 1024 x 1024 at 8 x 8 280 GFLOP/s, 16 x 4 277, 8 x 1 249; 2040 x 4096 x
#: 2048 at 16 x 16 278-283, 8 x 1 221.
CPU_NN_MAX_BLOCKS = (16, 16)


def cpu_nn_blocks(M: int, N: int, groups: int, compute_units: int,
                  cfg: CpuConfig = CPU_NN) -> tuple[int, int]:
    """``(RB, CB)``: the row blocks (of ``cfg.mr`` rows) and column blocks (of ``cfg.nr``
    columns) of the block of tiles one ``sgemm_nn`` work-item computes: the largest up to
    :data:`CPU_NN_MAX_BLOCKS` that keep at least :data:`CPU_NN_ITEMS_PER_CU` work-items per
    compute unit (the larger of the two halved first, down to one tile), then evened out
    (:func:`_even`: as many blocks, of sizes as equal as can be)."""
    return blocks_within(-(-M // cfg.mr), -(-N // cfg.nr), groups, compute_units,
                         CPU_NN_MAX_BLOCKS)


#: Reduction steps per chunk of ``sgemm_nt`` (the kernel's ``GEMM_NT_KC``): per chunk,
#: the tiles of a work-item's block pass over the block's rows of A and B in turn, so that
#: those rows are read from memory once per block rather than once per tile. Measured with
#: :data:`CPU_NT_MAX_BLOCKS` on ResNet-50's twelve stride-1 1x1 backward-weights layers at
#: N=8 (2-core Xeon, AVX-512, 48 KiB L1, PoCL 3.1, best of 3 interleaved rounds): 128, 192
#: and 256 within 5 % of each other, 64 up to 1.9x slower; the unblocked kernel (one tile
#: a work-item, the whole reduction at once) 1.5-1.9x slower than 256 on 28x28 to 56x56
#: pictures.
CPU_NT_KC = 256

#: The largest block of ``sgemm_nt`` tiles (4 x 4 dot products each) one work-item takes:
#: row tiles and column tiles. Same layers: 4 x 8 and 8 x 8 alike, 4 x 4 up to 1.1x and
#: 2 x 2 up to 2.3x slower.
CPU_NT_MAX_BLOCKS = (4, 8)
#: Most tiles in one sgemm_nt work-item's block (its GEMM_NT_MAXB: private arrays).
CPU_NT_MAX_TILES = CPU_NT_MAX_BLOCKS[0] * CPU_NT_MAX_BLOCKS[1]


def cpu_nt_blocks(M: int, N: int, groups: int, compute_units: int,
                  cfg: CpuConfig = CPU_NT) -> tuple[int, int]:
    """``(RB, CB)``: the row tiles and column tiles of the block one ``sgemm_nt`` work-item
    computes, as :func:`cpu_nn_blocks` chooses them (up to :data:`CPU_NT_MAX_BLOCKS`)."""
    return blocks_within(-(-M // cfg.mr), -(-N // cfg.nr), groups, compute_units,
                         CPU_NT_MAX_BLOCKS)


def blocks_within(mb: int, nb: int, groups: int, compute_units: int,
                  most: tuple[int, int]) -> tuple[int, int]:
    """``(RB, CB)`` for ``mb`` row tiles and ``nb`` column tiles: the largest blocks up to
    ``most`` that keep at least :data:`CPU_NN_ITEMS_PER_CU` work-items per compute unit
    (the larger of the two halved first, down to one tile), then evened out
    (:func:`_even`). :func:`cpu_nn_blocks` and :func:`cpu_nt_blocks` with their limits;
    the GEMM's tuning names (sgemm.gemm_configs) with others."""
    rb, cb = min(mb, most[0]), min(nb, most[1])
    want = CPU_NN_ITEMS_PER_CU * max(1, compute_units)
    while (rb > 1 or cb > 1) and -(-mb // rb) * -(-nb // cb) * groups < want:
        if cb >= rb:
            cb = -(-cb // 2)
        else:
            rb = -(-rb // 2)
    return _even(mb, rb), _even(nb, cb)


def _even(tiles: int, block: int) -> int:
    """The block size that splits ``tiles`` into as many blocks as ``block`` does, their
    sizes as equal as can be: 49 column tiles in blocks of 8 are six blocks of 8 and one
    of 1 tile, whose work-item idles a core while the others finish; in blocks of 7, every
    work-item does the same work. sgemm_nn on a 2-core Xeon (AVX-512, PoCL
    3.1), two interleaved rounds, best of 5: 256 x 1568 x 2304 (ResNet-50's 256 -> 256 3x3
    stride-2 layer at N=8 as im2col + GEMM) 9.6-9.7 -> 8.3-8.5 ms, 512 x 392 x 4608
    10.7-11.2 -> 10.2-10.3 ms; 1024^3 and 128 x 6272 x 1152 unchanged (blocks already
    even). The number of work-items, and so the WTI models, do not change."""
    return -(-tiles // -(-tiles // block))


def cpu_configs(vector_width: int) -> tuple[CpuConfig, CpuConfig]:
    """``(sgemm_nn, sgemm_nt)`` configurations for a CPU whose preferred float vector width
    (``CL_DEVICE_PREFERRED_VECTOR_WIDTH_FLOAT``) is ``vector_width``: 16 for AVX-512 (the
    measured configurations above), 8 for AVX2 (16 registers: 6 rows x 2 vectors of
    accumulators), 4 otherwise. Efficiencies for 8 and 4 are not measured here; they keep
    the AVX-512 figures, which only scale the WTI of both kernels alike."""
    vw = 16 if vector_width >= 16 else 8 if vector_width >= 8 else 4
    if vw == 16:
        return CPU_NN, CPU_NT
    nn = CpuConfig(mr=6, nr=2 * vw, efficiency=CPU_NN.efficiency, vw=vw)
    nt = CpuConfig(mr=4, nr=4, efficiency=CPU_NT.efficiency, vw=vw)
    return nn, nt

GPU_CONFIGS = (
    GpuConfig(128, 128, 8, 16, 16, efficiency=0.47),
    GpuConfig(64, 64, 8, 8, 8, efficiency=0.43),
    GpuConfig(128, 64, 16, 16, 16, efficiency=0.41),
)
#: The GPU kernel without float4 global loads (operands not 16-byte aligned, image-mapped
#: columns) reached 0.85 x the float4 variant's rate at 4096^3 (measured, H200).
SCALAR_LOADS_FACTOR = 0.85
#: ... and 0.65 x when B's columns are pixels of several pictures loaded one by one (each
#: column's picture and offset decoded per load): gemm.1x1 on the H200 at N=32, 7x7 to
#: 73x73 pictures whose pixel count is odd or under VEC_MIN_PICTURE, ran 1.3x slower than
#: the dense-matrix factor predicted (evaluate-inception3-n32-h200.csv).
MAPPED_SCALAR_LOADS_FACTOR = 0.65
#: The float4 variant hides its loads' latency only with many work-groups in flight: on
#: grids of fewer than VEC_FULL_GROUPS_PER_CU work-groups per compute unit its efficiency
#: is divided by ``1 + VEC_LATENCY x (1 - work-groups / (VEC_FULL_GROUPS_PER_CU x compute
#: units))``. Fitted to gemm.1x1 forward in the H200 corpus measurements
#: (benchmarks/results/corpus-*-h200.csv, N=1 and 32, 373 float4 runs): against the
#: scalar variant's runs at the same fill, float4 ran 1.87x slower than predicted under 0.5
#: work-groups per compute unit, 1.6x under 2, 1.16x under 8 and as predicted above;
#: gemm.im2col's forward GEMMs showed the same (1.6x under 2 per compute unit).
VEC_LATENCY = 0.9
VEC_FULL_GROUPS_PER_CU = 4
#: The kernel variant whose B operand is k-fast (``GEMM_B_KFAST=1``: the backward-weights
#: GEMMs of gemm.1x1, gemm.im2col and the Winograd solvers, both operands read along the
#: reduction) ran 1.3x slower against this model than the forward GEMMs of the same
#: solvers: measured / predicted time, median per solver, wrw over fwd, 1.2-1.5 for
#: gemm.1x1, gemm.im2col, winograd.f2x3, f4x3 and rxs on ResNet-50, VGG-16 and
#: Inception-v3 at N=32 on the H200 (evaluate-*-n32-h200.csv); 1 / 1.3 = 0.77.
B_KFAST_FACTOR = 0.77


def _util(size: int, tile: int) -> float:
    return size / (-(-size // tile) * tile)


def efficiency(cfg: GpuConfig, M: int, N: int, K: int, groups: int,
               compute_units: int, vec: bool = True, mapped: bool = False,
               b_kfast: bool = False) -> float:
    """Predicted fraction of peak of ``cfg`` on an M x N x K GEMM (``groups`` of them).

    ``cfg.efficiency * util(M) * util(N) * fill * kfill * loads``: util = useful fraction of the
    tiles along that axis; fill = min(1, work-groups / (2 x compute units)) (two
    work-groups per compute unit hide each other's barriers and loads); kfill =
    K / (K + 2 * kwg) charges the prologue and epilogue of short reductions; loads =
    SCALAR_LOADS_FACTOR when the float4-load variant does not apply
    (MAPPED_SCALAR_LOADS_FACTOR when B's columns are ``mapped`` pixels of pictures), else
    the float4 variant's latency on small grids (:data:`VEC_LATENCY`), times
    B_KFAST_FACTOR when B is read along k (``b_kfast``).
    """
    mt, nt = -(-M // cfg.mwg), -(-N // cfg.nwg)
    groups_run = mt * nt * groups
    fill = min(1.0, groups_run / (2.0 * compute_units))
    kfill = K / (K + 2.0 * cfg.kwg)
    if vec:
        short = max(0.0, 1.0 - groups_run / (VEC_FULL_GROUPS_PER_CU * compute_units))
        loads = 1.0 / (1.0 + VEC_LATENCY * short)
    else:
        loads = MAPPED_SCALAR_LOADS_FACTOR if mapped else SCALAR_LOADS_FACTOR
    if b_kfast:
        loads *= B_KFAST_FACTOR
    # M / (mt * mwg) = _util(M, cfg.mwg), likewise N
    return cfg.efficiency * (M / (mt * cfg.mwg)) * (N / (nt * cfg.nwg)) * fill * kfill * loads


#: sgemm_nn's rate when B's columns are gathered element by element (strided pixels,
#: pictures under 16 pixels) against contiguous columns: gemm.1x1 forward at stride 2 on
#: ResNet-50's layers (N=8, PoCL, 2-core Zen 5) ran 1.6x slower than 0.25 predicted,
#: relative to its stride-1 layers (evaluate-resnet50-n8-cpu.csv).
CPU_GATHER_FACTOR = 0.16


#: ... and its rate when C's columns are strided pixels (backward data of a strided 1x1
#: convolution, stored element by element): gemm.1x1 backward data at stride 2 ran 1.2x
#: slower against gemm.im2col (which stores a dense column buffer) than predicted, on
#: ResNet-50's three such layers, in four evaluations at N=8 (PoCL, 2-core Zen 5).
CPU_SCATTER_FACTOR = 0.8


def cpu_nn_efficiency(M: int, N: int, K: int, groups: int, compute_units: int,
                      contiguous: bool, cfg: CpuConfig = CPU_NN,
                      scattered: bool = False) -> float:
    """Predicted fraction of peak of ``sgemm_nn``: ``CPU_NN.efficiency * util(M, mr) *
    util(N, 32) * fill * kfill``, times :data:`CPU_GATHER_FACTOR` when B's columns must be
    gathered element by element (strided pixels, pictures under 16 pixels) and
    :data:`CPU_SCATTER_FACTOR` when C's are ``scattered`` (strided pixels); fill = min(1,
    work-items / (4 x cores)); kfill = K / (K + 8) (the tile's start and its stores)."""
    items = -(-M // cfg.mr) * -(-N // cfg.nr) * groups
    fill = min(1.0, items / (4.0 * compute_units))
    gather = 1.0 if contiguous else CPU_GATHER_FACTOR
    if scattered:
        gather *= CPU_SCATTER_FACTOR
    return (cfg.efficiency * _util(M, cfg.mr) * _util(N, cfg.nr) * fill * K / (K + 8.0)
            * gather)


#: ``sgemm_nt``'s cost, in vector steps (GEMM_VW steps of k for one tile), of one step of
#: k past the last whole vector of a picture's reduction (run scalar), and of starting a
#: tile on the next picture (its rows of A and B read from memory anew, its partial sums
#: reloaded). Fitted to the 1x1 backward-weights layers above: rate against 28x28 pictures
#: (784 steps) 0.93 at 56x56, 0.62 at 14x14 (196 = 12 vectors + 4 steps), 0.38 at 7x7.
CPU_NT_TAIL_STEP = 0.75
CPU_NT_PICTURE_STEPS = 4.0


def cpu_nt_efficiency(M: int, N: int, K: int, groups: int, compute_units: int,
                      cfg: CpuConfig = CPU_NT) -> float:
    """Predicted fraction of peak of ``sgemm_nt`` on ``groups`` GEMMs of M x N whose
    reduction is K steps a picture (batch term): ``CPU_NT.efficiency * util(M, 4) *
    util(N, 4) * fill * vec``, fill = min(1, work-items / (4 x cores)) with the blocks of
    :func:`cpu_nt_blocks`, vec = (K / vw) / (kv / vw + CPU_NT_TAIL_STEP * (K - kv) +
    CPU_NT_PICTURE_STEPS), kv = K rounded down to the vector width ``vw``."""
    rb, cb = cpu_nt_blocks(M, N, groups, compute_units, cfg)
    items = -(-M // (cfg.mr * rb)) * -(-N // (cfg.nr * cb)) * groups
    fill = min(1.0, items / (4.0 * compute_units))
    vw = float(cfg.vw)
    kv = K // cfg.vw * cfg.vw
    vec = (K / vw) / (kv / vw + CPU_NT_TAIL_STEP * (K - kv) + CPU_NT_PICTURE_STEPS) \
        if K else 1.0
    return cfg.efficiency * _util(M, cfg.mr) * _util(N, cfg.nr) * fill * vec


@lru_cache(maxsize=8192)
def gpu_config(M: int, N: int, K: int, groups: int, compute_units: int) -> GpuConfig:
    """The configuration with the best :func:`efficiency` (ties: the earlier one); cached,
    since every ranking asks it several times."""
    best, best_e = None, 0.0
    for cfg in GPU_CONFIGS:  # max() by efficiency, without its key function's calls
        e = efficiency(cfg, M, N, K, groups, compute_units)
        if best is None or e > best_e:
            best, best_e = cfg, e
    return best
