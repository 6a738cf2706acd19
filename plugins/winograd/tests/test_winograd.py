"""The Winograd solvers against the float64 reference: transforms, network layers, edge
shapes, RxS pieces, stride-2 phases, NaN/Inf, and the GPU plans on any device."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from wticonv import ConvProblem, Decline, reference, rms_range
from wticonv.workloads.networks import load_network
from wticonv_winograd import plan as wplan
from wticonv_winograd.f2x3 import solver as f2x3
from wticonv_winograd.f4x3 import solver as f4x3
from wticonv_winograd.fused import solver as fused
from wticonv_winograd.rxs import solver as rxs
from wticonv_winograd.transforms import winograd_transform

P = ConvProblem
OUT = {"fwd": "y", "bwd": "x", "wrw": "w"}
TOL = {"winograd.f2x3": 2e-5, "winograd.f4x3": 1e-4, "winograd.rxs": 2e-5,
       "winograd.fused_f2x3": 2e-5}


@pytest.mark.parametrize("m, r", [(2, 3), (4, 3), (2, 2), (4, 2), (6, 3), (3, 1)])
def test_transform_identity_is_exact(m, r):
    """A^T [(G g) * (B^T d)] = correlation, checked in exact rational arithmetic."""
    t = winograd_transform(m, r)
    rng = np.random.default_rng(m * 10 + r)
    d = [Fraction(int(v)) for v in rng.integers(-9, 10, t.alpha)]
    g = [Fraction(int(v)) for v in rng.integers(-9, 10, r)]
    Gg = [sum(row[k] * g[k] for k in range(r)) for row in t.G]
    Bd = [sum(row[l] * d[l] for l in range(t.alpha)) for row in t.BT]
    y = [sum(t.AT[i][j] * Gg[j] * Bd[j] for j in range(t.alpha)) for i in range(m)]
    assert y == [sum(d[i + k] * g[k] for k in range(r)) for i in range(m)]


def test_f2x3_matrices_match_lavin_and_gray_up_to_scaling():
    t = winograd_transform(2, 3)
    assert [[float(v) for v in row] for row in t.AT] == [[1, 1, 1, 0], [0, 1, -1, 1]]
    assert max(abs(float(v)) for row in t.BT for v in row) == 1.0


def run_case(handle, q: ConvProblem, solver: str, seed=0, fill=None):
    rng = np.random.default_rng(seed)
    data = {k: rng.uniform(-1, 1, s).astype(np.float32)
            for k, s in (("x", q.x_shape), ("w", q.w_shape), ("y", q.y_shape))}
    if fill is not None:
        fill(data)
    given = {k: v for k, v in data.items() if k != OUT[q.direction]}
    return handle.compute(q, solver=solver, **given), reference(q, **given)


def check(handle, q, solver, seed=0):
    result, ref = run_case(handle, q, solver, seed)
    err = rms_range(result, ref)
    assert err <= TOL[solver], f"{solver} {q.key}: rms_range {err:.3g}"


def _accepted_layers():
    out = []
    for net in ("resnet50", "vgg16", "inception3"):
        for layer in load_network(net, 1).layers:
            p = layer.problem
            for d in ("fwd", "bwd", "wrw"):
                q = p.with_direction(d)
                for sid, s in (("winograd.f2x3", f2x3), ("winograd.f4x3", f4x3),
                               ("winograd.rxs", rxs), ("winograd.fused_f2x3", fused)):
                    if not isinstance(s.covers(q), Decline):
                        out.append(pytest.param(q, sid, id=f"{net}-{sid}-{q.key}"))
    return out


@pytest.mark.parametrize("q, solver", _accepted_layers())
def test_every_accepted_network_layer_within_tolerance(handle, q, solver):
    check(handle, q, solver)


EDGE = {
    "odd H and W": P(2, 5, 13, 11, 7, 3, 3, pad_h=1, pad_w=1),
    "even H and W": P(2, 5, 12, 10, 7, 3, 3, pad_h=1, pad_w=1),
    "tile remainders, no padding": P(3, 4, 9, 7, 6, 3, 3),
    "1x1 picture, padding 1": P(2, 6, 1, 1, 5, 3, 3, pad_h=1, pad_w=1),
    "2x2 picture, padding 1": P(2, 6, 2, 2, 5, 3, 3, pad_h=1, pad_w=1),
    "K = 1": P(2, 8, 10, 10, 1, 3, 3, pad_h=1, pad_w=1),
    "C = 1": P(2, 1, 10, 10, 8, 3, 3, pad_h=1, pad_w=1),
    "C = 512": P(1, 512, 6, 6, 8, 3, 3, pad_h=1, pad_w=1),
    "K = 640": P(1, 4, 5, 5, 640, 3, 3, pad_h=1, pad_w=1),
    "padding 2": P(1, 3, 8, 9, 4, 3, 3, pad_h=2, pad_w=2),
    "groups": P(2, 8, 9, 9, 12, 3, 3, pad_h=1, pad_w=1, groups=4),
}


@pytest.mark.parametrize("direction", ["fwd", "bwd", "wrw"])
@pytest.mark.parametrize("solver", ["winograd.f2x3", "winograd.f4x3"])
@pytest.mark.parametrize("name", list(EDGE))
def test_edge_shapes(handle, name, solver, direction):
    check(handle, EDGE[name].with_direction(direction), solver, seed=len(name))


@pytest.mark.parametrize("direction", ["fwd", "bwd"])
@pytest.mark.parametrize("name", list(EDGE))
def test_fused_edge_shapes(handle, name, direction):
    check(handle, EDGE[name].with_direction(direction), "winograd.fused_f2x3", seed=len(name))


RXS = {
    "5x5": P(2, 4, 11, 9, 6, 5, 5, pad_h=2, pad_w=2),
    "7x7": P(1, 3, 15, 14, 4, 7, 7, pad_h=3, pad_w=3),
    "1x7": P(2, 6, 9, 12, 5, 1, 7, pad_w=3),
    "7x1": P(2, 6, 12, 9, 5, 7, 1, pad_h=3),
    "3x1": P(2, 4, 9, 8, 6, 3, 1, pad_h=1),
    "1x3": P(2, 4, 8, 9, 6, 1, 3, pad_w=1),
    "2x2": P(2, 4, 8, 9, 6, 2, 2),
    "5x3 unpadded": P(1, 3, 12, 10, 4, 5, 3),
}


@pytest.mark.parametrize("direction", ["fwd", "bwd", "wrw"])
@pytest.mark.parametrize("name", list(RXS))
def test_rxs_pieces(handle, name, direction):
    q = RXS[name].with_direction(direction)
    check(handle, q, "winograd.rxs", seed=len(name))
    geo = wplan.geometry(q, rxs.covers(q))
    pieces_h = 1 if q.r == 1 else -(-q.r // 3)
    pieces_w = 1 if q.s == 1 else -(-q.s // 3)
    assert len(geo.pieces) == pieces_h * pieces_w


@pytest.mark.parametrize("p", [P(2, 5, 11, 13, 7, 3, 3, pad_h=1, pad_w=1, stride_h=2,
                                 stride_w=2),
                               P(1, 8, 16, 16, 8, 3, 3, stride_h=2, stride_w=2),
                               P(1, 3, 224 // 8, 224 // 8, 16, 3, 3, pad_h=1, pad_w=1,
                                 stride_h=2, stride_w=2)], ids=lambda p: p.key)
def test_stride2_forward_in_phases(handle, p):
    check(handle, p, "winograd.rxs")
    assert len(wplan.geometry(p, rxs.covers(p)).pieces) == 4


@pytest.mark.parametrize("p, reason", [
    (P(1, 4, 8, 8, 4, 3, 3, stride_h=2, stride_w=2, direction="bwd"),
     "3x3 stride 2 is covered forward only"),
    (P(1, 4, 8, 8, 4, 3, 3, dilation_h=2, dilation_w=2), "only dilation 1"),
    (P(1, 4, 8, 8, 4, 1, 1), "1x1 filters: no transform saves a multiplication"),
    (P(1, 4, 8, 8, 4, 3, 3), "3x3 stride 1 is winograd.f2x3's and winograd.f4x3's"),
    (P(1, 4, 20, 20, 4, 17, 3), "filters over 15 taps per axis (17x3)"),
])
def test_rxs_declines_with_reason(handle, p, reason):
    v = rxs.is_applicable(p, handle.device, None)
    assert not v and reason in v.reason


def test_3x3_solvers_decline_other_shapes(handle):
    v = f2x3.is_applicable(P(1, 4, 8, 8, 4, 5, 5, pad_h=2, pad_w=2), handle.device, None)
    assert not v and "only 3x3 filters (this one is 5x5" in v.reason
    v = f4x3.is_applicable(P(1, 4, 9, 9, 4, 3, 3, stride_h=2, stride_w=2), handle.device, None)
    assert not v and v.reason == "only stride 1 (stride 2x2; winograd.rxs takes it)"
    v = f2x3.is_applicable(P(1, 4, 8, 8, 4, 1, 1), handle.device, None)
    assert not v and v.reason == "only 3x3 filters (this one is 1x1)"


@pytest.mark.parametrize("solver", ["winograd.f2x3", "winograd.f4x3", "winograd.fused_f2x3"])
def test_nan_and_inf_propagate(handle, solver):
    """Every output that depends on a NaN or Inf input is NaN or Inf. Winograd mixes a
    tile's inputs, so the other outputs of the tiles that read a bad input are non-finite
    too; outputs of the other tiles stay finite and exact."""
    q = P(1, 3, 16, 16, 2, 3, 3, pad_h=1, pad_w=1)

    def poison(data):
        data["x"][0, 1, 3, 4] = np.nan
        data["x"][0, 2, 12, 1] = np.inf

    result, ref = run_case(handle, q, solver, fill=poison)
    bad = ~np.isfinite(ref)
    assert bad.any() and (~np.isfinite(result))[bad].all()
    m = 4 if solver.endswith("f4x3") else 2
    far = np.ones(ref.shape, bool)  # outputs whose tile reads neither bad pixel
    for (r, c) in ((3, 4), (12, 1)):
        for ty in range(0, 16, m):
            for tx in range(0, 16, m):
                if ty - 1 <= r <= ty + m and tx - 1 <= c <= tx + m:
                    far[:, :, ty:ty + m, tx:tx + m] = False
    assert far.any() and np.isfinite(result[far]).all()
    assert rms_range(result[far], ref[far]) <= TOL[solver]


@pytest.mark.parametrize("direction", ["fwd", "bwd", "wrw"])
def test_workspace_chunks(handle, direction):
    q = P(5, 6, 9, 8, 10, 3, 3, pad_h=1, pad_w=1, direction=direction)
    v = f2x3.covers(q)
    kind = "cpu" if handle.device.kind == "cpu" else "gpu"
    one = wplan.one_image_bytes(q, v, kind, handle.device.info.compute_units)
    limit = 2 * one + 16
    sel = handle.select(q, workspace_limit=limit, solver="winograd.f2x3")
    assert 0 < sel.chosen.workspace <= limit
    layout = wplan.workspace_layout(q, v, kind, handle.device.info.compute_units, limit)
    assert 1 <= layout.nc < 5
    result, ref = run_case(handle, q, "winograd.f2x3")
    assert rms_range(result, ref) <= 2e-5
    verdict = f2x3.is_applicable(q, handle.device, one - 1)
    assert not verdict and f"needs at least {one} bytes of workspace" in verdict.reason


@pytest.mark.parametrize("direction", ["fwd", "bwd", "wrw"])
@pytest.mark.parametrize("p", [P(4, 6, 11, 9, 8, 3, 3, pad_h=1, pad_w=1),
                               P(2, 4, 9, 9, 6, 5, 5, pad_h=2, pad_w=2)], ids=lambda p: p.key)
def test_gpu_plans_run_correctly_on_any_device(handle, p, direction):
    """The GPU launch plans (split-K over images in backward weights) give the same
    results, run on whatever device is present."""
    from wticonv.runtime import kit
    from wticonv_winograd.base import _pieces_buffer

    q = p.with_direction(direction)
    s = f2x3 if (q.r, q.s) == (3, 3) else rxs
    v = s.covers(q)
    layout = wplan.workspace_layout(q, v, "gpu", 132, 2**30)
    launches = wplan.plan(q, v, "gpu", 132, layout)
    dev = handle.device
    rng = np.random.default_rng(3)
    data = {k: rng.uniform(-1, 1, sh).astype(np.float32)
            for k, sh in (("x", q.x_shape), ("w", q.w_shape), ("y", q.y_shape))}
    out = OUT[direction]
    bufs = {k: dev.upload(a) for k, a in data.items()}
    bufs["ws"] = dev.alloc(layout.bytes)
    bufs["pc"] = _pieces_buffer(dev, q, v)
    kit.enqueue(dev, launches, bufs)
    result = dev.download(bufs[out], data[out].shape)
    given = {k: a for k, a in data.items() if k != out}
    assert rms_range(result, reference(q, **given)) <= 2e-5


@pytest.mark.parametrize("solver, p", [
    (f2x3, P(2, 19, 9, 9, 7, 3, 3, pad_h=1, pad_w=1)),
    (f4x3, P(2, 35, 9, 9, 5, 3, 3, pad_h=1, pad_w=1, direction="bwd")),
    (f4x3, P(1, 16, 8, 8, 3, 3, 3, groups=1, pad_h=1, pad_w=1)),
    (f2x3, P(2, 12, 9, 9, 8, 3, 3, groups=2, pad_h=1, pad_w=1, direction="bwd")),
    (rxs, P(2, 21, 9, 9, 6, 5, 5, pad_h=2, pad_w=2)),
    (rxs, P(2, 17, 10, 10, 4, 3, 3, pad_h=1, pad_w=1, stride_h=2, stride_w=2)),
], ids=lambda v: v.key if isinstance(v, ConvProblem) else None)
def test_cpu_filter_transform_matches_the_gpu_one_bit_for_bit(handle, solver, p):
    """winograd_cpu.cl's filter_transform_vec (vectors across input channels, CPU plans)
    writes exactly the U that winograd.cl's filter_transform (GPU plans) writes: same
    layout and the same products in the same order, channel tails, groups, flipped filters
    (backward data), pieces of larger filters and stride-2 phases included, NaN and Inf
    carried alike."""
    from wticonv.runtime import kit
    from wticonv_winograd.base import _pieces_buffer

    v = solver.covers(p)
    dev = handle.device
    rng = np.random.default_rng(7)
    w = rng.uniform(-1, 1, p.w_shape).astype(np.float32)
    w.flat[5], w.flat[-3] = np.nan, np.inf
    geo = wplan.geometry(p, v)
    u_floats = v.positions * geo.groups * geo.O * len(geo.pieces) * geo.I
    got = {}
    for kind in ("cpu", "gpu"):
        layout = wplan.workspace_layout(p, v, kind, 2, 2**30)
        first = wplan.plan(p, v, kind, 2, layout)[0]
        assert first.kernel == ("filter_transform_vec" if kind == "cpu" else "filter_transform")
        bufs = {"w": dev.upload(w), "ws": dev.alloc(layout.bytes),
                "pc": _pieces_buffer(dev, p, v)}
        kit.enqueue(dev, [first], bufs)
        got[kind] = dev.download(bufs["ws"], (layout.floats,))[layout.u_off:u_floats]
    assert np.isnan(got["gpu"]).any() and np.isinf(got["gpu"]).any()
    np.testing.assert_array_equal(got["cpu"], got["gpu"])


def test_fused_declines_backward_weights_and_needs_no_workspace(handle):
    q = P(2, 16, 12, 12, 16, 3, 3, pad_h=1, pad_w=1)
    v = fused.is_applicable(q.with_direction("wrw"), handle.device, None)
    assert not v and "backward weights is not fused" in v.reason
    v = fused.is_applicable(P(1, 4, 8, 8, 4, 5, 5, pad_h=2, pad_w=2), handle.device, None)
    assert not v and "only 3x3 filters" in v.reason
    for d in ("fwd", "bwd"):
        assert fused.workspace_size(q.with_direction(d), handle.device, 0) == 0
        assert fused.is_applicable(q.with_direction(d), handle.device, 0) is True


@pytest.mark.parametrize("direction", ["fwd", "bwd"])
def test_fused_serves_3x3_layers_without_workspace(handle, direction):
    """With no workspace allowed, the unfused Winograd and GEMM solvers decline and the
    fused kernel's WTI ranks it above direct.naive (it does 2.25x fewer multiplies).
    direct.tiled, also workspace-free, may rank higher (on the CPU it is 2-4x faster
    than the fused kernel here)."""
    q = P(1, 64, 28, 28, 64, 3, 3, pad_h=1, pad_w=1, direction=direction)
    sel = handle.select(q, workspace_limit=0)
    assert sel.solver_id in ("winograd.fused_f2x3", "direct.tiled")
    assert sel.chosen.workspace == 0
    ranked = {v.solver_id: v.wti for v in sel.verdicts if v.candidate}
    assert "winograd.f2x3" not in ranked
    assert ranked["winograd.fused_f2x3"] > ranked["direct.naive"]
    check(handle, q, "winograd.fused_f2x3")


@pytest.mark.parametrize("kind", ["cpu", "gpu"])
@pytest.mark.parametrize("direction", ["fwd", "bwd"])
@pytest.mark.parametrize("p", [P(3, 11, 9, 13, 37, 3, 3, pad_h=1), P(2, 3, 10, 7, 4, 3, 3, pad_w=1)],
                         ids=["many-outputs", "few-outputs"])
def test_fused_plans_of_both_kinds_run_on_any_device(handle, p, kind, direction):
    """Every work-group shape (fused_plan.PARAMS, PARAMS_FEW_OUTPUTS) gives the reference
    result on whatever device is present: tiles and channels not multiples of the
    work-group's blocks."""
    from wticonv.runtime import kit
    from wticonv_winograd import fused_plan as fp

    q = p.with_direction(direction)
    launches = fp.fused_plan(q, fused.covers(q), kind)
    outputs = q.k if direction == "fwd" else q.c
    table = fp.PARAMS_FEW_OUTPUTS if outputs <= fp.FEW_OUTPUTS else fp.PARAMS
    assert len(launches) == 1 and table[kind].options in launches[0].options
    dev = handle.device
    rng = np.random.default_rng(5)
    data = {k: rng.uniform(-1, 1, sh).astype(np.float32)
            for k, sh in (("x", q.x_shape), ("w", q.w_shape), ("y", q.y_shape))}
    out = OUT[direction]
    bufs = {k: dev.upload(a) for k, a in data.items()}
    kit.enqueue(dev, launches, bufs)
    result = dev.download(bufs[out], data[out].shape)
    given = {k: a for k, a in data.items() if k != out}
    assert rms_range(result, reference(q, **given)) <= 2e-5


