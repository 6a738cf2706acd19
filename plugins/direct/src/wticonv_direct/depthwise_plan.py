"""Launch planning for direct.depthwise: kernels, grid and work-group sizes, arguments,
the backward-weights split and its workspace.

Kept apart from the hook functions (depthwise.py) so that it can be read and tested
without the plugin machinery. Build options and work-group sizes depend only on the
device kind (:data:`PARAMS`); everything that depends on the problem is a kernel argument
or a grid size, so one build per device serves every problem (PoCL also compiles each
kernel once per work-group size, which is fixed here).

Kernels (``kernels/depthwise.cl``, whose header gives the formulas):

- fwd: ``dw_fwd_3x3s1`` / ``dw_fwd_3x3s2`` for 3x3 filters at stride 1 or 2 (both axes)
  and dilation 1, ``dw_fwd_any`` otherwise.
- bwd: at stride 1, the same plane kernels run with ``in = dy``, ``out = dx``, flipped taps
  and pads ``(R-1)*dh - ph``, ``(S-1)*dw - pw``, summing the m filters of each channel;
  at larger strides ``dw_bwd_any`` (column phases; on CPUs ``dw_bwd_3x3s2`` for 3x3
  filters at stride 2 and dilation 1).
- wrw: ``dw_wrw`` (on CPUs ``dw_wrw_3x3s1`` / ``dw_wrw_3x3s2`` where the fwd kernels are
  specialised), then, when the reduction is split, ``dw_wrw_sum`` (see :func:`wrw_split`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from wticonv.runtime.kit import Launch, kernel_family
from wticonv.runtime.kit import round_up as _up

from .programs import KERNELS

__all__ = ["Params", "PARAMS", "Plan", "decline_reason", "wrw_split", "plan", "plan_for"]

_FILE = "depthwise.cl"


@dataclass(frozen=True)
class Params:
    """Tunables of one device kind (the kernels' macros and the launch shapes).

    Attributes:
        gpu: one output column per work-item (DIRECT_DW_GPU=1) instead of whole rows.
        vw: outputs per vector along a row (DIRECT_DW_VW); 1 on GPUs.
        th: output rows per work-item (DIRECT_DW_TH).
        plane_local: work-group size of the plane kernels; CPU (1, L, 1) over
            (row blocks, channels, images), GPU (L,) over the flattened blocks.
        wrw_local: work-items per group of dw_wrw on GPUs (DIRECT_DW_WRW_LOCAL); on CPUs
            the groups are (1, L) over (parts, channels).
        sum_local: work-group size of dw_wrw_sum.
        wrw_items_per_cu: dw_wrw work-items (CPU) or work-groups (GPU) wanted per compute
            unit; fewer channels than that split the reduction into parts.
        wrw_min_elems: fewest dy elements in one part (keeps each part's work above the
            launch and reduction costs).
    """

    gpu: bool
    vw: int
    th: int
    plane_local: tuple[int, ...]
    wrw_local: tuple[int, ...]
    sum_local: int
    wrw_items_per_cu: int
    wrw_min_elems: int

    @property
    def options(self) -> str:
        """The OpenCL build options: these macros, nothing that depends on a problem."""
        opts = f"-DDIRECT_DW_GPU={int(self.gpu)} -DDIRECT_DW_VW={self.vw} -DDIRECT_DW_TH={self.th}"
        return opts + (f" -DDIRECT_DW_WRW_LOCAL={self.wrw_local[0]}" if self.gpu else "")


#: CPU: float8 vectors, 7 rows per work-item, 8 channels per work-group. Measured on
#: MobileNetV2's layers (2-core EPYC, AVX-512, PoCL 3.1, N=8): float16 is about 20 %
#: faster on the 112-wide pictures only and up to 50 % slower on 7x7 ones (9 of 16 lanes
#: wasted against 1 of 8); 7 rows beat 2 and 4 (a 7x7 or 14x14 plane in one or two blocks,
#: each input row loaded once for up to 3 output rows) and match 8; groups of 1, 2, 4 or
#: 8 channels were within the run-to-run noise (+-20 %). Registers: 7 accumulators, 9
#: weights, 3 masks, 3 loaded vectors. GPU: one column and 4 rows per work-item, groups
#: of 64; backward weights in 32 parts per SM at most (measured on the H200: 4 parts per
#: SM left it 2.5-3x slower on MobileNetV2's large layers at N=32, e.g. 742 -> 242 us).
PARAMS = {
    "cpu": Params(gpu=False, vw=8, th=7, plane_local=(1, 8, 1), wrw_local=(1, 8),
                  sum_local=64, wrw_items_per_cu=8, wrw_min_elems=2048),
    "gpu": Params(gpu=True, vw=1, th=4, plane_local=(64,), wrw_local=(64,), sum_local=256,
                  wrw_items_per_cu=32, wrw_min_elems=256),
}


@dataclass(frozen=True)
class Plan:
    """The launches of one problem, in order, and the workspace they use (bytes)."""

    launches: tuple[Launch, ...]
    workspace: int
    options: str


def decline_reason(problem) -> str | None:
    """Why direct.depthwise cannot compute ``problem`` (None when it can)."""
    p = problem
    if p.groups != p.c:
        return f"not depthwise: groups={p.groups} must equal c={p.c}"
    return None


def wrw_split(problem, kind: str, compute_units: int,
              workspace_limit: int | None = None) -> tuple[int, int]:
    """(parts, row blocks per part) of the backward-weights reduction.

    dy's rows are taken in blocks of ``th`` rows of one image (the last block of an image
    may be shorter), N * ceil(Ho / th) blocks in all, cut into ``parts`` contiguous runs;
    pass 1 sums each run for every (k, r, s), pass 2 adds the runs in order. Parts are
    added until there are ``wrw_items_per_cu`` work-items (or groups) per compute unit,
    while each part keeps at least ``wrw_min_elems`` dy elements and their partial sums
    (4 * parts * K * R * S bytes) fit ``workspace_limit``. One part means one pass,
    writing dw directly.
    """
    p, prm = problem, PARAMS[kind]
    units = p.n * -(-p.ho // prm.th)
    per_part = 4 * p.k * p.r * p.s
    most = max(1, units // max(1, -(-prm.wrw_min_elems // (p.wo * prm.th))))
    parts = min(most, -(-prm.wrw_items_per_cu * compute_units // p.k))
    if workspace_limit is not None:
        parts = min(parts, workspace_limit // per_part)
    if parts < 2:
        return 1, units
    upp = -(-units // parts)
    return -(-units // upp), upp


def _i32(*values):
    return tuple(np.int32(v) for v in values)


def _plane_launch(kind, name, bufs, n, cout, hout, wout, sizes) -> Launch:
    prm = PARAMS[kind]
    blocks = -(-hout // prm.th)
    if prm.gpu:
        glob = (_up(n * cout * blocks * wout, prm.plane_local[0]),)
    else:
        glob = (blocks, _up(cout, prm.plane_local[1]), n)
    return KERNELS.launch(_FILE, name, prm.options, glob, prm.plane_local,
                          bufs + _i32(*sizes))


def plan(problem, kind: str, compute_units: int = 1,
         workspace_limit: int | None = None) -> Plan:
    """The launches that compute ``problem`` on a device of ``kind`` ("cpu" or "gpu")
    with ``compute_units`` compute units, using at most ``workspace_limit`` bytes.

    Raises:
        ValueError: ``problem`` is not depthwise (see :func:`decline_reason`).
    """
    p, prm = problem, PARAMS[kind]
    reason = decline_reason(p)
    if reason:
        raise ValueError(f"direct.depthwise cannot run {p.key}: {reason}")
    m = p.k // p.c
    spec = p.r == p.s == 3 and p.dilation_h == p.dilation_w == 1
    if p.direction == "fwd":
        name = "dw_fwd_any"
        if spec and p.stride_h == p.stride_w in (1, 2):
            name = f"dw_fwd_3x3s{p.stride_h}"
        sizes = (p.n, p.c, p.h, p.w, p.k, p.ho, p.wo, p.r, p.s, p.pad_h, p.pad_w, p.stride_h,
                 p.stride_w, p.dilation_h, p.dilation_w, m, 0)
        return Plan((_plane_launch(kind, name, ("x", "w", "y"), p.n, p.k, p.ho, p.wo,
                                   sizes),), 0, prm.options)
    if p.direction == "bwd":
        common = (p.n, p.k, p.ho, p.wo, p.c, p.h, p.w, p.r, p.s)
        if p.stride_h == p.stride_w == 1:
            name = "dw_fwd_3x3s1" if spec else "dw_fwd_any"
            sizes = common + ((p.r - 1) * p.dilation_h - p.pad_h,
                              (p.s - 1) * p.dilation_w - p.pad_w, 1, 1, p.dilation_h,
                              p.dilation_w, m, 1)
        else:
            name = "dw_bwd_any"
            if not prm.gpu and prm.vw == 8 and spec and p.stride_h == p.stride_w == 2:
                name = "dw_bwd_3x3s2"
            sizes = common + (p.pad_h, p.pad_w, p.stride_h, p.stride_w, p.dilation_h,
                              p.dilation_w, m, 1)
        return Plan((_plane_launch(kind, name, ("y", "w", "x"), p.n, p.c, p.h, p.w,
                                   sizes),), 0, prm.options)
    parts, upp = wrw_split(p, kind, compute_units, workspace_limit)
    krs = p.k * p.r * p.s
    dst = "ws" if parts > 1 else "w"
    args = ("x", "y", dst) + _i32(p.n, p.c, p.h, p.w, p.k, p.ho, p.wo, p.r, p.s, p.pad_h,
                                  p.pad_w, p.stride_h, p.stride_w, p.dilation_h,
                                  p.dilation_w, m, parts) + (np.int64(upp),)
    if prm.gpu:
        pass1 = KERNELS.launch(_FILE, "dw_wrw", prm.options, (parts * p.k * prm.wrw_local[0],),
                               prm.wrw_local, args)
    else:
        name = "dw_wrw"
        if spec and p.stride_h == p.stride_w in (1, 2):
            name = f"dw_wrw_3x3s{p.stride_h}"
        pass1 = KERNELS.launch(_FILE, name, prm.options, (parts, _up(p.k, prm.wrw_local[1])),
                               prm.wrw_local, args)
    if parts == 1:
        return Plan((pass1,), 0, prm.options)
    pass2 = KERNELS.launch(_FILE, "dw_wrw_sum", prm.options, (_up(krs, prm.sum_local),),
                           (prm.sum_local,), ("ws", "w", np.int32(parts), np.int64(krs)))
    return Plan((pass1, pass2), 4 * parts * krs, prm.options)


def plan_for(problem, device, workspace) -> Plan:
    """:func:`plan` of ``problem`` for ``device``'s kernel family
    (:func:`wticonv.runtime.kit.kernel_family`) in exactly ``workspace`` (a buffer of the
    size ``workspace_size`` answered, or None for 0 bytes): the split of the backward-weights
    reduction follows from its size.

    Raises:
        ValueError: ``workspace`` is not the size the plan needs.
    """
    have = 0 if workspace is None else workspace.size
    pl = plan(problem, kernel_family(device), device.info.compute_units, have)
    if pl.workspace != have:
        raise ValueError(f"direct.depthwise: {problem.key} needs a workspace of "
                         f"{pl.workspace} bytes, got {have}")
    return pl
