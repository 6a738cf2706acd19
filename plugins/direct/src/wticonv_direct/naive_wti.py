"""The time models of direct.naive, from its launch (launch.grid): GPUs, and the
work-group cost of naive_wrw_split on CPUs.

Each work-item of the naive kernels runs its whole reduction alone, one dependent step of
loads and a multiply-add after another. So a launch costs

    time = overhead                                        (the device's launch cost)
         + 2 x items x steps / (peak x EFFICIENCY)         (the device's throughput)
         + waves x steps x STEP_LATENCY_S                  (one work-item's serial chain)
         + groups / compute_units x GROUP_S                (work-group start and end)

and in ``naive_wrw_split`` the throughput and chain terms are multiplied by the cache
factor ``1 + PLANE_MISS x max(0, ln(plane / PLANE_CACHED_BYTES))`` (:func:`cache_factor`),
``plane`` being the bytes one work-group streams: its input and output-gradient planes
over the batch, ``4 N (H W + Ho Wo)``. Its 64 lanes read 64 different rows at a time; the
larger those planes, the more of those loads miss the compute unit's cache.

- ``items`` is the launch's global size (padded to whole work-groups), ``steps`` the
  serial reduction of one work-item (:func:`steps`);
- ``waves`` is ``ceil(items / resident work-items)``
  (:func:`wticonv.runtime.kit.resident_work_items`: 2048 per multiprocessor): a grid
  that fits on the device at once still takes one work-item's whole chain, which is
  what makes a few outputs with a long reduction slow (a 128 -> 32 3x3 layer on a 7x7
  picture at N=1, or a depthwise backward-weights layer split into work-groups of mostly
  idle lanes);
- ``overhead`` is the device's measured launch cost
  (:func:`wticonv.runtime.kit.launch_overhead_s`).

The constants are per kernel, fitted (least squares in log(measured / predicted)) to the
H200's direct.naive runs on the development networks that came within 5x of the fastest
solver (2046 runs: ``benchmarks/results/corpus-dev-*-h200.csv`` and the calibration
probes ``calibrate-test-n32-h200-floors.csv``; slower runs do not decide a choice). On the
test networks' runs within 3x of the fastest, the spread of log(measured / predicted) is
0.29 (fwd), 0.29 (bwd), 0.10 (wrw) and 0.35 (wrw split), against 0.80, 0.78, 0.61 and
0.41 for the flat 1 %-of-peak model that CPUs keep (naive.py). naive_wrw_split's constants
and its cache factor were refitted (2026-12-05) to the 510 runs of the development
networks at N=1 and N=32 on the H200 within 3x of the fastest solver: the spread fell
from 0.33 to 0.22 there, and from 0.29 to 0.21 (N=1) and from 0.40 to 0.26 (N=32) on the
test networks' runs; the flat-throughput model had predicted 1x1 layers on 56x56 pictures
at N=1 1.4-1.8x too fast and on 28x28-56x56 pictures at N=32 up to 3.5x.
docs/wti-models.md has the measurement.

On CPUs the kernels keep the flat 1 %-of-peak model (naive.py), plus, for
naive_wrw_split, :data:`CPU_SPLIT_GROUP_S` per work-group and core (:func:`cpu_seconds`).
"""

from __future__ import annotations

import math

from wticonv.runtime.kit import launch_overhead_s, resident_work_items

from .launch import WRW_LOCAL, grid

__all__ = ["EFFICIENCY", "STEP_LATENCY_S", "GROUP_S", "PLANE_CACHED_BYTES", "PLANE_MISS",
           "CPU_SPLIT_GROUP_S", "steps", "cache_factor", "seconds", "cpu_seconds"]

#: Fraction of peak FP32 (one multiply-add = 2 FLOP per work-item step) the device sustains
#: over a kernel's work-items, by kernel.
EFFICIENCY = {"naive_fwd": 0.029, "naive_bwd": 0.019, "naive_wrw": 0.024,
              "naive_wrw_split": 0.034}
#: Seconds per serial step of one work-item (its loads' latency), by kernel. naive_wrw
#: is used only on grids of a full wave or more, where the fit finds throughput alone.
STEP_LATENCY_S = {"naive_fwd": 0.27e-6, "naive_bwd": 0.62e-6, "naive_wrw": 0.0,
                  "naive_wrw_split": 0.01e-6}
