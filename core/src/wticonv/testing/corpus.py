"""The kit's problem corpus: :data:`EDGE_SHAPES` (small forward problems at the edges of
the convolution's definition) and :func:`problems` (a hypothesis strategy of small valid
problems in every direction)."""

from __future__ import annotations

from wticonv.problem.conv import ConvProblem as P

__all__ = ["EDGE_SHAPES", "problems"]


#: Name -> small forward :class:`~wticonv.ConvProblem` at an edge of the definition.
EDGE_SHAPES = {
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


def problems(max_n: int = 3, max_channels: int = 12, max_picture: int = 14):
    """A hypothesis strategy of small valid :class:`~wticonv.ConvProblem` objects, in every
    direction: filters 1x1 to 7x7 (3x3 most often), strides 1-3, dilations 1-2, padding
    0-3, plain, grouped and depthwise, pictures from the smallest the filter allows up to
    ``max_picture``. Needs hypothesis (the ``testing`` extra: ``pip install
    "wticonv[testing]"``).

    Raises
    ------
    ModuleNotFoundError
        If hypothesis is not installed; the message says which extra installs it.
    """
    try:
        from hypothesis import strategies as st
    except ImportError:
        raise ModuleNotFoundError("wticonv.testing.problems() needs hypothesis, which is not "
                                  "installed: pip install \"wticonv[testing]\"",
                                  name="hypothesis") from None

    from wticonv.problem.conv import DIRECTIONS

    @st.composite
    def draw(d):
        r = d(st.sampled_from([1, 2, 3, 3, 3, 5, 7]))
        s = d(st.sampled_from([r, r, 1, 3]))
        dil_h, dil_w = d(st.sampled_from([1, 1, 2])), d(st.sampled_from([1, 1, 2]))
        pad_h, pad_w = d(st.integers(0, 3)), d(st.integers(0, 3))
        kind = d(st.sampled_from(["plain", "plain", "grouped", "depthwise"]))
        if kind == "depthwise":
            groups = c = d(st.integers(1, max_channels))
            k = c * d(st.integers(1, 2))
        else:
            groups = d(st.integers(2, 3)) if kind == "grouped" else 1
            c = groups * d(st.integers(1, max(1, max_channels // groups)))
            k = groups * d(st.integers(1, max(1, max_channels // groups)))
        eff_r, eff_s = (r - 1) * dil_h + 1, (s - 1) * dil_w + 1
        h = d(st.integers(max(1, eff_r - 2 * pad_h), max(eff_r - 2 * pad_h, 1) + max_picture))
        w = d(st.integers(max(1, eff_s - 2 * pad_w), max(eff_s - 2 * pad_w, 1) + max_picture))
        return P(d(st.integers(1, max_n)), c, h, w, k, r, s, pad_h=pad_h, pad_w=pad_w,
                 stride_h=d(st.integers(1, 3)), stride_w=d(st.integers(1, 3)),
                 dilation_h=dil_h, dilation_w=dil_w, groups=groups,
                 direction=d(st.sampled_from(list(DIRECTIONS))))

    return draw()
