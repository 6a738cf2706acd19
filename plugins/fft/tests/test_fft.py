"""The FFT solver against the float64 reference: every tile side and direction, edge
shapes, the network layers it accepts, chunked workspace, declines, NaN/Inf, and the GPU
plans on any device."""

from __future__ import annotations

import numpy as np
import pytest
from wticonv import ConvProblem, Decline, reference, rms_range
from wticonv.runtime import kit
from wticonv.workloads.networks import load_network
from wticonv_fft import plan as fplan
from wticonv_fft.tiled import MAX_FILTER, covers
from wticonv_fft.tiled import solver as fft

P = ConvProblem
OUT = {"fwd": "y", "bwd": "x", "wrw": "w"}
TOL = 1e-5        # the solver's declared tolerance (rms_range), issue 20's accuracy bound


def _data(q, seed):
    rng = np.random.default_rng(seed)
    return {k: rng.uniform(-1, 1, s).astype(np.float32)
            for k, s in (("x", q.x_shape), ("w", q.w_shape), ("y", q.y_shape))}


def run_plan(handle, q, t, kind=None, room=2**30, seed=0, data=None):
    """Run the plan of tile ``t`` for ``kind`` (default: the device's) and return the
    result and the float64 reference."""
    dev = handle.device
    kind = kind or kit.kernel_family(dev)
    layout = fplan.workspace_layout(q, t, kind, 132 if kind == "gpu" else 2, room)
    launches = fplan.plan(q, t, kind, 132 if kind == "gpu" else 2, layout)
    data = data or _data(q, seed)
    out = OUT[q.direction]
    bufs = {k: dev.upload(a) for k, a in data.items()}
    bufs["ws"] = dev.alloc(layout.bytes)
    kit.enqueue(dev, launches, bufs)
    result = dev.download(bufs[out], data[out].shape)
    given = {k: a for k, a in data.items() if k != out}
    return result, reference(q, **given), layout


SHAPES = {
    "5x5 padding 2": P(2, 6, 13, 11, 7, 5, 5, pad_h=2, pad_w=2),
    "3x3 padding 1": P(2, 5, 17, 9, 4, 3, 3, pad_h=1, pad_w=1),
    "7x3 unequal padding": P(1, 4, 20, 17, 5, 7, 3, pad_h=0, pad_w=3),
    "1x7": P(2, 3, 9, 19, 6, 1, 7, pad_w=3),
    "padding past the filter": P(1, 3, 6, 6, 4, 5, 5, pad_h=4, pad_w=4),
    "picture smaller than the filter": P(2, 4, 3, 2, 3, 5, 5, pad_h=2, pad_w=2),
    "1x1 picture, padding 1": P(3, 6, 1, 1, 5, 3, 3, pad_h=1, pad_w=1),
    "C = 1, K = 1": P(2, 1, 12, 12, 1, 5, 5, pad_h=2, pad_w=2),
}


@pytest.mark.parametrize("direction", ["fwd", "bwd", "wrw"])
@pytest.mark.parametrize("t", fplan.TILES)
@pytest.mark.parametrize("name", list(SHAPES))
def test_every_tile_side_and_direction(handle, name, t, direction):
    q = SHAPES[name].with_direction(direction)
    if t <= max(q.r, q.s):
        pytest.skip(f"tile {t} is too small for a {q.r}x{q.s} filter")
    result, ref, _ = run_plan(handle, q, t, seed=t + len(name))
    err = rms_range(result, ref)
    assert err <= TOL, f"tile {t} {q.key}: rms_range {err:.3g}"


@pytest.mark.parametrize("direction", ["fwd", "bwd", "wrw"])
@pytest.mark.parametrize("p", [P(4, 6, 23, 21, 8, 5, 5, pad_h=2, pad_w=2),
                               P(3, 5, 40, 9, 6, 3, 7, pad_h=1, pad_w=3)],
                         ids=lambda p: p.key)
def test_gpu_plans_run_correctly_on_any_device(handle, p, direction):
    """The GPU plans (split-K over batch terms of images in backward weights, 256-item
    transform work-groups) give the same results on whatever device is present."""
    for t in (8, 16):
        result, ref, layout = run_plan(handle, p.with_direction(direction), t, kind="gpu")
        assert rms_range(result, ref) <= TOL, f"tile {t}"


def _accepted_layers():
    out = []
    for net in ("inception3", "alexnet", "googlenet"):
        try:
            layers = load_network(net, 1).layers
        except Exception:  # noqa: BLE001 - a network the corpus does not ship
            continue
        seen = set()
        for layer in layers:
            p = layer.problem
            if max(p.r, p.s) < 5 or covers(p) is not None or p.key in seen:
                continue
            seen.add(p.key)
            for d in ("fwd", "bwd", "wrw"):
                out.append(pytest.param(p.with_direction(d), id=f"{net}-{d}-{p.key}"))
    return out


@pytest.mark.parametrize("q", _accepted_layers())
def test_accepted_network_layers_within_tolerance(handle, q):
    data = _data(q, 1)
    given = {k: v for k, v in data.items() if k != OUT[q.direction]}
    result = handle.compute(q, solver="fft.tiled", **given)
    err = rms_range(result, reference(q, **given))
    assert err <= TOL, f"{q.key}: rms_range {err:.3g}"


