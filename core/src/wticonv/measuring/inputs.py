"""What every measurement needs first: random inputs, and a check that the host can hold
them."""

from __future__ import annotations

import os

import numpy as np

from wticonv.errors import HostMemoryError
from wticonv.problem.conv import ConvProblem
from wticonv.problem.tensors import OUTPUT_TENSOR

__all__ = ["available_host_bytes", "check_host", "random_inputs"]


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
