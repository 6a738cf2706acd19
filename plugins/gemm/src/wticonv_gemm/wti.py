"""The WTI model of the GEMM solvers: predicted time of a launch plan.

    time = sum over launches of  overhead
                               + flops / (peak * efficiency)     (GEMMs)
                               + bytes / bandwidth                (every kernel's traffic)
                               + fixed_s                          (CPU work-item set-up)
    WTI  = direct FLOPs / (peak * time)

``peak`` and ``bandwidth`` are the device's measured figures (wticonv.runtime.peak); each GEMM's
efficiency comes from params.py (measured large-GEMM efficiency x tile utilisation x
device fill); ``bytes`` counts each tensor element a kernel reads or writes once (for a
GEMM: A, B and C); ``fixed_s`` is the CPU kernels' per-work-item set-up (params.py). The per-launch overhead is measured: an empty kernel's queued-to-end time,
18 us through PoCL 3.1 on the development machines' CPU and 11 us through NVIDIA's OpenCL
driver on the H200 (median of 200).

Unlike MIOpen's GEMM WTI (a fixed slowdown factor per extra pass), the cost of every pass
scales with the problem, so a small picture with many channels and a large picture with
few are told apart. See docs/wti-models.md.
"""

from __future__ import annotations

__all__ = ["LAUNCH_OVERHEAD_S", "predict_seconds", "wti"]

#: Seconds per kernel launch, per device kind (measured; see module docstring).
LAUNCH_OVERHEAD_S = {"cpu": 18e-6, "gpu": 11e-6}


def predict_seconds(launches, device) -> float:
    """Predicted time of ``launches`` on ``device``, in seconds."""
    kind = "cpu" if device.kind == "cpu" else "gpu"
    t = 0.0
    for launch in launches:
        t += LAUNCH_OVERHEAD_S[kind]
        if launch.flops:
            t += launch.flops / (device.peak_flops * max(launch.efficiency, 1e-6))
        if launch.bytes:
            t += launch.bytes / device.bandwidth
        t += launch.fixed_s
    return t


def wti(problem, launches, device) -> float:
    """``problem.flops / (peak * predicted time)``: the WTI of a plan."""
    return problem.flops / (device.peak_flops * predict_seconds(launches, device))
