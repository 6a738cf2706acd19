"""direct.chanvec against the float64 reference (ResNet-50's and ResNeXt-50's
small-picture layers, scaled down, and edge shapes: padding, strides, positions crossing
rows and images, both register blocks); NaN propagation through padding; what it
declines; the WTI model's figures."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest
from wticonv import ConvProblem, Decline, reference, rms_range
from wticonv.problem.tensors import OUTPUT_TENSOR
from wticonv_direct import chanvec_plan
from wticonv_direct.chanvec import (BLOCK_EFFICIENCY, ONE_BLOCK_EFFICIENCY,
                                    ONE_BLOCK_REDUCTION_HALF, REDUCTION_HALF, TAP_OVERHEAD,
                                    efficiency, predicted_seconds, solver)

P = ConvProblem

CASES = {
    "1x1, 7x7 picture (6 x 64 block)": P(2, 96, 7, 7, 128, 1, 1),
    "3x3 stride 2, 14x14 -> 7x7": P(2, 48, 14, 14, 64, 3, 3, pad_h=1, pad_w=1, stride_h=2,
                                    stride_w=2),
    "1x1 stride 2 downsample": P(3, 40, 13, 13, 64, 1, 1, stride_h=2, stride_w=2),
    "groups of 32 channels (12 x 32 block)": P(2, 64, 9, 9, 64, 3, 3, pad_h=1, pad_w=1,
                                               groups=2),
    "K = 96: the 12 x 32 block": P(1, 20, 6, 5, 96, 3, 3, pad_h=1, pad_w=1),
    "7x7 stem, stride 2, 3 channels": P(1, 3, 23, 21, 64, 7, 7, pad_h=3, pad_w=3,
                                         stride_h=2, stride_w=2),
    "positions not a multiple of the block, one image": P(1, 8, 5, 3, 64, 3, 3, pad_h=1,
                                                          pad_w=1),
    "padding beyond the filter": P(1, 4, 4, 5, 64, 2, 3, pad_h=3, pad_w=4),
    "1x1 picture": P(5, 33, 1, 1, 64, 1, 1),
    "groups of 16 channels (12 x 16 block)": P(2, 32, 9, 9, 32, 3, 3, pad_h=1, pad_w=1,
                                               groups=2),
    "asymmetric stride and filter": P(2, 5, 11, 17, 32, 1, 5, pad_w=2, stride_h=3,
                                      stride_w=2),
    # 108 positions in 36-position pictures: runs of 16 within an image (one vector a
    # channel), across images and cut by the last position (written one by one)
    "runs of 16 positions, 64-channel blocks": P(3, 8, 6, 6, 64, 3, 3, pad_h=1, pad_w=1),
    "runs of 16 positions, 32-channel blocks": P(3, 8, 6, 6, 32, 3, 3, pad_h=1, pad_w=1),
    "runs of 16 positions, 16-channel blocks": P(3, 8, 6, 6, 16, 3, 3, pad_h=1, pad_w=1),
}


def _check_against_the_reference(handle, p, seed):
    """direct.chanvec's output for ``p`` on uniform random inputs (the two tensors its
    direction reads) within the solver's tolerance of the float64 reference."""
    rng = np.random.default_rng(seed)
    shapes = {"x": p.x_shape, "w": p.w_shape, "y": p.y_shape}
    inputs = {t: rng.uniform(-1, 1, shapes[t]).astype(np.float32)
              for t in shapes if t != OUTPUT_TENSOR[p.direction]}
    out = handle.compute(p, solver="direct.chanvec", **inputs)
    ref = reference(p, **inputs)
    assert out.shape == ref.shape == shapes[OUTPUT_TENSOR[p.direction]]
    assert rms_range(out, ref) < solver.tolerance, f"{p.key}: {rms_range(out, ref)}"


