"""direct.tiled's perf configs: the kernel builds and splits ``wticonv tune`` searches.

:func:`wticonv_direct.tiled_plan.plan` picks one plan by heuristics and the WTI model (the
default perf config); the names here select one of the others explicitly, so that tuning
can time each and the perf-db can store the fastest. Every perf config computes the same
result and keeps the solver dynamic: the builds depend on the device kind and the config,
never on the problem's sizes.
"""

from __future__ import annotations

from .tiled_plan import (
    CPU,
    CPU_NARROW,
    GPU_LANES,
    GPU_LANES_LOCAL,
    GPU_TILES,
    Plan,
    _cpu_plan,
    _gpu_plan,
    _gpu_split,
    _lens,
    _most_splits,
    maps,
)

__all__ = ["perf_configs", "config_plan", "CPU_MAX_TUNE_SPLITS", "PACK_TUNE_MIN_Q"]

#: CPU backward-weights perf configs split the batch into at most this many parts.
CPU_MAX_TUNE_SPLITS = 64
#: CPU fwd/bwd perf configs with the filter packed are offered from this reduction length
#: (shorter ones gain nothing from packing: the heuristic packs from tiled_plan.PACK_MIN_Q).
PACK_TUNE_MIN_Q = 64


def perf_configs(p, kind: str, compute_units: int, workspace_limit: int | None = None
                 ) -> list[str]:
    """The perf configs of problem ``p`` (names for :func:`config_plan`) whose
    workspace fits ``workspace_limit`` bytes.

    GPUs: each tile build of :data:`GPU_TILES` by name, unsplit, and ``"<tile>/s<n>"``
    with the reduction in ``n`` parts where the unsplit blocks cannot fill the device (the
    model's split and half of it); ``"lanes"`` (tiled_cpu.cl's kernel, 4 channels or
    fewer). CPUs: backward weights ``"s<n>"``, the batch in ``n`` parts (1, 2, 4, ... up to
    N); fwd and bwd ``"v16"`` or ``"v8"`` lanes for every row, each also with ``"+pack"``
    (the filter packed into the workspace first) where the reduction is 64 or longer.
    """
    lens = _lens(p)
    most = _most_splits(p, lens, workspace_limit)
    names = []
    if kind == "cpu":
        if p.direction == "wrw":
            s = 1
            while s <= min(p.n, max(most, 1), CPU_MAX_TUNE_SPLITS):
                per = -(-p.n // s)
                name = f"s{-(-p.n // per)}"
                if name not in names:
                    names.append(name)
                s *= 2
            return names
        long = all(mp.Q >= PACK_TUNE_MIN_Q for mp in maps(p))
        for lanes in ("v16", "v8"):
            names.append(lanes)
            if long and (workspace_limit is None or config_plan(
                    p, kind, lanes + "+pack").workspace_bytes <= workspace_limit):
                names.append(lanes + "+pack")
        return names
    if p.direction != "wrw" and maps(p)[0].M <= GPU_LANES.mr:
        names.append("lanes")
    for tile in GPU_TILES:
        names.append(tile.name)
        s = _gpu_split(p, tile, compute_units, most)
        for n in sorted({s, s // 2}, reverse=True):
            if n > 1:
                names.append(f"{tile.name}/s{n}")
    return names


def config_plan(p, kind: str, config: str) -> Plan:
    """The plan of perf config ``config`` (a name from :func:`perf_configs`) for problem
    ``p`` on a device of ``kind``. The workspace limit is not checked here: perf_configs
    lists only the configs that fit.

    Raises
    ------
    ValueError
        If ``config`` is not a perf config of this device kind and direction.
    """
    lens = _lens(p)
    if kind == "cpu":
        if p.direction == "wrw" and config[:1] == "s" and config[1:].isdigit():
            return _cpu_plan(p, int(config[1:]), lens)
        lanes, _, extra = config.partition("+")
        prm = {"v16": CPU, "v8": CPU_NARROW}.get(lanes)
        if p.direction != "wrw" and prm is not None and extra in ("", "pack"):
            return _cpu_plan(p, 1, lens, prm, pack=extra == "pack", auto_narrow=False)
    elif config == "lanes" and p.direction != "wrw":
        return _cpu_plan(p, 1, lens, GPU_LANES, GPU_LANES_LOCAL)
    else:
        name, _, split = config.partition("/s")
        tile = next((t for t in GPU_TILES if t.name == name), None)
        if tile is not None and (split == "" or split.isdigit() and int(split) > 1):
            return _gpu_plan(p, tile, int(split or 1), lens)
    raise ValueError(f"direct.tiled has no perf config {config!r} for {kind} {p.direction}")


