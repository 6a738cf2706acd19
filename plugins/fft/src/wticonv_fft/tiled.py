"""The ``fft.tiled`` solver: tiled FFT convolution (overlap-save), every direction.

Covers stride 1, dilation 1, one group, any padding, filters from 1 x 2 up to 31 x 31 (a
32 x 32 tile keeps at least two outputs per axis); 1 x 1 filters are declined (a GEMM).
N, H and W are run-time arguments: each build is tied to the tile side (8, 16 or 32,
plan.TILES) and the device kind only. The tile side is chosen per problem: the one of
least predicted time whose workspace fits.

WTI model (docs/wti-models.md, "FFT"): the predicted time of the exact plan, as for the
GEMM and Winograd solvers (wticonv_gemm.sgemm.predict_seconds): the per-bin GEMMs' FLOPs
at the SGEMM's predicted efficiency, the transforms' butterflies and traffic
(plan.TRANSFORM_COST, plan.FILTER_EFFICIENCY) and the launch overheads. The direct FLOPs
over that time exceed 1.0 where the spectrum's saving outweighs the 4 real products per
complex one: R S (T-R+1)(T-S+1) / (4 T (T/2+1)) fewer multiply-adds per tile, 6.25x for
a 5 x 5 filter on 16 x 16 tiles. -2.0 (unknown) on device kinds the models were not
measured on (:func:`wticonv.runtime.kit.modelled_kind`).

On NVIDIA GPUs with tensor cores, ``fft.tiled_3xtf32`` runs the per-bin GEMMs in 3xTF32
(FP32-accurate: the FP32 solver's tolerance).
"""

from __future__ import annotations

from functools import lru_cache

