"""The ``direct.depthwise`` solver: depthwise convolution, every direction.

Applies to problems with ``groups == C`` and therefore ``K == m * C`` for a channel
multiplier m >= 1 (output channel k reads input channel k // m; w is K x 1 x R x S), any
filter size, stride, padding and dilation, NCHW float32. Dynamic: one build per device
(build options depend only on the device kind) serves every problem; sizes are kernel
arguments. Kernels: ``kernels/depthwise.cl``; launches: :mod:`.depthwise_plan`.

Backward weights reduce over N*Ho*Wo per dw element (dw has only K*R*S elements), so the
N*Ho rows of dy may be split into P contiguous parts (deterministic two-pass scheme, no
atomics): pass 1 (``dw_wrw``) writes the partial sums ``ws[p][k][r][s]`` of every part to
the workspace (4 * P * K * R * S bytes), pass 2 (``dw_wrw_sum``) adds them in part order
p = 0, 1, ... into dw. P grows until the device has enough work-items, while each part
keeps enough rows and the partial sums fit the caller's workspace limit; with P = 1 pass 1
writes dw directly and the workspace is 0 bytes. fwd and bwd use no workspace.

WTI model (fraction of ``device.peak_flops``, see docs/wti-models.md)::

    time = launches * overhead
           + max(bytes / (device.bandwidth * STREAMING[kind]),
                 flops / (device.peak_flops * efficiency),
                 R * S * th * GPU_TAP_STEP_S)                   (GPUs, fwd and bwd)
    WTI  = flops / (device.peak_flops * time)

where bytes (B) counts every element of x, w and y read or written once, plus the
workspace written and read again, flops = ``problem.flops`` (2*N*K*Ho*Wo*R*S) and
overhead the device's measured launch overhead (:func:`wticonv.runtime.kit.launch_overhead_s`);
efficiency is ``EFFICIENCY["cpu"]`` on CPUs and, on GPUs, ``GPU_EFFICIENCY`` of the kernel
the plan launches (the 3x3 kernels, the generic one, backward data at a stride); the
last term is a work-item's serial chain of taps (:data:`GPU_TAP_STEP_S`), the floor of a
launch however few work-items it has.
Backward weights on GPUs is bound by its loads of x instead, one per filter tap and dy
element, the taps taken :data:`WRW_TAPS` at a time (the last group padded)::

    flops = 2 * N*K*Ho*Wo * ceil(R*S / WRW_TAPS) * WRW_TAPS,  at WRW_EFFICIENCY["gpu"]
Devices other than CPUs and GPUs get ``WTI_UNKNOWN`` (-2.0,
:func:`wticonv.runtime.kit.modelled_kind`).
"""

from __future__ import annotations

from wticonv import WTI_UNKNOWN, Decline, hookimpl
from wticonv.runtime.kit import enqueue, launch_overhead_s, modelled_kind, programs_of

from . import depthwise_plan

__all__ = ["DepthwiseSolver", "solver", "EFFICIENCY", "GPU_EFFICIENCY", "STREAMING",
           "WRW_EFFICIENCY", "WRW_TAPS", "GPU_TAP_STEP_S", "predicted_seconds"]

#: Fraction of the measured peak FP32 rate the kernels reach where arithmetic, not memory,
#: limits them. CPU 0.16: measured on the 2-core AMD EPYC (Zen 5, AVX-512) through PoCL
#: 3.1 (peak 469 GFLOP/s), MobileNetV2's 3x3 stride-1 layers at N=8, tensors in cache,
#: best of 30 runs: 192 x 28 x 28 forward 21.7 MFLOP in 0.283 ms, 576 x 14 x 14 16.3 MFLOP
#: in 0.213 ms (77 GFLOP/s each), backward data the same; backward weights reaches up to
#: 0.28, the generic and stride-2 kernels about half (docs/wti-models.md). GPU 0.25: not
#: measured separately (memory limits every MobileNetV2 depthwise layer on the H200).
EFFICIENCY = {"cpu": 0.16, "gpu": 0.25}
#: Fraction of the peak FP32 rate each forward / backward-data kernel reaches on GPUs,
#: counting ``problem.flops`` (2 N K Ho Wo R S). Fitted (least squares in log(measured /
#: predicted), together with STREAMING["gpu"]) to the H200's 388 forward and backward-data
#: runs of the corpus's development networks at N=1 and N=32 within 3x of the fastest
#: solver (benchmarks/results/corpus-dev-*-h200.csv, 2026-12-05): the spread fell from
#: 0.53 to 0.18 there, and on the test networks' runs from 0.86 to 0.11 (N=32) and 0.48 to
#: 0.23 (N=1). The single 0.25 before it predicted 5x5 and 7x7 filters 2.4-3.5x too fast
#: and backward data at stride 2 (dw_bwd_any, which visits every tap of every output) 2-4x.
#: ``EFFICIENCY["gpu"]`` stays for a kernel this table lacks.
GPU_EFFICIENCY = {"dw_fwd_3x3s1": 0.066, "dw_fwd_3x3s2": 0.05, "dw_fwd_any": 0.0245,
                  "dw_bwd_any": 0.005}