@pytest.fixture(scope="module", params=[16, 8], ids=["16-float vectors", "8-float vectors"])
def cpu_handle(request, handle):
    """A handle on the CPU as a device of 16-float vectors (AVX-512's register blocks) and
    one on it as a device of 8 (AVX2's), whichever the CPU prefers: a block's results do
    not depend on the instructions it compiles to, only its speed. Each width its own
    Device and Handle (a handle keeps each problem's plan)."""
    from wticonv import Handle
    from wticonv.runtime.device import Device

    dev = handle.device
    if dev.kind != "cpu":
        pytest.skip("direct.chanvec runs on CPUs")
    if dev.info.vector_width == request.param:
        return handle
    info = dataclasses.replace(dev.info, vector_width=request.param)
    return Handle(Device(dev.cl_device, info, dev.store))


@pytest.mark.parametrize("name", list(CASES))
def test_matches_the_reference(cpu_handle, name):
    p = CASES[name]
    _check_against_the_reference(cpu_handle, p, seed=3)
    kg = p.k // p.groups
    width = cpu_handle.device.info.vector_width
    assert chanvec_plan.block(p, width) == (
        (6, 1) if width < 16 else (6, 4) if kg % 64 == 0 else (12, 2) if kg % 32 == 0
        else (12, 1))


@pytest.mark.parametrize("k, fwd_block", [(64, "-DCHANVEC_FPB=4 -DCHANVEC_SUB=4"),
                                          (32, "-DCHANVEC_FPB=4 -DCHANVEC_SUB=4"),
                                          (16, "-DCHANVEC_FPB=8 -DCHANVEC_SUB=2")])
