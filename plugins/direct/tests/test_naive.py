"""direct.naive against the float64 reference on edge shapes, in every direction."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from wticonv import ConvProblem, reference, rms_range
from wticonv_direct import launch
from wticonv_direct.naive import NAIVE_WTI, solver

P = ConvProblem
EDGE = {
    "1x1 picture, 1x1 filter": P(2, 3, 1, 1, 4, 1, 1),
    "1x1 picture, 3x3 filter, pad 1": P(2, 3, 1, 1, 5, 3, 3, pad_h=1, pad_w=1),
    "1x1 picture, pad 2 > filter/2": P(1, 2, 1, 1, 3, 3, 3, pad_h=2, pad_w=2),
    "pad larger than filter": P(1, 2, 4, 5, 3, 2, 2, pad_h=3, pad_w=4),
    "filter = padded picture (output 1x1)": P(2, 3, 5, 4, 2, 7, 6, pad_h=1, pad_w=1),
    "filter nearly the picture": P(1, 4, 6, 6, 3, 5, 6),
    "stride > filter": P(2, 3, 11, 13, 4, 2, 3, stride_h=5, stride_w=4),
    "stride > filter, not dividing": P(1, 2, 17, 10, 3, 3, 1, stride_h=4, stride_w=3,
                                       pad_h=1),
    "dilation 2": P(2, 4, 13, 11, 5, 3, 3, pad_h=2, pad_w=2, dilation_h=2, dilation_w=2),
    "dilation 3, stride 2": P(1, 3, 17, 19, 4, 3, 2, pad_h=1, stride_h=2, stride_w=2,
                              dilation_h=3, dilation_w=3),
    "groups 4": P(2, 8, 9, 7, 12, 3, 3, pad_h=1, pad_w=1, groups=4),
    "depthwise": P(2, 16, 15, 15, 16, 3, 3, pad_h=1, pad_w=1, groups=16),
    "depthwise stride 2, multiplier 2": P(1, 6, 14, 13, 12, 3, 3, pad_h=1, pad_w=1,
                                          stride_h=2, stride_w=2, groups=6),
    "dilated groups": P(1, 6, 12, 12, 6, 3, 3, pad_h=2, pad_w=2, dilation_h=2,
                        dilation_w=2, groups=3),
    "odd and prime sizes": P(3, 7, 13, 17, 11, 5, 3, pad_h=2, pad_w=1),
    "non-square even filter": P(2, 5, 10, 9, 3, 2, 4, pad_h=1, pad_w=2),
    "1xW picture": P(2, 3, 1, 19, 4, 1, 5, pad_w=2),
    "large C, small picture": P(1, 300, 3, 3, 7, 3, 3, pad_h=1, pad_w=1),
    "K = C = 1": P(4, 1, 23, 29, 1, 7, 7, pad_h=3, pad_w=3, stride_h=2, stride_w=2),
    "resnet conv1 shape": P(1, 3, 32, 32, 8, 7, 7, pad_h=3, pad_w=3, stride_h=2,
                            stride_w=2),
}


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
    assert launch.plan(small, dev).global_size == 4 * 3 * 9 * launch.WRW_LOCAL
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
    assert plan.global_size >= total and plan.global_size % plan.local_size == 0
    assert plan.global_size - total < plan.local_size
    bwd = launch.plan(p.with_direction("bwd"), dev)
    assert bwd.global_size >= 64 * 64 * 257 * 512
    src = launch.kernel_source()
    assert "const long total = (long)N * K * Ho * Wo;" in src
    assert "const long gid = get_global_id(0);" in src


def test_hooks_report_the_contract(handle):
    p = EDGE["odd and prime sizes"]
    dev = handle.device
    assert solver.is_applicable(p, dev) is True
    assert solver.is_dynamic() is True
    assert solver.get_wti(p, dev) == NAIVE_WTI == 0.01
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
