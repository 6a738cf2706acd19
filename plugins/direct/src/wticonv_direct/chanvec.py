"""The ``direct.chanvec`` solver: convolution on CPUs with output channels in the vector
lanes, in every direction (backward data at stride 1).

Applies on CPUs with 16-float vectors (AVX-512) or 8-float ones (AVX2, in a smaller
register block: :data:`.chanvec_plan.NARROW_BLOCKS`), no dilation, not depthwise: forward and
backward weights at any filter, stride and padding, groups whose K/G is a multiple of 16
(the register blocks, :data:`.chanvec_plan.BLOCKS`); backward data at stride 1 with
padding at most R-1 x S-1 and C/G a multiple of 16, run as the forward kernel on dy
with the filters flipped and transposed (:func:`.chanvec_plan.forward_view`). Dynamic:
six builds per device at most (two per register block); every size is a kernel
argument. Kernels: ``kernels/chanvec.cl``; launches: :mod:`.chanvec_plan`. The workspace
holds the packed filters, 4 K C/G R S bytes (forward and backward data), or the packed
dy, 4 N K Ho Wo bytes, and in chunks of rows their partial dws (backward weights).

Where it pays: pictures of 7x7 to 14x14 and strided layers, where ``direct.tiled`` (output
positions in the lanes) fills few lanes and the GEMMs' 392-column matrices run at
110-165 GFLOP/s. On a 2-core AMD EPYC (Zen 4, PoCL 3.1) it ran ResNet-50's 7x7 and 14x14
forward layers at N=8 at 184-214 GFLOP/s, 1.14-1.59x faster than the fastest other
solver on six of seven, and ResNeXt-50's grouped 3x3 layers of 32 channels a group
1.6-2.5x faster (``benchmarks/chanvec_fwd.py``); ResNet-50's backward weights at N=8 in
0.59-1.33x the best other solver's time, 0.857 in geometric mean over 23 layers
(``benchmarks/chanvec_layers.py``; docs/performance.md).

WTI model (fraction of ``device.peak_flops``)::

    time = 2 x overhead                                   (two launches)
         + PACK_BYTES_FACTOR x 8 x packed floats / bandwidth   (the packing pass)
         + flops / (peak x efficiency)
    forward (and backward data, as the forward problem it runs: q = K/G x R x S):
    efficiency = BLOCK_EFFICIENCY[block] x q / (q + REDUCTION_HALF + TAP_OVERHEAD x R x S)
    q = C/G x R x S   (ONE_BLOCK_EFFICIENCY and ONE_BLOCK_REDUCTION_HALF where a
                       work-item runs one block: chanvec_plan.fwd_split)
    backward weights (:func:`wrw_efficiency`):
    efficiency = WRW_EFFICIENCY[block] x L / (rows x (Wo + WRW_ROW_OVERHEAD)
                 + WRW_ITEM_OVERHEAD) x fill x used x (WRW_POINTWISE for 1x1)
    rows = N x Ho, L = rows x Wo

the forward's second factor being the share of a work-item's time spent in its reduction
rather than setting up its positions, each filter tap's offsets and padding test, and
storing its outputs (a 3-channel stem's 49 taps run 3 channels each). The constants are
fitted by ``tools/fit_chanvec.py`` to this solver's runs among the probes of three
``wticonv calibrate`` runs on a 2-core AMD EPYC (Zen 4, PoCL 3.1; random problems, none a
network's layer; files benchmarks/results/calibrate-chanvec-fit-cpu-zen4.csv,
evaluate-test-n4-cpu-zen4-6/calibrate.csv and calibrate-chanvec-wrw-fit-cpu-zen4.csv):
each run's efficiency that makes the model give its measured time, then the constants
with the least rms log error, over the runs whose time is above the model's floor (the
others are pictures of 1x1 to 7x7 whose two launches took 4-16 us against the 40 us the
device figure charges). Forward: 375 runs, rms log error 0.44 (median -0.01), about what
two timings of one probe differ by on that machine (the first, hand-set constants 0.75,
0.55, 150, no tap term and the packing at the full bandwidth: 1.35x too slow at the
median); those constants are kept for the forward work-items of one block
(ONE_BLOCK_EFFICIENCY), and refitted for those of 16 positions (2026-12-07, eighth session:
calibrate-cpu-zen4-eighth{,-b}.csv, 886 forward and backward-data runs, rms log error
0.48, median -0.03). Backward weights: 121 runs, rms log error 0.38 (median -0.02); on
ResNet-50's 23 backward-weights layers at N=8, fitted to nothing, 0.17 (median +0.06).
Those runs
predate chanvec_wrw_slots: their groups of fewer channels than slots ran half idle, so a
refit on them now misreads those few (the tool gives 0.45 over the same runs); refit on
a fresh calibration.
"""