@pytest.mark.parametrize("solver", [f2x3, f4x3, rxs, fused])
def test_wti_unknown_on_unmodelled_device_kinds(handle, solver):
    """-2.0 where the model's constants were not measured; a real estimate elsewhere."""
    from types import SimpleNamespace

    q = P(8, 64, 28, 28, 64, 5 if solver is rxs else 3, 5 if solver is rxs else 3,
          pad_h=1, pad_w=1)
    odd = SimpleNamespace(kind="accelerator", peak_flops=1e12, bandwidth=1e11,
                          info=SimpleNamespace(compute_units=8, vector_width=4,
                                               max_alloc_bytes=2**30,
                                               global_mem_bytes=2**32))
    assert solver.get_wti(q, odd, None) == -2.0
    assert solver.get_wti(q, handle.device, None) > 0.05


def test_kernel_files_share_the_transform_header():
    """The kernel library splices ``#include "winograd_common.h"`` into both kernel files,
    so the OpenCL compiler needs no include path; a missing kernel file is a clear error."""
    from wticonv_winograd.plan import KERNELS

    kernel_source = KERNELS.source
    for name in ("winograd.cl", "winograd_cpu.cl", "fused.cl"):
        src = kernel_source(name)
        assert not [ln for ln in src.splitlines() if ln.lstrip().startswith("#include")]
        assert src.count("static inline void wino_input_tile(") == 1
        assert src.count("#define WTICONV_COMMON_H") == 1     # the core's, through it
        assert "#define WINO_COMMON_H" in src
    with pytest.raises(FileNotFoundError):
        kernel_source("no_such_kernel.cl")


