"""Launch plan of the fused Winograd kernel (kernels/fused.cl): one launch, no workspace.

The fused kernel serves forward-like passes (fwd; bwd with the filter flipped and
transposed, as in plan.py) of 3x3 stride-1 problems with one F(MH x MW, 3x3) transform.
Each work-group stages its input tiles' and filters' transforms in local memory, so the
transformed tensors never reach global memory: the price is that every work-group
transforms its FK filters again (once per FT tiles) and every input tile is transformed
once per block of FK output channels.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from wticonv.runtime.kit import Launch

from .plan import KERNELS, Variant, geometry

__all__ = ["FusedParams", "PARAMS", "PARAMS_FEW_OUTPUTS", "FEW_OUTPUTS", "EFFICIENCY",
           "params", "fused_plan", "limit_reason"]

_SRC = "fused.cl"
_F32 = 4


@dataclass(frozen=True)
class FusedParams:
    """Work-group shape of fused.cl (its FUSED_* macros)."""

    tt: int   # tiles per work-item
    kk: int   # output channels per work-item
    lt: int   # work-items along the tiles
    lk: int   # work-items along the output channels
    cb: int   # input channels staged per step

    @property
    def ft(self) -> int:
        return self.tt * self.lt

    @property
    def fk(self) -> int:
        return self.kk * self.lk

    @property
    def wg(self) -> int:
        return self.lt * self.lk

    @property
    def options(self) -> str:
        return (f"-DFUSED_TT={self.tt} -DFUSED_KK={self.kk} -DFUSED_LT={self.lt} "
                f"-DFUSED_LK={self.lk} -DFUSED_CB={self.cb}")


#: Work-group shapes per device kind, chosen by timing candidates on the 3x3 stride-1
#: layers of ResNet-50 and VGG-16 at N=1 and N=32 (H200) or N=1 (CPU, PoCL 3.1). GPU: 128
#: work-items of 2 tiles x 4 channels; CPUs: PoCL runs a work-group's work-items in a loop,
#: so few work-items with many tiles each (their loops vectorise) did best.
PARAMS = {"cpu": FusedParams(tt=16, kk=8, lt=1, lk=2, cb=8),
          "gpu": FusedParams(tt=2, kk=4, lt=16, lk=8, cb=8)}
#: For at most :data:`FEW_OUTPUTS` output channels (VGG-16's backward data of conv1_1 has
#: 3), a GPU block of 32 channels would be mostly padding: there it takes 4. On the CPU
#: narrower blocks measured slower (the tile loop, not the channel loop, is vectorised).
PARAMS_FEW_OUTPUTS = {"cpu": PARAMS["cpu"],
                      "gpu": FusedParams(tt=4, kk=1, lt=32, lk=4, cb=8)}
FEW_OUTPUTS = 4

#: Fraction of the device's peak the fused kernel's multiply reaches (its padded FLOPs):
#: measured 0.15-0.23 on the H200 at N=32, 0.06 on the 2-core CPU. Its operands come from
#: local memory, one read per one to two FMAs, far from a register-blocked SGEMM.
EFFICIENCY = {"cpu": 0.06, "gpu": 0.18}

#: GPUs: seconds a work-group spends on each step of :attr:`FusedParams.cb` input channels
#: (load, transform, stage, multiply, each after the last), the floor of its run time
#: whatever the multiply's rate: ``waves x steps x STEP_S`` (waves of
#: :data:`GROUPS_PER_CU` work-groups per compute unit). Fitted to the 712 fused runs of
#: the H200 corpus measurements (benchmarks/results/corpus-*-h200.csv, N=1 and 32): few
#: output channels over many input channels (256 -> 4 on 13x13, 1024 -> 24 on 19x19 at
#: N=1, one or two work-groups) ran 17-22x slower than their FLOPs predicted; with the
#: floor the spread of log(measured / predicted) fell from 0.71 to 0.23.
STEP_S = {"gpu": 4e-6}
#: Work-groups of 128 work-items resident per compute unit (2048 threads per SM on the
#: H200: CUDA C Programming Guide, compute capability 9.0).
GROUPS_PER_CU = 16


def params(kind: str, outputs: int) -> FusedParams:
    """The work-group shape for ``outputs`` output channels per group on a ``kind`` device."""
    return (PARAMS_FEW_OUTPUTS if outputs <= FEW_OUTPUTS else PARAMS)[kind]


def limit_reason(p, v: Variant) -> str | None:
    """Why the fused kernel's 32-bit indices cannot address problem ``p`` (None when they
    can): it numbers the batch's tiles and the filters of all groups in ints."""
    geo = geometry(p, v)
    th, tw = geo.tiles(v)
    if geo.n * th * tw > 2**31 - 1:
        return f"{geo.n * th * tw} tiles in the batch pass 2^31 (32-bit tile indices)"
    if geo.groups * geo.O * geo.I > 2**31 - 1:
        return (f"{geo.groups * geo.O * geo.I} filters pass 2^31 (the fused kernel indexes "
                "them in 32 bits)")
    return None


