"""The ``gemm.im2col`` solver: im2col / col2im plus our SGEMM, in all three directions.

Applies to every valid problem (any filter, stride, padding, dilation, groups). The
workspace is the column buffer of a chunk of images: the whole batch when the caller's
limit allows, else as many images as fit (at least one; below that the solver declines).
Without a limit, the buffer stays under 1 GiB and an eighth of the device's memory (but
holds at least one image).
Launch planning is in plan.py, the kernels in kernels/, the WTI model in wti.py.
Tunable: its perf configs are the GEMMs' blockings or tiles (plan.perf_configs).

Three solvers, one per numerical class (wticonv.contract.answers.MATH_CLASSES):
``gemm.im2col`` (FP32, every device), and on GPUs with tensor cores
(:func:`wticonv.runtime.kit.tensor_cores`) ``gemm.im2col_3xtf32`` (FP32-accurate) and
``gemm.im2col_tf32`` (TF32, ranked only with ``allow_tf32``).
"""

from __future__ import annotations

from functools import lru_cache

from wticonv import Decline, hookimpl
from wticonv.runtime.kit import (
    enqueue,
    kernel_family,
    programs_of,
    tensor_core_decline,
    wgmma,
    workspace_room,
)

from . import plan, tcsolver, wti

__all__ = ["Im2colSolver", "solver", "solver_3xtf32", "solver_tf32", "chunk_for"]

_INT32 = 2**31 - 1


def _room(device, workspace_limit: int | None, problem) -> int:
    return workspace_room(device, workspace_limit, plan.col_bytes_per_image(problem))


@lru_cache(maxsize=2048)
def _layout(problem, kind: str, compute_units: int, room: int):
    return plan.im2col_layout(problem, kind, compute_units, room)


def chunk_for(problem, device, workspace_limit: int | None) -> int:
    """Images per chunk: the most whose column buffer (plus split-K partial sums on GPUs)
    fits the limit and the device's largest buffer, with a 32-bit GEMM width
    (Nc * Ho * Wo < 2^31); 0 if not even one image fits."""
    return _layout(problem, kernel_family(device), device.info.compute_units,
                   _room(device, workspace_limit, problem))[0]


@lru_cache(maxsize=1024)
def _plan(problem, kind: str, compute_units: int, workspace_bytes: int, vector_width: int,
          math: str, config: str | None = None):
    return plan.plan_im2col(problem, kind, compute_units, workspace_bytes, vector_width,
                            math, config)


@lru_cache(maxsize=1024)
def _configs(problem, kind: str, compute_units: int, workspace_bytes: int,
             vector_width: int, math: str, wgmma: bool) -> tuple[str, ...]:
    ops: list = []
    plan.plan_im2col(problem, kind, compute_units, workspace_bytes, vector_width, math,
                     ops=ops)
    return tuple(plan.perf_configs(ops, kind, compute_units, vector_width, math, wgmma))


class Im2colSolver:
    """Convolution as GEMM over an explicit column buffer (im2col), chunked over the
    batch, in numerical class ``math`` (``"fp32"``, ``"3xtf32"`` or ``"tf32"``; see
    :mod:`wticonv_gemm.tcsolver`)."""

    #: Hook API versions it was written for (wticonv.contract.hookspecs.HOOK_API_VERSION).
    hook_api = (2,)

    #: what it covers, for `wticonv solvers` (its declines say the rest)
    scope = "any problem, all directions: a column buffer in the workspace, chunked by images"

    def __init__(self, math: str = "fp32") -> None:
        tcsolver.declare(self, "gemm.im2col", math)

    @hookimpl
    def is_applicable(self, problem, device, workspace_limit):
        if (no := tensor_core_decline(self.math, device)) is not None:
            return no
        if max(problem.ho * problem.wo, problem.h * problem.w) > _INT32:
            return Decline("a picture of more than 2^31 pixels (plane indices are 32-bit)")
        if chunk_for(problem, device, workspace_limit) >= 1:
            return True
        need = plan.col_bytes(problem, kernel_family(device), 1)
        if need > device.info.max_alloc_bytes:
            return Decline(f"one image's column buffer ({need} bytes) exceeds the device's "
                           f"largest buffer ({device.info.max_alloc_bytes} bytes)")
        if max(problem.ho * problem.wo, problem.h * problem.w) > _INT32:
            return Decline("a picture of more than 2^31 pixels (plane indices are 32-bit)")
        return Decline(f"needs at least {need} bytes of workspace (one image's column "
                       f"buffer); the limit is {workspace_limit}")

    @hookimpl
    def is_dynamic(self):
        return True

    @hookimpl
    def workspace_size(self, problem, device, workspace_limit):
        return _layout(problem, kernel_family(device), device.info.compute_units,
                       _room(device, workspace_limit, problem))[2]

    @hookimpl
    def get_wti(self, problem, device, workspace_limit, perf_config):
        ws = self.workspace_size(problem, device, workspace_limit)
        return wti.wti(problem, self._launches(problem, device, ws, perf_config), device)

    @hookimpl
    def perf_configs(self, problem, device, workspace_limit):
        """The GEMMs' blockings (CPUs) or tiles (GPUs): wticonv_gemm.sgemm.gemm_configs.
        They leave the workspace as it is, so all fit wherever the solver applies; they
        are named after the GEMM of the largest chunk whatever the limit, so that a
        record tuned under a limit stays offered without one (each name runs on the
        smaller chunks as well)."""
        if self.is_applicable(problem, device, workspace_limit) is not True:
            return []
        ws = self.workspace_size(problem, device, None)
        return list(_configs(problem, kernel_family(device), device.info.compute_units, ws,
                             device.info.vector_width, self.math,
                             self.math != "fp32" and wgmma(device)))

    @hookimpl
    def programs(self, problem, device, workspace_limit, perf_config):
        ws = self.workspace_size(problem, device, workspace_limit)
        return programs_of(self._launches(problem, device, ws, perf_config))

    @hookimpl
    def run(self, problem, device, tensors, workspace, perf_config):
        enqueue(device, self._launches(problem, device, workspace.size, perf_config),
                {"x": tensors.x, "w": tensors.w, "y": tensors.y, "ws": workspace})

    def _launches(self, problem, device, workspace_bytes: int, perf_config: str | None):
        return _plan(problem, kernel_family(device), device.info.compute_units,
                     workspace_bytes, device.info.vector_width, self.math, perf_config)


solver = Im2colSolver()
solver_3xtf32 = Im2colSolver("3xtf32")
solver_tf32 = Im2colSolver("tf32")
