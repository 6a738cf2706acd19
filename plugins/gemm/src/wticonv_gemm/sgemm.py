"""The public interface of wticonv-gemm's SGEMM: what other plugins may use.

wticonv-gemm's other modules are private to it and may change in any release; this one
is the interface that another plugin (wticonv-winograd runs its batched multiply with it)
may import, and it changes only with a new major version of wticonv-gemm:

- planning: :class:`GemmOp` (one strided, batched, grouped ``C = A * B (+ C)``) with its
  :class:`Operand` and :class:`ColMap` addressing, :func:`gemm_launch` (the
  :class:`wticonv.runtime.kit.Launch` of an op on a CPU or a GPU, with its modelled
  efficiency), the GPU split-K helpers :func:`gpu_splits`, :func:`most_gpu_splits` and
  :func:`splitk_reduce_launch`;
- the cost model: :func:`predict_seconds` and :func:`wti` (predicted time and WTI of a
  list of launches from their cost fields and the device's measured figures; see
  docs/wti-models.md).

Launches of these functions name this plugin's kernel files (:data:`KERNELS`); run them,
with launches of your own, through :func:`wticonv.runtime.kit.enqueue`.
"""

from __future__ import annotations

from .gemm import (
                   KERNELS,
                   ColMap,
                   GemmOp,
                   Operand,
                   gemm_launch,
                   gpu_splits,
                   most_gpu_splits,
                   splitk_reduce_launch,
)
from .wti import predict_seconds, wti

__all__ = ["KERNELS", "ColMap", "Operand", "GemmOp", "gemm_launch", "gpu_splits",
           "most_gpu_splits", "splitk_reduce_launch", "predict_seconds", "wti"]
