"""direct.depthwise against the float64 reference in every direction, on MobileNetV2's
depthwise layers and on edge shapes; NaN/Inf propagation against direct.naive (which
follows the definition); the backward-weights split and its workspace; the GPU launch
plans, run on the CPU device; the hooks' contract and the WTI model."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import wticonv
from wticonv import ConvProblem, Decline, reference, rms_range
from wticonv.workloads.networks import load_network
from wticonv.runtime.kit import FALLBACK_LAUNCH_OVERHEAD_S as LAUNCH_OVERHEAD_S
from wticonv_direct import depthwise_plan
from wticonv_direct.depthwise import (EFFICIENCY, GPU_EFFICIENCY, GPU_TAP_STEP_S, STREAMING,
                                      WRW_EFFICIENCY, WRW_TAPS, solver)
from wticonv_direct.naive import solver as naive_solver

P = ConvProblem
OUT = {"fwd": "y", "bwd": "x", "wrw": "w"}
DIRECTIONS = ("fwd", "bwd", "wrw")
CPU = depthwise_plan.PARAMS["cpu"]  # TH = 7 rows, VW = 8 columns per block


def dwp(n, c, h, w, m, r, s, **kw):
    """A depthwise problem with channel multiplier m (K = m * C, groups = C)."""
    return P(n, c, h, w, m * c, r, s, groups=c, **kw)


MOBILENET = [layer.problem for layer in load_network("mobilenetv2", 1).layers
             if layer.problem.groups > 1]

EDGE = {
    "multiplier 2": dwp(2, 6, 15, 15, 2, 3, 3, pad_h=1, pad_w=1),
    "multiplier 2, stride 2": dwp(1, 6, 14, 13, 2, 3, 3, pad_h=1, pad_w=1, stride_h=2,
                                  stride_w=2),
    "multiplier 3, 5x5": dwp(1, 4, 17, 19, 3, 5, 5, pad_h=2, pad_w=2),
    "stride 3": dwp(2, 3, 16, 17, 1, 3, 3, pad_h=1, pad_w=1, stride_h=3, stride_w=3),
    "7x7, stride 3": dwp(2, 3, 16, 17, 1, 7, 7, pad_h=3, pad_w=3, stride_h=3, stride_w=3),
    "dilation 2": dwp(1, 4, 13, 11, 1, 3, 3, pad_h=2, pad_w=2, dilation_h=2, dilation_w=2),
    "dilation 2, stride 2, m 2": dwp(1, 3, 17, 19, 2, 3, 3, pad_h=2, pad_w=2, stride_h=2,
                                     stride_w=2, dilation_h=2, dilation_w=2),
    "padding 0": dwp(1, 5, 12, 12, 1, 3, 3),
    "padding 0, stride 2": dwp(1, 4, 12, 12, 2, 3, 3, stride_h=2, stride_w=2),
    "padding >= filter": dwp(1, 2, 4, 5, 1, 2, 2, pad_h=3, pad_w=4),
    "padding > filter, 3x3": dwp(1, 4, 12, 12, 1, 3, 3, pad_h=4, pad_w=4),
    "padding > filter, 3x3 stride 2": dwp(1, 4, 12, 12, 1, 3, 3, pad_h=4, pad_w=3,
                                          stride_h=2, stride_w=2),
    "1x5": dwp(1, 3, 9, 23, 1, 1, 5, pad_w=2),
    "5x1": dwp(1, 3, 23, 9, 1, 5, 1, pad_h=2),
    "7x7": dwp(2, 3, 16, 17, 1, 7, 7, pad_h=3, pad_w=3),
    "1x1 picture, 3x3 pad 1": dwp(2, 2, 1, 1, 1, 3, 3, pad_h=1, pad_w=1),
    "1x1 picture, 1x1 filter, m 2": dwp(2, 3, 1, 1, 2, 1, 1),
    "1xW picture": dwp(2, 2, 1, 19, 2, 1, 3, pad_w=1),
    "1xW picture, 3x3": dwp(1, 2, 1, 40, 1, 3, 3, pad_h=1, pad_w=1),
    "output 1x1 (filter = padded picture)": dwp(1, 3, 5, 4, 1, 7, 6, pad_h=1, pad_w=1),
    "output 1x1, 3x3 stride 2": dwp(1, 2, 3, 3, 1, 3, 3, stride_h=2, stride_w=2),
    # one past the block sizes: 7 + 1 rows, 8 + 1 and 16 + 1 columns (bwd stride 2 takes
    # 16 dx columns at a time)
    "tails: 8 x 9 outputs": dwp(1, 3, 8, 9, 1, 3, 3, pad_h=1, pad_w=1),
    "tails: 8 x 17 outputs, stride 2": dwp(2, 2, 16, 34, 2, 3, 3, pad_h=1, pad_w=1,
                                          stride_h=2, stride_w=2),
    "tails: 15 x 17 dx, stride 2": dwp(1, 2, 15, 17, 1, 3, 3, pad_h=1, pad_w=1,
                                      stride_h=2, stride_w=2),
    "stride 2, odd pad_w, even pad_h": dwp(1, 2, 13, 21, 1, 3, 3, pad_w=1, stride_h=2,
                                           stride_w=2),
    "stride 2, pads 2 and 3": dwp(1, 2, 13, 21, 1, 3, 3, pad_h=2, pad_w=3, stride_h=2,
                                  stride_w=2),
    "strides 1 x 2, dilations 3 x 1, 3x2": dwp(1, 3, 20, 18, 1, 3, 2, pad_h=1, stride_w=2,
                                              dilation_h=3),
    "C = 1, K = 4, stride 2": dwp(2, 1, 23, 29, 4, 3, 3, pad_h=1, pad_w=1, stride_h=2,
                                  stride_w=2),
}

#: backward weights split into parts (two passes) on the CPU: 20 row blocks, 4 parts
SPLIT = dwp(2, 2, 64, 64, 1, 3, 3, pad_h=1, pad_w=1, direction="wrw")


def _data(p: ConvProblem, seed: int):
    rng = np.random.default_rng(seed)
    return {name: rng.uniform(-1, 1, shape).astype(np.float32)
            for name, shape in (("x", p.x_shape), ("w", p.w_shape), ("y", p.y_shape))}


def _inputs(p: ConvProblem, seed: int = 0):
    return {k: v for k, v in _data(p, seed).items() if k != OUT[p.direction]}


def _check(handle, p: ConvProblem, seed: int = 0, **kw):
    given = _inputs(p, seed)
    result = handle.compute(p, solver="direct.depthwise", **given, **kw)
    ref = reference(p, **given)
    assert result.shape == ref.shape
    err = rms_range(result, ref)
    assert err < solver.tolerance, f"{p.key}: rms_range {err}"
    return result


@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("layer", MOBILENET, ids=lambda p: p.key)
def test_mobilenetv2_depthwise_layers(handle, layer, direction):
    _check(handle, layer.with_direction(direction))


@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("layer", MOBILENET[2::3], ids=lambda p: p.key)
def test_mobilenetv2_layers_batch_2_multiplier_2(handle, layer, direction):
    p = layer
    small = dwp(2, p.c // 8, min(p.h, 28), min(p.w, 28), 2, p.r, p.s, pad_h=p.pad_h,
                pad_w=p.pad_w, stride_h=p.stride_h, stride_w=p.stride_w)
    _check(handle, small.with_direction(direction))


@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("name", list(EDGE))
def test_edge_shapes(handle, name, direction):
    _check(handle, EDGE[name].with_direction(direction), seed=len(name))


def _poisoned(p: ConvProblem, where: str):
    d = _data(p, 7)
    if where == "w":
        d["w"][0, 0, 0, 0] = np.nan
        return d
    for name in ("x", "y") if where == "data" else ():
        a = d[name]
        n, c, h, w = a.shape
        a[0, 0, 0, w - 1] = np.nan                # row end: the next row's left padding
        a[0, 0, min(2, h - 1), 0] = np.inf        # row start: the previous row's right pad
        a[n - 1, c - 1, h - 1, w - 1] = -np.inf   # the buffer's last element
        a[n - 1, c - 1, h // 2, w // 2] = np.nan
    return d


@pytest.mark.parametrize(("direction", "where"), [("fwd", "data"), ("bwd", "data"),
                                                  ("wrw", "data"), ("fwd", "w"), ("bwd", "w")])
@pytest.mark.parametrize("shape", [dwp(1, 3, 9, 10, 1, 3, 3, pad_h=1, pad_w=1),
                                   dwp(1, 2, 11, 18, 2, 3, 3, pad_h=1, pad_w=1,
                                       stride_h=2, stride_w=2),
                                   dwp(1, 2, 9, 11, 1, 5, 3, pad_h=3, pad_w=2, stride_h=3)],
                         ids=["3x3", "3x3 stride 2", "5x3 stride 3x1"])
def test_nan_and_inf_propagate_as_in_the_definition(handle, shape, direction, where):
    p = shape.with_direction(direction)
    d = _poisoned(p, where)
    given = {k: v for k, v in d.items() if k != OUT[direction]}
    ours = handle.compute(p, solver="direct.depthwise", **given)
    definition = handle.compute(p, solver="direct.naive", **given)
    assert np.isnan(ours).any()
    assert np.array_equal(np.isnan(ours), np.isnan(definition))
    assert np.array_equal(np.isposinf(ours), np.isposinf(definition))
    assert np.array_equal(np.isneginf(ours), np.isneginf(definition))
    finite = np.isfinite(definition)
    assert finite.any() or where == "data"
    assert rms_range(ours[finite], definition[finite]) < solver.tolerance


def test_declines_what_is_not_depthwise(handle):
    dev = handle.device
    for p in (P(1, 8, 9, 9, 8, 3, 3), P(1, 8, 9, 9, 16, 3, 3, groups=4),
              P(1, 8, 9, 9, 4, 3, 3, groups=4)):
        verdict = solver.is_applicable(p, dev)
        assert isinstance(verdict, Decline) and not verdict
        assert verdict.reason == f"not depthwise: groups={p.groups} must equal c={p.c}"
    assert solver.is_applicable(EDGE["multiplier 2"], dev) is True
    assert solver.is_applicable(P(1, 1, 5, 5, 3, 3, 3), dev) is True  # C = groups = 1
    with pytest.raises(wticonv.SolverNotApplicableError, match="not depthwise"):
        handle.compute(P(1, 4, 5, 5, 4, 3, 3), x=np.zeros((1, 4, 5, 5)),
                       w=np.zeros((4, 4, 3, 3)), solver="direct.depthwise")


def test_wrw_split_workspace_is_exact_and_deterministic(handle):
    dev, p = handle.device, SPLIT
    kind = "gpu" if dev.kind == "gpu" else "cpu"
    parts, upp = depthwise_plan.wrw_split(p, kind, dev.info.compute_units)
    krs = p.k * p.r * p.s
    assert parts > 1
    assert solver.workspace_size(p, dev, None) == 4 * parts * krs
    assert solver.workspace_size(p, dev, 10**9) == 4 * parts * krs
    assert solver.workspace_size(p, dev, 4 * krs) == 0  # one part: no second pass
    if kind == "cpu":
        assert parts == 4 and upp == 5  # 2 images x ceil(64 / 7) row blocks
        assert solver.workspace_size(p, dev, None) == 288
        assert solver.workspace_size(p, dev, 3 * 4 * krs) == 3 * 4 * krs  # 3 parts fit
        assert solver.workspace_size(p, dev, 287) == 216
    for d in ("fwd", "bwd"):
        assert solver.workspace_size(p.with_direction(d), dev, None) == 0
    first = _check(handle, p, seed=3)
    again = handle.compute(p, solver="direct.depthwise", **_inputs(p, 3))
    assert np.array_equal(first, again)
    for limit in (216, 0):
        _check(handle, p, seed=3, workspace_limit=limit)
    pl = depthwise_plan.plan(p, kind, dev.info.compute_units)
    assert [ln.kernel for ln in pl.launches][-1] == "dw_wrw_sum"


def test_run_rejects_a_workspace_of_another_size(handle):
    dev = handle.device
    with pytest.raises(ValueError, match="needs a workspace of 0 bytes, got 100"):
        depthwise_plan.plan_for(SPLIT, dev, SimpleNamespace(size=100))


GPU_SHAPES = [MOBILENET[0], MOBILENET[1], EDGE["multiplier 2, stride 2"], EDGE["7x7, stride 3"],
              EDGE["tails: 8 x 17 outputs, stride 2"], EDGE["padding > filter, 3x3"],
              EDGE["1xW picture"], SPLIT]


@pytest.mark.parametrize("direction", DIRECTIONS)
def test_gpu_launch_plans_on_the_cpu_device(handle, monkeypatch, direction):
    # The GPU kernels (one column per work-item, work-group reductions in wrw) are plain
    # OpenCL C: run them through PoCL so that they are checked without a GPU.
    monkeypatch.setattr(depthwise_plan, "kernel_family", lambda device: "gpu")
    kernels = set()
    for shape in GPU_SHAPES:
        p = shape.with_direction(direction)
        kernels.update(ln.kernel for ln in depthwise_plan.plan(
            p, "gpu", handle.device.info.compute_units).launches)
        _check(handle, p, seed=5)
    expected = {"fwd": {"dw_fwd_3x3s1", "dw_fwd_3x3s2", "dw_fwd_any"},
                "bwd": {"dw_fwd_3x3s1", "dw_fwd_any", "dw_bwd_any"},
                "wrw": {"dw_wrw", "dw_wrw_sum"}}[direction]
    assert kernels == expected


def test_cpu_kernel_choice():
    cpu = {d: {name: depthwise_plan.plan(p.with_direction(d), "cpu").launches[0].kernel
               for name, p in (("s1", MOBILENET[0]), ("s2", MOBILENET[1]),
                               ("5x5", EDGE["multiplier 3, 5x5"]),
                               ("dil", EDGE["dilation 2"]), ("s3", EDGE["stride 3"]))}
           for d in DIRECTIONS}
    assert cpu["fwd"] == {"s1": "dw_fwd_3x3s1", "s2": "dw_fwd_3x3s2", "5x5": "dw_fwd_any",
                          "dil": "dw_fwd_any", "s3": "dw_fwd_any"}
    assert cpu["bwd"] == {"s1": "dw_fwd_3x3s1", "s2": "dw_bwd_3x3s2", "5x5": "dw_fwd_any",
                          "dil": "dw_fwd_any", "s3": "dw_bwd_any"}
    assert cpu["wrw"] == {"s1": "dw_wrw_3x3s1", "s2": "dw_wrw_3x3s2", "5x5": "dw_wrw",
                          "dil": "dw_wrw", "s3": "dw_wrw"}


def test_launch_shapes_and_options_do_not_depend_on_the_problem():
    huge = dwp(64, 1024, 512, 512, 1, 3, 3, pad_h=1, pad_w=1)  # 2^34 elements: planned only
    for kind in ("cpu", "gpu"):
        plans = [depthwise_plan.plan(p.with_direction(d), kind, 132)
                 for p in MOBILENET + list(EDGE.values()) + [SPLIT, huge] for d in DIRECTIONS]
        assert {pl.options for pl in plans} == {depthwise_plan.PARAMS[kind].options}
        assert {ln.local_size for pl in plans for ln in pl.launches} == {
            depthwise_plan.PARAMS[kind].plane_local, depthwise_plan.PARAMS[kind].wrw_local,
            (depthwise_plan.PARAMS[kind].sum_local,)}
        for ln in (ln for pl in plans for ln in pl.launches):
            assert all(g % loc == 0 for g, loc in zip(ln.global_size, ln.local_size,
                                                      strict=True))
    gpu = depthwise_plan.plan(huge, "gpu").launches[0]
    assert gpu.global_size[0] >= 64 * 1024 * 128 * 512 >= 2**32  # Python ints, no wrap


def test_one_build_serves_every_shape(handle):
    counters = handle.device.programs.counters
    _check(handle, EDGE["multiplier 2"])
    before = counters.builds
    for p in (MOBILENET[3], EDGE["7x7, stride 3"], EDGE["1xW picture"], SPLIT):
        for d in DIRECTIONS:
            _check(handle, p.with_direction(d))
    assert counters.builds == before


def test_hooks_report_the_contract(handle):
    dev = handle.device
    assert solver.solver_id == "direct.depthwise"
    assert solver.is_dynamic() is True
    for p in MOBILENET:
        for d in DIRECTIONS:
            q = p.with_direction(d)
            wti = solver.get_wti(q, dev, None)
            assert 0 < wti <= EFFICIENCY[dev.kind]
            if not _gpu_small_wrw(dev, q):
                assert naive_solver.get_wti(q, dev) < wti
    accelerator = SimpleNamespace(kind="accelerator", peak_flops=1e12, bandwidth=1e11,
                                  info=SimpleNamespace(compute_units=4))
    assert solver.get_wti(MOBILENET[0], accelerator, None) == wticonv.WTI_UNKNOWN


def test_wti_model():
    p = MOBILENET[0].with_batch(8)  # 32 x 112 x 112, 3x3: memory-bound on this device
    dev = SimpleNamespace(kind="cpu", peak_flops=1e12, bandwidth=1e10,
                          launch_overhead_s=LAUNCH_OVERHEAD_S["cpu"],
                          info=SimpleNamespace(compute_units=2))
    nbytes = 4 * (2 * 8 * 32 * 112 * 112 + 32 * 9)
    seconds = LAUNCH_OVERHEAD_S["cpu"] + nbytes / (1e10 * STREAMING["cpu"])
    assert solver.get_wti(p, dev, None) == pytest.approx(p.flops / (1e12 * seconds))
    fast_memory = SimpleNamespace(kind="gpu", peak_flops=1e12, bandwidth=1e14,
                                  launch_overhead_s=LAUNCH_OVERHEAD_S["gpu"],
                                  info=SimpleNamespace(compute_units=132))
    seconds = LAUNCH_OVERHEAD_S["gpu"] + p.flops / (1e12 * GPU_EFFICIENCY["dw_fwd_3x3s1"])
    assert solver.get_wti(p, fast_memory, None) == pytest.approx(p.flops / (1e12 * seconds))
    # on GPUs each kernel has its own arithmetic rate: 5x5 filters run the generic kernel,
    # backward data at stride 2 the one that visits every tap of every output
    for q, kernel in ((dwp(8, 96, 28, 28, 1, 5, 5, pad_h=2, pad_w=2), "dw_fwd_any"),
                      (dwp(8, 96, 28, 28, 1, 3, 3, pad_h=1, pad_w=1, stride_h=2,
                           stride_w=2).with_direction("bwd"), "dw_bwd_any")):
        assert depthwise_plan.plan(q, "gpu", 132).launches[0].kernel == kernel
        seconds = LAUNCH_OVERHEAD_S["gpu"] + q.flops / (1e12 * GPU_EFFICIENCY[kernel])
        assert solver.get_wti(q, fast_memory, None) == pytest.approx(
            q.flops / (1e12 * seconds))
    assert GPU_EFFICIENCY["dw_bwd_any"] < GPU_EFFICIENCY["dw_fwd_any"] < GPU_EFFICIENCY[
        "dw_fwd_3x3s2"] < GPU_EFFICIENCY["dw_fwd_3x3s1"] <= EFFICIENCY["gpu"]
    # the split wrw: two launches, and its workspace written and read
    split = SPLIT
    parts = depthwise_plan.wrw_split(split, "cpu", 2)[0]
    nbytes = 4 * (2 * (2 * 2 * 64 * 64) + 2 * 9) + 2 * 4 * parts * 18
    seconds = 2 * LAUNCH_OVERHEAD_S["cpu"] + nbytes / (1e10 * STREAMING["cpu"])
    assert solver.get_wti(split, dev, None) == pytest.approx(split.flops / (1e12 * seconds))


def test_gpu_wrw_model_charges_a_load_per_tap_in_groups_of_wrw_taps():
    import re
    from pathlib import Path

    import wticonv_direct

    cl = (Path(wticonv_direct.__file__).parent / "kernels" / "depthwise.cl").read_text()
    assert int(re.search(r"#define DIRECT_DW_WRW_TAPS (\d+)", cl).group(1)) == WRW_TAPS
    gpu = SimpleNamespace(kind="gpu", peak_flops=6e13, bandwidth=4e12,
                          launch_overhead_s=1e-5, info=SimpleNamespace(compute_units=132))
    for r, passes in ((3, 1), (5, 3), (7, 6)):
        p = dwp(32, 384, 14, 14, 1, r, r, pad_h=r // 2, pad_w=r // 2).with_direction("wrw")
        launches = len(depthwise_plan.plan(p, "gpu", 132).launches)
        taps = 2 * 32 * 384 * 14 * 14 * passes * WRW_TAPS
        seconds = launches * 1e-5 + taps / (6e13 * WRW_EFFICIENCY["gpu"])
        assert solver.get_wti(p, gpu, None) == pytest.approx(p.flops / (6e13 * seconds))
        # fwd keeps the bandwidth-or-arithmetic model, faster per FLOP (1.7x for 5x5 and
        # 7x7 filters, 4x for 3x3 in the fitted rates)
        assert solver.get_wti(p.with_direction("fwd"), gpu, None) > 1.5 * solver.get_wti(
            p, gpu, None)


def _gpu_small_wrw(dev, q) -> bool:
    """Backward weights on a GPU with dy under 2^22 elements: there direct.naive's one
    launch is as fast or faster (H200, MobileNetV2 at N=1 and the 14x14 and 7x7 layers
    at N=8: 9-22 us against 10-34 us), and the models may rank either first."""
    return dev.kind == "gpu" and q.direction == "wrw" and q.n * q.k * q.ho * q.wo < 2**22


def test_solver_is_chosen_for_depthwise_layers(handle):
    for p in MOBILENET:
        for d in DIRECTIONS:
            q = p.with_direction(d).with_batch(8)
            sel = handle.select(q)
            if _gpu_small_wrw(handle.device, q):
                assert sel.solver_id in ("direct.depthwise", "direct.naive")
            else:
                assert sel.solver_id == "direct.depthwise"


def test_gpu_fwd_and_bwd_take_at_least_a_work_items_chain_of_taps():
    # ConvNeXt's 7x7 depthwise layer on 7x7 pictures at N=1 (768 channels): on an H100
    # (62.6 TFLOP/s, 3 TB/s, 11.2 us a launch) the arithmetic and memory terms give
    # about 2 us, but each work-item's 4 rows x 49 taps are a chain of dependent loads
    h100 = SimpleNamespace(kind="gpu", peak_flops=6.26e13, bandwidth=2.96e12,
                           launch_overhead_s=11.2e-6, info=SimpleNamespace(compute_units=132))
    th = depthwise_plan.PARAMS["gpu"].th
    for direction in ("fwd", "bwd"):
        p = dwp(1, 768, 7, 7, 1, 7, 7, pad_h=3, pad_w=3).with_direction(direction)
        floor = 7 * 7 * th * GPU_TAP_STEP_S
        kernel = depthwise_plan.plan(p, "gpu", 132).launches[0].kernel
        assert p.flops / (6.26e13 * GPU_EFFICIENCY[kernel]) < floor / 4
        seconds = 11.2e-6 + floor                               # 22.96 us; measured 23
        assert solver.get_wti(p, h100, None) == pytest.approx(p.flops / (6.26e13 * seconds))
    # a full device is still charged its arithmetic: MobileNetV2-like 5x5 at N=32
    big = dwp(32, 480, 28, 28, 1, 5, 5, pad_h=2, pad_w=2)
    arith = big.flops / (6.26e13 * GPU_EFFICIENCY["dw_fwd_any"])
    assert arith > 25 * th * GPU_TAP_STEP_S
    memory = 4 * (2 * 32 * 480 * 28 * 28 + 480 * 25) / (2.96e12 * STREAMING["gpu"])
    assert solver.get_wti(big, h100, None) == pytest.approx(
        big.flops / (6.26e13 * (11.2e-6 + max(arith, memory))))
