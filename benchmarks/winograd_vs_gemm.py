"""Winograd vs GEMM and PyTorch on the 3x3 stride-1 layers of ResNet-50 and VGG-16.

Every direction, same run.

Per layer and direction: the kernel time of gemm.im2col, winograd.f2x3, winograd.f4x3 and
winograd.fused_f2x3 (fwd and bwd only; each verified against the float64 reference; best
of the iterations), PyTorch's time
(cuDNN on the GPU with TF32 off, oneDNN on the CPU), and whether the faster Winograd
solver beats gemm.im2col. Summary per direction: the share of layers where Winograd is
faster than GEMM (issue target: >= 80 %), and the geometric mean of (Winograd / PyTorch)
(GPU target: <= 2.0 forward and backward data).

    python benchmarks/winograd_vs_gemm.py -n 8                  # CPU
    python benchmarks/winograd_vs_gemm.py -n 32 --device gpu --json out.json
"""

from __future__ import annotations

import argparse
import json
import math
import sys

from peers import load_torch, torch_timer  # first: sets OpenMP's env before torch loads

import wticonv
from wticonv.measuring.bench import measure
from wticonv.workloads.networks import load_network

SOLVERS = ("gemm.im2col", "winograd.f2x3", "winograd.f4x3", "winograd.fused_f2x3")
WINOGRAD = SOLVERS[1:]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=8)
    ap.add_argument("--device", default=None)
    ap.add_argument("--directions", default="fwd,bwd,wrw")
    ap.add_argument("-i", "--iterations", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=1,
                    help="measure everything this many times and keep each one's best")
    ap.add_argument("--json", default=None)
    ap.add_argument("--no-verify", action="store_true",
                    help="skip the float64 checks (large N: the reference is slow)")
    args = ap.parse_args(argv)
    handle = wticonv.Handle(args.device)
    torch = load_torch(handle)
    kind = "gpu" if handle.device.kind == "gpu" else "cpu"
    layers = []
    for net in ("resnet50", "vgg16"):
        for layer in load_network(net, args.n).layers:
            p = layer.problem
            if (p.r, p.s, p.stride_h, p.stride_w, p.dilation_h) == (3, 3, 1, 1, 1):
                layers.append((net, layer))
    dirs = [d.strip() for d in args.directions.split(",")]
    best: dict = {}
    for rep in range(max(1, args.repeat)):
        for net, layer in layers:
            for d in dirs:
                p = layer.problem.with_direction(d)
                for sid in SOLVERS:
                    if sid == "winograd.fused_f2x3" and d == "wrw":
                        continue  # not fused (the solver declines backward weights)
                    m = measure(handle, p, args.iterations, verify=rep == 0 and not args.no_verify,
                                solver=sid)
                    if not m.ok:
                        print(f"FAILED {sid} {p.key}: {m.error}", file=sys.stderr)
                        continue
                    key = (p.key, sid)
                    best[key] = min(best.get(key, math.inf), min(m.kernel_ms))
    rows = []
    print(f"{handle.device.info.name}, N={args.n}; times in ms (best of "
          f"{args.iterations} x {args.repeat})")
    print(f"{'net':9} {'dir':3} {'key':56} {'gemm':>8} {'f2x3':>8} {'f4x3':>8} {'fused':>8} "
          f"{'torch':>8} {'wino/gemm':>9} {'wino/torch':>10}")
    for net, layer in layers:
        for d in dirs:
            p = layer.problem.with_direction(d)
            t = {sid: best.get((p.key, sid), math.inf) for sid in SOLVERS}
            theirs = min(torch_timer(torch, kind, p, d, args.iterations)
                         for _ in range(max(1, args.repeat)))
            wino = min(t[sid] for sid in WINOGRAD)
            row = dict(net=net, direction=d, key=p.key, gemm_ms=t["gemm.im2col"],
                       f2x3_ms=t["winograd.f2x3"], f4x3_ms=t["winograd.f4x3"],
                       fused_ms=t["winograd.fused_f2x3"] if d != "wrw" else None,
                       torch_ms=theirs, wino_vs_gemm=wino / t["gemm.im2col"],
                       wino_vs_torch=wino / theirs)
            rows.append(row)
            times = " ".join(f"{t[sid]:8.3f}" if t[sid] < math.inf else f"{'-':>8}"
                             for sid in SOLVERS)
            print(f"{net:9} {d:3} {p.key:56} {times} {theirs:8.3f} "
                  f"{row['wino_vs_gemm']:9.2f} {row['wino_vs_torch']:10.2f}", flush=True)
    summary = {}
    for d in dirs:
        sel = [r for r in rows if r["direction"] == d]
        faster = sum(r["wino_vs_gemm"] < 1 for r in sel)
        gm = math.exp(sum(math.log(r["wino_vs_torch"]) for r in sel) / len(sel))
        summary[d] = {"faster_than_gemm": faster, "layers": len(sel),
                      "share_faster": faster / len(sel), "geomean_vs_torch": gm}
        print(f"{d}: Winograd faster than gemm.im2col on {faster} of {len(sel)} layers "
              f"({faster / len(sel) * 100:.0f} %); geometric mean Winograd/PyTorch {gm:.3f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": handle.device.info.name, "n": args.n, "rows": rows,
                       "summary": summary}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
