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


def test_tensor_core_gemm_classes(gpu_handle):
    """kernels/nv/sgemm_tc.cl on NVIDIA's OpenCL (compute capability 8.0+): 3xTF32 is as
    accurate as an FP32 product, TF32 is not (10-bit mantissa), both against float64."""
    import pyopencl as cl
    from wticonv.runtime.kit import tensor_cores

    dev = gpu_handle.device
    if not tensor_cores(dev):
        pytest.skip(f"{dev.info.name}: no tensor cores reachable through inline PTX")
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import tc_gemm

    M, N, K = 256, 384, 272
    rng = np.random.default_rng(3)
    A = rng.uniform(-1, 1, (M, K)).astype(np.float32)
    B = rng.uniform(-1, 1, (K, N)).astype(np.float32)
    mf = cl.mem_flags
    bufs = {"a": cl.Buffer(dev.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=A),
            "b": cl.Buffer(dev.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=B),
            "c": cl.Buffer(dev.context, mf.READ_WRITE, 4 * M * N)}
    rows = np.arange(M)
    for cfg in ((128, 128, 64, 32), (64, 128, 32, 32)):
        _, C3 = tc_gemm.ours(dev, bufs, M, N, K, cfg, True, 1)
        _, C1 = tc_gemm.ours(dev, bufs, M, N, K, cfg, False, 1)
        e3, e1 = tc_gemm.rel_error(C3, A, B, rows), tc_gemm.rel_error(C1, A, B, rows)
        # cuBLAS FP32 measured 2.1-2.6e-6 at K = 2048-4096 (benchmarks/results/tc-gemm-h200.txt);
        # TF32 rounds each operand to 11 significant bits (2^-11 = 4.9e-4)
        assert e3 < 2e-6 and e3 < e1 / 50, (cfg, e3, e1)
        assert 1e-5 < e1 < 5e-3, (cfg, e1)
