"""The WTI model of the GEMM solvers: predicted time of a launch plan.

    time = sum over launches of  overhead
                               + flops / (peak * efficiency)     (GEMMs)
                               + bytes / bandwidth                (every kernel's traffic)
                               + fixed_s                          (CPU work-item set-up)
    WTI  = direct FLOPs / (peak * time)

``peak`` and ``bandwidth`` are the device's measured figures (wticonv.runtime.peak); each GEMM's
efficiency comes from params.py (measured large-GEMM efficiency x tile utilisation x
device fill); ``bytes`` counts each tensor element a kernel reads or writes once (for a
GEMM: A, B and C); ``fixed_s`` is the CPU kernels' per-work-item set-up (params.py). The per-launch
overhead is the device's measured figure (:func:`wticonv.runtime.kit.launch_overhead_s`:
an empty kernel's median queued-to-end time). Devices that are neither CPUs nor GPUs get
-2.0, unknown (:func:`wticonv.runtime.kit.modelled_kind`).

Unlike MIOpen's GEMM WTI (a fixed slowdown factor per extra pass), the cost of every pass
scales with the problem, so a small picture with many channels and a large picture with
few are told apart. See docs/wti-models.md.
"""

from __future__ import annotations

from wticonv import WTI_UNKNOWN
from wticonv.runtime.kit import launches_seconds, modelled_kind

__all__ = ["predict_seconds", "wti"]


def predict_seconds(launches, device) -> float:
    """Predicted time of ``launches`` (:class:`wticonv.runtime.kit.Launch`, their cost
    fields) on ``device``, in seconds (see the module docstring;
    :func:`wticonv.runtime.kit.launches_seconds`)."""
    return launches_seconds(launches, device)


def wti(problem, launches, device) -> float:
    """``problem.flops / (peak * predicted time)``: the WTI of a plan; -2.0 (unknown) on
    devices that are neither CPUs nor GPUs."""
    if modelled_kind(device) is None:
        return WTI_UNKNOWN
    return problem.flops / (device.peak_flops * predict_seconds(launches, device))
