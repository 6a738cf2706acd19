"""wticonv against PyTorch (oneDNN on the CPU, cuDNN on the GPU), layer by layer, in one run.

For every distinct conv layer of a network and every requested direction: wticonv's
immediate-mode choice (or a forced solver) is verified against the float64 reference and
timed (the best kernel time of the iterations, OpenCL profiling events); PyTorch's FP32 convolution of the
same shape is timed on its own device (``torch.nn.functional.conv2d``,
``torch.nn.grad.conv2d_input``, ``torch.nn.grad.conv2d_weight``; CUDA events on the GPU
with TF32 off, wall clock on the CPU), also the best of the iterations: on shared
machines the other tenants only ever make a run slower, so the minimum is the fairest
figure for both sides. Printed per layer: both times, the ratio
(ours / PyTorch), our TFLOP/s and fraction of the device's measured peak; then geometric
means of the ratio, over all layers and over the 1x1 layers. ``--math tf32`` admits our
TF32 solvers and turns cuDNN's TF32 on (both sides in TF32 where they choose it).

    pip install torch==2.13.0          # benchmark-only dependency (CPU build here)
    python benchmarks/conv_vs_torch.py resnet50 -n 8 --directions fwd
    python benchmarks/conv_vs_torch.py resnet50 -n 32 --device gpu --json out.json
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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("network")
    ap.add_argument("-n", type=int, default=8)
    ap.add_argument("--directions", default="fwd")
    ap.add_argument("--device", default=None, help="wticonv device spec (gpu, cpu, P:D)")
    ap.add_argument("--solver", default=None, help="force a wticonv solver id")
    ap.add_argument("-i", "--iterations", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=1,
                    help="measure every layer this many times, spread over the run, on both "
                         "sides, and keep each side's best (a shared machine's slow spells "
                         "last seconds)")
    ap.add_argument("--math", choices=("fp32", "tf32"), default="fp32",
                    help="fp32 (default): FP32-accurate solvers only (fp32 and 3xtf32) "
                         "against PyTorch with TF32 off; tf32: TF32 solvers too "
                         "(allow_tf32), against cuDNN with TF32 on, PyTorch's default for "
                         "convolutions")
    ap.add_argument("--json", default=None, help="also write every row to this file")
    args = ap.parse_args(argv)
    if args.n < 1 or args.iterations < 1:
        ap.error("-n and -i must be at least 1")
    try:
        net = load_network(args.network, args.n)
        dirs = parse_directions(args.directions)
    except (wticonv.WticonvError, ValueError) as e:
        ap.error(str(e))
    try:
        handle = wticonv.Handle(args.device, allow_tf32=args.math == "tf32")
    except wticonv.WticonvError as e:
        ap.error(str(e))
    torch = load_torch(handle)
    torch.backends.cudnn.allow_tf32 = args.math == "tf32"
    kind = "gpu" if handle.device.kind == "gpu" else "cpu"
    peak = handle.device.peak_flops
    rows = []
    print(f"{args.network} N={args.n} on {handle.device.info.name} "
          f"(peak {peak / 1e12:.3f} TFLOP/s) vs PyTorch {torch.__version__} on {kind}, "
          f"math {args.math}")
    jobs = [(layer, d) for layer in net.layers for d in dirs]
    ours = [None] * len(jobs)
    for rep in range(max(1, args.repeat)):  # wticonv first, all layers, then PyTorch
        for i, (layer, d) in enumerate(jobs):
            p = layer.problem.with_direction(d)
            m = measure(handle, p, args.iterations, verify=rep == 0, solver=args.solver)
            if ours[i] is None:
                ours[i] = m
            else:
                ours[i].kernel_ms.extend(m.kernel_ms)
    print(f"{'layer':16} {'dir':3} {'key':58} {'solver':12} {'ours ms':>9} {'torch ms':>9} "
          f"{'ratio':>6} {'TFLOP/s':>8} {'%peak':>6} {'err':>8}")
    for (layer, d), m in zip(jobs, ours):
        p = layer.problem.with_direction(d)
        t_ours = min(m.kernel_ms)
        theirs = min(torch_timer(torch, kind, p, d, args.iterations)
                     for _ in range(max(1, args.repeat)))
        tflops = p.flops / (t_ours * 1e-3) / 1e12
        row = dict(layer=layer.name, direction=d, key=p.key, solver=m.solver_id,
                   ours_ms=t_ours, torch_ms=theirs, ratio=t_ours / theirs, tflops=tflops,
                   peak_fraction=tflops * 1e12 / peak, error=m.error, ok=bool(m.ok),
                   is_1x1=p.r == 1 and p.s == 1, count=layer.count)
        rows.append(row)
        print(f"{layer.name[:16]:16} {d:3} {p.key:58} {m.solver_id:12} {t_ours:9.3f} "
              f"{theirs:9.3f} {row['ratio']:6.2f} {tflops:8.3f} "
              f"{row['peak_fraction'] * 100:5.1f}% {m.error:8.1e}"
              + ("" if m.ok else "  FAILED"), flush=True)

    def gmean(values):
        values = list(values)
        return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None

    summary = {}
    for d in parse_directions(args.directions):
        sel = [r for r in rows if r["direction"] == d]
        summary[d] = {"geomean_ratio": gmean(r["ratio"] for r in sel),
                      "geomean_ratio_1x1": gmean(r["ratio"] for r in sel if r["is_1x1"]),
                      "layers": len(sel)}
        g1 = summary[d]["geomean_ratio_1x1"]
        print(f"{d}: geometric mean of ours/torch over {len(sel)} layers = "
              f"{summary[d]['geomean_ratio']:.3f}; over the 1x1 layers = "
              + (f"{g1:.3f}" if g1 is not None else "- (none)"))
    allr = gmean(r["ratio"] for r in rows)
    print(f"all directions: geometric mean ours/torch = {allr:.3f}; failures: "
          f"{sum(not r['ok'] for r in rows)}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": handle.device.info.name, "peak_flops": peak,
                       "math": args.math,
                       "torch": torch.__version__, "network": args.network, "n": args.n,
                       "rows": rows, "summary": summary, "geomean_all": allr}, f, indent=1)
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
