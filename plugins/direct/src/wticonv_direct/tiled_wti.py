"""The WTI model of direct.tiled: predicted time of its plan (tiled_plan.Plan).

    time = launches x overhead                                            (per launch)
         + padded_flops / (peak x efficiency x fill)                      (the blocks)
         + traffic / bandwidth                                            (compulsory traffic)
    WTI  = problem.flops / (peak x time)

- efficiency is scaled by Q / (Q + setup) for a reduction of Q indices per block
  (:data:`SETUP_STEPS`: 32 on the CPU, 24 on the GPU; :data:`DOT_SETUP_STEPS` for the
  CPU's backward weights): short reductions pay the block's set-up and store.
- ``padded_flops`` counts the multiply-adds of whole blocks (channels and positions
  rounded up to the block sizes), so small K or small pictures cost what the tail blocks
  waste; bwd sums its stride phases, which skip the taps that only meet zeros.
- ``efficiency`` is the fraction of peak the blocks' inner loops reach on problems that
  fill the device, measured per device kind and kernel variant (:data:`EFFICIENCY`).
- ``fill`` is the occupancy of the last wave: blocks / (waves x slots), a slot being a
  compute unit on the CPU and one of :data:`SLOTS_PER_CU` resident work-groups per
  multiprocessor on the GPU; a grid that leaves most slots idle is predicted slower.
- ``traffic`` counts the inputs read once, the output written once, and a split
  reduction's partial sums written and read once, at the measured bandwidth.
- ``overhead`` is the device's measured launch cost
  (:func:`wticonv.runtime.kit.launch_overhead_s`).
- the "lanes" plans (GPUs, 4 channels or fewer) take at least ``launches x reduction x``
  :data:`LANES_STEP_S`: each work-item runs its reduction alone, one dependent step of
  loads after another, so few channels with a long reduction are latency-bound however
  many work-items run.

The same model picks the GPU tile build and the split (tiled_plan.plan). Device kinds
other than CPUs and GPUs get -2.0 (unknown, :func:`wticonv.runtime.kit.modelled_kind`).
Constants: benchmarks/direct_solvers.py on the development machines' 2-core Zen 5 CPU
(PoCL 3.1) and the H200 (docs/performance.md).
"""

from __future__ import annotations

from wticonv import WTI_UNKNOWN
from wticonv.runtime.kit import FALLBACK_LAUNCH_OVERHEAD_S, launch_overhead_s, modelled_kind

__all__ = ["EFFICIENCY", "SLOTS_PER_CU", "SETUP_STEPS", "DOT_SETUP_STEPS", "LANES_STEP_S",
           "plan_seconds", "seconds", "wti", "PLAN_BIAS", "plan_bias"]

#: Fraction of peak FP32 of the inner loops on large problems, by (device kind, variant).
#: GPU variants are tile builds (tiled_plan.GPU_TILES) and "lanes" (tiled_cpu.cl's kernel
#: on a GPU, for 4 channels or fewer); CPU variants are lane modes:
#: "flat" (lanes load as one vector), "rows" (row-aligned lanes, strided vector loads;
#: "rows8" with 8 lanes for 7-wide rows),
#: "gather" (lanes loaded one by one) and "dot" (the wrw kernel).
EFFICIENCY = {
    ("gpu", "64x64"): 0.25, ("gpu", "64x128"): 0.27, ("gpu", "64x128k8"): 0.27,
    ("gpu", "128x128"): 0.34, ("gpu", "16x256"): 0.13, ("gpu", "lanes"): 0.10,
    ("cpu", "flat"): 0.26, ("cpu", "rows"): 0.33, ("cpu", "rows8"): 0.18,
    ("cpu", "gather"): 0.12,
    ("cpu", "dot"): 0.29,
}
#: Work-groups resident per multiprocessor, by GPU tile build (H200: 64 K registers and
#: 2048 work-items per SM); "lanes" counts work-items (its efficiency was measured at the
#: occupancy its grids reach, so its waves are made short enough not to count).
SLOTS_PER_CU = {"64x64": 4, "64x128": 2, "64x128k8": 2, "128x128": 1, "16x256": 4,
                "lanes": 64}


#: fwd/bwd blocks spend about as long setting up and storing as this many reduction steps:
#: efficiency x Q / (Q + steps). CPU: fitted to ResNet-50's 1x1 layers with 64 input
#: channels (predicted 1.3x too fast without it) and MobileNetV2's 1x1 layers with 16-24
#: (2x too fast). GPU: fitted to ResNet-50's 1x1 layers with 64 channels at N=32 on the
#: H200 (predicted 1.35x too fast without it; evaluate-resnet50-n32-h200.csv).
SETUP_STEPS = {"cpu": 32, "gpu": 24}
#: The same for the CPU backward-weights kernel (tiled_dot), whose blocks each reduce over
#: N x Ho x Wo / splits: fitted to every split ``wticonv tune`` timed on ResNet-50's wrw
#: layers at N=8 on the development machines' CPU (92 timings; mean |log(measured /
#: predicted)| 0.15 with it, 0.21 without: 7x7 pictures, a reduction of 392 or less per
#: block, ran 1.3-2x slower than predicted).
DOT_SETUP_STEPS = 64
#: Seconds per reduction step of a GPU "lanes" work-item (4 weights and 8 inputs loaded,
#: 32 multiply-adds), the floor of a launch whatever its width: fitted to the 65 lanes
#: plans of the H200 corpus measurements (benchmarks/results/corpus-*-h200.csv, N=1 and
#: 32; the SE blocks' 96 -> 4 1x1 layers, segmentation heads' 256 -> 3, first layers'
#: backward data). 0.35 us per step (0.25-0.7 measured) cut the spread of log(measured /
#: predicted) from 0.60 to 0.26; without it, 1x1 layers with K = 3 were predicted 4.5x
#: too fast.
LANES_STEP_S = 0.35e-6


