"""The ``direct.chanvec`` solver: forward convolution on CPUs with output channels in the
vector lanes.

Applies to forward problems on CPUs with 16-float vectors (AVX-512), any filter, stride
and padding, no dilation, groups whose K/G is a multiple of 32 (the register block,
:data:`.chanvec_plan.BLOCKS`). Dynamic: two builds per device at most (one per register
block); every size is a kernel argument. Kernels: ``kernels/chanvec.cl``; launches:
:mod:`.chanvec_plan`. The workspace holds the packed filters, 4 K C/G R S bytes.

Where it pays: pictures of 7x7 to 14x14 and strided layers, where ``direct.tiled`` (output
positions in the lanes) fills few lanes and the GEMMs' 392-column matrices run at
110-165 GFLOP/s. On a 2-core AMD EPYC (Zen 4, PoCL 3.1) it ran ResNet-50's 7x7 and 14x14
forward layers at N=8 at 184-214 GFLOP/s, 1.14-1.59x faster than the fastest other
solver on six of seven, and ResNeXt-50's grouped 3x3 layers of 32 channels a group
1.6-2.5x faster (``benchmarks/chanvec_fwd.py``; docs/performance.md).

WTI model (fraction of ``device.peak_flops``)::

    time = 2 x overhead                                   (two launches)
         + 8 K C/G R S / bandwidth                        (packing the filters)
         + flops / (peak x efficiency)
    efficiency = BLOCK_EFFICIENCY[block] x q / (q + REDUCTION_HALF + TAP_OVERHEAD x R x S)
    q = C/G x R x S

the second factor being the share of a work-item's time spent in its reduction rather
than setting up its positions, each filter tap's offsets and padding test, and storing
its outputs (a 3-channel stem's 49 taps run 3 channels each). The constants are fitted
to the 278 runs of this solver among the probes of two ``wticonv calibrate`` runs on a
2-core AMD EPYC (Zen 4, PoCL 3.1; random problems, none a network's layer; files
benchmarks/results/calibrate-chanvec-fit-cpu-zen4.csv and
evaluate-test-n4-cpu-zen4-6/calibrate.csv, script ``tools/fit_chanvec.py``): each run's
efficiency that makes the model give its measured time, then the constants with the
least rms log error over the 259 runs whose time is above the model's launch floor (the
others are pictures of 1x1 to 7x7 whose two launches took 4-16 us against the 40 us the
device figure charges). The rms log error of the modelled efficiency is 0.42 (median -0.05), about what
two timings of one probe differ by on that machine (the first, hand-set constants 0.75,
0.55, 150 and no tap term: 0.62, and 1.35x too slow at the median); the 3 -> 64 7x7
stride-2 probe on 520x520 implied 0.37-0.38 and is modelled 0.36.
"""

from __future__ import annotations

from wticonv import WTI_UNKNOWN, Decline, hookimpl
from wticonv.runtime.kit import enqueue, launches_seconds, modelled_kind, programs_of

from . import chanvec_plan

__all__ = ["ChanvecSolver", "solver", "BLOCK_EFFICIENCY", "REDUCTION_HALF", "TAP_OVERHEAD",
           "WRW_EFFICIENCY", "WRW_ROW_OVERHEAD", "efficiency", "wrw_efficiency",
           "predicted_seconds"]

#: Fraction of peak of a long reduction, per register block (positions, vectors).
BLOCK_EFFICIENCY = {(6, 4): 0.74, (12, 2): 0.66}
#: Reduction length (C/G x R x S) at which half of a work-item's time is set-up and
#: stores (see the module docstring).
REDUCTION_HALF = 50
#: What each filter tap (r, s) adds to that length: its offsets and padding test.
TAP_OVERHEAD = 2
#: Backward weights: fraction of peak of a long row, per register block.
WRW_EFFICIENCY = {(6, 4): 0.74, (12, 2): 0.66}
#: Backward weights: a row's set-up (its tap row test and pointers), in columns' time.
WRW_ROW_OVERHEAD = 2


def efficiency(problem, compute_units: int = 1) -> float:
    """The modelled fraction of peak of chanvec_fwd (or chanvec_wrw) on ``problem``
    (module docstring)."""
    if problem.direction == "wrw":
        return wrw_efficiency(problem, compute_units)
    q = (problem.c // problem.groups) * problem.r * problem.s
    return (BLOCK_EFFICIENCY[chanvec_plan.block(problem)] * q
            / (q + REDUCTION_HALF + TAP_OVERHEAD * problem.r * problem.s))


def wrw_efficiency(problem, compute_units: int) -> float:
    """chanvec_wrw's modelled fraction of peak: :data:`WRW_EFFICIENCY` of the block, times
    the share of a row's time in its columns (a row costs :data:`WRW_ROW_OVERHEAD`
    columns' time to set up), times the share of the compute units its work-items fill
    (one work-item per block runs on one unit)."""
    p = problem
    pb, kv = chanvec_plan.block(p)
    cols = max(p.wo, 1)
    fill = min(1.0, chanvec_plan.wrw_items(p) / max(compute_units, 1))
    return WRW_EFFICIENCY[(pb, kv)] * cols / (cols + WRW_ROW_OVERHEAD) * fill


def predicted_seconds(problem, device) -> float:
    """Predicted time in seconds of ``problem`` on the CPU ``device`` (module docstring;
    :func:`wticonv.runtime.kit.launches_seconds` of the plan)."""
    return launches_seconds(chanvec_plan.plan(problem, _efficiency(problem, device)),
                            device)


def _efficiency(problem, device) -> float:
    return efficiency(problem, device.info.compute_units)


class ChanvecSolver:
    """Forward convolution with output channels in the vector lanes (CPUs)."""

    solver_id = "direct.chanvec"
    hook_api = (1, 2)
    #: rms_range tolerance against the float64 reference (fp32 accumulation along C/G x R x S)
    tolerance = 1e-5

    @hookimpl
    def is_applicable(self, problem, device):
        reason = chanvec_plan.decline_reason(problem, device)
        return Decline(reason) if reason else True

    @hookimpl
    def is_dynamic(self):
        return True

    @hookimpl
    def get_wti(self, problem, device):
        if modelled_kind(device) != "cpu" or device.peak_flops <= 0 or device.bandwidth <= 0:
            return WTI_UNKNOWN
        return problem.flops / (device.peak_flops * predicted_seconds(problem, device))

    @hookimpl
    def workspace_size(self, problem, device):
        return chanvec_plan.workspace_bytes(problem)

    @hookimpl
    def programs(self, problem, device):
        return programs_of(chanvec_plan.plan(problem, _efficiency(problem, device)))

    @hookimpl
    def run(self, problem, device, tensors, workspace):
        enqueue(device, chanvec_plan.plan(problem, _efficiency(problem, device)),
                {"x": tensors.x, "w": tensors.w, "y": tensors.y, "ws": workspace})


solver = ChanvecSolver()