@pytest.mark.parametrize("solver, p, where", [
    # stride 2, pad 0, H even: input row/column 7 reaches no output
    ("winograd.rxs", P(1, 2, 8, 8, 2, 3, 3, stride_h=2, stride_w=2), ("x", (0, 0, 7, 3))),
    ("winograd.rxs", P(2, 3, 10, 10, 2, 3, 3, pad_h=1, stride_h=2, stride_w=2),
     ("x", (1, 2, 4, 9))),
    # backward data with pad 3 >= R: dy row 10 of 11 reaches no dx
    ("winograd.f2x3", P(1, 2, 7, 7, 2, 3, 3, pad_h=3, pad_w=3, direction="bwd"),
     ("y", (0, 0, 10, 4))),
    ("winograd.fused_f2x3", P(1, 2, 7, 7, 2, 3, 3, pad_h=3, pad_w=3, direction="bwd"),
     ("y", (0, 1, 4, 10))),
    ("winograd.f4x3", P(1, 2, 7, 7, 2, 3, 3, pad_h=3, pad_w=3, direction="bwd"),
     ("y", (0, 0, 10, 10))),
], ids=lambda v: v if isinstance(v, str) else None)
def test_nan_where_no_output_reads_stays_out(handle, solver, p, where):
    """A NaN in an input element that no output depends on leaves every output finite, as
    in the direct algorithm (tiles treat such elements as padding)."""
    name, index = where

    def poison(data):
        data[name][index] = np.nan

    result, ref = run_case(handle, p, solver, fill=poison)
    assert np.isfinite(ref).all() and np.isfinite(result).all()
    assert rms_range(result, ref) <= TOL[solver]


