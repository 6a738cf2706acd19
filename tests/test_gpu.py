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


def _tc_handle(gpu_handle):
    from wticonv.runtime.kit import tensor_cores

    if not tensor_cores(gpu_handle.device):
        pytest.skip(f"{gpu_handle.device.info.name}: no tensor cores reachable through "
                    "inline PTX")
    return gpu_handle


def test_tensor_core_gemm_classes(gpu_handle):
    """kernels/nv/sgemm_tc.cl on NVIDIA's OpenCL (compute capability 8.0+), and
    kernels/nv/sgemm_wg.cl on 9.0 (its PTX undeferred, wticonv.runtime.ptx), through the
    plugin's launch plan: 3xTF32 is as accurate as an FP32 product, TF32 is not (10-bit
    mantissa), both against float64; every configuration, with 16-byte loads (K = 272)
    and element loads (K = 271, rows not 16-byte aligned), sizes past the tiles."""
    from dataclasses import replace

    import pyopencl as cl
    from wticonv.runtime.kit import wgmma
    from wticonv_gemm.tensorcore import TC_CONFIGS, WG_CONFIGS

    dev = _tc_handle(gpu_handle).device
    # the warpgroup kernel (kernels/nv/sgemm_wg.cl) too, on compute capability 9.0
    # and its pipelined loop order (WG_PIPE), 3 stages or more
    configs = {math: TC_CONFIGS[math] + ((WG_CONFIGS[math] + tuple(
                   replace(c, pipe=True, stages=max(3, c.stages)) for c in WG_CONFIGS[math]))
                   if wgmma(dev) else ())
               for math in TC_CONFIGS}
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import tc_gemm

    rng = np.random.default_rng(3)
    for M, N, K in ((256, 384, 272), (250, 301, 271)):
        A = rng.uniform(-1, 1, (M, K)).astype(np.float32)
        B = rng.uniform(-1, 1, (K, N)).astype(np.float32)
        mf = cl.mem_flags
        bufs = {"a": cl.Buffer(dev.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=A),
                "b": cl.Buffer(dev.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=B),
                "c": cl.Buffer(dev.context, mf.READ_WRITE, 4 * M * N)}
        rows = np.arange(M)
        err = {math: [tc_gemm.rel_error(tc_gemm.ours(dev, bufs, M, N, K, cfg, math, 1)[1],
                                        A, B, rows) for cfg in configs[math]]
               for math in ("3xtf32", "tf32")}
        # cuBLAS FP32 measured 2.1-2.6e-6 at K = 2048-4096
        # (benchmarks/results/tc-gemm-h200.txt); TF32 rounds each operand to 11
        # significant bits (2^-11 = 4.9e-4)
        assert max(err["3xtf32"]) < 2e-6, (M, N, K, err)
        assert 1e-5 < min(err["tf32"]) and max(err["tf32"]) < 5e-3, (M, N, K, err)
        assert max(err["3xtf32"]) < min(err["tf32"]) / 50, (M, N, K, err)


TC_BASES = ("gemm.im2col", "gemm.1x1", "winograd.f2x3", "winograd.f4x3", "winograd.rxs")


@pytest.mark.parametrize("direction", ["fwd", "bwd", "wrw"])
@pytest.mark.parametrize("p", [
    ConvProblem(8, 256, 14, 14, 512, 1, 1),                       # 16-byte loads of x
    ConvProblem(8, 512, 7, 7, 256, 1, 1),                         # 49 pixels: element loads
    ConvProblem(4, 256, 28, 28, 128, 1, 1, stride_h=2, stride_w=2),
    ConvProblem(4, 64, 28, 28, 64, 3, 3, pad_h=1, pad_w=1),
    ConvProblem(4, 96, 17, 17, 64, 3, 3, pad_h=1, pad_w=1, stride_h=2, stride_w=2),
    ConvProblem(2, 32, 19, 19, 48, 5, 5, pad_h=2, pad_w=2),
    ConvProblem(2, 3, 57, 61, 16, 7, 7, pad_h=3, pad_w=3, stride_h=2, stride_w=2),
    ConvProblem(2, 64, 15, 15, 128, 3, 3, pad_h=1, pad_w=1, groups=4),
], ids=lambda p: p.key)
def test_tensor_core_solvers_match_the_reference(gpu_handle, p, direction):
    """Every solver's 3xTF32 class within its FP32 class's tolerance, its TF32 class (where
    it has one) within its own (wticonv.contract.answers.tolerance_for), and 3xTF32 at
    least 10x closer to the float64 reference than TF32."""
    from wticonv import WticonvError
    from wticonv.contract.answers import tolerance_for

    h = _tc_handle(gpu_handle)
    q = p.with_direction(direction)
    rng = np.random.default_rng(1)
    data = {k: rng.uniform(-1, 1, s).astype(np.float32)
            for k, s in (("x", q.x_shape), ("w", q.w_shape), ("y", q.y_shape))}
    out = {"fwd": "y", "bwd": "x", "wrw": "w"}[direction]
    given = {k: v for k, v in data.items() if k != out}
    want = reference(q, **given)
    ran = []
    for base in TC_BASES:
        try:
            h.select(q, solver=f"{base}_3xtf32")
        except WticonvError:        # the solver declines this problem
            continue
        e3 = rms_range(h.compute(q, solver=f"{base}_3xtf32", **given), want)
        assert e3 < tolerance_for(h.registry, base, q), (base, e3)
        ran.append(base)
        if f"{base}_tf32" not in h.registry.ids():   # winograd.f4x3 has no TF32 class
            continue
        e1 = rms_range(h.compute(q, solver=f"{base}_tf32", allow_tf32=True, **given), want)
        assert e1 < tolerance_for(h.registry, f"{base}_tf32", q), (base, e1)
        assert e3 < e1 / 10, (base, e3, e1)
    assert "gemm.im2col" in ran, ran


@pytest.mark.parametrize("solver_id", [f"{b}_{m}" for b in TC_BASES for m in ("3xtf32", "tf32")
                                       if (b, m) != ("winograd.f4x3", "tf32")])
def test_tensor_core_solvers_name_their_programs(gpu_handle, solver_id):
    """The conformance kit's programs check on the tensor-core classes (the CPU suite
    cannot run them): each names exactly the programs its run builds."""
    from wticonv.testing import check_solver

    h = _tc_handle(gpu_handle)
    report = check_solver(solver_id, h, checks=["programs"])
    assert report.ok and report.results[0].covered, str(report)
