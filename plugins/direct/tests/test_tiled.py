"""direct.tiled against the float64 reference, in every direction, on both kernel families.

The GPU kernels (tiled_gpu.cl) are plain OpenCL with local memory, so they also run on the
CPU device: the ``kind`` tests enqueue the plan of either device kind on the default
device, which lets CI (no GPU) check the GPU code path's arithmetic and edges.
"""

from __future__ import annotations

import numpy as np
import pytest

from wticonv import WTI_UNKNOWN, ConvProblem, Decline, reference, rms_range
from wticonv.runtime.kit import enqueue
from wticonv.testing import EDGE_SHAPES
from wticonv_direct import tiled_configs, tiled_plan, tiled_wti
from wticonv_direct.tiled import declines, solver

P = ConvProblem
OUT = {"fwd": "y", "bwd": "x", "wrw": "w"}
DIRS = ("fwd", "bwd", "wrw")

#: ResNet-50 / MobileNetV2 layer shapes at N=1 (pictures cropped where the full size only
#: costs time), and sizes just past every block multiple.
LAYERS = {
    "resnet conv1 7x7 s2": P(1, 3, 64, 70, 64, 7, 7, pad_h=3, pad_w=3, stride_h=2,
                             stride_w=2),
    "resnet 3x3 56": P(1, 64, 20, 56, 64, 3, 3, pad_h=1, pad_w=1),
    "resnet 3x3 s2": P(1, 128, 28, 28, 128, 3, 3, pad_h=1, pad_w=1, stride_h=2, stride_w=2),
    "resnet downsample 1x1 s2": P(1, 256, 28, 28, 512, 1, 1, stride_h=2, stride_w=2),
    "resnet 3x3 7x7": P(2, 512, 7, 7, 512, 3, 3, pad_h=1, pad_w=1),
    "resnet 1x1 expand 14": P(1, 256, 14, 14, 1024, 1, 1),
    "mobilenet expand 1x1": P(2, 24, 28, 28, 144, 1, 1),
    "mobilenet stem 3x3 s2": P(1, 3, 40, 40, 32, 3, 3, pad_h=1, pad_w=1, stride_h=2,
                               stride_w=2),
    "past every block": P(2, 17, 9, 17, 65, 3, 3, pad_h=1, pad_w=1),
    "K 13 C 33 P 65": P(1, 33, 5, 13, 13, 1, 1),
    "11x11 stride 4": P(1, 3, 45, 47, 20, 11, 11, pad_h=2, pad_w=2, stride_h=4, stride_w=4),
    "grouped, dilated": P(2, 16, 13, 15, 24, 3, 3, pad_h=2, pad_w=2, dilation_h=2,
                          dilation_w=2, groups=4),
    "packed filter": P(1, 40, 64, 64, 37, 3, 3, pad_h=1, pad_w=1),
    "7-wide rows, stride 2": P(2, 24, 14, 13, 30, 3, 3, pad_h=1, pad_w=1, stride_h=2,
                               stride_w=2),
    # CPU rows spanning whole groups (tiled_groups.group_tiles): 4 groups a tile, the last
    # tile partly past G; 5 groups of 3 (15 rows); one group of 12 (an exact tile); 8
    # groups of 2 a tile over a 3x3 picture (one position block: the tiles split over
    # work-items)
    "groups of 4, stride 2": P(2, 40, 11, 13, 40, 3, 3, pad_h=1, pad_w=1, stride_h=2,
                               stride_w=2, groups=10),
    "groups of 3, 1x7": P(2, 15, 5, 40, 15, 1, 7, pad_w=3, groups=5),
    "groups of 12": P(1, 36, 9, 9, 36, 3, 3, pad_h=1, pad_w=1, groups=3),
    "groups of 2, 3x3 picture": P(1, 64, 3, 3, 64, 3, 3, pad_h=1, pad_w=1, groups=32),
}


def _data(p: ConvProblem, seed: int = 0):
    rng = np.random.default_rng(seed)
    return {name: rng.uniform(-1, 1, shape).astype(np.float32)
            for name, shape in (("x", p.x_shape), ("w", p.w_shape), ("y", p.y_shape))}


def _check(handle, p, seed=0):
    d = _data(p, seed)
    given = {k: v for k, v in d.items() if k != OUT[p.direction]}
    result = handle.compute(p, solver="direct.tiled", **given)
    ref = reference(p, **given)
    assert result.shape == ref.shape
    err = rms_range(result, ref)
    assert err < solver.tolerance, err
    return result