def plan_seconds(plan, kind: str, compute_units: int, peak_flops: float,
                 bandwidth: float, launch_s: float | None = None) -> float:
    """Predicted run time of ``plan`` in seconds on a device of ``kind`` with
    ``compute_units``, ``peak_flops`` (FLOP/s), ``bandwidth`` (bytes/s) and ``launch_s``
    seconds per launch (None: the kit's fallback constant for ``kind``,
    :data:`wticonv.runtime.kit.FALLBACK_LAUNCH_OVERHEAD_S`)."""
    return seconds(kind, plan.variant, plan.blocks, plan.padded_flops, plan.traffic_bytes,
                   plan.reduction, plan.splits, plan.n_launches, compute_units, peak_flops,
                   bandwidth, launch_s)


def seconds(kind: str, variant: str, blocks: int, padded_flops: float, traffic_bytes: int,
            reduction: int, splits: int, n_launches: int, compute_units: int,
            peak_flops: float, bandwidth: float, launch_s: float | None = None) -> float:
    """:func:`plan_seconds` of a plan given as the values it reads (the planner costs its
    candidates this way, without building them)."""
    if launch_s is None:
        launch_s = FALLBACK_LAUNCH_OVERHEAD_S[kind]
    slots = compute_units * (SLOTS_PER_CU.get(variant, 1) if kind == "gpu" else 1)
    waves = -(-blocks // slots)
    fill = blocks / (waves * slots)
    eff = EFFICIENCY[(kind, variant)] * fill
    # a block's set-up (offsets, masks, the store) against its part of the reduction
    q = reduction / splits
    eff *= q / (q + (DOT_SETUP_STEPS if variant == "dot" else SETUP_STEPS[kind]))
    compute = padded_flops / (peak_flops * eff) if padded_flops > 0 else 0.0
    if variant == "lanes":
        compute = max(compute, n_launches * reduction * LANES_STEP_S)
    return n_launches * launch_s + compute + traffic_bytes / bandwidth


#: Median measured / predicted time of the plans each GPU build runs, over the H200
#: measurements of the development networks (benchmarks/results/corpus-dev-*-h200.csv
#: with remeasure-2026-12-02-h200.csv, N=1 and 32, 3285 runs; the test networks' runs
#: give 0.76, 0.89, 0.58, 0.94 and 0.78): the WTI of a chosen plan is scaled by it, the
#: planner's comparison of builds is not. Efficiencies rescaled by these figures moved
#: 228 problems to other builds, which measured as fast or slower (docs/wti-models.md):
#: the figures describe the problems each build is chosen for, and a correction fitted
#: over all of direct.tiled's runs cannot tell the builds apart. A (kind, build,
#: direction) entry overrides its build's figure for that direction: the 8-deep build's
#: one figure (0.51) mixed forward and backward data (0.67 and 0.66 on the same H200
#: runs) with backward weights (0.18), so its forward and backward-data plans were
#: predicted 1.3x too fast on an H100 nobody fitted to (1.30-1.36, 229 calibration-probe
#: runs; regnet_y_3_2gf's 72 -> 32 1x1 stride-2 backward data at N=32: predicted 0.104
#: ms, measured 0.22-0.23, against gemm.1x1's 0.14).
PLAN_BIAS = {("gpu", "128x128"): 0.75, ("gpu", "64x128"): 0.89, ("gpu", "64x128k8"): 0.51,
             ("gpu", "64x64"): 0.93, ("gpu", "16x256"): 0.82,
             ("gpu", "64x128k8", "fwd"): 0.67, ("gpu", "64x128k8", "bwd"): 0.66}


def plan_bias(kind: str, variant: str, direction: str) -> float:
    """:data:`PLAN_BIAS` of a plan of build ``variant`` in ``direction`` on a device of
    ``kind``: the direction's own figure, else the build's, else 1."""
    return PLAN_BIAS.get((kind, variant, direction), PLAN_BIAS.get((kind, variant), 1.0))


def wti(problem, plan, device) -> float:
    """``problem.flops / (peak * predicted time)``, the time scaled by
    :func:`plan_bias`; -2.0 on unmodelled device kinds."""
    kind = modelled_kind(device)
    if kind is None:
        return WTI_UNKNOWN
    t = plan_seconds(plan, kind, device.info.compute_units, device.peak_flops,
                     device.bandwidth, launch_overhead_s(device))
    return problem.flops / (device.peak_flops * t
                            * plan_bias(kind, plan.variant, problem.direction))