from wticonv import WTI_UNKNOWN, Decline, hookimpl
from wticonv.runtime.kit import (
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

__all__ = ["FftSolver", "solver", "solver_3xtf32", "MAX_FILTER"]

#: Largest filter side: the largest tile (32) less one, so a tile gives two outputs.
MAX_FILTER = max(plan.TILES) - 1


@lru_cache(maxsize=2048)
def _layout(problem, t: int, kind: str, cu: int, room: int):
    return plan.workspace_layout(problem, t, kind, cu, room)


@lru_cache(maxsize=1024)
def _plan(problem, t: int, kind: str, cu: int, layout, vector_width: int, math: str):
    return plan.plan(problem, t, kind, cu, layout, vector_width, math)


def covers(problem):
    """None when ``problem`` is covered, else a :class:`wticonv.Decline` with the reason."""
    p = problem
    if (p.stride_h, p.stride_w) != (1, 1):
        return Decline(f"stride {p.stride_h}x{p.stride_w}: the tiled FFT covers stride 1 "
                       "only (the other solvers cover strided layers)")
    if (p.dilation_h, p.dilation_w) != (1, 1):
        return Decline(f"dilation {p.dilation_h}x{p.dilation_w}: the tiled FFT covers "
                       "dilation 1 only")
    if p.groups != 1:
        return Decline(f"{p.groups} groups: the tiled FFT covers one group only")
    if (p.r, p.s) == (1, 1):
        return Decline("filter 1x1: a 1x1 convolution is a GEMM (gemm.1x1 runs it); the "
                       "transforms would only add work to the same per-bin products")
    if max(p.r, p.s) > MAX_FILTER:
        return Decline(f"filter {p.r}x{p.s}: the tiled FFT covers filters up to "
                       f"{MAX_FILTER}x{MAX_FILTER} (its largest tile is {max(plan.TILES)})")
    return None


class FftSolver:
    """Tiled FFT convolution; ``math`` ``"fp32"`` (every device) or ``"3xtf32"`` (the
    per-bin GEMMs on tensor cores: NVIDIA GPUs that have them)."""

    #: Hook API versions it was written for (wticonv.contract.hookspecs.HOOK_API_VERSION).
    hook_api = (1, 2)
    #: rms_range against the float64 reference: the transforms' rounding (log2 T^2
    #: butterflies of FP32) stays near 1e-6 on every accepted layer (tests/test_fft.py).
    tolerance = 1e-5
    #: Largest WTI it may report: the core's limit (wticonv.contract.answers.MAX_WTI_LIMIT).
    #: The saving of the spectrum reaches 27x for 11 x 11 filters on 32 x 32 tiles.
    max_wti = 16.0

    #: what it covers, for `wticonv solvers` (its declines say the rest)
    scope = ("stride 1, one group, no dilation, filters up to 31 taps an axis but 1x1, "
             "all directions")

    def __init__(self, math: str = "fp32") -> None:
        if math not in ("fp32", "3xtf32"):
            raise ValueError(f"no FFT solver class {math!r}: use fp32 or 3xtf32")
        self.math = math
        self.scope = tensor_core_scope(type(self).scope, math)
        self.solver_id = "fft.tiled" if math == "fp32" else f"fft.tiled_{math}"

    def _tiles(self, problem):
        return [t for t in plan.TILES if t > max(problem.r, problem.s)
                and plan.index_limit_reason(problem, t) is None]

    def _choice(self, problem, device, room: int):
        """``(t, layout, launches)`` of least predicted time whose workspace fits ``room``
        bytes, or None."""
        kind, cu = kernel_family(device), device.info.compute_units
        best = None
        for t in self._tiles(problem):
            layout = _layout(problem, t, kind, cu, room)
            if layout is None:
                continue
            launches = _plan(problem, t, kind, cu, layout, device.info.vector_width,
                             self.math)
            secs = sgemm.predict_seconds(launches, device)
            if best is None or secs < best[0]:
                best = (secs, t, layout, launches)
        return None if best is None else best[1:]

    def _room(self, problem, device, workspace_limit):
        kind, cu = kernel_family(device), device.info.compute_units
        least = min((plan.one_image_bytes(problem, t, kind, cu)
                     for t in self._tiles(problem)), default=0)
        return workspace_room(device, workspace_limit, least)

    @hookimpl
    def is_applicable(self, problem, device, workspace_limit):
        if (no := tensor_core_decline(self.math, device)) is not None:
            return no
        if (no := covers(problem)) is not None:
            return no
        if not self._tiles(problem):
            return Decline("the kernels' 32-bit indices cannot address this problem")
        if self._choice(problem, device, self._room(problem, device, workspace_limit)) is None:
            where = (f"the limit is {workspace_limit}" if workspace_limit is not None else
                     f"the device's largest buffer is {device.info.max_alloc_bytes} bytes")
            kind, cu = kernel_family(device), device.info.compute_units
            need = min(plan.one_image_bytes(problem, t, kind, cu) for t in self._tiles(problem))
            return Decline(f"needs at least {need} bytes of workspace (one image's tile "
                           f"spectra); {where}")
        return True

    @hookimpl
    def is_dynamic(self):
        return True

    @hookimpl
    def workspace_size(self, problem, device, workspace_limit):
        return self._choice(problem, device,
                            self._room(problem, device, workspace_limit))[1].bytes

    @hookimpl
    def get_wti(self, problem, device, workspace_limit):
        if modelled_kind(device) is None:
            return WTI_UNKNOWN
        launches = self._choice(problem, device,
                                self._room(problem, device, workspace_limit))[2]
        return sgemm.wti(problem, launches, device)

    @hookimpl
    def programs(self, problem, device, workspace_limit):
        size = self.workspace_size(problem, device, workspace_limit)
        return programs_of(self._choice(problem, device, size)[2])

    @hookimpl
    def run(self, problem, device, tensors, workspace):
        launches = self._choice(problem, device, workspace.size)[2]
        enqueue(device, launches, {"x": tensors.x, "w": tensors.w, "y": tensors.y,
                                   "ws": workspace})


solver = FftSolver()
solver_3xtf32 = FftSolver("3xtf32")
