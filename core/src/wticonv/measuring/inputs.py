"""What every measurement needs first: random inputs, and a check that the host can hold
them."""

from __future__ import annotations

import math
import os

import numpy as np

from wticonv.errors import HostMemoryError
from wticonv.problem.conv import ConvProblem
from wticonv.problem.tensors import OUTPUT_TENSOR

__all__ = ["POOL_MAX_VALUES", "available_host_bytes", "check_host", "random_inputs",
           "timing_inputs"]

#: Most float32 values (128 MiB) of the random pool :func:`timing_inputs` keeps between
#: calls; a larger tensor repeats it.
POOL_MAX_VALUES = 2**25

_pool = np.empty(0, dtype=np.float32)


def random_inputs(p: ConvProblem, seed: int) -> dict[str, np.ndarray]:
    """Uniform [-1, 1) float32 inputs of ``p``'s direction, keyed ``x``/``w``/``y``."""
    rng = np.random.default_rng(seed)
    shapes = {"x": p.x_shape, "w": p.w_shape, "y": p.y_shape}
    out = {}
    for name, shape in shapes.items():
        if name != OUTPUT_TENSOR[p.direction]:
            a = rng.random(size=shape, dtype=np.float32)  # drawn in float32: 3x faster
            a *= 2.0
            a -= 1.0
            out[name] = a
    return out


def timing_inputs(p: ConvProblem) -> dict[str, np.ndarray]:
    """Uniform [-1, 1) float32 inputs of ``p``'s direction for timing, keyed ``x``/``w``/
    ``y``: read-only views of one pool of random values kept between calls (every input
    starts with the same values; a timing needs values of the right distribution, not
    independent ones). Drawing fresh inputs took 34 ms per problem on the H200's host,
    40 % of a calibration's time (benchmarks/calibrate_profile.py). The pool grows to the
    largest tensor asked for, up to :data:`POOL_MAX_VALUES`; a larger tensor is a read-only
    copy of the pool repeated (drawing such tensors afresh took 0.32 s each, 6.8 of a cold
    calibration's 54.6 s on the H100's host: benchmarks/results/calibrate-profile-h100-k.txt)."""
    global _pool
    shapes = {name: shape for name, shape in (("x", p.x_shape), ("w", p.w_shape),
                                              ("y", p.y_shape))
              if name != OUTPUT_TENSOR[p.direction]}
    need = max(math.prod(s) for s in shapes.values())
    if need > _pool.size and _pool.size < POOL_MAX_VALUES:
        size = min(POOL_MAX_VALUES, max(need, 2 * _pool.size, 2**20))
        pool = np.random.default_rng(0).random(size=size, dtype=np.float32)
        pool *= 2.0
        pool -= 1.0
        pool.flags.writeable = False
        _pool = pool
    out = {}
    for name, shape in shapes.items():
        count = math.prod(shape)
        if count <= _pool.size:
            out[name] = _pool[:count].reshape(shape)
        else:
            a = np.empty(count, dtype=np.float32)   # the pool repeated
            for start in range(0, count, _pool.size):
                n = min(_pool.size, count - start)
                a[start:start + n] = _pool[:n]
            a.flags.writeable = False
            out[name] = a.reshape(shape)
    return out


def available_host_bytes() -> int | None:
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not POSIX
        return None


def check_host(nbytes: int, what: str) -> None:
    """Raise :class:`HostMemoryError` if ``nbytes`` (the host arrays of ``what``) exceed
    80 % of the host's available memory."""
    avail = available_host_bytes()
    if avail is not None and nbytes > 0.8 * avail:
        raise HostMemoryError(f"{what} need {nbytes / 2**30:.1f} GiB of host memory, more than "
                              f"the {avail / 2**30:.1f} GiB available; use a smaller batch")