@pytest.mark.parametrize("direction", DIRS)
@pytest.mark.parametrize("name", [n for n in EDGE_SHAPES if n not in (
    "depthwise", "depthwise stride 2, multiplier 2")])
def test_edge_shapes(handle, name, direction):
    _check(handle, EDGE_SHAPES[name].with_direction(direction), seed=len(name))


@pytest.mark.parametrize("direction", DIRS)
@pytest.mark.parametrize("name", list(LAYERS))
def test_layer_shapes(handle, name, direction):
    _check(handle, LAYERS[name].with_direction(direction))


def _run_plan(device, p, kind, data, limit=None, config=None):
    """Enqueue the plan made for device ``kind`` on ``device`` (perf config ``config``, or
    the default) and return the output."""
    if config is not None:
        pl = tiled_configs.config_plan(p, kind, config)
    else:
        pl = tiled_plan.plan(p, kind, 132 if kind == "gpu" else device.info.compute_units,
                             limit, 62.6e12 if kind == "gpu" else device.peak_flops,
                             4.1e12 if kind == "gpu" else device.bandwidth)
    bufs = {k: device.upload(v) for k, v in data.items()}
    bufs["ws"] = device.alloc(max(pl.workspace_bytes, 4))
    enqueue(device, pl.launches, bufs)
    out = OUT[p.direction]
    return device.download(bufs[out], data[out].shape), pl


#: Kernel families by device kind; ids that do not read "gpu" (a GPU-only test marker).
KINDS = pytest.mark.parametrize("kind", ["cpu", "gpu"], ids=["cpu_kernels", "gpu_kernels"])


@KINDS
@pytest.mark.parametrize("direction", DIRS)
@pytest.mark.parametrize("name", ["past every block", "11x11 stride 4", "grouped, dilated",
                                  "resnet 3x3 s2", "K 13 C 33 P 65", "resnet conv1 7x7 s2"])
def test_both_kernel_families_on_this_device(handle, kind, name, direction):
    p = LAYERS[name].with_direction(direction)
    d = _data(p, 5)
    d[OUT[direction]][:] = np.nan          # the output must be fully overwritten
    given = {k: v for k, v in d.items() if k != OUT[direction]}
    result, _ = _run_plan(handle.device, p, kind, d)
    assert rms_range(result, reference(p, **given)) < solver.tolerance


@KINDS
@pytest.mark.parametrize("direction", DIRS)
@pytest.mark.parametrize("name", ["past every block", "resnet 3x3 7x7", "mobilenet stem 3x3 s2"])
def test_every_perf_config_of_both_kernel_families(handle, kind, name, direction):
    p = LAYERS[name].with_direction(direction)
    cus = 132 if kind == "gpu" else handle.device.info.compute_units
    configs = tiled_configs.perf_configs(p, kind, cus)
    assert len(configs) >= (1 if p.n == 1 and kind == "cpu" and direction == "wrw" else 2)
    d = _data(p, 3)
    given = {k: v for k, v in d.items() if k != OUT[direction]}
    ref = reference(p, **given)
    for cfg in configs:
        d[OUT[direction]][:] = np.nan
        result, pl = _run_plan(handle.device, p, kind, d, config=cfg)
        assert rms_range(result, ref) < solver.tolerance, cfg
        if "/s" in cfg or (kind == "cpu" and cfg[0] == "s" and cfg != "s1"):
            assert pl.splits == int(cfg.rsplit("s", 1)[1]) > 1, cfg
    # names fit the hook's contract; unknown names are refused
    assert len(set(configs)) == len(configs) and all(0 < len(c) <= 100 for c in configs)
    with pytest.raises(ValueError, match="no perf config"):
        tiled_configs.config_plan(p, kind, "nonsense")


def test_gpu_planner_costs_candidates_as_their_full_plans():
    """The planner costs GPU candidates from their sizes (tiled_plan._GpuCost) and builds
    only the fastest: the cost must read exactly what the built plan holds."""
    for name, layer in LAYERS.items():
        for direction in DIRS:
            p = layer.with_direction(direction)
            lens = tiled_plan._lens(p)
            for tile in tiled_plan.GPU_TILES:
                for splits in (1, 3):
                    full = tiled_plan._gpu_plan(p, tile, splits, lens)
                    cost = tiled_plan._GpuCost(p, tile, splits, lens)
                    for attr in ("variant", "blocks", "padded_flops", "traffic_bytes",
                                 "reduction", "splits", "phases", "n_launches"):
                        assert getattr(cost, attr) == getattr(full, attr), (name, attr)


