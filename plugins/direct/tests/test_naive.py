"""direct.naive against the float64 reference on edge shapes, in every direction."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np

import pytest

from wticonv import ConvProblem, reference, rms_range
from wticonv.testing import EDGE_SHAPES
from wticonv_direct import launch, naive_wti
from wticonv_direct.naive import NAIVE_WTI, solver
from wticonv_direct.programs import KERNELS

P = ConvProblem
EDGE = EDGE_SHAPES


def _data(p: ConvProblem, seed: int):
    rng = np.random.default_rng(seed)
    return {name: rng.uniform(-1, 1, shape).astype(np.float32)
            for name, shape in (("x", p.x_shape), ("w", p.w_shape), ("y", p.y_shape))}


@pytest.mark.parametrize("direction", ["fwd", "bwd", "wrw"])
@pytest.mark.parametrize("name", list(EDGE))
def test_edge_shapes(handle, name, direction):
    p = EDGE[name].with_direction(direction)
    d = _data(p, seed=len(name))
    out = {"fwd": "y", "bwd": "x", "wrw": "w"}[direction]
    given = {k: v for k, v in d.items() if k != out}
    result = handle.compute(p, solver="direct.naive", **given)
    ref = reference(p, **given)
    assert result.shape == ref.shape
    assert rms_range(result, ref) < solver.tolerance


@pytest.mark.parametrize("shape", [P(1, 2, 3, 3, 4, 3, 3, pad_h=1, pad_w=1),   # split kernel
                                   P(1, 64, 4, 4, 64, 3, 3, pad_h=1, pad_w=1)])  # serial
def test_both_wrw_kernels(handle, shape):
    p = shape.with_direction("wrw")
    d = _data(p, seed=3)
    dw = handle.compute(p, x=d["x"], y=d["y"], solver="direct.naive")
    assert rms_range(dw, reference(p, x=d["x"], y=d["y"])) < solver.tolerance


def test_wrw_kernel_choice_depends_on_dw_size():
    dev = SimpleNamespace(kind="cpu", info=SimpleNamespace(max_work_group_size=4096,
                                                           compute_units=2))
    small = P(8, 3, 64, 64, 4, 3, 3, direction="wrw")
    big = P(1, 64, 8, 8, 64, 3, 3, direction="wrw")
    assert launch.plan(small, dev).kernel == "naive_wrw_split"
    assert launch.plan(small, dev).global_size == (4 * 3 * 9 * launch.WRW_LOCAL,)
    assert launch.plan(big, dev).kernel == "naive_wrw"


def test_launch_sizes_past_2_31_are_planned_in_64_bit():
    # 2^31 output elements: planned, never allocated. The global size is a Python int (no
    # wrap-around) rounded up to the work-group size, and the kernels index with long.
    dev = SimpleNamespace(kind="gpu", info=SimpleNamespace(max_work_group_size=1024,
                                                           compute_units=132))
    p = P(n=64, c=64, h=257, w=512, k=256, r=3, s=3, pad_h=1, pad_w=1)
    total = 64 * 256 * 257 * 512
    assert total > 2**31
    plan = launch.plan(p, dev)
    (items,), (local,) = plan.global_size, plan.local_size
    assert items >= total and items % local == 0
    assert items - total < local
    bwd = launch.plan(p.with_direction("bwd"), dev)
    assert bwd.global_size[0] >= 64 * 64 * 257 * 512
    src = KERNELS.source("naive.cl")
    assert "const long total = (long)N * K * Ho * Wo;" in src
    assert "const long gid = get_global_id(0);" in src


def test_hooks_report_the_contract(handle):
    p = EDGE["odd and prime sizes"]
    dev = handle.device
    if dev.kind != "cpu":
        pytest.skip("the flat 1 % model is the CPU's; GPUs: test_gpu_model_* below")
    assert solver.is_applicable(p, dev) is True
    assert solver.is_dynamic() is True
    wti = solver.get_wti(p, dev)
    assert 0 < wti < NAIVE_WTI == 0.01
    big = P(32, 256, 56, 56, 256, 3, 3, pad_h=1, pad_w=1)
    assert solver.get_wti(big, dev) == pytest.approx(NAIVE_WTI, rel=0.01)
    assert solver.get_wti(big, dev) < NAIVE_WTI
    assert solver.workspace_size(p, dev) == 0


def test_one_build_serves_every_shape(handle):
    counters = handle.device.programs.counters
    p = EDGE["groups 4"]
    handle.compute(p, **{k: v for k, v in _data(p, 1).items() if k != "y"},
                   solver="direct.naive")
    before = counters.builds
    for q in (p.with_batch(5), EDGE["dilation 2"], EDGE["1xW picture"]):
        for d in ("fwd", "bwd", "wrw"):
            qq = q.with_direction(d)
            out = {"fwd": "y", "bwd": "x", "wrw": "w"}[d]
            handle.compute(qq, solver="direct.naive",
                           **{k: v for k, v in _data(qq, 2).items() if k != out})
    assert counters.builds == before


def _gpu():
    from wticonv.testing.launches import RecordingDevice

    return RecordingDevice("gpu", launch_overhead_s=11e-6)       # an H200 stand-in


def test_gpu_model_reads_the_launch_grid():
    gpu = _gpu()
    for p in (P(1, 128, 7, 7, 32, 3, 3, pad_h=1, pad_w=1),
              P(1, 768, 7, 7, 768, 7, 7, pad_h=3, pad_w=3, groups=768, direction="wrw"),
              P(32, 64, 56, 56, 64, 3, 3, pad_h=1, pad_w=1, direction="bwd")):
        name, items, local = launch.grid(p, gpu)
        plan = launch.plan(p, gpu)
        assert (plan.kernel, plan.global_size, plan.local_size) == (name, (items,), (local,))
        n = naive_wti.steps(p, name)
        waves = -(-items // (132 * 2048))
        expected = (11e-6 + 2 * items * n / (gpu.peak_flops * naive_wti.EFFICIENCY[name])
                    + waves * n * naive_wti.STEP_LATENCY_S[name]
                    + items / local / 132 * naive_wti.GROUP_S[name])
        assert naive_wti.seconds(p, gpu) == pytest.approx(expected)
        assert solver.get_wti(p, gpu) == pytest.approx(p.flops / (gpu.peak_flops * expected))


def test_gpu_model_sees_a_long_serial_reduction_on_few_outputs():
    # 128 -> 32, 3x3 on a 7x7 picture at N=1: 1568 work-items of 1152 taps each, a few
    # work-groups; measured 0.196 ms on the H200 while the flat 1 % model said 0.045 ms
    # (benchmarks/results/evaluate-test-n1-cold-h200-bias.csv, densenet169).
    gpu = _gpu()
    p = P(1, 128, 7, 7, 32, 3, 3, pad_h=1, pad_w=1)
    assert naive_wti.steps(p, "naive_fwd") == 1152
    t = naive_wti.seconds(p, gpu)
    assert t >= 1152 * naive_wti.STEP_LATENCY_S["naive_fwd"]
    assert 0.15e-3 < t < 0.5e-3
    # the same work spread over 32x the outputs and 1/32 of the taps is far faster
    wide = P(32, 4, 7, 7, 32, 3, 3, pad_h=1, pad_w=1)
    assert naive_wti.seconds(wide, gpu) < t / 5


def test_gpu_model_charges_the_split_wrw_kernel_its_work_groups():
    # depthwise 7x7 wrw on 7x7 at N=1 (ConvNeXt): one work-group of 64 lanes per dw
    # element, 7 of them busy; measured 0.055 ms against 0.014 ms for fwd on the H200
    # (benchmarks/results/corpus-test-n1-h200.csv, convnext_small)
    gpu = _gpu()
    p = P(1, 768, 7, 7, 768, 7, 7, pad_h=3, pad_w=3, groups=768)
    assert launch.grid(p.with_direction("wrw"), gpu)[0] == "naive_wrw_split"
    wrw, fwd = naive_wti.seconds(p.with_direction("wrw"), gpu), naive_wti.seconds(p, gpu)
    assert 0.035e-3 < wrw < 0.08e-3
    # the model over-predicts this fwd (0.026 ms); the order of the two holds with room
    assert wrw > 1.5 * fwd


def test_gpu_model_charges_the_split_wrw_kernel_its_cache_misses():
    # 1x1 wrw at N=1, 64 -> 64: on a 56x56 picture each work-group streams a 25 KB x plane
    # and dy plane (measured 0.057 ms on the H200, 0.072-0.075 ms on the H100:
    # benchmarks/results/corpus-dev-n1-h200.csv, evaluate-test9-n1-h100-*/); on 7x7 both
    # fit the cache. The factor multiplies the throughput and chain terms.
    gpu = _gpu()
    p = P(1, 64, 56, 56, 64, 1, 1).with_direction("wrw")
    assert launch.grid(p, gpu)[0] == "naive_wrw_split"
    f = naive_wti.cache_factor(p, "naive_wrw_split")
    assert f == pytest.approx(1 + 0.77 * math.log(4 * 2 * 56 * 56 / 7.3e3))
    assert 1.9 < f < 2.0
    _, items, local = launch.grid(p, gpu)
    n = naive_wti.steps(p, "naive_wrw_split")
    fixed = 11e-6 + items / local / 132 * naive_wti.GROUP_S["naive_wrw_split"]
    uncached = (2 * items * n / (gpu.peak_flops * naive_wti.EFFICIENCY["naive_wrw_split"])
                + n * naive_wti.STEP_LATENCY_S["naive_wrw_split"])
    assert naive_wti.seconds(p, gpu) == pytest.approx(fixed + f * uncached)
    assert 0.035e-3 < naive_wti.seconds(p, gpu) < 0.08e-3
    small = P(1, 64, 7, 7, 64, 1, 1).with_direction("wrw")        # 392 B: all cached
    assert naive_wti.cache_factor(small, "naive_wrw_split") == 1.0
    assert naive_wti.cache_factor(p.with_direction("fwd"), "naive_fwd") == 1.0


def test_cpu_model_charges_the_split_wrw_kernel_its_work_groups():
    # squeeze-and-excitation 1x1 on a 1x1 picture at N=4, 32 -> 8 channels: 256 dw
    # elements of 4 taps, a work-group each; measured 0.066 ms on the 2-core Xeon
    # (0.19 ms on the 2-core EPYC) while the flat 1 % model said 0.006 ms, and gemm.1x1
    # took 0.004 ms (benchmarks/results/evaluate-test-n4-cpu-*.csv, efficientnet_b2)
    from wticonv.testing.launches import RecordingDevice

    cpu = RecordingDevice("cpu", compute_units=2, peak_flops=1.75e11,
                          launch_overhead_s=21e-6)
    p = P(4, 32, 1, 1, 8, 1, 1, direction="wrw")
    assert launch.grid(p, cpu)[0] == "naive_wrw_split"
    t = naive_wti.cpu_seconds(p, cpu, NAIVE_WTI)
    flat = 21e-6 + p.flops / (1.75e11 * NAIVE_WTI)
    assert t == pytest.approx(flat + 256 / 2 * naive_wti.CPU_SPLIT_GROUP_S)
    assert 0.04e-3 < t < 0.25e-3
    assert solver.get_wti(p, cpu) == pytest.approx(p.flops / (1.75e11 * t))
    # the one-work-item-per-dw-element kernel pays no work-group term
    big = P(4, 64, 1, 1, 64, 1, 1, direction="wrw")
    assert launch.grid(big, cpu)[0] == "naive_wrw"
    assert naive_wti.cpu_seconds(big, cpu, NAIVE_WTI) == pytest.approx(
        21e-6 + big.flops / (1.75e11 * NAIVE_WTI))
