"""The ``direct.tiled`` solver: direct convolution in blocks of outputs, all directions.

Applies to every valid problem except depthwise ones (``direct.depthwise``) and those
whose index ranges pass 32 bits (see :func:`declines`): any filter, stride, padding,
dilation and group count, in fwd, bwd and wrw. Dynamic: every size is a kernel argument;
two builds per device (the kernels and the wrw reduction) serve every problem.

How it computes (tiled_plan.py, kernels/tiled_gpu.cl, kernels/tiled_cpu.cl): each
work-group (GPU, input tiles staged in local memory) or work-item (CPU, vector register
blocks) computes a block of several output channels x several output positions:

- fwd: y blocks of K x (N, Ho, Wo), reducing over (C, R, S) of the group;
- bwd: dx blocks of C x (N, H, W), one launch per stride phase of dx, reducing over
  (K, taps that reach the phase), so stride > 1 wastes no multiplications on zeros;
- wrw: dw blocks of K x (C, R, S), reducing over (N, Ho, Wo). When dw has too few blocks
  to fill the device, the reduction is split into parts written to the workspace (one dw
  slice per part: ``splits x K x C/groups x R x S x 4`` bytes) and added by a second
  kernel in a fixed order: deterministic, no atomics. Within ``workspace_limit`` the split
  shrinks, down to none (workspace 0).

Workspace (exact, from the plan): the wrw split's partial sums; on GPUs also fwd and bwd
splits of long reductions on small pictures (``splits x`` the output's size x 4 bytes)
when the model predicts them faster; on CPUs the fwd/bwd filter packed into blocks
(``G x ceil(M / 16) x 16 x Q x 4`` bytes, 16 or 24 channels per block) when the reduction is
long and the positions many. Every one of them is dropped, at some cost in speed, when
``workspace_limit`` does not allow it: the solver always runs with no workspace at all.

WTI (:mod:`wticonv_direct.tiled_wti`): predicted time of the plan from the device's
measured peak and bandwidth; see docs/wti-models.md.

Tunable (:mod:`wticonv_direct.tiled_configs`): the perf configs are the GPU tile builds
with and without a split reduction, the CPU lane widths with and without a packed filter,
and the CPU backward-weights batch splits; the default is the plan the heuristics and the
model pick. ``wticonv tune`` times them all and stores the fastest in the perf-db.
"""

from __future__ import annotations

from functools import lru_cache

from wticonv import Decline, hookimpl
from wticonv.runtime.kit import enqueue, kernel_family, launch_overhead_s, programs_of

from . import tiled_configs, tiled_plan, tiled_wti
from .tiled_plan import INT32_MAX

__all__ = ["TiledSolver", "solver", "declines"]


def declines(p) -> Decline | None:
    """Why direct.tiled does not take problem ``p``, or None when it does."""
    if p.groups > 1 and p.groups == p.c and p.k % p.c == 0:
        return Decline("depthwise (groups == C, K = m*C): use direct.depthwise")
    n_pos = p.n * max(p.h * p.w, p.ho * p.wo)
    red = max(p.n * p.ho * p.wo, (p.c // p.groups) * p.r * p.s,
              (p.k // p.groups) * p.r * p.s)
    if max(n_pos, red, p.h * p.w, p.ho * p.wo) > INT32_MAX:
        return Decline("an index range passes 2^31 (N*H*W or the reduction); "
                       "split the batch")
    return None


@lru_cache(maxsize=2048)
def _plan(problem, kind: str, compute_units: int, limit: int | None, peak: float,
          bandwidth: float, launch_s: float):
    return tiled_plan.plan(problem, kind, compute_units, limit, peak, bandwidth, launch_s)


@lru_cache(maxsize=2048)
def _config_plan(problem, kind: str, config: str):
    return tiled_configs.config_plan(problem, kind, config)


def plan_for(problem, device, workspace_limit=None, perf_config=None) -> tiled_plan.Plan:
    """The (cached) plan of ``problem`` on ``device``: perf config ``perf_config`` (see
    :mod:`wticonv_direct.tiled_configs`), or by default the heuristics' choice within
    ``workspace_limit`` bytes.

    Raises
    ------
    ValueError
        If ``perf_config`` is not one of this device kind's and direction's.
    """
    kind = kernel_family(device)
    if perf_config is not None:
        return _config_plan(problem, kind, perf_config)
    return _plan(problem, kind, device.info.compute_units, workspace_limit,
                 device.peak_flops, device.bandwidth, launch_overhead_s(device))


class TiledSolver:
    """Direct convolution in output blocks (see module docstring)."""

    #: what it covers, for `wticonv solvers` (its declines say the rest)
    scope = "any problem but depthwise, all directions: blocked direct kernels, CPU and GPU builds"
    solver_id = "direct.tiled"
    #: Hook API versions it was written for (wticonv.contract.hookspecs.HOOK_API_VERSION).
    hook_api = (2,)
    #: rms_range tolerance against the float64 reference (fp32 accumulation).
    tolerance = 1e-5

    @hookimpl
    def is_applicable(self, problem, device):
        reason = declines(problem)
        return True if reason is None else reason

    @hookimpl
    def is_dynamic(self):
        return True

    @hookimpl
    def get_wti(self, problem, device, workspace_limit, perf_config):
        plan = plan_for(problem, device, workspace_limit, perf_config)
        return tiled_wti.wti(problem, plan, device)

    @hookimpl
    def workspace_size(self, problem, device, workspace_limit, perf_config):
        return plan_for(problem, device, workspace_limit, perf_config).workspace_bytes

    @hookimpl
    def perf_configs(self, problem, device, workspace_limit):
        return tiled_configs.perf_configs(problem, kernel_family(device),
                                          device.info.compute_units, workspace_limit)

    @hookimpl
    def programs(self, problem, device, workspace_limit, perf_config):
        ws = self.workspace_size(problem, device, workspace_limit, perf_config)
        return programs_of(plan_for(problem, device, ws, perf_config).launches)

    @hookimpl
    def run(self, problem, device, tensors, workspace, perf_config):
        buffers = {"x": tensors.x, "w": tensors.w, "y": tensors.y, "ws": workspace}
        plan = plan_for(problem, device, _limit_of(workspace), perf_config)
        if plan.workspace_bytes > _limit_of(workspace):
            raise ValueError(f"perf config {perf_config} needs {plan.workspace_bytes} bytes "
                             f"of workspace, {_limit_of(workspace)} were given")
        enqueue(device, plan.launches, buffers)


def _limit_of(workspace) -> int:
    """The plan that fits the workspace given to run (0 bytes when there is none)."""
    return 0 if workspace is None else int(workspace.size)


solver = TiledSolver()