from __future__ import annotations

from wticonv import WTI_UNKNOWN, Decline, hookimpl
from wticonv.runtime.kit import enqueue, launches_seconds, modelled_kind, programs_of

from . import chanvec_plan

__all__ = ["ChanvecSolver", "solver", "BLOCK_EFFICIENCY", "REDUCTION_HALF", "TAP_OVERHEAD",
           "ONE_BLOCK_EFFICIENCY", "ONE_BLOCK_REDUCTION_HALF",
           "WRW_EFFICIENCY", "WRW_ROW_OVERHEAD", "WRW_POINTWISE", "WRW_ITEM_OVERHEAD",
           "efficiency", "wrw_efficiency", "wrw_fill_used", "predicted_seconds"]

#: Fraction of peak of a long reduction, per register block (positions, vectors; the
#: forward kernel runs it as chanvec_plan.FWD_BLOCKS says). Fitted (tools/fit_chanvec.py)
#: to the forward and backward-data runs of two calibrations measured with 16 positions a
#: work-item (benchmarks/results/calibrate-cpu-zen4-eighth{,-b}.csv, 886 runs): rms log
#: error 0.484, median -0.03, against 0.575 and -0.15 for the constants fitted to the
#: kernel before (0.88, 0.82, 0.72; half 60), which stored each block's outputs one by one.
#: AVX2's 6 x 16 block (chanvec_plan.NARROW_BLOCKS): the value that makes the model's
#: mean log error zero, the other constants as they are, over the 152 runs of that path
#: in a calibration on a 2-core AMD EPYC (Zen 3, AVX2, PoCL 3.1; benchmarks/results/
#: calibrate-cpu-zen3-avx2-ninth.csv; rms log error 0.45); likewise ONE_BLOCK_EFFICIENCY's
#: (74 runs, 0.42) and WRW_EFFICIENCY's (109 runs, 0.47).
BLOCK_EFFICIENCY = {(6, 4): 0.80, (12, 2): 0.78, (12, 1): 0.76, (6, 1): 0.74}
#: Reduction length (C/G x R x S) at which half of a work-item's time is set-up and
#: stores (see the module docstring).
REDUCTION_HALF = 20
#: The same two for the forward problems that chanvec_fwd runs one block a work-item
#: (chanvec_plan.fwd_split: long reductions on small pictures), the kernel that the
#: constants fitted before the 16-position work-items describe (fitted as above to three
#: calibrations of 2026-12-06 and 2026-12-07; the 12 x 16 block's from a fourth).
ONE_BLOCK_EFFICIENCY = {(6, 4): 0.88, (12, 2): 0.82, (12, 1): 0.72, (6, 1): 0.83}
ONE_BLOCK_REDUCTION_HALF = 60
#: What each filter tap (r, s) adds to that length: its offsets and padding test.
TAP_OVERHEAD = 1
#: Backward weights: fraction of peak of a long row, per register block; 12 x 16 as
#: BLOCK_EFFICIENCY's (0.94 against 0.88 for 6 x 64 in that fit, so 1.07 x 0.96).
WRW_EFFICIENCY = {(6, 4): 0.96, (12, 2): 1.14, (12, 1): 1.02, (6, 1): 1.27}
#: Backward weights: a row's set-up (its tap row test and pointers), in columns' time.
WRW_ROW_OVERHEAD = 0
#: Backward weights of 1x1 filters, relative to the others (fitted: 10 % faster).
WRW_POINTWISE = 1.1
#: Backward weights: a work-item's set-up and stores, in positions' time.
WRW_ITEM_OVERHEAD = 64


