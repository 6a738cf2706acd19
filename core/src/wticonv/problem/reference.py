"""The correctness oracle: float64 NumPy convolutions in all three directions.

Each function takes NCHW arrays of any float dtype, computes in float64 and returns
float64. The loop runs over the R x S filter taps; each tap is one batched matrix product
over (groups, channels, pixels), so the reference stays fast enough for real layers at
small batch sizes.

Error metric (MIOpen's ``rms_range``, used by its driver and tests)::

    rms_range(a, b) = sqrt(sum((a - b)^2)) / (sqrt(n) * max(max|a|, max|b|))
"""

from __future__ import annotations

import numpy as np

from wticonv.problem.conv import ConvProblem

__all__ = ["conv_fwd", "conv_bwd", "conv_wrw", "reference", "rms_range"]


def _grouped(p: ConvProblem):
    g = p.groups
    return g, p.c // g, p.k // g


def _tap_slices(p: ConvProblem, r: int, s: int) -> tuple[slice, slice]:
    h0, w0 = r * p.dilation_h, s * p.dilation_w
    return (slice(h0, h0 + p.stride_h * (p.ho - 1) + 1, p.stride_h),
            slice(w0, w0 + p.stride_w * (p.wo - 1) + 1, p.stride_w))


def _padded(x: np.ndarray, p: ConvProblem) -> np.ndarray:
    return np.pad(np.asarray(x, dtype=np.float64),
                  ((0, 0), (0, 0), (p.pad_h, p.pad_h), (p.pad_w, p.pad_w)))


def conv_fwd(x: np.ndarray, w: np.ndarray, p: ConvProblem) -> np.ndarray:
    """y (N x K x Ho x Wo) from x (N x C x H x W) and w (K x C/groups x R x S)."""
    g, cg, kg = _grouped(p)
    xp = _padded(x, p).reshape(p.n, g, cg, p.h + 2 * p.pad_h, p.w + 2 * p.pad_w)
    wg = np.asarray(w, dtype=np.float64).reshape(g, kg, cg, p.r, p.s)
    y = np.zeros((p.n, g, kg, p.ho * p.wo))
    for r in range(p.r):
        for s in range(p.s):
            sh, sw = _tap_slices(p, r, s)
            patch = xp[:, :, :, sh, sw].reshape(p.n, g, cg, p.ho * p.wo)
            y += np.matmul(wg[None, :, :, :, r, s], patch)
    return y.reshape(p.y_shape)


def conv_bwd(dy: np.ndarray, w: np.ndarray, p: ConvProblem) -> np.ndarray:
    """dx (N x C x H x W) from dy (N x K x Ho x Wo) and w (K x C/groups x R x S)."""
    g, cg, kg = _grouped(p)
    dyg = np.asarray(dy, dtype=np.float64).reshape(p.n, g, kg, p.ho * p.wo)
    wg = np.asarray(w, dtype=np.float64).reshape(g, kg, cg, p.r, p.s)
    dxp = np.zeros((p.n, g, cg, p.h + 2 * p.pad_h, p.w + 2 * p.pad_w))
    for r in range(p.r):
        for s in range(p.s):
            sh, sw = _tap_slices(p, r, s)
            wt = np.swapaxes(wg[:, :, :, r, s], 1, 2)  # G x Cg x Kg
            dxp[:, :, :, sh, sw] += np.matmul(wt[None], dyg).reshape(
                p.n, g, cg, p.ho, p.wo)
    dx = dxp[:, :, :, p.pad_h:p.pad_h + p.h, p.pad_w:p.pad_w + p.w]
    return np.ascontiguousarray(dx).reshape(p.x_shape)


def conv_wrw(x: np.ndarray, dy: np.ndarray, p: ConvProblem) -> np.ndarray:
    """dw (K x C/groups x R x S) from x (N x C x H x W) and dy (N x K x Ho x Wo)."""
    g, cg, kg = _grouped(p)
    xp = _padded(x, p).reshape(p.n, g, cg, p.h + 2 * p.pad_h, p.w + 2 * p.pad_w)
    dyg = np.asarray(dy, dtype=np.float64).reshape(p.n, g, kg, p.ho * p.wo)
    dw = np.zeros((g, kg, cg, p.r, p.s))
    for r in range(p.r):
        for s in range(p.s):
            sh, sw = _tap_slices(p, r, s)
            patch = xp[:, :, :, sh, sw].reshape(p.n, g, cg, p.ho * p.wo)
            dw[:, :, :, r, s] = np.matmul(dyg, np.swapaxes(patch, 2, 3)).sum(axis=0)
    return dw.reshape(p.w_shape)


def reference(p: ConvProblem, x: np.ndarray | None = None, w: np.ndarray | None = None,
              y: np.ndarray | None = None) -> np.ndarray:
    """The float64 result of ``p``: y for fwd (from x, w), dx for bwd (from y=dy, w), dw
    for wrw (from x, y=dy)."""
    if p.direction == "fwd":
        return conv_fwd(x, w, p)
    if p.direction == "bwd":
        return conv_bwd(y, w, p)
    return conv_wrw(x, y, p)


def rms_range(a: np.ndarray, b: np.ndarray) -> float:
    """MIOpen's relative RMS error between ``a`` and ``b`` (see module docstring).

    Returns 0.0 for empty or all-zero arrays, and NaN when either holds a NaN or an
    infinity (a result with NaN or Inf never passes a tolerance check).
    """
    with np.errstate(all="ignore"):
        a = np.asarray(a, dtype=np.float64).ravel()
        b = np.asarray(b, dtype=np.float64).ravel()
    if a.shape != b.shape:
        raise ValueError(f"rms_range: shapes differ ({a.size} vs {b.size} elements)")
    if a.size == 0:
        return 0.0
    with np.errstate(all="ignore"):
        diff = float(np.sqrt(np.sum((a - b) ** 2)))
        scale = max(float(np.max(np.abs(a))), float(np.max(np.abs(b))))
    if not (np.isfinite(diff) and np.isfinite(scale)):
        return float("nan")
    if scale == 0.0:
        return 0.0
    return diff / (np.sqrt(a.size) * scale)
