"""direct.chanvec's kernel (output channels in the vector lanes,
``wticonv_direct/kernels/chanvec.cl``) in several register blocks against every solver,
on the small-picture layers where the CPU kernels lost most to oneDNN (issue 21;
docs/performance.md, "channels in the lanes"). The experiment that chose the solver's
blocks.

    python benchmarks/chanvec_fwd.py [KEY ...] [--rounds 3] [--configs 4x4x4,4x2x4,8x1x2]
        [--order plan|positions|channels] [--json F]

Rounds are interleaved: per round and layer, ``wticonv.measuring.find.find`` times the
installed solvers (nothing is recorded; direct.naive, fft.tiled, winograd.fused_f2x3 and
winograd.rxs are left out: far slower on these layers; direct.chanvec is among them, in
the block its plan picks), then the kernel in each
configuration ``PBxKV[xSUB]`` (positions per block x vectors of 16 channels x blocks per
work-item, CHANVEC_SUB: 1 if not given; PB x SUB must be 16 where SUB > 1). Each keeps its
best time over the rounds, since the 2-core machines here have slow spells of seconds. The
kernel's outputs are checked against a float64 reference at 64 sampled outputs.
Forward only, NCHW, FP32; K/G must be a multiple of 16*KV.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

SKIP = "direct.naive,fft.tiled,winograd.fused_f2x3,winograd.rxs"
#: ResNet-50's forward layers with a 7x7 picture and its 14x14 1x1 layers, and ResNeXt-50's
#: grouped 3x3 layers on 7x7 and 14x14 (N=8)
LAYERS = [
    "512-14-14-3x3-512-7-7-8-1x1-2x2-1x1-0-NCHW-FP32-F",
    "512-7-7-3x3-512-7-7-8-1x1-1x1-1x1-0-NCHW-FP32-F",
    "1024-14-14-1x1-2048-7-7-8-0x0-2x2-1x1-0-NCHW-FP32-F",
    "2048-7-7-1x1-512-7-7-8-0x0-1x1-1x1-0-NCHW-FP32-F",
    "512-7-7-1x1-2048-7-7-8-0x0-1x1-1x1-0-NCHW-FP32-F",
    "256-14-14-1x1-1024-14-14-8-0x0-1x1-1x1-0-NCHW-FP32-F",
    "1024-14-14-1x1-256-14-14-8-0x0-1x1-1x1-0-NCHW-FP32-F",
    "1024-14-14-3x3-1024-7-7-8-1x1-2x2-1x1-0-NCHW-FP32-F_g32",
    "1024-7-7-3x3-1024-7-7-8-1x1-1x1-1x1-0-NCHW-FP32-F_g32",
    "512-14-14-3x3-512-14-14-8-1x1-1x1-1x1-0-NCHW-FP32-F_g32",
]


def chanvec(device, program_cache, p, pb: int, kv: int, iterations: int, extra: str = "",
            kb_fast: bool | None = None, sub: int = 1):
    """(best ms, max relative error) of the kernel on problem ``p`` (``extra``: more build
    options; ``kb_fast``: the grid's order, channel blocks first or not, None: as the
    solver's plan picks it, chanvec_plan.kb_fast); None if K/G is not a multiple of
    16*kv."""
    import pyopencl as cl

    kg, cg = p.k // p.groups, p.c // p.groups
    kb = 16 * kv
    if kg % kb:
        return None
    key = (pb, kv, sub, extra)
    if key not in program_cache:
        from wticonv_direct.programs import KERNELS

        program_cache[key] = cl.Program(device.context, KERNELS.source("chanvec.cl")).build(
            options=f"-DCHANVEC_PB={pb} -DCHANVEC_KV={kv} -DCHANVEC_SUB={sub} {extra}")
    prg = program_cache[key]
    rng = np.random.default_rng(0)
    x = rng.standard_normal((p.n, p.c, p.h, p.w), dtype=np.float32)
    w = rng.standard_normal((p.k, cg, p.r, p.s), dtype=np.float32)
    # packed: [block of kb output channels][c][r][s][kb]
    wp = np.ascontiguousarray(w.reshape(p.k // kb, kb, cg, p.r, p.s).transpose(0, 2, 3, 4, 1))
    bx, bw = device.upload(x), device.upload(wp)
    by = device.alloc(4 * p.n * p.k * p.ho * p.wo)
    grid = (-(-(p.n * p.ho * p.wo) // (pb * sub)), p.k // kb)
    if kb_fast is None:
        from wticonv_direct import chanvec_plan

        blk = chanvec_plan.block(p)
        planned = blk is not None and (*chanvec_plan.FWD_BLOCKS[blk], blk[1]) == (pb, sub, kv)
        kb_fast = chanvec_plan.kb_fast(p) if planned else False
    kb_fast = int(kb_fast)
    if kb_fast:
        grid = grid[::-1]
    args = [bx, bw, by] + [np.int32(v) for v in (p.n, p.c, p.h, p.w, p.k, p.r, p.s, p.ho,
                                                  p.wo, p.stride_h, p.stride_w, p.pad_h,
                                                  p.pad_w, p.groups, kb_fast)]
    times = []
    for _ in range(iterations + 1):
        ev = prg.chanvec_fwd(device.queue, grid, (1, 1), *args)
        ev.wait()
        times.append((ev.profile.end - ev.profile.start) * 1e-6)
    y = np.empty((p.n, p.k, p.ho, p.wo), np.float32)
    cl.enqueue_copy(device.queue, y, by)
    for b in (bx, bw, by):
        b.release()
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (p.pad_h, p.pad_h), (p.pad_w, p.pad_w)))
    err = 0.0
    for _ in range(64):
        n, k = rng.integers(p.n), rng.integers(p.k)
        oh, ow = rng.integers(p.ho), rng.integers(p.wo)
        g = k // kg
        patch = xp[n, g * cg:(g + 1) * cg, oh * p.stride_h:oh * p.stride_h + p.r,
                   ow * p.stride_w:ow * p.stride_w + p.s]
        ref = float((patch * w[k]).sum())
        err = max(err, abs(ref - float(y[n, k, oh, ow])) / (abs(ref) + 1.0))
    return min(times[1:]), err


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("keys", nargs="*", default=LAYERS, metavar="KEY")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("-i", "--iterations", type=int, default=5)
    ap.add_argument("--configs", default="4x4x4,4x2x4,8x1x2",
                    help="comma-separated PBxKV[xSUB], each optionally followed by "
                         ":NAME=VALUE macros joined with + (4x4x4:CHANVEC_ROWS_CG=0); "
                         "default 4x4x4,4x2x4,8x1x2 (the solver's 16-position splits; "
                         "6x4, 12x2, 12x1 are its one-block ones)")
    ap.add_argument("--order", choices=("plan", "positions", "channels"), default="plan",
                    help="the kernel's grid: as the solver's plan orders it (default), "
                         "position blocks first, or channel blocks first")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    os.environ["WTICONV_DISABLE_SOLVERS"] = SKIP
    import wticonv
    from wticonv.measuring.find import find
    from wticonv.problem.conv import parse_key
    from wticonv.runtime.device import select_device

    handle = wticonv.Handle(select_device(args.device))
    configs = []
    for c in args.configs.split(","):
        block, _, macros = c.partition(":")
        pb, kv, sub = ([int(v) for v in block.split("x")] + [1])[:3]
        extra = " ".join(f"-D{m}" for m in macros.split("+") if m)
        configs.append((pb, kv, sub, extra, c))
    best: dict = {}
    errors: dict = {}
    cache: dict = {}
    for rnd in range(args.rounds):
        for key in args.keys:
            p = parse_key(key)
            for r in find(handle, p, args.iterations, 200.0, None, record=False,
                          search=False):
                if r.time_ms is not None:
                    best.setdefault((key, r.solver_id), []).append(r.time_ms)
            for pb, kv, sub, extra, name in configs:
                order = {"plan": None, "positions": False, "channels": True}[args.order]
                out = chanvec(handle.device, cache, p, pb, kv, args.iterations, extra, order,
                              sub)
                if out is not None:
                    best.setdefault((key, f"chanvec {name}"), []).append(out[0])
                    errors[(key, pb, kv, sub, extra)] = out[1]
        print(f"round {rnd + 1} of {args.rounds} done", file=sys.stderr)
    rows = []
    print(f"{handle.device.info.name}: best of {args.rounds} interleaved rounds, ms")
    for key in args.keys:
        p = parse_key(key)
        times = {s: min(v) for (k, s), v in best.items() if k == key}
        ours = {s: t for s, t in times.items() if not s.startswith("chanvec")}
        fastest = min(ours, key=ours.get) if ours else None
        kern = {s: t for s, t in times.items() if s.startswith("chanvec")}
        top = min(kern, key=kern.get) if kern else None
        gflops = p.flops / (kern[top] * 1e6) if top else float("nan")
        err = max((e for (k, *_), e in errors.items() if k == key), default=float("nan"))
        line = (f"{key:56} fastest solver {fastest} {ours.get(fastest, float('nan')):7.2f}"
                + (f" | {top} {kern[top]:7.2f} ({gflops:.0f} GFLOP/s, "
                   f"{ours[fastest] / kern[top]:.2f}x) err {err:.1e}" if top and fastest
                   else " | chanvec: K/G not a multiple of 16*KV")
                + ("".join(f"\n    {name}: {t:.2f}" for name, t in sorted(kern.items()))
                   if len(kern) > 1 else ""))
        print(line)
        rows.append({"problem": key, "solvers": ours, "chanvec": kern, "max_rel_err": err})
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
