"""Tile configurations and the efficiency model of the tensor-core SGEMM
(kernels/nv/sgemm_tc.cl), per numerical class.

The kernel runs on NVIDIA GPUs of compute capability 8.0 or newer through NVIDIA's
OpenCL (:func:`wticonv.runtime.kit.tensor_cores`); :func:`wticonv_gemm.sgemm.gemm_launch`
plans it for ``math="3xtf32"`` (FP32-accurate) or ``math="tf32"``. As for the CUDA-core
kernel (params.py), a few configurations, each one build reused for every size, and a
heuristic that picks the one with the best predicted efficiency for each GEMM.

Efficiencies are fractions of the device's FP32 peak (the WTI's yardstick), so a class
that outruns the FP32 units reports more than 1. Measured on the H200 through its OpenCL
driver with ``benchmarks/tc_gemm.py`` (4096^3, row-major, 16-byte loads; the measured FP32
peak is 62.6 TFLOP/s; benchmarks/results/tc-gemm-h200.txt).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

__all__ = ["TcConfig", "TC_CONFIGS", "WG_CONFIGS", "tc_config", "tc_efficiency", "TC_FILL_TILES",
           "tc_vec_ok", "ELEMENT_LOADS_FACTOR", "B_KFAST_FACTOR"]


@dataclass(frozen=True)
class TcConfig:
    """A tile of the tensor-core kernel: ``bm`` x ``bn`` outputs per work-group, warps of
    ``wm`` x ``wn``, ``bk`` values of k per local tile, ``kf`` per fragment batch, ``stages``
    local tiles in flight."""

    bm: int
    bn: int
    wm: int
    wn: int
    bk: int
    kf: int
    stages: int
    #: Fraction of the FP32 peak of a full wave of whole tiles with no fill and drain
    #: (from a 4096^3 GEMM's measured rate: see :data:`TC_CONFIGS`).
    efficiency: float
    #: ``"mma"``: warp-level mma.sync (kernels/nv/sgemm_tc.cl, compute capability 8.0 and
    #: newer); ``"wgmma"``: warpgroup-level wgmma (kernels/nv/sgemm_wg.cl, compute
    #: capability 9.0 only), where ``wm`` = ``bm`` (wgmma's N), ``wn`` = 64 (one
    #: warpgroup's columns) and ``kf`` = ``bk``.
    engine: str = "mma"
    #: wgmma only: keep one step's products in flight while the next tile is staged
    #: (WG_PIPE in kernels/nv/sgemm_wg.cl; needs 3 stages or more).
    pipe: bool = False

    @property
    def label(self) -> str:
        """``"BMxBNxWMxWNxBKxKFxSTAGES"`` (wgmma: ``"wgBMxBNxBKxSTAGES"``, pipelined
        ``"wgpBMxBNxBKxSTAGES"``), as
        benchmarks/tc_gemm.py names tiles."""
        if self.engine == "wgmma":
            name = "wgp" if self.pipe else "wg"
            return name + "x".join(str(v) for v in (self.bm, self.bn, self.bk, self.stages))
        return "x".join(str(v) for v in (self.bm, self.bn, self.wm, self.wn, self.bk,
                                         self.kf, self.stages))

    @property
    def threads(self) -> int:
        if self.engine == "wgmma":
            return 128 * (self.bn // 64)
        return 32 * (self.bm // self.wm) * (self.bn // self.wn)

    @property
    def kernel(self) -> tuple[str, str]:
        """(kernel file, kernel name) of this tile's engine."""
        if self.engine == "wgmma":
            return "nv/sgemm_wg.cl", "sgemm_wg"
        return "nv/sgemm_tc.cl", "sgemm_tc"

    def options(self, split: bool, vec: bool, a_kfast: bool, b_kfast: bool,
                c_pairs: bool = False) -> str:
        """Build options of the kernel: ``split`` 3xTF32 (else TF32), ``vec`` 16-byte loads,
        ``a_kfast``/``b_kfast`` element-load order, ``c_pairs`` float2 stores of C."""
        return _options(self, split, vec, a_kfast, b_kfast, c_pairs)