#: Fraction of the measured copy bandwidth (``device.bandwidth``) the kernels stream at.
#: GPU: fitted with GPU_EFFICIENCY (H200, 388 runs; before it 0.35, from MobileNetV2's
#: depthwise layers forward at N=32, 0.78-2.3 TB/s of 4.1, when the arithmetic term was
#: too optimistic to take its share); CPU: 15-45 GB/s at N=8 against a 40-72 GB/s copy,
#: 0.5 typical.
STREAMING = {"cpu": 0.5, "gpu": 0.63}
#: Filter taps one pass of the backward-weights kernel accumulates (DIRECT_DW_WRW_TAPS in
#: kernels/depthwise.cl).
WRW_TAPS = 9
#: Fraction of the peak FP32 rate backward weights reaches on GPUs, counting 2 FLOPs per
#: tap and dy element, padded taps included: each multiply-add waits on a load of x.
#: Fitted to the H200's measurements of the depthwise layers of the corpus's 31
#: development networks at N=1 and N=32 (173 problems, benchmarks/results/corpus-dev-*-
#: h200.csv): 0.0158, leaving a spread of 0.17 in log(measured / predicted) on them and on
#: the 100 of the test networks (against 0.54 for the bandwidth model, which predicted
#: 3x3 filters 1.1-1.9x too fast, 5x5 1.9-3.7x and 7x7 2.8-7.6x).
WRW_EFFICIENCY = {"gpu": 0.0158}
#: Seconds per filter tap of one work-item of a GPU forward or backward-data kernel, which
#: computes ``PARAMS["gpu"].th`` output rows of one column, each tap a load of x waiting
#: on the one before: however few work-items a problem has, a launch takes at least
#: ``R x S x th`` such steps (the arithmetic term above assumes the device is full).
#: Fitted to the H200's forward and backward-data runs at N=1 of the development
#: networks' 5x5 and 7x7 depthwise layers (benchmarks/results/corpus-dev-n1-h200.csv, 58
#: runs): after the launch overhead, 43-70 ns per step on their smaller pictures (7x7 to
#: 28x28, at 100 and 196 steps), more where the picture is large enough for the
#: arithmetic to take over. Without it, ConvNeXt's 7x7 layer on 7x7 pictures at N=1 was
#: predicted 14-20 us on an H100 and ran 23 us in each of four runs, where
#: ``direct.naive`` takes 11-14.
GPU_TAP_STEP_S = 60e-9


def _bytes(problem, workspace: int) -> int:
    p = problem
    elems = p.n * p.c * p.h * p.w + p.k * p.r * p.s + p.n * p.k * p.ho * p.wo
    return 4 * elems + 2 * workspace


def predicted_seconds(problem, device, workspace_limit=None) -> float | None:
    """Predicted run time (s) of ``problem`` on ``device``; None for unmodelled devices.

    See the module docstring for the model.
    """
    kind = modelled_kind(device)
    if kind is None:
        return None
    pl = depthwise_plan.plan(problem, kind, device.info.compute_units, workspace_limit)
    peak, bandwidth = device.peak_flops, device.bandwidth
    if peak <= 0 or bandwidth <= 0:
        return None
    p = problem
    memory = _bytes(p, pl.workspace) / (bandwidth * STREAMING[kind])
    if p.direction == "wrw" and kind in WRW_EFFICIENCY:
        taps = -(-p.r * p.s // WRW_TAPS) * WRW_TAPS
        compute = 2 * p.n * p.k * p.ho * p.wo * taps / (peak * WRW_EFFICIENCY[kind])
    elif kind == "gpu":
        eff = GPU_EFFICIENCY.get(pl.launches[0].kernel, EFFICIENCY[kind])
        compute = max(p.flops / (peak * eff),
                      p.r * p.s * depthwise_plan.PARAMS[kind].th * GPU_TAP_STEP_S)
    else:
        compute = p.flops / (peak * EFFICIENCY[kind])
    return len(pl.launches) * launch_overhead_s(device) + max(memory, compute)


class DepthwiseSolver:
    """Depthwise convolution (groups == C), blocked direct kernels, all directions."""

    #: what it covers, for `wticonv solvers` (its declines say the rest)
    scope = "depthwise (groups = C), all directions"
    solver_id = "direct.depthwise"
    #: Hook API versions it was written for (wticonv.contract.hookspecs.HOOK_API_VERSION).
    hook_api = (1, 2)
    #: rms_range tolerance against the float64 reference: fp32 sums of R*S terms (fwd),
    #: m*R*S (bwd) or N*Ho*Wo (wrw, in parts); measured on MobileNetV2's layers at N=8:
    #: about 1e-8 (fwd, bwd), up to 7e-7 (wrw).
    tolerance = 1e-5

    @hookimpl
    def is_applicable(self, problem, device):
        reason = depthwise_plan.decline_reason(problem)
        return Decline(reason) if reason else True

    @hookimpl
    def is_dynamic(self):
        return True

    @hookimpl
    def get_wti(self, problem, device, workspace_limit):
        seconds = predicted_seconds(problem, device, workspace_limit)
        if seconds is None:
            return WTI_UNKNOWN
        return problem.flops / (device.peak_flops * seconds)

    @hookimpl
    def workspace_size(self, problem, device, workspace_limit):
        kind = depthwise_plan.kernel_family(device)   # the plan's rule (tests may patch it)
        return depthwise_plan.plan(problem, kind, device.info.compute_units,
                                   workspace_limit).workspace

    @hookimpl
    def programs(self, problem, device, workspace_limit):
        kind = depthwise_plan.kernel_family(device)
        ws = self.workspace_size(problem, device, workspace_limit)
        return programs_of(depthwise_plan.plan(problem, kind, device.info.compute_units,
                                               ws).launches)

    @hookimpl
    def run(self, problem, device, tensors, workspace):
        enqueue(device, depthwise_plan.plan_for(problem, device, workspace).launches,
                {"x": tensors.x, "w": tensors.w, "y": tensors.y, "ws": workspace})


solver = DepthwiseSolver()