def test_perf_configs_honour_the_workspace_limit(handle):
    p = LAYERS["resnet 3x3 7x7"].with_direction("wrw")
    assert tiled_configs.perf_configs(p, "cpu", 2, 0) == ["s1"]
    long = LAYERS["resnet 3x3 7x7"]      # few blocks, a long reduction: GPU splits
    assert any("/s" in c for c in tiled_configs.perf_configs(long, "gpu", 132))
    assert all("/s" not in c for c in tiled_configs.perf_configs(long, "gpu", 132, 0))
    f = P(2, 64, 56, 56, 64, 3, 3, pad_h=1, pad_w=1)
    assert "v16+pack" in tiled_configs.perf_configs(f, "cpu", 2)
    assert tiled_configs.perf_configs(f, "cpu", 2, 0) == ["v16", "v8"]
    for cfg in tiled_configs.perf_configs(f, "cpu", 2, 10**6):
        assert tiled_configs.config_plan(f, "cpu", cfg).workspace_bytes <= 10**6


@KINDS
def test_wrw_split_is_deterministic_and_honours_the_workspace_limit(handle, kind):
    # Few dw blocks, long reduction: the plan splits the reduction into partial slices.
    p = P(8, 3, 30, 30, 4, 3, 3, pad_h=1, pad_w=1, direction="wrw")
    d = _data(p, 1)
    ref = reference(p, x=d["x"], y=d["y"])
    split1, pl = _run_plan(handle.device, p, kind, d)
    assert pl.splits > 1
    assert pl.workspace_bytes == pl.splits * 4 * p.k * p.c * p.r * p.s
    split2, _ = _run_plan(handle.device, p, kind, d)
    assert np.array_equal(split1, split2)
    assert rms_range(split1, ref) < solver.tolerance
    unsplit, pl0 = _run_plan(handle.device, p, kind, d, limit=0)
    assert pl0.splits == 1 and pl0.workspace_bytes == 0
    assert rms_range(unsplit, ref) < solver.tolerance


