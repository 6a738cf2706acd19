"""What the Winograd solvers share: workspace sizing, WTI, and running a plan.

Each solver (f2x3.py, f4x3.py, rxs.py) says which problems it covers and with which
transform (:class:`~wticonv_winograd.plan.Variant`); this base does the rest with
plan.py's launches, wticonv-gemm's public SGEMM interface (:mod:`wticonv_gemm.sgemm`:
planning and cost model) and the core's host kit (:mod:`wticonv.runtime.kit`).

WTI model (docs/wti-models.md): the predicted time of the exact plan, as for the GEMM
solvers: the batched multiply's FLOPs (alpha^2 / (m^2 r^2) of the direct FLOPs per tile:
2.25x fewer for F(2x2,3x3), 4x for F(4x4,3x3)) at the SGEMM's predicted efficiency, plus
every transform's memory traffic at the measured bandwidth, plus launch overheads. So the
WTI exceeds 1.0 where the multiply dominates and the reduction outweighs the traffic.
-2.0 (unknown) on device kinds other than CPUs and GPUs, whose constants were not measured
(:func:`wticonv.runtime.kit.modelled_kind`).
"""

from __future__ import annotations

import threading
import weakref
from functools import lru_cache

import pyopencl as cl
from wticonv import WTI_UNKNOWN, Decline, hookimpl
from wticonv.runtime.kit import (
    TENSOR_CORE_SPEEDUP,
    enqueue,
    kernel_family,
    modelled_kind,
    programs_of,
    tensor_core_decline,
    tensor_core_scope,
    workspace_room,
)
from wticonv_gemm import sgemm

from . import plan

__all__ = ["WinogradBase"]

_tables: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_lock = threading.Lock()

@lru_cache(maxsize=2048)
def _layout(problem, variant, kind: str, cu: int, room: int):
    return plan.workspace_layout(problem, variant, kind, cu, room)


@lru_cache(maxsize=1024)
def _plan(problem, variant, kind: str, cu: int, layout, vector_width: int, math: str):
    return plan.plan(problem, variant, kind, cu, layout, vector_width, math)


#: Declared WTIs stay within the core's limit (wticonv.contract.answers.MAX_WTI_LIMIT).
_MAX_WTI_LIMIT = 16.0


def _pieces_buffer(device, problem, variant) -> cl.Buffer:
    table = plan.pieces_table(problem, variant)
    key = table.tobytes()
    with _lock:
        per_device = _tables.setdefault(device, {})
        buf = per_device.get(key)
        if buf is None:
            buf = per_device[key] = cl.Buffer(
                device.context, cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR,
                hostbuf=table)
        return buf


class WinogradBase:
    """Hooks common to the Winograd solvers; subclasses define :meth:`covers`, and their
    FP32 ``solver_id``, ``tolerance`` and ``max_wti``.

    ``math`` picks the batched multiply's numerical class: ``"fp32"`` (every device), or
    on GPUs with tensor cores (:func:`wticonv.runtime.kit.tensor_cores`) ``"3xtf32"``
    (FP32-accurate: the FP32 solver's tolerance) and ``"tf32"`` (the class's default
    tolerance, ranked only with ``allow_tf32``); their ids append the class
    (``winograd.f4x3_3xtf32``).
    """

    solver_id = ""
    math = "fp32"
    tolerance = None
    max_wti = 1.0
    #: Hook API versions it was written for (wticonv.contract.hookspecs.HOOK_API_VERSION).
    hook_api = (1, 2)
    #: The last :meth:`_layout` answer: ``(problem, device.info, kind, limit, answer)``.
    _last = None

    def __init__(self, math: str = "fp32") -> None:
        if math not in TENSOR_CORE_SPEEDUP:
            raise ValueError(f"no Winograd solver class {math!r}: use one of "
                             f"{', '.join(TENSOR_CORE_SPEEDUP)}")
        if math != "fp32":
            self.solver_id = f"{type(self).solver_id}_{math}"
            self.math = math
            self.scope = tensor_core_scope(type(self).scope, math)
            # the transform's saving times the tensor cores' speed-up
            self.max_wti = min(_MAX_WTI_LIMIT,
                               type(self).max_wti * TENSOR_CORE_SPEEDUP[math])
            if math == "tf32":
                self.tolerance = None     # the class default (4e-3)

    def covers(self, problem):
        """The variant for ``problem``, or a :class:`wticonv.Decline` with the reason."""
        raise NotImplementedError

    def _layout(self, problem, device, workspace_limit):
        """``(variant, layout)``; ``(Decline, None)`` if not covered; layout None if not even
        one image fits. The last answer is kept: selection asks three hooks in a row about
        the same problem (the same objects: ``device.info`` is immutable)."""
        last = self._last
        if (last is not None and last[0] is problem and last[1] is device.info
                and last[2] == device.kind and last[3] == workspace_limit):
            return last[4]
        answer = self._layout_of(problem, device, workspace_limit)
        self._last = (problem, device.info, device.kind, workspace_limit, answer)
        return answer

    def _layout_of(self, problem, device, workspace_limit):
        v = self.covers(problem)
        if isinstance(v, Decline):
            return v, None
        too_large = plan.index_limit_reason(problem, v)
        if too_large:
            return Decline(too_large), None
        kind, cu = kernel_family(device), device.info.compute_units
        minimum = plan.one_image_bytes(problem, v, kind, cu)
        return v, _layout(problem, v, kind, cu, workspace_room(device, workspace_limit,
                                                              minimum))

    @hookimpl
    def is_applicable(self, problem, device, workspace_limit):
        if (no := tensor_core_decline(self.math, device)) is not None:
            return no
        v, layout = self._layout(problem, device, workspace_limit)
        if isinstance(v, Decline):
            return v
        if layout is None:
            need = plan.one_image_bytes(problem, v, kernel_family(device),
                                        device.info.compute_units)
            where = (f"the limit is {workspace_limit}" if workspace_limit is not None else
                     f"the device's largest buffer is {device.info.max_alloc_bytes} bytes")
            return Decline(f"needs at least {need} bytes of workspace (one image's transformed "
                           f"tiles); {where}")
        return True

    @hookimpl
    def is_dynamic(self):
        return True

    @hookimpl
    def workspace_size(self, problem, device, workspace_limit):
        return self._layout(problem, device, workspace_limit)[1].bytes

    @hookimpl
    def get_wti(self, problem, device, workspace_limit):
        if modelled_kind(device) is None:
            return WTI_UNKNOWN
        v, layout = self._layout(problem, device, workspace_limit)
        launches = _plan(problem, v, kernel_family(device), device.info.compute_units, layout,
                         device.info.vector_width, self.math)
        return sgemm.wti(problem, launches, device)

    @hookimpl
    def programs(self, problem, device, workspace_limit):
        v = self.covers(problem)
        layout = _layout(problem, v, kernel_family(device), device.info.compute_units,
                         self.workspace_size(problem, device, workspace_limit))
        return programs_of(_plan(problem, v, kernel_family(device), device.info.compute_units,
                                 layout, device.info.vector_width, self.math))

    @hookimpl
    def run(self, problem, device, tensors, workspace):
        v = self.covers(problem)
        layout = _layout(problem, v, kernel_family(device), device.info.compute_units,
                         workspace.size)
        launches = _plan(problem, v, kernel_family(device), device.info.compute_units, layout,
                         device.info.vector_width, self.math)
        enqueue(device, launches, {"x": tensors.x, "w": tensors.w, "y": tensors.y,
                                   "ws": workspace, "pc": _pieces_buffer(device, problem, v)})