def efficiency(problem, compute_units: int = 1, width: int = 16) -> float:
    """The modelled fraction of peak of chanvec_fwd (or chanvec_wrw) on ``problem`` on a
    CPU of ``compute_units`` and ``width``-float vectors (module docstring)."""
    if problem.direction == "wrw":
        return wrw_efficiency(problem, compute_units, width)
    problem = chanvec_plan.forward_view(problem)     # backward data: the forward it runs
    q = (problem.c // problem.groups) * problem.r * problem.s
    block = chanvec_plan.block(problem, width)
    if chanvec_plan.fwd_split(problem, width)[1] > 1:
        eff, half = BLOCK_EFFICIENCY[block], REDUCTION_HALF
    else:
        eff, half = ONE_BLOCK_EFFICIENCY[block], ONE_BLOCK_REDUCTION_HALF
    return eff * q / (q + half + TAP_OVERHEAD * problem.r * problem.s)


def wrw_efficiency(problem, compute_units: int, width: int = 16) -> float:
    """chanvec_wrw's modelled fraction of peak: :data:`WRW_EFFICIENCY` of the block, times
    the share of a work-item's time in its positions (each row costs
    :data:`WRW_ROW_OVERHEAD` columns' time to set up, the work-item
    :data:`WRW_ITEM_OVERHEAD` positions' time to set up and store), times the share of
    the compute units its work-items fill (one work-item per block runs on one unit),
    times the share of its slots that are real (the 3-channel stem fills its 6 with
    3 channels x 2 filter columns, a 4-channel group 4 of 6), times
    :data:`WRW_POINTWISE` for 1x1 filters; at most 1 (the fitted
    constants reach past the measured peak on long rows, and a WTI may not: the
    solver's ``max_wti`` is 1.0)."""
    p = problem
    cols = max(p.wo, 1)
    taps = WRW_POINTWISE if p.r * p.s == 1 else 1.0
    rows = p.n * p.ho
    length = rows * cols / (rows * (cols + WRW_ROW_OVERHEAD) + WRW_ITEM_OVERHEAD)
    return min(1.0, WRW_EFFICIENCY[chanvec_plan.block(p, width)] * length * taps
               * wrw_fill_used(p, compute_units, width))


def wrw_fill_used(problem, compute_units: int, width: int = 16) -> float:
    """The share of the compute units chanvec_wrw's work-items fill, times the share of
    its slots that are real (:func:`.chanvec_plan.wrw_slots`; known from the plan, not
    fitted)."""
    fill = min(1.0, chanvec_plan.wrw_items(problem, width) / max(compute_units, 1))
    return fill * chanvec_plan.wrw_slots(problem, width)[2]    # repeated slots do no real work


def predicted_seconds(problem, device) -> float:
    """Predicted time in seconds of ``problem`` on the CPU ``device`` (module docstring;
    :func:`wticonv.runtime.kit.launches_seconds` of the plan)."""
    return launches_seconds(_plan(problem, device), device)


def _plan(problem, device):
    """The plan of ``problem`` on ``device``, its blocks those of the device's vectors."""
    width = device.info.vector_width
    return chanvec_plan.plan(problem, efficiency(problem, device.info.compute_units, width),
                             width)


class ChanvecSolver:
    """Convolution with output channels in the vector lanes (CPUs): forward, backward
    weights, backward data at stride 1."""

    solver_id = "direct.chanvec"
    scope = ("CPUs with 8- or 16-float vectors; fwd and wrw: K/G a multiple of 16; bwd: stride 1, "
             "padding at most R-1 x S-1, C/G a multiple of 16; no dilation, not depthwise")
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
        return chanvec_plan.workspace_bytes(problem, device.info.vector_width)

    @hookimpl
    def programs(self, problem, device):
        return programs_of(_plan(problem, device))

    @hookimpl
    def run(self, problem, device, tensors, workspace):
        enqueue(device, _plan(problem, device),
                {"x": tensors.x, "w": tensors.w, "y": tensors.y, "ws": workspace})


solver = ChanvecSolver()