def test_forward_work_items_hold_16_positions(k, fwd_block):
    """chanvec_fwd's work-items take 16 positions each (sub-blocks of FPB, FWD_BLOCKS) on
    short reductions or large pictures, one block elsewhere; backward weights keep the
    block's slots (CHANVEC_PB)."""
    p = P(3, 8, 6, 6, k, 3, 3, pad_h=1, pad_w=1)
    pb, kv = chanvec_plan.block(p)
    pack, fwd = chanvec_plan.plan(p, 0.5)
    assert fwd.kernel == "chanvec_fwd"
    assert fwd.options == f"-DCHANVEC_PB={pb} -DCHANVEC_KV={kv} {fwd_block}"
    assert fwd.global_size == (-(-108 // 16), k // (16 * kv))
    assert pack.options == fwd.options          # one program
    # large reductions on small pictures: one block of the block's own positions
    small = P(2, 512, 7, 7, k, 3, 3, pad_h=1, pad_w=1)
    assert chanvec_plan.fwd_split(small) == (pb, 1)
    _, fwd = chanvec_plan.plan(small, 0.5)
    assert fwd.options == f"-DCHANVEC_PB={pb} -DCHANVEC_KV={kv}"
    assert fwd.global_size == (-(-98 // pb), k // (16 * kv))
    # ... but 16 positions on pictures of 28x28 and more, or reductions of 288 and less
    assert chanvec_plan.fwd_split(dataclasses.replace(small, h=28, w=28)) != (pb, 1)
    assert chanvec_plan.fwd_split(dataclasses.replace(small, c=32)) != (pb, 1)
    wrw = chanvec_plan.plan(p.with_direction("wrw"), 0.5)
    assert all(launch.options == f"-DCHANVEC_PB={pb} -DCHANVEC_KV={kv}" for launch in wrw)


#: Groups of fewer input channels than a block's 6 slots: the slots take several filter
#: columns (1, 2 and 3 channels), or repeat (4); filters wider than the picture
WRW_CASES = {
    **CASES,
    "1 channel, 5x5: 6 filter columns a block": P(2, 1, 10, 10, 64, 5, 5, pad_h=2, pad_w=2),
    "2 channels, 3x5 pad 4: 3 columns a block": P(1, 2, 9, 11, 64, 3, 5, pad_h=1, pad_w=4),
    "4 channels: 4 of 6 slots real": P(1, 4, 8, 8, 64, 3, 3, pad_h=1, pad_w=1),
    "3 channels, 1x7 stride 2": P(1, 3, 5, 5, 64, 1, 7, pad_w=3, stride_w=2),
    "7x7 filter on a 3x3 picture": P(1, 3, 3, 3, 64, 7, 7, pad_h=3, pad_w=3),
}


@pytest.mark.parametrize("name", list(WRW_CASES))
def test_backward_weights_match_the_reference(cpu_handle, name):
    """chanvec_wrw: every tap's valid columns, slots of several filter columns (the
    stem's 3 channels x 2), repeated slots, groups, strides, padding beyond the filter."""
    _check_against_the_reference(cpu_handle, WRW_CASES[name].with_direction("wrw"), seed=5)


#: Backward data at stride 1 (C/G a multiple of 16): padding 0 to R-1, the three blocks,
#: groups, filters wider than the picture, positions crossing rows and images
BWD_CASES = {
    "1x1, 7x7 picture (6 x 64 block)": P(2, 64, 7, 7, 96, 1, 1),
    "3x3 pad 1, groups of 32 (12 x 32 block)": P(2, 64, 9, 9, 64, 3, 3, pad_h=1, pad_w=1,
                                                  groups=2),
    "3x3 without padding, K = 40": P(1, 32, 6, 5, 40, 3, 3),
    "5x5 pad 1, C = 96": P(1, 96, 8, 9, 20, 5, 5, pad_h=1, pad_w=1),
    "1x7 pad 3, two images": P(2, 32, 5, 9, 16, 1, 7, pad_w=3),
    "1x1 picture": P(5, 64, 1, 1, 33, 1, 1),
    "groups of 16 channels (12 x 16 block), 5x5 pad 2": P(1, 64, 6, 7, 64, 5, 5, pad_h=2,
                                                          pad_w=2, groups=4),
    "7x7 pad 3 on a 3x3 picture": P(1, 32, 3, 3, 8, 7, 7, pad_h=3, pad_w=3),
}


@pytest.mark.parametrize("name", list(BWD_CASES))
def test_backward_data_matches_the_reference(cpu_handle, name):
    """chanvec_pack_bwd's flipped, transposed filters and chanvec_fwd on dy."""
    p = BWD_CASES[name].with_direction("bwd")
    _check_against_the_reference(cpu_handle, p, seed=7)
    f = chanvec_plan.forward_view(p)
    assert (f.n, f.c, f.h, f.w, f.k, f.ho, f.wo) == (p.n, p.k, p.ho, p.wo, p.c, p.h, p.w)


@pytest.mark.parametrize("direction", ["fwd", "bwd"])
def test_channel_blocks_first_match_the_reference(cpu_handle, direction, monkeypatch):
    """chanvec_fwd's grid the other way round (kb_fast: every channel block of a position
    block in turn), forced on the small cases by lowering the input threshold to 0; the
    groups-1 cases of more than one channel block take it."""
    width = cpu_handle.device.info.vector_width
    monkeypatch.setattr(chanvec_plan, "KB_FAST_INPUT_BYTES", 0)
    cases = CASES if direction == "fwd" else BWD_CASES
    taken = 0
    for i, p in enumerate(cases.values()):
        p = p.with_direction(direction)
        f = chanvec_plan.forward_view(p)
        _, kv = chanvec_plan.block(p, width)
        assert chanvec_plan.kb_fast(f, width) == (f.groups == 1 and f.k > 16 * kv)
        taken += chanvec_plan.kb_fast(f, width)
        _check_against_the_reference(cpu_handle, p, seed=11 + i)
    assert taken >= 1


def test_channel_blocks_first_where_the_input_is_large_and_the_filters_small():
    """The work order's rule (KB_FAST_*): ResNet-50's 256 -> 512 1x1 stride-2 layer at
    N=8 (input 25.7 MB, filters 0.5 MB) channel blocks first; its 7x7 layers (input
    0.8 MB) and the 1024 -> 2048 downsample (filters 8 MB) position blocks first; groups
    and a single channel block never."""
    assert chanvec_plan.kb_fast(P(8, 256, 56, 56, 512, 1, 1, stride_h=2, stride_w=2))
    assert chanvec_plan.kb_fast(P(8, 256, 28, 28, 256, 3, 3, pad_h=1, pad_w=1, stride_h=2,
                                  stride_w=2))
    assert not chanvec_plan.kb_fast(P(8, 512, 7, 7, 512, 3, 3, pad_h=1, pad_w=1))
    assert not chanvec_plan.kb_fast(P(8, 1024, 14, 14, 2048, 1, 1, stride_h=2, stride_w=2))
    assert not chanvec_plan.kb_fast(P(8, 256, 56, 56, 64, 1, 1))
    assert not chanvec_plan.kb_fast(P(8, 256, 56, 56, 512, 1, 1, groups=2))


def test_backward_data_spreads_inf_only_through_real_taps(cpu_handle):
    """An Inf in dy reaches exactly the dx positions of its window (3x3 around it, cut by
    the picture's edge), never a padding tap's."""
    p = P(1, 32, 5, 5, 16, 3, 3, pad_h=1, pad_w=1, direction="bwd")
    w = np.ones(p.w_shape, np.float32)
    dy = np.ones(p.y_shape, np.float32)
    dy[0, 3, 0, 4] = np.inf
    dx = cpu_handle.compute(p, solver="direct.chanvec", w=w, y=dy)
    bad = np.isinf(dx[0])
    assert bad[:, :2, 3:].all() and bad.sum() == 32 * 4
    # ones elsewhere: 16 channels k x the taps inside (2 at an edge, 3 inside, a side)
    assert np.all(dx[0, :, 2:, :2] == 16.0 * np.array([[6, 9], [6, 9], [4, 6]]))


@pytest.mark.parametrize("name", ["7x7 stem, stride 2, 3 channels", "1x1 picture",
                                  "groups of 32 channels (12 x 32 block)",
                                  "2 channels, 3x5 pad 4: 3 columns a block"])
def test_backward_weights_in_chunks_of_rows_match_the_reference(cpu_handle, name,
                                                               monkeypatch):
    """Chunks of rows (forced here on small problems), uneven ones included: each chunk's
    partial dw, then chanvec_wrw_sum; both kernels."""
    width = cpu_handle.device.info.vector_width
    monkeypatch.setattr(chanvec_plan, "WRW_CHUNK_ABOVE_BYTES", 0)
    monkeypatch.setattr(chanvec_plan, "WRW_CHUNK_BYTES", 1)     # a row a chunk, at most
    # batch sizes no other test uses: the handle keeps each problem's plan and workspace
    p = dataclasses.replace(WRW_CASES[name], n=WRW_CASES[name].n + 7, direction="wrw")
    chunks, rows = chanvec_plan.wrw_chunks(p, width)
    assert chunks == p.n * p.ho > 1 and rows == 1
    _check_against_the_reference(cpu_handle, p, seed=11)
    p = dataclasses.replace(p, n=p.n + 1)
    row_bytes = 4 * 16 * chanvec_plan.block(p, width)[1] * p.wo
    monkeypatch.setattr(chanvec_plan, "WRW_CHUNK_BYTES", 3 * row_bytes)     # 3 rows a chunk
    chunks, rows = chanvec_plan.wrw_chunks(p, width)
    assert rows == 3 and chunks == -(-p.n * p.ho // 3)
    _check_against_the_reference(cpu_handle, p, seed=12)


def test_backward_weights_leave_padding_taps_out(cpu_handle):
    """A padding tap contributes an exact zero: an Inf in dy reaches only the weights
    whose tap sees real input at that position."""
    p = P(1, 2, 4, 4, 64, 3, 3, pad_h=1, pad_w=1, direction="wrw")
    x = np.ones(p.x_shape, np.float32)
    dy = np.ones(p.y_shape, np.float32)
    dy[0, 5, 0, 0] = np.inf              # output (0, 0): taps r = 0 or s = 0 are padding
    dw = cpu_handle.compute(p, solver="direct.chanvec", x=x, y=dy)
    assert np.isinf(dw[5, :, 1:, 1:]).all() and np.isfinite(dw[5, :, 0, :]).all()
    assert np.isfinite(dw[5, :, :, 0]).all()
    # ones everywhere: each weight counts the positions whose tap is inside (3 or 4 rows
    # times 3 or 4 columns)
    assert np.all(dw[4] == np.array([[9.0, 12.0, 9.0], [12.0, 16.0, 12.0], [9.0, 12.0, 9.0]]))


def test_nan_in_the_picture_reaches_only_its_outputs(cpu_handle):
    """A padding tap is an exact zero: a NaN spreads only to the outputs whose window
    holds it, and an Inf in a filter only where it meets a nonzero input."""
    p = P(1, 4, 6, 6, 64, 3, 3, pad_h=1, pad_w=1)
    x = np.ones(p.x_shape, np.float32)
    w = np.ones(p.w_shape, np.float32)
    x[0, 1, 0, 0] = np.nan
    y = cpu_handle.compute(p, solver="direct.chanvec", x=x, w=w)
    bad = np.isnan(y[0, 0])
    assert bad[:2, :2].all() and bad.sum() == 4            # the 2x2 windows around (0, 0)
    assert np.all(y[0, :, 2:5, 2:5] == 36.0)               # 4 channels x 9 taps of ones
    assert np.all(y[0, :, 5, 5] == 16.0)                   # the corner: 4 of 9 taps inside


def _device(kind="cpu", vector_width=16):
    info = SimpleNamespace(vector_width=vector_width, compute_units=2, name="t")
    return SimpleNamespace(kind=kind, info=info, peak_flops=2.0e11, bandwidth=5.0e10,
                           launch_overhead_s=2e-5)


@pytest.mark.parametrize("problem, device, words", [
    (P(1, 64, 8, 8, 64, 3, 3, direction="bwd", stride_h=2, stride_w=2), _device(),
     "stride 1 only"),
    (P(1, 64, 7, 7, 64, 3, 3, direction="bwd", pad_h=3, pad_w=3), _device(),
     "padding 3x3 beyond the filter"),
    (P(1, 40, 7, 7, 64, 3, 3, direction="bwd"), _device(), "C/G = 40 input channels"),
    # depthwise and dilation are named before the backward-data limits they also break
    (P(1, 16, 8, 8, 16, 3, 3, pad_h=3, pad_w=3, groups=16, direction="bwd"), _device(),
     "direct.depthwise serves it"),
    (P(1, 16, 8, 8, 16, 3, 3, pad_h=3, pad_w=3, dilation_h=2, dilation_w=2,
       direction="bwd"), _device(), "no dilation"),
    (P(1, 8, 7, 7, 40, 3, 3), _device(), "multiple of 16"),
    (P(1, 64, 7, 7, 64, 3, 3, groups=8), _device(), "K/G = 8"),
    (P(1, 8, 9, 9, 64, 3, 3, dilation_h=2, dilation_w=2), _device(), "no dilation"),
    (P(1, 64, 7, 7, 64, 3, 3, groups=64), _device(), "direct.depthwise serves it"),
    (P(1, 64, 7, 7, 2, 3, 3, groups=2), _device(), "K/G = 1 output channel a group"),
    (P(1, 8, 7, 7, 64, 3, 3), _device("gpu"), "the GPU solvers serve GPUs"),
    (P(1, 8, 7, 7, 64, 3, 3), _device(vector_width=4), "8- or 16-float vectors"),
    # too narrow is named before the channel count that no block would take either
    (P(1, 8, 7, 7, 8, 3, 3), _device(vector_width=4), "8- or 16-float vectors"),
])
def test_declines_with_a_reason(problem, device, words):
    got = solver.is_applicable(problem, device)
    assert isinstance(got, Decline) and words in str(got)
    assert solver.is_applicable(P(1, 8, 7, 7, 64, 3, 3), _device()) is True
    assert solver.is_applicable(P(1, 8, 7, 7, 64, 3, 3, direction="wrw"), _device()) is True
    assert solver.is_applicable(P(1, 8, 7, 7, 64, 3, 3), _device(vector_width=8)) is True


def test_narrow_vectors_take_the_narrow_block():
    """On 8-float vectors (AVX2) every problem runs 6 positions x 16 channels (12
    registers of 8 floats), forward work-items 4 sub-blocks of 4 positions, with that
    block's constants; on 16-float vectors the blocks of 64, 32 and 16 channels."""
    narrow = _device(vector_width=8)
    p = P(8, 256, 14, 14, 512, 3, 3, pad_h=1, pad_w=1)
    assert chanvec_plan.block(p, 8) == (6, 1) and chanvec_plan.block(p, 16) == (6, 4)
    assert chanvec_plan.block(p, 4) is None
    small = P(8, 3, 224, 224, 64, 7, 7, pad_h=3, pad_w=3, stride_h=2, stride_w=2)
    pack, fwd = chanvec_plan.plan(small, 0.5, 8)
    assert fwd.options == "-DCHANVEC_PB=6 -DCHANVEC_KV=1 -DCHANVEC_FPB=4 -DCHANVEC_SUB=4"
    assert chanvec_plan.kb_fast(small, 8)      # channel blocks first: the grid reversed
    assert fwd.global_size == (64 // 16, -(-8 * 112 * 112 // 16))
    assert efficiency(small, 2, 8) == pytest.approx(
        BLOCK_EFFICIENCY[(6, 1)] * 147 / (147 + REDUCTION_HALF + TAP_OVERHEAD * 49))
    # backward weights: 16 output channels a work-item, so four times the 64-wide grid
    wrw = small.with_direction("wrw")
    assert chanvec_plan.wrw_items(wrw, 8) == 4 * chanvec_plan.wrw_items(wrw, 16)
    assert [launch.options for launch in chanvec_plan.plan(wrw, 0.5, 8)][:2] == [
        "-DCHANVEC_PB=6 -DCHANVEC_KV=1"] * 2
    assert solver.workspace_size(wrw, narrow) == chanvec_plan.workspace_bytes(wrw, 8)
    assert predicted_seconds(p, narrow) != predicted_seconds(p, _device())


def test_wti_model_figures():
    dev = _device()
    # a long reduction on 7x7 pictures: one block a work-item, its own constants
    p = P(8, 2048, 7, 7, 512, 1, 1)
    assert chanvec_plan.fwd_split(p) == (6, 1)
    eff = ONE_BLOCK_EFFICIENCY[(6, 4)] * 2048 / (2048 + ONE_BLOCK_REDUCTION_HALF + TAP_OVERHEAD)
    assert efficiency(p) == pytest.approx(eff)
    packing = chanvec_plan.PACK_BYTES_FACTOR * 8 * 512 * 2048 / dev.bandwidth
    expected = 2 * dev.launch_overhead_s + packing + p.flops / (dev.peak_flops * eff)
    assert predicted_seconds(p, dev) == pytest.approx(expected)
    assert solver.get_wti(p, dev) == pytest.approx(p.flops / (dev.peak_flops * expected))
    assert solver.workspace_size(p, dev) == 4 * 512 * 2048
    # a short reduction (3 channels x 7 x 7) runs at a smaller share of peak
    stem = P(8, 3, 224, 224, 64, 7, 7, pad_h=3, pad_w=3, stride_h=2, stride_w=2)
    # and each of its 49 taps (offsets, padding test) weighs on 3 channels only
    assert efficiency(stem) == pytest.approx(BLOCK_EFFICIENCY[(6, 4)] * 147
                                             / (147 + REDUCTION_HALF + TAP_OVERHEAD * 49))
    assert solver.get_wti(stem, _device("gpu")) == -2.0


def test_backward_weights_model_figures():
    from wticonv_direct.chanvec import (WRW_EFFICIENCY, WRW_ITEM_OVERHEAD, WRW_POINTWISE,
                                        WRW_ROW_OVERHEAD, wrw_efficiency)

    dev = _device()                                   # 2 compute units
    # the stem: 3 input channels, 7x7 filters
    stem = P(8, 3, 224, 224, 64, 7, 7, pad_h=3, pad_w=3, stride_h=2, stride_w=2,
             direction="wrw")
    rows = 8 * 112
    length = rows * 112 / (rows * (112 + WRW_ROW_OVERHEAD) + WRW_ITEM_OVERHEAD)
    # 6 slots: 3 channels x 2 filter columns; 7 columns take 4 blocks, 21 of 24 slots real
    assert chanvec_plan.wrw_slots(stem) == (1, 7 * 4, 21 / 24)
    assert chanvec_plan.wrw_items(stem) == 28
    assert wrw_efficiency(stem, 2) == pytest.approx(WRW_EFFICIENCY[(6, 4)] * length * 21 / 24)
    # one work-item (64 output channels, 6 input channels, 1x1): half of two units busy
    one = P(1, 6, 8, 8, 64, 1, 1, direction="wrw")
    length = 8 * 8 / (8 * (8 + WRW_ROW_OVERHEAD) + WRW_ITEM_OVERHEAD)
    assert chanvec_plan.wrw_items(one) == 1
    assert wrw_efficiency(one, 2) == pytest.approx(
        WRW_EFFICIENCY[(6, 4)] * length * 0.5 * WRW_POINTWISE)
    # never past the peak (a WTI may not be): long rows of 1x1 filters would model more
    long_rows = P(64, 1024, 56, 56, 1024, 1, 1, groups=32, direction="wrw")
    assert wrw_efficiency(long_rows, 2) == 1.0
    assert 0 < solver.get_wti(long_rows, dev) <= 1.0
    # the workspace holds dy packed, N x K x Ho x Wo floats, and the stem's 25.7 MB of it
    # runs in chunks of rows: 896 rows of 28 KiB in chunks of about 512 KiB (19 rows, 48
    # chunks), each with its partial dw (64 x 3 x 7 x 7 floats), then their sum
    assert chanvec_plan.wrw_chunks(stem) == (48, 19)
    dw = 64 * 3 * 7 * 7
    assert solver.workspace_size(stem, dev) == 4 * (8 * 64 * 112 * 112 + 48 * dw)
    packing = chanvec_plan.PACK_BYTES_FACTOR * 8 * 8 * 64 * 112 * 112 / dev.bandwidth
    expected = (3 * dev.launch_overhead_s + packing + 4 * 49 * dw / dev.bandwidth
                + stem.flops / (dev.peak_flops * wrw_efficiency(stem, 2)))
    assert predicted_seconds(stem, dev) == pytest.approx(expected)
    # a small dy runs in one chunk, writing dw itself: no partials, no sum
    assert chanvec_plan.wrw_chunks(one) == (1, 8)
    assert solver.workspace_size(one, dev) == 4 * 64 * 8 * 8


def test_the_kits_default_corpus_checks_it_on_13_problems():
    """The conformance kit's default corpus holds 13 problems and directions this solver
    accepts (wticonv.testing.kit.default_corpus), at either vector width: the kit checks it
    on more than a handful."""
    from wticonv.testing.kit import default_corpus

    for width in (16, 8):
        dev = _device(vector_width=width)
        accepted = [p.with_direction(d) for p in default_corpus()
                    for d in ("fwd", "bwd", "wrw")
                    if solver.is_applicable(p.with_direction(d), dev) is True]
        assert len(accepted) == 13
        assert {p.direction for p in accepted} == {"fwd", "bwd", "wrw"}
