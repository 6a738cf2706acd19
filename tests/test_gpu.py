"""On an OpenCL GPU (the lent NVIDIA H200 here): device figures and direct.naive results.

Skipped where there is no GPU (CI, PoCL-only machines).
"""

from __future__ import annotations

import numpy as np
import pytest

from wticonv import ConvProblem, reference, rms_range
from wticonv.measuring.bench import run_bench
from wticonv.workloads.networks import load_network

pytestmark = pytest.mark.gpu


def test_gpu_figures(gpu_handle):
    dev = gpu_handle.device
    assert dev.kind == "gpu"
    # Any current GPU exceeds 1 TFLOP/s FP32 and 100 GB/s.
    assert dev.peak_flops > 1e12 and dev.bandwidth > 1e11


@pytest.mark.parametrize("direction", ["fwd", "bwd", "wrw"])
@pytest.mark.parametrize("p", [
    ConvProblem(4, 64, 28, 28, 32, 3, 3, pad_h=1, pad_w=1),
    ConvProblem(2, 3, 57, 61, 16, 7, 7, pad_h=3, pad_w=3, stride_h=2, stride_w=2),
    ConvProblem(2, 32, 15, 15, 32, 3, 3, pad_h=2, pad_w=2, dilation_h=2, dilation_w=2,
                groups=32),
], ids=lambda p: p.key)
def test_naive_on_gpu(gpu_handle, p, direction):
    q = p.with_direction(direction)
    rng = np.random.default_rng(0)
    data = {k: rng.uniform(-1, 1, s).astype(np.float32)
            for k, s in (("x", q.x_shape), ("w", q.w_shape), ("y", q.y_shape))}
    out = {"fwd": "y", "bwd": "x", "wrw": "w"}[direction]
    given = {k: v for k, v in data.items() if k != out}
    result = gpu_handle.compute(q, solver="direct.naive", **given)
    assert rms_range(result, reference(q, **given)) < 1e-5


def test_resnet50_bench_on_gpu(gpu_handle):
    report = run_bench(gpu_handle, load_network("resnet50", 2), ["fwd", "bwd", "wrw"],
                       iterations=1)
    assert not report.failures and len(report.rows) == 69