def fused_plan(p, v: Variant, kind: str) -> list[Launch]:
    """The one launch of problem ``p`` (fwd or bwd, 3x3, stride 1) with variant ``v``.

    Buffers ``"x"``, ``"w"``, ``"y"``. Cost: the multiply's FLOPs (its tiles and channels
    padded to the work-group's) at :data:`EFFICIENCY`, plus the input read once per block
    of output channels, the filters once per block of tiles, and the output written once.
    """
    if p.direction not in ("fwd", "bwd"):
        raise ValueError(f"the fused kernel serves fwd and bwd, not {p.direction}")
    geo = geometry(p, v)
    fp = params(kind, geo.O)
    (piece,) = geo.pieces
    G, O, I = geo.groups, geo.O, geo.I
    th, tw = geo.tiles(v)
    T = geo.n * th * tw
    too_large = limit_reason(p, v)
    if too_large:
        raise ValueError(f"{p.key}: {too_large}")
    tile_blocks, k_blocks = -(-T // fp.ft), -(-O // fp.fk)
    if p.direction == "fwd":
        wbase, so, si, sr, ss = 0, I * p.r * p.s, p.r * p.s, p.s, 1
        src, dst = "x", "y"
    else:
        wbase, so, si, sr, ss = (p.r - 1) * p.s + p.s - 1, p.r * p.s, O * p.r * p.s, -p.s, -1
        src, dst = "y", "x"
    cb_pad = -(-I // fp.cb) * fp.cb
    flops = 2 * G * (tile_blocks * fp.ft) * (k_blocks * fp.fk) * cb_pad * v.positions
    traffic = _F32 * G * (k_blocks * geo.n * I * geo.H * geo.W
                          + tile_blocks * O * I * p.r * p.s
                          + geo.n * O * geo.Ho * geo.Wo)
    i32, i64 = np.int32, np.int64
    return [KERNELS.launch(_SRC, "fused_forward", f"{v.options} {fp.options}",
                   (tile_blocks * fp.wg, k_blocks, G), (fp.wg, 1, 1),
                   (src, "w", dst, i32(geo.n), i32(I), i32(O), i32(G), i32(geo.H),
                    i32(geo.W), i32(geo.hl), i32(geo.wl), i32(geo.Ho), i32(geo.Wo), i32(th),
                    i32(tw),
                    i32(piece.offh), i32(piece.offw), i64(wbase), i64(O * I * p.r * p.s),
                    i64(so), i64(si), i64(sr), i64(ss)),
                   flops=flops, efficiency=EFFICIENCY[kind], bytes=traffic)]


def serial_seconds(p, v: Variant, kind: str, compute_units: int, launch: Launch) -> float:
    """The latency floor of ``launch``, :func:`fused_plan`'s launch of ``p``, on a ``kind``
    device of ``compute_units`` (seconds, launch overhead excluded; 0 where :data:`STEP_S`
    has no figure for ``kind``): waves of its work-groups x channel steps x :data:`STEP_S`."""
    step = STEP_S.get(kind)
    if step is None:
        return 0.0
    geo = geometry(p, v)
    blocks = math.prod(launch.global_size) // math.prod(launch.local_size)
    waves = -(-blocks // (GROUPS_PER_CU * compute_units))
    return waves * -(-geo.I // params(kind, geo.O).cb) * step