@lru_cache(maxsize=128)
def _options(cfg: TcConfig, split: bool, vec: bool, a_kfast: bool, b_kfast: bool,
             c_pairs: bool) -> str:
    if cfg.engine == "wgmma":
        return (f"-DWG_BM={cfg.bm} -DWG_NWG={cfg.bn // 64} -DTC_BK={cfg.bk} "
                f"-DTC_STAGES={cfg.stages} -DTC_SPLIT={int(split)} -DTC_VEC={int(vec)} "
                f"-DTC_A_KFAST={int(a_kfast)} -DTC_B_KFAST={int(b_kfast)} "
                f"-DWG_PIPE={int(cfg.pipe)}")
    return (f"-DTC_BM={cfg.bm} -DTC_BN={cfg.bn} -DTC_WM={cfg.wm} -DTC_WN={cfg.wn} "
            f"-DTC_BK={cfg.bk} -DTC_KF={cfg.kf} -DTC_STAGES={cfg.stages} "
            f"-DTC_SPLIT={int(split)} -DTC_VEC={int(vec)} -DTC_A_KFAST={int(a_kfast)} "
            f"-DTC_B_KFAST={int(b_kfast)} -DTC_C2={int(c_pairs)}")


#: Per class, large tiles first (ties in the heuristic go to the earlier one). Each
#: efficiency is the tile's rate at 4096^3 over the 62.6 TFLOP/s FP32 peak, measured on
#: the H200 (benchmarks/results/tc-gemm-h200.txt: 3xTF32 51.4, 45.5 and 39.3 TFLOP/s,
#: cuBLAS FP32 51.4; TF32 138.3, 100.5, 98.5 and 79.4, cuBLAS TF32 401), divided by the
#: model's own waves and kfill there (1024 / 1056 and 4096 / (4096 + bk)), so that
#: :func:`tc_efficiency` gives back the measured rate at that size.
TC_CONFIGS: dict[str, tuple[TcConfig, ...]] = {
    "3xtf32": (
        TcConfig(128, 128, 64, 64, 16, 8, 3, efficiency=0.851),
        TcConfig(128, 64, 64, 32, 16, 16, 3, efficiency=0.752),
        TcConfig(64, 64, 32, 32, 32, 16, 2, efficiency=0.653),
    ),
    "tf32": (
        TcConfig(128, 128, 64, 64, 32, 32, 3, efficiency=2.297),
        TcConfig(128, 64, 64, 32, 32, 32, 3, efficiency=1.670),
        TcConfig(64, 128, 32, 64, 32, 32, 3, efficiency=1.636),
        TcConfig(64, 64, 32, 32, 32, 32, 3, efficiency=1.319),
    ),
}
#: Tiles of the warpgroup kernel (kernels/nv/sgemm_wg.cl, compute capability 9.0 only:
#: :func:`wticonv.runtime.kit.wgmma`), per class. Measured on the H200
#: (benchmarks/results/tc-gemm-wgmma-h200.txt): 3xTF32 54.0 TFLOP/s at 4096^3 and 51.0
#: at 2048x4096x2048 (1.05x and 1.01x cuBLAS FP32, errors 5.4e-7 and 5.8e-7), against
#: 51.5 and 50.3 for mma.sync's best; TF32 98.9 and 92.0, where mma.sync's best runs at
#: 138.1 and 127.7. The 64-k tiles ran faster (3xTF32 56.1 and 54.5) but failed
#: tests/test_gpu.py's element-load case in 3xTF32 (error 5.7e-5 on 250x301x271), from a
#: race on the low-part tile that review found afterwards; with it fixed the case passed
#: on an H100 (6.0e-7, benchmarks/results/tc-wgmma-pipe-h100/), as did the pipelined loop
#: order (TcConfig.pipe), 1.07-1.14x faster there but still behind mma.sync's best
#: (docs/performance.md). Not yet offered to :func:`tc_config`: on five
#: convolution-shaped GEMMs the 3xTF32 tile ran 0.79-1.09x the speed of mma.sync's best
#: tile for each (the 64-k tile 0.82-1.17x; tc-gemm-wgmma-shapes-3xtf32-h200.txt), and the
#: efficiency model is not fitted to it. Its load path (cp.async through every thread, one
#: wgmma group in flight) holds it to a fifth of the 482 TFLOP/s that wgmma reaches
#: on operands already in local memory (benchmarks/results/wgmma-probe-h200.txt).
#: Efficiencies are the 4096^3 rates over the 62.6 TFLOP/s FP32 peak, divided by waves
#: and kfill as above.
WG_CONFIGS: dict[str, tuple[TcConfig, ...]] = {
    "3xtf32": (TcConfig(128, 128, 128, 64, 32, 32, 2, efficiency=0.897, engine="wgmma"),),
    "tf32": (TcConfig(256, 128, 256, 64, 32, 32, 3, efficiency=1.642, engine="wgmma"),),
}
#: Element-by-element loads (4-byte cp.async: operands not 16-byte aligned, strided or
#: small pictures) against 16-byte ones: fitted to the 38 layers of ResNet-50 at N=32
#: where the fallback chose a tensor-core solver (H200, benchmarks/results/tc-resnet50-
#: n32-h200-fit.json: rms log error of predicted over measured time 0.144 at 0.7,
#: 0.127 at 0.8, 0.141 at 0.9), and checked on the 88 such layers of four networks it was
#: not fitted to (googlenet, efficientnet_b0, alexnet, convnext_tiny: 0.167, 0.158 and
#: 0.161).
ELEMENT_LOADS_FACTOR = 0.8
#: B read along k (backward weights: both operands contiguous along the reduction).
B_KFAST_FACTOR = 0.8


