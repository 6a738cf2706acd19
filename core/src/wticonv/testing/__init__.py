"""Helpers for testing solvers: a corpus of problems every solver should get right.

:data:`EDGE_SHAPES` names small forward problems at the edges of the convolution's
definition (1x1 pictures with padding, padding larger than the filter, stride larger than
the filter and not dividing the picture, dilation with groups, outputs of size 1, K or C
of 1, non-square and even filters...). Use them in every direction a solver accepts
(``problem.with_direction(d)``) against :func:`wticonv.reference`.
"""

from __future__ import annotations

from ..problem import ConvProblem as P

__all__ = ["EDGE_SHAPES"]

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
