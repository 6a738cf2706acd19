"""ConvProblem: validation, derived sizes, FLOPs."""

from __future__ import annotations

import numpy as np
import pytest

from wticonv import ConvProblem, ProblemError


def test_resnet_3x3_sizes_and_flops():
    p = ConvProblem(n=16, c=64, h=56, w=56, k=64, r=3, s=3, pad_h=1, pad_w=1)
    assert (p.ho, p.wo) == (56, 56)
    assert p.x_shape == (16, 64, 56, 56)
    assert p.w_shape == (64, 64, 3, 3)
    assert p.y_shape == (16, 64, 56, 56)
    assert p.flops == 2 * 16 * 64 * 56 * 56 * 64 * 9


def test_output_size_with_stride_dilation_and_groups():
    # Ho = (H + 2p - d(R-1) - 1) // u + 1
    p = ConvProblem(n=1, c=8, h=17, w=10, k=4, r=3, s=2, pad_h=2, pad_w=0, stride_h=3,
                    stride_w=2, dilation_h=2, dilation_w=3, groups=4)
    assert p.ho == (17 + 4 - 4 - 1) // 3 + 1 == 6
    assert p.wo == (10 + 0 - 3 - 1) // 2 + 1 == 4
    assert p.w_shape == (4, 2, 3, 2)
    assert p.flops == 2 * 1 * 4 * 6 * 4 * 2 * 3 * 2


def test_numpy_integers_accepted_and_normalised():
    p = ConvProblem(n=np.int64(2), c=np.int32(3), h=5, w=5, k=4, r=3, s=3)
    assert type(p.n) is int and p.n == 2 and type(p.c) is int


def test_directions_and_aliases():
    base = ConvProblem(1, 3, 8, 8, 4, 3, 3)
    assert base.direction == "fwd"
    assert base.with_direction("B").direction == "bwd"
    assert base.with_direction("4").direction == "wrw"
    assert base.with_direction("backward_weights").direction == "wrw"
    assert base.with_batch(7).n == 7 and base.with_batch(7).c == 3


@pytest.mark.parametrize("kwargs, fragment", [
    (dict(n=0), "n=0 must be a positive integer"),
    (dict(c=-3), "c=-3 must be a positive integer"),
    (dict(k=0), "k=0 must be a positive integer"),
    (dict(r=0), "r=0 must be a positive integer"),
    (dict(stride_h=0), "stride_h=0 must be a positive integer"),
    (dict(dilation_w=0), "dilation_w=0 must be a positive integer"),
    (dict(pad_h=-1), "pad_h=-1 must not be negative"),
    (dict(groups=3), "groups=3 must divide c=4"),
    (dict(c=6, groups=3), "groups=3 must divide k=4"),
    (dict(direction="sideways"), "direction='sideways' is unknown"),
    (dict(dtype="fp16"), "dtype='fp16' is not supported"),
    (dict(layout="NHWC"), "layout='NHWC' is not supported"),
    (dict(h=2, r=3), "output h size < 1"),
    (dict(w=4, s=3, dilation_w=2), "output w size < 1"),
    (dict(n=2.5), "n=2.5 must be an integer"),
    (dict(h=True), "h=True must be an integer"),
    (dict(w=2**31), "exceeds 2147483647"),
])
def test_invalid_problems_name_field_value_and_rule(kwargs, fragment):
    args = dict(n=1, c=4, h=8, w=8, k=4, r=3, s=3)
    args.update(kwargs)
    with pytest.raises(ProblemError) as e:
        ConvProblem(**args)
    assert fragment in str(e.value)


def test_padding_rescues_small_picture():
    p = ConvProblem(n=1, c=1, h=1, w=1, k=1, r=3, s=3, pad_h=1, pad_w=1)
    assert (p.ho, p.wo) == (1, 1)


def test_problem_is_hashable_and_immutable():
    p = ConvProblem(1, 3, 8, 8, 4, 3, 3)
    assert {p: 1}[ConvProblem(1, 3, 8, 8, 4, 3, 3)] == 1
    with pytest.raises(AttributeError):
        p.n = 2  # type: ignore[misc]
