"""Random realistic convolution problems: the kinds of layer that CNNs are built of.

:func:`random_problems` draws forward problems layer kind by layer kind, with the
frequencies and ranges seen in the development corpus (``data/corpus.csv``, 46 networks
of torchvision's model definitions): pointwise 1x1 layers on every picture size, 3x3 and
larger filters, strided downsampling, depthwise and grouped layers, squeeze-and-excitation
1x1 layers on 1x1 pictures, factorized 1xS / Rx1 filters, dilated layers and patchifying
stems. Channel counts are multiples of 8 (or the odd counts of stems and SE
reductions) between 3 and 2048; pictures from 1 to 224 pixels a side, fewer channels on
larger pictures as in real networks.

The calibration's probe set (:mod:`wticonv.measuring.calibrate`) and the tests use it; it
is deterministic for a given seed (``random.Random``).
"""

from __future__ import annotations

import math
import random

from wticonv.problem.conv import ConvProblem

__all__ = ["LAYER_KINDS", "random_problems"]

#: Layer kinds and their weights (roughly their share of the corpus's distinct layers).
LAYER_KINDS = {
    "1x1": 0.34,
    "1x1 strided": 0.03,
    "se 1x1": 0.08,
    "3x3": 0.17,
    "3x3 strided": 0.05,
    "depthwise": 0.13,
    "depthwise strided": 0.04,
    "grouped": 0.05,
    "large": 0.03,
    "factorized": 0.03,
    "dilated": 0.03,
    "stem": 0.02,
}

#: Most forward FLOPs per image of a drawn problem: VGG-16's largest layers are 3.7 GFLOP
#: per image (3x3, 256-512 channels on 56x56 and 28x28).
MAX_FLOPS_PER_IMAGE = 4e9

_PICTURES = (7, 7, 8, 10, 13, 14, 14, 17, 19, 20, 25, 28, 28, 35, 38, 50, 56, 56, 65, 75,
             100, 112, 150)


def _channels(rng: random.Random, picture: int, lo: int = 8) -> int:
    """A channel count for a layer on a ``picture`` x ``picture`` input: log-uniform,
    capped so that the tensor stays within a realistic size (C x H x W <= ~1.6 M)."""
    hi = max(lo, min(2048, int(1.6e6 / (picture * picture))))
    c = math.exp(rng.uniform(math.log(lo), math.log(hi)))
    return max(lo, int(round(c / 8)) * 8)