def test_fused_wti_has_a_latency_floor_on_gpus():
    """256 -> 4 channels on 13x13 at N=1 is one work-group running 32 steps of 8 input
    channels one after another (fused_plan.STEP_S each; measured 0.197 ms on the H200,
    its FLOPs alone predict 0.012): the WTI reports the floor. A large layer is
    throughput-bound, and the CPU has no floor."""
    from wticonv.testing.launches import RecordingDevice
    from wticonv_winograd import fused_plan

    gpu = RecordingDevice("gpu", launch_overhead_s=11e-6)
    head = P(1, 256, 13, 13, 4, 3, 3, pad_h=1, pad_w=1)
    v = wplan.Variant(2, 2, 3, 3)
    (head_launch,) = fused_plan.fused_plan(head, v, "gpu")
    floor = fused_plan.serial_seconds(head, v, "gpu", 132, head_launch)
    assert floor == pytest.approx(32 * fused_plan.STEP_S["gpu"])
    wti = fused.get_wti(problem=head, device=gpu, workspace_limit=None)
    assert wti == pytest.approx(head.flops / (gpu.peak_flops * (11e-6 + floor)))
    big = P(32, 256, 56, 56, 256, 3, 3, pad_h=1, pad_w=1)
    (launch,) = fused_plan.fused_plan(big, v, "gpu")
    busy = launch.flops / (gpu.peak_flops * launch.efficiency)
    assert fused_plan.serial_seconds(big, v, "gpu", 132, launch) < busy
    assert fused_plan.serial_seconds(head, v, "cpu", 2, head_launch) == 0.0
