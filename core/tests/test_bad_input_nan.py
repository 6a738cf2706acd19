"""Bad input through the Python API, NaN and Inf: docs/reliability.md's "NaN and Inf"
table (the other rows: test_bad_input.py). Non-finite values are never hidden, and the
finite results around them are right."""

from __future__ import annotations

import numpy as np
import pytest

import wticonv
from wticonv import ConvProblem, SolverNotApplicableError, reference, rms_range
from wticonv.problem.tensors import OUTPUT_TENSOR

P = ConvProblem(2, 3, 8, 7, 4, 3, 3, pad_h=1, pad_w=1)


def rand(*shape, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)


X, W = rand(*P.x_shape, seed=1), rand(*P.w_shape, seed=2)


def _poison(a):
    """A copy with NaN, Inf and -Inf at even coordinates (which every stride-2 sample
    reaches)."""
    a = a.copy()
    _, c, h, w = a.shape
    a[0, 0, 0, 0] = np.nan
    a[-1, -1, 2 * (h // 4), 2 * (w // 4)] = np.inf
    a[0, c // 2, 2 * ((h - 1) // 2), 0] = -np.inf
    return a


LAYERS = {  # chosen on a CPU: direct.tiled, gemm.1x1 / naive, tiled / im2col, depthwise
    "3x3": ConvProblem(2, 8, 12, 11, 16, 3, 3, pad_h=1, pad_w=1),
    "1x1 stride 2": ConvProblem(2, 16, 9, 9, 8, 1, 1, stride_h=2, stride_w=2),
    "5x5 stride 2": ConvProblem(1, 6, 15, 13, 10, 5, 5, pad_h=2, pad_w=2, stride_h=2,
                                stride_w=2),
    "depthwise": ConvProblem(2, 8, 10, 10, 8, 3, 3, pad_h=1, pad_w=1, groups=8),
}
#: Winograd transforms mix a tile's pixels: a NaN or Inf input makes its whole output
#: tile non-finite (and +Inf and -Inf meeting there make NaN). The others are exact.
SPREADING = ("winograd.f2x3", "winograd.f4x3", "winograd.fused_f2x3", "winograd.rxs")


def _poisoned_run(handle, p, poisoned, solver=None):
    """(result, float64 reference, inputs) with NaN and Inf in the input ``poisoned``."""
    data = {"x": rand(*p.x_shape, seed=4), "w": rand(*p.w_shape, seed=5),
            "y": rand(*p.y_shape, seed=6)}
    data[poisoned] = _poison(data[poisoned])
    given = {k: v for k, v in data.items() if k != OUTPUT_TENSOR[p.direction]}
    got = handle.compute(p, solver=solver, **given)
    with np.errstate(invalid="ignore"):
        want = reference(p, **given)
    return got, want, given


def _never_hidden_and_finite_values_right(got, want):
    bad = ~np.isfinite(want)
    assert bad.any()                                   # the poison reached the reference
    assert not (np.isfinite(got) & bad).any()          # ... and the result, everywhere
    both = np.isfinite(got) & ~bad
    assert both.any() and rms_range(got[both], want[both]) < 1e-4


@pytest.mark.parametrize("layer", list(LAYERS))
@pytest.mark.parametrize("direction, poisoned", [("fwd", "x"), ("wrw", "x"), ("bwd", "y")])
def test_nan_and_inf_in_data_propagate(handle, layer, direction, poisoned):
    p = LAYERS[layer].with_direction(direction)
    got, want, _ = _poisoned_run(handle, p, poisoned)
    _never_hidden_and_finite_values_right(got, want)
    if handle.select(p).solver_id not in SPREADING:
        assert np.array_equal(np.isnan(got), np.isnan(want))
        assert np.array_equal(np.isinf(got), np.isinf(want))


@pytest.mark.parametrize("solver", ["direct.naive", "direct.tiled", "direct.depthwise",
                                    "gemm.im2col", "gemm.1x1", *SPREADING])
def test_nan_and_inf_in_data_with_every_solver(handle, solver):
    layers = {**LAYERS, "3x3 stride 2": ConvProblem(1, 4, 9, 11, 6, 3, 3, pad_h=1, pad_w=1,
                                                    stride_h=2, stride_w=2),
              "1x1": ConvProblem(2, 5, 6, 7, 3, 1, 1),
              "5x5": ConvProblem(2, 3, 9, 8, 4, 5, 5, pad_h=2, pad_w=2)}
    ran = 0
    for p0 in layers.values():
        for direction, poisoned in (("fwd", "x"), ("wrw", "x"), ("bwd", "y")):
            p = p0.with_direction(direction)
            try:
                handle.select(p, solver=solver)
            except SolverNotApplicableError:
                continue
            got, want, _ = _poisoned_run(handle, p, poisoned, solver)
            _never_hidden_and_finite_values_right(got, want)
            if solver not in SPREADING:
                assert np.array_equal(np.isnan(got), np.isnan(want))
            ran += 1
    assert ran >= 2


@pytest.mark.parametrize("layer", list(LAYERS))
@pytest.mark.parametrize("direction, poisoned", [("fwd", "w"), ("bwd", "w"), ("wrw", "y")])
def test_nan_and_inf_in_weights_are_never_hidden(handle, layer, direction, poisoned):
    """Every output a non-finite weight meets through a real input is non-finite (the
    float64 reference also multiplies the zero padding, 0 x NaN = NaN, which solvers may
    skip; Winograd tiles and direct.tiled's backward stride phases spread it further)."""
    p = LAYERS[layer].with_direction(direction)
    got, want, given = _poisoned_run(handle, p, poisoned)
    ones = {k: np.ones_like(v) for k, v in given.items()}
    ones[poisoned] = (~np.isfinite(given[poisoned])).astype(np.float32)
    reached = reference(p, **ones) > 0
    assert reached.any()
    assert not (np.isfinite(got) & reached).any()
    both = np.isfinite(got) & np.isfinite(want)
    assert both.any() and rms_range(got[both], want[both]) < 1e-4


def test_nan_in_bias_propagates():
    b = np.array([0.0, np.nan, np.inf, 1.0], np.float32)
    y = wticonv.conv2d(X, W, bias=b, padding=1)
    assert np.isnan(y[:, 1]).all() and np.isposinf(y[:, 2]).all()
    assert np.isfinite(y[:, [0, 3]]).all()