def _one(rng: random.Random, kind: str, n: int) -> ConvProblem:
    pic = rng.choice(_PICTURES)
    c, k = _channels(rng, pic), _channels(rng, pic)
    if kind == "1x1":
        return ConvProblem(n, c, pic, pic, k, 1, 1)
    if kind == "1x1 strided":
        return ConvProblem(n, c, pic, pic, k, 1, 1, stride_h=2, stride_w=2)
    if kind == "se 1x1":
        big = _channels(rng, 1, 64)
        small = max(4, int(big / rng.choice((4, 8, 16, 24))))
        c, k = (big, small) if rng.random() < 0.5 else (small, big)
        return ConvProblem(n, c, 1, 1, k, 1, 1)
    if kind in ("3x3", "3x3 strided"):
        st = 2 if kind == "3x3 strided" else 1
        return ConvProblem(n, c, pic, pic, k, 3, 3, pad_h=1, pad_w=1, stride_h=st,
                           stride_w=st)
    if kind.startswith("depthwise"):
        f = rng.choice((3, 3, 3, 5, 5, 7))
        st = 2 if kind.endswith("strided") else 1
        return ConvProblem(n, c, pic, pic, c, f, f, pad_h=f // 2, pad_w=f // 2,
                           stride_h=st, stride_w=st, groups=c)
    if kind == "grouped":
        g = rng.choice((2, 4, 8, 16, 32, 64))
        width = rng.choice((4, 8, 16, 24, 48, 64))
        c = k = g * width
        st = 2 if rng.random() < 0.2 else 1
        return ConvProblem(n, c, pic, pic, k, 3, 3, pad_h=1, pad_w=1, stride_h=st,
                           stride_w=st, groups=g)
    if kind == "large":
        f = rng.choice((5, 7, 11))
        st = rng.choice((1, 1, 2))
        return ConvProblem(n, c, pic, pic, k, f, f, pad_h=f // 2, pad_w=f // 2,
                           stride_h=st, stride_w=st)
    if kind == "factorized":
        f = rng.choice((3, 5, 7))
        if rng.random() < 0.5:
            return ConvProblem(n, c, pic, pic, k, 1, f, pad_w=f // 2)
        return ConvProblem(n, c, pic, pic, k, f, 1, pad_h=f // 2)
    if kind == "dilated":
        d = rng.choice((2, 4, 6, 12))
        pic = max(pic, 2 * d + 3)
        c, k = _channels(rng, pic, 64), _channels(rng, pic, 64)
        return ConvProblem(n, c, pic, pic, k, 3, 3, pad_h=d, pad_w=d, dilation_h=d,
                           dilation_w=d)
    # stem: few input channels, a large picture, a large filter or a patchify stride
    pic = rng.choice((112, 160, 224, 299))
    c = rng.choice((3, 3, 3, 4, 16, 24, 32))
    f, st = rng.choice(((7, 2), (3, 2), (3, 1), (5, 2), (4, 4), (16, 16), (11, 4)))
    pad = f // 2 if f not in (4, 16) else 0
    return ConvProblem(n, c, pic, pic, rng.choice((16, 24, 32, 48, 64, 96)), f, f,
                       pad_h=pad, pad_w=pad, stride_h=st, stride_w=st)


def random_problems(count: int, n: int = 1, seed: int = 0,
                    kinds: dict[str, float] | None = None) -> list[ConvProblem]:
    """``count`` distinct forward problems at batch size ``n``, drawn with
    :data:`LAYER_KINDS`' weights (or ``kinds``', a mapping of some of its names to
    positive weights), reproducibly for one integer ``seed``.

    Raises
    ------
    ValueError
        ``count``, ``n`` or ``seed`` not an integer (``count`` and ``n`` at least 1),
        ``kinds`` not a mapping of known kinds to positive weights, or fewer distinct
        problems of those kinds than ``count`` (the draw gives up after ``50 x count +
        1000`` tries: "stem" has about 800 distinct problems, "se 1x1" about 2000).
    """
    for name, value, least in (("count", count, 1), ("n", n, 1), ("seed", seed, None)):
        if isinstance(value, bool) or not isinstance(value, int) or \
                (least is not None and value < least):
            raise ValueError(f"{name}={value!r} must be an integer"
                             + (f" >= {least}" if least is not None else ""))
    weights = dict(LAYER_KINDS) if kinds is None else kinds
    if not isinstance(weights, dict) or not weights:
        raise ValueError(f"kinds={kinds!r:.60} must be a non-empty mapping of layer kinds to "
                         f"weights; choose from {list(LAYER_KINDS)}")
    unknown = sorted(set(weights) - set(LAYER_KINDS))
    if unknown:
        raise ValueError(f"unknown layer kinds {unknown}; choose from {list(LAYER_KINDS)}")
    bad = {k: w for k, w in weights.items() if isinstance(w, bool)
           or not isinstance(w, (int, float)) or not 0 < w < float("inf")}
    if bad:
        raise ValueError(f"layer kind weights must be positive numbers, not {bad}")
    rng = random.Random(seed)
    names, probs = list(weights), list(weights.values())
    out: dict[ConvProblem, None] = {}
    for _ in range(50 * count + 1000):
        if len(out) == count:
            break
        p = _one(rng, rng.choices(names, probs)[0], n)
        if p.flops <= MAX_FLOPS_PER_IMAGE * n:
            out.setdefault(p)
    else:
        if len(out) < count:
            raise ValueError(f"only {len(out)} distinct problems of kinds {names} were drawn "
                             f"in {50 * count + 1000} tries, not {count}: ask for fewer, or "
                             "for more kinds")
    return list(out)
