"""Property: for random valid problems, the solver immediate mode SELECTS (not a forced one)
computes what the float64 reference computes, in every direction, with and without a
workspace limit.

Problems come from wticonv.testing.problems() (filters 1x1-7x7, strides, dilations,
padding, groups, depthwise); hypothesis is derandomized with a bounded number of
examples, so every run checks the same problems. A failure names the chosen solver.
"""

from __future__ import annotations

import dataclasses
import zlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

import wticonv
from wticonv.problem.reference import reference, rms_range
from wticonv.testing import problems

#: Examples per direction: 150 take about a second on the 2-core CPU (the problems are
#: small); immediate mode chose direct.naive, direct.tiled, direct.depthwise and
#: gemm.im2col for them there.
EXAMPLES = 150
#: Examples per direction of the larger 3x3 layers (about 2 s in all).
LAYER_EXAMPLES = 40


@pytest.mark.parametrize("direction", ["fwd", "bwd", "wrw"])
@settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(drawn=problems(max_n=4, max_channels=40, max_picture=24),
       limit=st.sampled_from([None, None, 0, 65536]))
def test_the_selected_solver_agrees_with_the_reference(handle, direction, drawn, limit):
    p = dataclasses.replace(drawn, direction=direction)
    sel = handle.select(p, workspace_limit=limit)
    sid = sel.solver_id
    note(f"problem {p.key} ({p.describe()}), workspace limit {limit}: chosen {sid}")
    rng = np.random.default_rng(zlib.crc32(p.key.encode()))
    out_name = {"fwd": "y", "bwd": "x", "wrw": "w"}[direction]
    data = {n: rng.uniform(-1, 1, s).astype(np.float32)
            for n, s in (("x", p.x_shape), ("w", p.w_shape), ("y", p.y_shape))
            if n != out_name}
    out = handle.compute(p, workspace_limit=limit, **data)
    ref = reference(p, **data)
    err = rms_range(out, ref)
    tol = wticonv.solver_tolerance(handle, sid, p)
    assert out.shape == ref.shape and np.isfinite(out).all() and err <= tol, (
        f"{direction} {p.key} ({p.describe()}), workspace limit {limit}: the selected "
        f"solver {sid} is off by "
        f"rms_range {err:.3g} (tolerance {tol:.3g}); candidates "
        f"{[v.solver_id for v in sel.candidates]}")



@st.composite
def _layers(draw):
    """3x3 layers with more channels, as in networks: where the Winograd solvers and
    gemm.im2col are chosen too."""
    g = draw(st.sampled_from([1, 1, 1, 2]))
    pad = draw(st.sampled_from([0, 1, 1]))
    return wticonv.ConvProblem(
        draw(st.integers(1, 4)), g * draw(st.integers(4, 32)), draw(st.integers(6, 30)),
        draw(st.integers(6, 30)), g * draw(st.integers(4, 32)), 3, 3, pad_h=pad, pad_w=pad,
        stride_h=draw(st.sampled_from([1, 1, 1, 2])), stride_w=1, groups=g)


@pytest.mark.parametrize("direction", ["fwd", "bwd", "wrw"])
@settings(max_examples=LAYER_EXAMPLES, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(drawn=_layers(), limit=st.sampled_from([None, None, 0]))
def test_the_selected_solver_agrees_with_the_reference_on_layers(handle, direction, drawn,
                                                                 limit):
    test_the_selected_solver_agrees_with_the_reference.hypothesis.inner_test(
        handle, direction, drawn, limit)
