"""The direct plugin's targets, side by side in one run (issue #5).

Three parts, each printed as a table with a verdict line:

- ``tiled``: direct.tiled against direct.naive on every distinct ResNet-50 layer, in every
  requested direction (target: at least 10x faster on every layer).
- ``depthwise``: direct.depthwise against PyTorch's depthwise convolution (oneDNN on the
  CPU, cuDNN on the GPU) on MobileNetV2's depthwise layers, forward (targets: faster on
  the CPU at N=8, within 2x on the GPU at N=32).
- ``first``: ResNet-50's first layer (3 -> 64, 7x7 stride 2) with direct.tiled against
  gemm.im2col, forward and backward weights (target: faster on both devices).

Every wticonv figure is kernel time from OpenCL profiling events, the best of
``--iterations`` runs, repeated ``--repeat`` times spread over the run (a shared machine's
slow spells last seconds; the minimum is the fairest figure for every side). The first
run of each solver on each layer is verified against the float64 reference
(``--no-verify`` skips it).

    python benchmarks/direct_solvers.py -n 8                       # CPU (PoCL)
    python benchmarks/direct_solvers.py -n 32 --device gpu --json out.json
    python benchmarks/direct_solvers.py --parts tiled --directions wrw
"""

from __future__ import annotations

import argparse
import json
import math
import sys

from peers import load_torch, torch_timer  # first: sets OpenMP's env before torch loads

import wticonv
from wticonv.measuring.bench import measure, parse_directions
from wticonv.workloads.networks import load_network

PARTS = ("tiled", "depthwise", "first")


def _best(handle, p, solver, iterations, repeat, verify):
    """Best kernel ms of ``solver`` on ``p`` over ``repeat`` x ``iterations`` runs; the
    verification error of the first run (None when not verified)."""
    times, error, ok = [], None, True
    for rep in range(repeat):
        m = measure(handle, p, iterations, verify=verify and rep == 0, solver=solver)
        times.extend(m.kernel_ms)
        if rep == 0:
            error, ok = m.error, m.ok
    return min(times), error, ok


def _gmean(values):
    values = list(values)
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else math.nan


def part_tiled(handle, args, rows):
    net = load_network("resnet50", args.n)
    dirs = parse_directions(args.directions)
    print(f"\n== direct.tiled vs direct.naive, ResNet-50 N={args.n} ==")
    print(f"{'layer':16} {'dir':3} {'key':58} {'naive ms':>9} {'tiled ms':>9} {'speedup':>8} "
          f"{'%peak':>6}")
    worst = {}
    for layer in net.layers:
        for d in dirs:
            p = layer.problem.with_direction(d)
            t_naive, e1, ok1 = _best(handle, p, "direct.naive", args.iterations,
                                     args.repeat, args.verify)
            t_tiled, e2, ok2 = _best(handle, p, "direct.tiled", args.iterations,
                                     args.repeat, args.verify)
            speedup = t_naive / t_tiled
            frac = p.flops / (t_tiled * 1e-3) / handle.device.peak_flops
            worst[d] = min(worst.get(d, math.inf), speedup)
            rows.append(dict(part="tiled", layer=layer.name, direction=d, key=p.key,
                             naive_ms=t_naive, tiled_ms=t_tiled, speedup=speedup,
                             peak_fraction=frac, error=e2, ok=ok1 and ok2))
            print(f"{layer.name[:16]:16} {d:3} {p.key:58} {t_naive:9.3f} {t_tiled:9.3f} "
                  f"{speedup:7.1f}x {frac * 100:5.1f}%" + ("" if ok1 and ok2 else " FAILED"),
                  flush=True)
    for d, w in worst.items():
        sel = [r["speedup"] for r in rows if r["part"] == "tiled" and r["direction"] == d]
        print(f"{d}: smallest speedup {w:.1f}x, geometric mean {_gmean(sel):.1f}x "
              f"(target >= 10x on every layer: {'met' if w >= 10 else 'NOT met'})")


