"""The float64 reference against a literal loop implementation, and rms_range."""

from __future__ import annotations

import math

import numpy as np
import pytest

from wticonv import ConvProblem, rms_range
from wticonv.problem.reference import conv_bwd, conv_fwd, conv_wrw


def loops_fwd(x, w, p):
    """y[n,k,i,j] = sum_{c,r,s} x[n, g*Cg+c, i*u-ph+r*dh, j*v-pw+s*dw] * w[k,c,r,s]"""
    y = np.zeros(p.y_shape)
    cg, kg = p.c // p.groups, p.k // p.groups
    for n in range(p.n):
        for k in range(p.k):
            g = k // kg
            for i in range(p.ho):
                for j in range(p.wo):
                    acc = 0.0
                    for c in range(cg):
                        for r in range(p.r):
                            for s in range(p.s):
                                ih = i * p.stride_h - p.pad_h + r * p.dilation_h
                                iw = j * p.stride_w - p.pad_w + s * p.dilation_w
                                if 0 <= ih < p.h and 0 <= iw < p.w:
                                    acc += x[n, g * cg + c, ih, iw] * w[k, c, r, s]
                    y[n, k, i, j] = acc
    return y


CASES = [
    ConvProblem(n=2, c=4, h=5, w=6, k=6, r=3, s=2, pad_h=1, pad_w=2, stride_h=2, stride_w=1,
                dilation_h=1, dilation_w=2, groups=2),
    ConvProblem(n=1, c=3, h=7, w=4, k=2, r=1, s=3, pad_h=0, pad_w=1, stride_h=3, stride_w=2),
    ConvProblem(n=1, c=2, h=1, w=1, k=3, r=3, s=3, pad_h=2, pad_w=2),
    ConvProblem(n=2, c=4, h=6, w=6, k=4, r=3, s=3, pad_h=1, pad_w=1, groups=4),
]


@pytest.mark.parametrize("p", CASES, ids=lambda p: p.key)
def test_fwd_matches_loops(p):
    rng = np.random.default_rng(1)
    x = rng.standard_normal(p.x_shape)
    w = rng.standard_normal(p.w_shape)
    np.testing.assert_allclose(conv_fwd(x, w, p), loops_fwd(x, w, p), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("p", CASES, ids=lambda p: p.key)
def test_bwd_and_wrw_are_the_adjoints_of_fwd(p):
    # <conv(x, w), dy> = <x, bwd(dy, w)> = <w, wrw(x, dy)> for every x, w, dy
    rng = np.random.default_rng(2)
    x = rng.standard_normal(p.x_shape)
    w = rng.standard_normal(p.w_shape)
    dy = rng.standard_normal(p.y_shape)
    lhs = float(np.sum(loops_fwd(x, w, p) * dy))
    assert float(np.sum(x * conv_bwd(dy, w, p))) == pytest.approx(lhs, rel=1e-10)
    assert float(np.sum(w * conv_wrw(x, dy, p))) == pytest.approx(lhs, rel=1e-10)


def test_rms_range_definition():
    a = np.array([1.0, 2.0, -4.0])
    b = np.array([1.0, 2.5, -4.0])
    assert rms_range(a, b) == pytest.approx(0.5 / (math.sqrt(3) * 4.0))
    assert rms_range(a, a) == 0.0
    assert rms_range(np.zeros(3), np.zeros(3)) == 0.0
    assert rms_range(np.zeros(3), np.ones(3)) == 1.0
    assert math.isnan(rms_range(np.array([np.nan]), np.array([1.0])))
    assert rms_range(np.zeros(0), np.zeros(0)) == 0.0
    with pytest.raises(ValueError, match="shapes differ"):
        rms_range(np.zeros(2), np.zeros(3))