#: Seconds per work-group and compute unit: starting it, its index arithmetic, and in
#: naive_wrw_split its tree reduction through local memory, by kernel.
GROUP_S = {"naive_fwd": 0.18e-6, "naive_bwd": 1.4e-6, "naive_wrw": 0.53e-6,
           "naive_wrw_split": 0.076e-6}
#: naive_wrw_split's cache factor (:func:`cache_factor`): the bytes of a work-group's
#: planes the compute unit's cache still serves (about 7 KB), and the time added per
#: e-fold beyond them (77 %), fitted with the constants above (H200, 510 runs).
PLANE_CACHED_BYTES = 7.3e3
PLANE_MISS = 0.77
#: Seconds a CPU core spends on one work-group of naive_wrw_split whatever its reduction
#: (PoCL runs the group's WRW_LOCAL work-items as loops between its barriers, then the
#: tree reduction): measured on dw of 64-384 elements with a reduction of 4 (1x1 layers
#: on 1x1 pictures at N=4), (measured - 1 %-model time) x cores / groups was 0.36-0.66 us
#: on the 2-core Intel Xeon (AVX-512) and 0.49-1.42 us on the 2-core AMD EPYC, both PoCL
#: 3.1 (benchmarks/results/evaluate-test-n4-cpu-*.csv); the 1 % model alone predicted
#: these launches 4-12x too fast.
CPU_SPLIT_GROUP_S = 0.7e-6


def steps(problem, kernel: str) -> float:
    """Serial reduction steps of one work-item of ``kernel`` on ``problem``: its output's
    reduction (``ConvProblem.direct_work``: C/g R S in fwd, K/g R S / strides in bwd,
    N Ho Wo in naive_wrw), or in naive_wrw_split one lane's share of it (ceil(N Ho /
    WRW_LOCAL) rows of Wo)."""
    p = problem
    if kernel == "naive_wrw_split":
        return -(-(p.n * p.ho) // WRW_LOCAL) * p.wo
    return p.direct_work[1]


def cache_factor(problem, kernel: str) -> float:
    """The factor naive_wrw_split's throughput and chain terms take for its cache misses:
    ``1 + PLANE_MISS x max(0, ln(plane / PLANE_CACHED_BYTES))`` with ``plane = 4 N (H W +
    Ho Wo)`` bytes (one dw element's x and dy planes over the batch); 1 for the other
    kernels."""
    if kernel != "naive_wrw_split":
        return 1.0
    p = problem
    plane = 4.0 * p.n * (p.h * p.w + p.ho * p.wo)
    return 1.0 + PLANE_MISS * max(0.0, math.log(plane / PLANE_CACHED_BYTES))


def seconds(problem, device) -> float:
    """Predicted run time in seconds of direct.naive on ``problem`` on the GPU ``device``
    (needs ``peak_flops`` in FLOP/s, ``info.compute_units`` and the launch overhead)."""
    kernel, items, local = grid(problem, device)
    cu = device.info.compute_units
    n = steps(problem, kernel)
    waves = -(-items // resident_work_items(device))
    return (launch_overhead_s(device)
            + cache_factor(problem, kernel)
            * (2.0 * items * n / (device.peak_flops * EFFICIENCY[kernel])
               + waves * n * STEP_LATENCY_S[kernel])
            + items / local / cu * GROUP_S[kernel])


def cpu_seconds(problem, device, efficiency: float) -> float:
    """Predicted run time in seconds of direct.naive on ``problem`` on the CPU ``device``:
    one launch (the device's overhead), the FLOPs at ``efficiency`` x peak, and for
    naive_wrw_split :data:`CPU_SPLIT_GROUP_S` per work-group, its groups shared by the
    cores (``info.compute_units``)."""
    kernel, items, local = grid(problem, device)
    t = launch_overhead_s(device) + problem.flops / (device.peak_flops * efficiency)
    if kernel == "naive_wrw_split":
        t += items / local / device.info.compute_units * CPU_SPLIT_GROUP_S
    return t