def part_depthwise(handle, torch, kind, args, rows):
    net = load_network("mobilenetv2", args.n)
    print(f"\n== direct.depthwise vs PyTorch ({'cuDNN' if kind == 'gpu' else 'oneDNN'}), "
          f"MobileNetV2 depthwise layers N={args.n}, fwd ==")
    print(f"{'layer':16} {'key':60} {'ours ms':>9} {'torch ms':>9} {'ratio':>6} {'GB/s':>7}")
    ratios = []
    for layer in net.layers:
        p = layer.problem.with_direction("fwd")
        if not (p.groups > 1 and p.groups == p.c):
            continue
        ours, err, ok = _best(handle, p, "direct.depthwise", args.iterations, args.repeat,
                              args.verify)
        theirs = min(torch_timer(torch, kind, p, "fwd", args.iterations)
                     for _ in range(args.repeat))
        moved = 4 * (p.n * p.c * p.h * p.w + p.n * p.k * p.ho * p.wo)
        ratios.append(ours / theirs)
        rows.append(dict(part="depthwise", layer=layer.name, direction="fwd", key=p.key,
                         ours_ms=ours, torch_ms=theirs, ratio=ours / theirs,
                         gbps=moved / (ours * 1e-3) / 1e9, error=err, ok=ok))
        print(f"{layer.name[:16]:16} {p.key:60} {ours:9.3f} {theirs:9.3f} "
              f"{ours / theirs:6.2f} {moved / (ours * 1e-3) / 1e9:7.1f}"
              + ("" if ok else " FAILED"), flush=True)
    target = 2.0 if kind == "gpu" else 1.0
    print(f"depthwise fwd: geometric mean ours/torch {_gmean(ratios):.3f}, worst "
          f"{max(ratios):.3f} (target: {'within 2x' if kind == 'gpu' else 'faster'}: "
          f"{'met' if _gmean(ratios) <= target else 'NOT met'} on the mean, "
          f"{'met' if max(ratios) <= target else 'NOT met'} on every layer)")


def part_first(handle, args, rows):
    p0 = load_network("resnet50", args.n).layers[0].problem
    print(f"\n== ResNet-50 conv1 ({p0.key}) ==")
    print(f"{'dir':3} {'direct.tiled ms':>16} {'gemm.im2col ms':>15} {'tiled faster by':>16}")
    for d in ("fwd", "wrw"):
        p = p0.with_direction(d)
        t_tiled, e1, ok1 = _best(handle, p, "direct.tiled", args.iterations, args.repeat,
                                 args.verify)
        t_gemm, e2, ok2 = _best(handle, p, "gemm.im2col", args.iterations, args.repeat,
                                args.verify)
        rows.append(dict(part="first", direction=d, key=p.key, tiled_ms=t_tiled,
                         im2col_ms=t_gemm, ratio=t_gemm / t_tiled, ok=ok1 and ok2))
        print(f"{d:3} {t_tiled:16.3f} {t_gemm:15.3f} {t_gemm / t_tiled:15.2f}x"
              + ("" if ok1 and ok2 else " FAILED"), flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=8, help="batch size N (default 8)")
    ap.add_argument("--parts", default=",".join(PARTS), help=f"any of {', '.join(PARTS)}")
    ap.add_argument("--directions", default="fwd,bwd,wrw", help="for the tiled part")
    ap.add_argument("--device", default=None, help="wticonv device spec (gpu, cpu, P:D)")
    ap.add_argument("-i", "--iterations", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--no-verify", dest="verify", action="store_false")
    ap.add_argument("--json", default=None, help="also write every row to this file")
    args = ap.parse_args(argv)
    parts = [s.strip() for s in args.parts.split(",") if s.strip()]
    if bad := [s for s in parts if s not in PARTS]:
        ap.error(f"unknown part(s) {', '.join(bad)}; choose from {', '.join(PARTS)}")
    if args.n < 1 or args.iterations < 1 or args.repeat < 1:
        ap.error("-n, -i and --repeat must be at least 1")
    handle = wticonv.Handle(args.device)
    kind = "gpu" if handle.device.kind == "gpu" else "cpu"
    torch = load_torch(handle) if "depthwise" in parts else None
    print(f"{handle.device.info.name} (peak {handle.device.peak_flops / 1e12:.3f} TFLOP/s, "
          f"{handle.device.bandwidth / 1e9:.0f} GB/s), N={args.n}")
    rows: list[dict] = []
    if "tiled" in parts:
        part_tiled(handle, args, rows)
    if "depthwise" in parts:
        part_depthwise(handle, torch, kind, args, rows)
    if "first" in parts:
        part_first(handle, args, rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": handle.device.info.name, "n": args.n,
                       "peak_flops": handle.device.peak_flops,
                       "torch": getattr(torch, "__version__", None), "rows": rows}, f,
                      indent=1)
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