def tc_vec_ok(cfg: TcConfig) -> bool:
    """Whether the 16-byte-load variant exists for ``cfg`` (whole loads per thread)."""
    t = cfg.threads
    return (cfg.bk % 4 == 0 and (cfg.bm * cfg.bk) % (4 * t) == 0
            and (cfg.bk * cfg.bn) % (4 * t) == 0)


#: The pipeline's fill and drain in :func:`tc_efficiency`, in k tiles (``bk`` values of k):
#: kfill = K / (K + TC_FILL_TILES x bk). Fitted (2026-12-05) to the calibration probes'
#: runs of the tensor-core solvers within 3x of the fastest on the H100 and the H200
#: (3456 runs: evaluate-test9-n1-h100-a/calibrate.csv, calibrate-test15-n{1,32}-cold-
#: h200-precompile.csv; random problems, none a test network's layer): the spread of
#: log(measured / predicted) is 0.256 at 1 tile, 0.242 at 0.5, 0.238 at 0.25 and at 0.1.
#: At 1 tile the model had short reductions (backward weights at N=1: N Ho Wo of a few
#: dozen) 1.7x too slow. The configurations' efficiencies above were derived at K = 4096,
#: where this moves kfill by under 1 %.
TC_FILL_TILES = 0.25


def tc_efficiency(cfg: TcConfig, M: int, N: int, K: int, groups: int, compute_units: int,
                  vec: bool = True, b_kfast: bool = False, k_term: int | None = None
                  ) -> float:
    """Predicted fraction of the FP32 peak of ``cfg`` on an M x N x K GEMM (``groups`` of
    them; K the whole reduction, ``k_term`` its length per batch term when it is a sum of
    several, default K): ``cfg.efficiency * util(M) * util(N) * util(k_term) * waves *
    kfill * loads``.

    util = useful fraction of the tiles along that axis (each batch term starts a new k
    tile: 7 values of k per term fill 7/16 of a tile); waves = work-groups over the
    compute units of the waves they need (a grid of 1.1 waves takes as long as 2: one
    work-group per compute unit already runs near its full rate); kfill = K / (K +
    :data:`TC_FILL_TILES` x bk), the pipeline's fill and drain; loads =
    :data:`ELEMENT_LOADS_FACTOR` without 16-byte loads, times :data:`B_KFAST_FACTOR`
    when B is read along k. Against the H200's 42 runs of these tiles on GEMMs of 4096^3
    and of convolution shapes (M = 64-2048, N = 1568-100352, K = 64-1024), predicted over
    measured time (with the traffic and launch terms of wti.py) has a median of 1.05 and
    an rms log error of 0.118 (``benchmarks/tc_model_residuals.py --gemm``,
    benchmarks/results/tc-gemm-shapes-*; with a whole k tile of fill then).
    """
    mt, nt = -(-M // cfg.bm), -(-N // cfg.bn)
    tiles = mt * nt * groups
    waves = tiles / (-(-tiles // compute_units) * compute_units)
    kfill = K / (K + TC_FILL_TILES * cfg.bk)
    kt = K if k_term is None else k_term
    kutil = kt / (-(-kt // cfg.bk) * cfg.bk) if kt else 1.0
    loads = 1.0 if vec else ELEMENT_LOADS_FACTOR
    if b_kfast:
        loads *= B_KFAST_FACTOR
    return (cfg.efficiency * (M / (mt * cfg.bm)) * (N / (nt * cfg.bn)) * kutil * waves
            * kfill * loads)


@lru_cache(maxsize=8192)
def tc_config(math: str, M: int, N: int, K: int, groups: int, compute_units: int,
              vec: bool) -> TcConfig:
    """The configuration of class ``math`` ("3xtf32" or "tf32") with the best
    :func:`tc_efficiency` for this GEMM (ties: the earlier one); cached.

    Raises KeyError for another class."""
    best, best_e = None, 0.0
    for cfg in TC_CONFIGS[math]:
        e = tc_efficiency(cfg, M, N, K, groups, compute_units, vec and tc_vec_ok(cfg))
        if best is None or e > best_e:
            best, best_e = cfg, e
    return best