def test_the_layers_it_accepts_include_the_5x5_and_7x7_branches():
    keys = {pytest_param.values[0].key for pytest_param in _accepted_layers()}
    assert any("-5x5-" in k for k in keys) and any("-1x7-" in k or "-7x1-" in k for k in keys)


@pytest.mark.parametrize("direction", ["fwd", "bwd", "wrw"])
def test_chunked_under_a_workspace_limit(handle, direction):
    """A limit of one image's spectra makes chunks of one image: the workspace stays
    within the limit and the result is unchanged."""
    q = P(3, 4, 15, 14, 5, 5, 5, pad_h=2, pad_w=2, direction=direction)
    t = 16
    one = fplan.one_image_bytes(q, t, kit.kernel_family(handle.device),
                                handle.device.info.compute_units)
    result, ref, layout = run_plan(handle, q, t, room=one)
    assert layout.nc == 1 and layout.bytes <= one
    assert rms_range(result, ref) <= TOL
    # through the hooks: the reported workspace fits the limit, and a limit below one
    # image's spectra for every tile side is declined with the bytes it needs
    size = fft.workspace_size(q, handle.device, one)
    assert 0 < size <= one
    least = min(fplan.one_image_bytes(q, s, kit.kernel_family(handle.device),
                                      handle.device.info.compute_units)
                for s in fplan.TILES if s > 5)
    verdict = fft.is_applicable(q, handle.device, least - 1)
    assert not verdict and f"needs at least {least} bytes" in verdict.reason


def test_workspace_is_the_spectra_exactly():
    """fwd: filters 4OI, input tiles 2IT and output tiles 2OT floats per bin (T tiles of
    the chunk), each region 16-byte aligned."""
    q = P(2, 6, 13, 11, 7, 5, 5, pad_h=2, pad_w=2)
    t = 8
    layout = fplan.workspace_layout(q, t, "cpu", 2, 2**30)
    bins = t * (t // 2 + 1)
    tiles = 2 * (-(-13 // 4)) * (-(-11 // 4))          # N x ceil(Ho/4) x ceil(Wo/4)
    floats = bins * (4 * 7 * 6 + 2 * 6 * tiles + 2 * 7 * tiles)
    assert layout.bytes == 4 * floats and layout.nc == 2


@pytest.mark.parametrize("p, reason", [
    (P(1, 4, 9, 9, 4, 3, 3, stride_h=2, stride_w=2, pad_h=1, pad_w=1), "stride 2x2"),
    (P(1, 4, 9, 9, 4, 3, 3, dilation_h=2, dilation_w=2, pad_h=2, pad_w=2), "dilation 2x2"),
    (P(1, 4, 9, 9, 4, 3, 3, groups=2, pad_h=1, pad_w=1), "2 groups"),
    (P(1, 2, 40, 40, 2, MAX_FILTER + 1, 3), f"filter {MAX_FILTER + 1}x3"),
    (P(1, 8, 9, 9, 8, 1, 1), "filter 1x1: a 1x1 convolution is a GEMM"),
])
def test_declines_what_it_does_not_cover(handle, p, reason):
    verdict = fft.is_applicable(p, handle.device, None)
    assert isinstance(verdict, Decline) and reason in verdict.reason


def test_nan_and_inf_reach_the_outputs_that_read_them(handle):
    q = P(1, 3, 12, 12, 2, 5, 5, pad_h=2, pad_w=2)
    data = _data(q, 5)
    data["x"][0, 1, 6, 6] = np.nan
    result, ref, _ = run_plan(handle, q, 16, data=data)
    assert np.isnan(ref).any() and np.isnan(result[np.isnan(ref)]).all()


def test_the_3xtf32_class_needs_tensor_cores(handle):
    from wticonv_fft.tiled import solver_3xtf32

    q = P(1, 4, 12, 12, 4, 5, 5, pad_h=2, pad_w=2)
    verdict = solver_3xtf32.is_applicable(q, handle.device, None)
    if kit.tensor_cores(handle.device):
        assert verdict is True
    else:
        assert not verdict and "tensor cores" in verdict.reason


def test_the_tile_is_the_fastest_predicted():
    """The solver's tile side is the one of least predicted time: larger tiles for a
    large picture (more outputs per transform), the smallest for a tiny one."""
    from wticonv.testing.launches import RecordingDevice
    from wticonv_gemm import sgemm

    dev = RecordingDevice("gpu")
    for p in (P(32, 64, 56, 56, 64, 5, 5, pad_h=2, pad_w=2), P(1, 16, 4, 4, 16, 3, 3,
                                                                pad_h=1, pad_w=1)):
        t, layout, launches = fft._choice(p, dev, 2**30)
        times = {s: sgemm.predict_seconds(fplan.plan(p, s, "gpu", 132, fplan.workspace_layout(
            p, s, "gpu", 132, 2**30)), dev) for s in fplan.TILES if s > p.r}
        assert t == min(times, key=times.get)
    assert fft._choice(P(32, 64, 56, 56, 64, 5, 5, pad_h=2, pad_w=2), dev, 2**30)[0] > 8
    assert fft._choice(P(1, 16, 4, 4, 16, 3, 3, pad_h=1, pad_w=1), dev, 2**30)[0] == 8