def test_workspace_limit_through_the_hooks(handle):
    p = P(8, 3, 30, 30, 4, 3, 3, pad_h=1, pad_w=1, direction="wrw")
    dev = handle.device
    full = solver.workspace_size(p, dev, None, None)
    assert full > 0
    assert solver.workspace_size(p, dev, 0, None) == 0
    d = _data(p, 2)
    ref = reference(p, x=d["x"], y=d["y"])
    for limit in (0, full // 2, None):
        dw = handle.compute(p, x=d["x"], y=d["y"], solver="direct.tiled",
                            workspace_limit=limit)
        assert rms_range(dw, ref) < solver.tolerance


@pytest.mark.parametrize("direction", DIRS)
def test_nan_and_inf_propagate(handle, direction):
    p = P(1, 4, 9, 10, 5, 3, 3, pad_h=1, pad_w=1, direction=direction)
    d = _data(p, 3)
    src = "y" if direction == "bwd" else "x"
    d[src][0, 1, 4, 5] = np.nan
    d[src][0, 2, 2, 3] = np.inf
    given = {k: v for k, v in d.items() if k != OUT[direction]}
    result = handle.compute(p, solver="direct.tiled", **given)
    ref = reference(p, **given)
    assert np.array_equal(np.isnan(result), np.isnan(ref))
    assert np.array_equal(np.isinf(result), np.isinf(ref))
    finite = np.isfinite(ref)
    assert finite.any() and not finite.all()
    assert rms_range(result[finite], ref[finite]) < solver.tolerance


def test_hooks_report_the_contract(handle):
    dev = handle.device
    p = P(32, 64, 56, 56, 64, 3, 3, pad_h=1, pad_w=1)   # fills any device
    assert solver.is_applicable(p, dev) is True
    assert solver.is_dynamic() is True
    for d in DIRS:
        q = p.with_direction(d)
        wti = solver.get_wti(q, dev, None, None)
        assert 0.01 < wti < 1.0          # above direct.naive, below peak
        assert solver.workspace_size(q, dev, None, None) >= 0


def test_declines_depthwise_and_32_bit_overflow(handle):
    dw = P(2, 16, 15, 15, 16, 3, 3, pad_h=1, pad_w=1, groups=16)
    reason = solver.is_applicable(dw, handle.device)
    assert isinstance(reason, Decline) and "direct.depthwise" in reason.reason
    huge = P(70000, 1, 200, 200, 1, 1, 1)          # N*H*W = 2.8e9 positions
    assert isinstance(declines(huge), Decline) and "2^31" in declines(huge).reason
    assert declines(P(1, 3, 8, 8, 4, 3, 3)) is None


def test_offsets_past_2_31_are_64_bit_kernel_arguments():
    # x has 256 * 64 * 257 * 512 > 2^31 elements: image strides and buffer lengths are
    # passed as 64-bit integers, never wrapped.
    p = P(256, 64, 257, 512, 256, 3, 3, pad_h=1, pad_w=1)
    assert p.n * p.c * p.h * p.w > 2**31
    for d in DIRS:
        for kind in ("cpu", "gpu"):
            for launch in tiled_plan.plan(p.with_direction(d), kind, 8).launches:
                if launch.kernel not in ("tiled_conv", "tiled_dot"):
                    continue
                for a in launch.args:
                    if isinstance(a, np.int32):
                        assert -2**31 <= int(a) < 2**31
                big = [int(a) for a in launch.args if isinstance(a, np.int64)]
                assert max(big) >= 2**31


def test_wti_is_unknown_on_unmodelled_device_kinds(handle):
    from types import SimpleNamespace

    dev = handle.device
    fake = SimpleNamespace(kind="accelerator", info=dev.info, peak_flops=dev.peak_flops,
                           bandwidth=dev.bandwidth, launch_overhead_s=dev.launch_overhead_s)
    assert solver.get_wti(LAYERS["resnet 3x3 56"], fake, None, None) == WTI_UNKNOWN


def test_one_build_serves_every_shape(handle):
    counters = handle.device.programs.counters
    for d in DIRS:
        _check(handle, LAYERS["past every block"].with_direction(d))
        _check(handle, LAYERS["K 13 C 33 P 65"].with_direction(d))
    before = counters.builds
    for q in (EDGE_SHAPES["odd and prime sizes"], EDGE_SHAPES["dilation 2"],
              LAYERS["past every block"].with_batch(3)):
        for d in DIRS:
            _check(handle, q.with_direction(d))
    assert counters.builds == before


@pytest.mark.parametrize("tile", tiled_plan.GPU_TILES, ids=lambda t: t.name)
@pytest.mark.parametrize("flags", [(0, 0, 1), (1, 1, 1), (1, 0, 0)],
                         ids=["mfast-pfast-idx32", "kfast-kfast-idx32", "kfast-pfast-idx64"])
@pytest.mark.parametrize("direction", DIRS)
def test_every_gpu_build_on_this_device(handle, tile, flags, direction):
    # Every build the GPU planner can choose (tile x load layout x offset width), split and
    # unsplit, run on this device (PoCL runs the local-memory kernels too).
    dev = handle.device
    p = LAYERS["past every block"].with_direction(direction)
    d = _data(p, 7)
    given = {k: v for k, v in d.items() if k != OUT[direction]}
    ref = reference(p, **given)
    for splits in (1, 3):
        pl = tiled_plan._gpu_plan(p, tile, splits, tiled_plan._lens(p))
        opts = tile.options(*map(bool, flags))
        bufs = {k: dev.upload(v) for k, v in d.items()}
        bufs["ws"] = dev.alloc(max(pl.workspace_bytes, 4))
        for launch in pl.launches:
            if launch.kernel == "tiled_conv":
                launch = launch.replace(options=opts)
            enqueue(dev, [launch], bufs)
        out = dev.download(bufs[OUT[direction]], d[OUT[direction]].shape)
        assert rms_range(out, ref) < solver.tolerance, (splits, flags)


def test_gpu_planner_picks_lanes_for_three_channels():
    # ResNet-50's first layer, backward data (C = 3), at N=32 on an H200's figures.
    p = P(32, 3, 224, 224, 64, 7, 7, pad_h=3, pad_w=3, stride_h=2, stride_w=2,
          direction="bwd")
    assert tiled_plan.plan(p, "gpu", 132, None, 62.6e12, 4.1e12).variant == "lanes"


def test_gpu_lanes_are_latency_bound_on_long_reductions():
    # A segmentation head's 256 -> 3 1x1 layer at N=1: each lanes work-item would run the
    # 256 channels alone, at least 256 x LANES_STEP_S (measured 0.16 ms on the H200, the
    # 128 x 128 tile 0.05 ms); the planner takes a tile. A short reduction (16 channels,
    # 4 outputs) stays on lanes, whose floor is then below its launch.
    head = P(1, 256, 13, 13, 3, 1, 1)
    plan = tiled_plan.plan(head, "gpu", 132, None, 62.6e12, 4.1e12, 11e-6)
    assert plan.variant != "lanes"
    lanes = tiled_plan._cpu_plan(head, 1, tiled_plan._lens(head), tiled_plan.GPU_LANES,
                                 tiled_plan.GPU_LANES_LOCAL)
    t = tiled_wti.plan_seconds(lanes, "gpu", 132, 62.6e12, 4.1e12, 11e-6)
    assert t >= 11e-6 + 256 * tiled_wti.LANES_STEP_S
    assert t > tiled_wti.plan_seconds(plan, "gpu", 132, 62.6e12, 4.1e12, 11e-6)
    small = P(1, 16, 1, 1, 4, 1, 1)
    assert tiled_plan.plan(small, "gpu", 132, None, 62.6e12, 4.1e12, 11e-6).variant == "lanes"


@pytest.mark.parametrize("direction", ["fwd", "bwd"])
def test_gpu_lanes_plan_on_this_device(handle, direction):
    # GPUs run tiled_cpu.cl's tiled_conv in work-groups of 64 for few channels; the grid is
    # rounded up, so the kernel must ignore blocks past the end.
    dev = handle.device
    p = P(2, 3, 37, 41, 3, 7, 7, pad_h=3, pad_w=3, stride_h=2, stride_w=2,
          direction=direction)
    pl = tiled_plan._cpu_plan(p, 1, tiled_plan._lens(p), tiled_plan.GPU_LANES,
                              tiled_plan.GPU_LANES_LOCAL)
    assert pl.variant == "lanes"
    assert all(launch.global_size[1] % tiled_plan.GPU_LANES_LOCAL == 0
               for launch in pl.launches)
    d = _data(p, 9)
    d[OUT[direction]][:] = np.nan
    given = {k: v for k, v in d.items() if k != OUT[direction]}
    bufs = {k: dev.upload(v) for k, v in d.items()}
    enqueue(dev, pl.launches, bufs)
    result = dev.download(bufs[OUT[direction]], d[OUT[direction]].shape)
    assert rms_range(result, reference(p, **given)) < solver.tolerance


def test_cpu_plans_8_lanes_for_7_wide_rows():
    p = LAYERS["7-wide rows, stride 2"]
    assert (p.ho, p.wo) == (7, 7)
    pl = tiled_plan.plan(p, "cpu", 2)
    assert pl.variant == "rows8" and "-DTILED_VW=8" in pl.launches[-1].options


@pytest.mark.parametrize("direction", ["fwd", "bwd"])
def test_cpu_row_tiles_hold_whole_groups_of_few_channels(direction):
    """ResNeXt-50's first grouped layer (32 groups of 4 channels): a row tile of 16 holds 4
    whole groups, so the plan computes no padded rows (it computed 16 for 4 before), and
    each work-item runs all 8 tiles of its position block after one set-up."""
    p = P(8, 128, 56, 56, 128, 3, 3, pad_h=1, pad_w=1, groups=32).with_direction(direction)
    pl = tiled_plan.plan(p, "cpu", 2)
    (launch,) = pl.launches
    assert "-DTILED_GT=4" in launch.options and "-DTILED_MR=16" in launch.options
    assert launch.global_size == (1, 8 * 56 * 56 // 16, 1)
    assert pl.padded_flops == p.flops and pl.blocks == 8 * 56 * 56 // 16
    assert pl.reduction == 8 * 4 * 9          # steps per set-up: 8 tiles of 36
    few = tiled_plan.plan(P(1, 64, 3, 3, 64, 3, 3, pad_h=1, pad_w=1, groups=32), "cpu", 2)
    assert few.launches[0].global_size == (4, 1, 1)      # 4 tiles of 8 groups, one each
    # groups of 12 or 16 run exact tiles of one group; of 32, the usual tiles
    for groups, rows in ((3, 12), (2, 16)):
        q = P(1, 36 if groups == 3 else 32, 9, 9, 36 if groups == 3 else 32, 3, 3,
              pad_h=1, pad_w=1, groups=groups).with_direction(direction)
        opts = tiled_plan.plan(q, "cpu", 2).launches[-1].options
        assert f"-DTILED_MR={rows}" in opts and "TILED_GT" not in opts
    ungrouped = tiled_plan.plan(LAYERS["resnet 3x3 56"].with_direction(direction), "cpu", 2)
    assert all("TILED_GT" not in ln.options for ln in ungrouped.launches)


def test_cpu_backward_weights_blocks_fit_short_groups():
    """Backward weights of groups: tiled_dot blocks of K/G rows (rounded up to 4) x 36
    columns (C/G x 3 x 3 for a multiple of 4 channels), not 32 x 32 of which 4 x 36 real."""
    p = P(8, 128, 56, 56, 128, 3, 3, pad_h=1, pad_w=1, groups=32).with_direction("wrw")
    pl = tiled_plan.plan(p, "cpu", 2)
    assert "-DTILED_DOT_MR=4 " in pl.launches[0].options + " "
    assert "-DTILED_DOT_NR=36" in pl.launches[0].options
    assert pl.padded_flops == p.flops
    odd = tiled_plan.plan(LAYERS["groups of 3, 1x7"].with_direction("wrw"), "cpu", 2)
    assert "-DTILED_DOT_MR=4 -DTILED_DOT_NR=32" in odd.launches[0].options   # 3 rows, 21 cols
    plain = tiled_plan.plan(LAYERS["resnet 3x3 56"].with_direction("wrw"), "cpu", 2)
    assert "-DTILED_DOT_MR=32 -DTILED_DOT_NR=32" in plain.launches[0].options


@pytest.mark.parametrize("direction", ["fwd", "bwd"])
def test_cpu_packs_long_filters_into_the_workspace(handle, direction):
    p = LAYERS["packed filter"].with_direction(direction)
    pl = tiled_plan.plan(p, "cpu", 2)
    kernels = [launch.kernel for launch in pl.launches]
    assert kernels == ["tiled_pack_a", "tiled_conv"]
    blocks = -(-(p.k if direction == "fwd" else p.c) // tiled_plan.CPU.mr)
    assert pl.workspace_bytes == 4 * blocks * tiled_plan.CPU.mr * 9 * (
        p.c if direction == "fwd" else p.k)
    assert [ln.kernel for ln in tiled_plan.plan(p, "cpu", 2, 0).launches] == ["tiled_conv"]
    d = _data(p, 4)
    given = {k: v for k, v in d.items() if k != OUT[direction]}
    ref = reference(p, **given)
    for kind_limit in (None, 0):
        got, _ = _run_plan(handle.device, p, "cpu", d, limit=kind_limit)
        assert rms_range(got, ref) < solver.tolerance


def test_run_uses_the_plan_that_was_sized(handle):
    # workspace_size and run must agree: the workspace sized for the packed plan is enough
    # for run to pack again (run re-plans within the workspace it was given).
    for d in ("fwd", "bwd"):
        p = LAYERS["packed filter"].with_direction(d)
        full = tiled_plan.plan(p, "cpu", 2)
        assert full.launches[0].kernel == "tiled_pack_a"
        again = tiled_plan.plan(p, "cpu", 2, full.workspace_bytes)
        assert again == full
        assert tiled_plan.plan(p, "cpu", 2, full.workspace_bytes - 4).workspace_bytes == 0


@pytest.mark.parametrize("p", [
    P(1, 2, 1, 1, 2, 1, 1, pad_h=1, stride_h=2),
    P(3, 10, 4, 1, 3, 3, 1, pad_h=3, pad_w=1, stride_h=4, stride_w=4, dilation_h=2,
      dilation_w=2),
], ids=["1x1 picture", "strided dilated"])
def test_bwd_where_no_tap_reaches_dx(handle, p):
    # Stride and padding such that no filter tap lands on a real input position: dx is
    # all zeros, every phase has an empty reduction, and the WTI is still a number.
    q = p.with_direction("bwd")
    assert all(mp.Q == 0 for mp in tiled_plan.maps(q))
    wti = solver.get_wti(q, handle.device, None, None)
    assert wti > 0 and np.isfinite(wti)
    dx = _check(handle, q)
    assert not dx.any()


@pytest.mark.parametrize("direction", DIRS)
@pytest.mark.parametrize("name", list(LAYERS))
def test_gpu_plan_built_on_first_use_equals_the_eager_plan(name, direction):
    """The GPU plan ranking reads (launches built on first use) has the costs, workspace
    and launches of the plan built at once with the same tile and split."""
    p = LAYERS[name].with_direction(direction)
    lazy = tiled_plan.plan(p, "gpu", 132, None, 62.6e12, 4.1e12)
    if lazy.variant == "lanes":           # tiled_cpu.cl's kernel: a Plan built at once
        assert isinstance(lazy, tiled_plan.Plan) and len(lazy.launches) == lazy.n_launches
        return
    tile = next(t for t in tiled_plan.GPU_TILES if t.name == lazy.variant)
    eager = tiled_plan._gpu_plan(p, tile, lazy.splits, tiled_plan._lens(p))
    for name_ in ("variant", "blocks", "padded_flops", "traffic_bytes", "reduction", "splits",
                  "phases", "n_launches", "workspace_bytes"):
        assert getattr(lazy, name_) == getattr(eager, name_), name_
    assert lazy.launches == eager.launches and len(lazy.launches) == lazy.n_launches


def test_gpu_wti_scales_the_chosen_plan_by_its_build_bias():
    # The planner compares builds by their modelled seconds; the WTI of the plan it keeps
    # is scaled by the build's measured median ratio (tiled_wti.PLAN_BIAS).
    from wticonv.testing.launches import RecordingDevice

    gpu = RecordingDevice("gpu", launch_overhead_s=11e-6)
    p = P(32, 256, 14, 14, 256, 3, 3, pad_h=1, pad_w=1)
    plan = tiled_plan.plan(p, "gpu", 132, None, gpu.peak_flops, gpu.bandwidth, 11e-6)
    t = tiled_wti.plan_seconds(plan, "gpu", 132, gpu.peak_flops, gpu.bandwidth, 11e-6)
    bias = tiled_wti.PLAN_BIAS[("gpu", plan.variant)]
    assert 0.4 < bias < 1.0
    assert tiled_wti.wti(p, plan, gpu) == pytest.approx(p.flops / (gpu.peak_flops * t * bias))


def test_the_8_deep_builds_bias_is_its_directions_own():
    # 64x128k8's forward and backward-data plans ran 0.67 / 0.66 of their modelled time on
    # the H200, its backward-weights plans far less: one figure per direction, the
    # build's own for any direction without one, 1.0 for a build without any.
    assert tiled_wti.plan_bias("gpu", "64x128k8", "fwd") == 0.67
    assert tiled_wti.plan_bias("gpu", "64x128k8", "bwd") == 0.66
    assert tiled_wti.plan_bias("gpu", "64x128k8", "wrw") == tiled_wti.PLAN_BIAS[
        ("gpu", "64x128k8")] == 0.51
    assert tiled_wti.plan_bias("gpu", "128x128", "bwd") == 0.75
    assert tiled_wti.plan_bias("cpu", "flat", "fwd") == 1.0
    from wticonv.testing.launches import RecordingDevice

    # the H100's measured figures (benchmarks/results/evaluate-test9-n32-h100-c)
    gpu = RecordingDevice("gpu", compute_units=132, peak_flops=6.259e13, bandwidth=2.964e12,
                          launch_overhead_s=11.2e-6)
    # regnet_y_3_2gf's 72 -> 32 1x1 stride-2 backward data at N=32: an 8-deep plan
    p = P(32, 32, 112, 112, 72, 1, 1, stride_h=2, stride_w=2, direction="bwd")
    plan = tiled_plan.plan(p, "gpu", 132, None, gpu.peak_flops, gpu.bandwidth, 11.2e-6)
    assert plan.variant == "64x128k8"
    t = tiled_wti.plan_seconds(plan, "gpu", 132, gpu.peak_flops, gpu.bandwidth, 11.2e-6)
    assert tiled_wti.wti(p, plan, gpu) == pytest.approx(p.flops / (gpu.peak_flops * t * 0.66))
