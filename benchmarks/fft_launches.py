"""Per-launch times of the FFT solvers against their plan's predicted costs.

    python benchmarks/fft_launches.py --keys KEYS.txt --out launches.csv [--solver fft.tiled]
    python benchmarks/fft_launches.py --networks alexnet,inception3 -n 32 --out l.csv

For fitting the transforms' cost constants (``wticonv_fft.plan.TRANSFORM_COST``,
``FFT_EFFICIENCY``) and checking the per-bin GEMMs' predictions: each problem is run
with the solver's chosen plan, every kernel timed by its OpenCL profiling event (fastest
of ``-i`` runs), and written beside the plan's cost fields for that launch (kernel name,
FLOPs, efficiency, bytes, predicted seconds of :func:`wticonv_gemm.wti.predict_seconds`
for that launch alone, the launch overhead included). One CSV row per (problem, solver,
launch). Problems the solver declines are skipped with their reason on stderr.

``--networks`` takes built-in or corpus network names (``dev``, ``test`` or ``all`` for
the corpus's splits); ``--min-filter`` (default 3) leaves out smaller filters.
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
import time

COLUMNS = ("problem", "direction", "solver", "tile", "launch", "kernel", "flops",
           "efficiency", "bytes", "cost", "predicted_s", "measured_s", "device", "kind",
           "peak_flops", "bandwidth", "launch_overhead_s")


def problems(args) -> list:
    from wticonv.measuring.bench import parse_directions
    from wticonv.problem.conv import parse_key
    from wticonv.workloads.networks import corpus_networks, load_network

    out: dict = {}
    if args.keys:
        with open(args.keys) as f:
            for ln in f:
                ln = ln.split("#")[0].strip()
                if ln:
                    out.setdefault(parse_key(ln))
    for spec in filter(None, args.networks.split(",")):
        names = ([c.name for c in corpus_networks(None if spec == "all" else spec)]
                 if spec in ("dev", "test", "all") else [spec])
        for name in names:
            for layer in load_network(name, args.n).layers:
                for d in parse_directions(args.directions):
                    out.setdefault(layer.problem.with_direction(d))
    return [p for p in out if max(p.r, p.s) >= args.min_filter]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", help="file of problem keys, one per line (# comments)")
    ap.add_argument("--networks", default="", help="comma-separated network names")
    ap.add_argument("-n", type=int, default=32, help="batch size of --networks (default 32)")
    ap.add_argument("--directions", default="fwd,bwd,wrw")
    ap.add_argument("--min-filter", type=int, default=3, metavar="SIDE",
                    help="leave out problems whose filter sides are both below SIDE")
    ap.add_argument("--solver", action="append", default=None,
                    help="solver id (repeatable; default every installed fft solver)")
    ap.add_argument("-i", "--iterations", type=int, default=5)
    ap.add_argument("--device", default=None)
    ap.add_argument("--budget-s", type=float, default=float("inf"))
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    if not (args.keys or args.networks):
        ap.error("give --keys or --networks")

    import wticonv
    from wticonv.errors import WticonvError
    from wticonv.measuring.timing import problem_tensors
    from wticonv.runtime.kit import kernel_family, launch_overhead_s
    from wticonv_fft import plan, tiled
    from wticonv_gemm.wti import predict_seconds

    handle = wticonv.Handle(args.device)
    dev = handle.device
    solvers = {"fft.tiled": tiled.solver, "fft.tiled_3xtf32": tiled.solver_3xtf32}
    ids = args.solver or [s for s in solvers if s in handle.registry.ids()]
    unknown = [s for s in ids if s not in solvers]
    if unknown:
        ap.error(f"--solver {unknown[0]}: not an FFT solver ({', '.join(solvers)})")
    overhead = launch_overhead_s(dev)
    t0 = time.monotonic()
    todo = problems(args)
    with open(args.out, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        for k, p in enumerate(todo):
            if time.monotonic() - t0 > args.budget_s:
                print(f"budget spent after {k} of {len(todo)} problems", file=sys.stderr)
                break
            for sid in ids:
                s = solvers[sid]
                ok = s.is_applicable(p, dev, None)
                if ok is not True:
                    print(f"{p.key} {sid}: declined ({ok})", file=sys.stderr)
                    continue
                size = s.workspace_size(p, dev, None)
                t, _layout, launches = s._choice(p, dev, size)
                best = [math.inf] * len(launches)
                try:
                    ws = dev.alloc(max(size, 4))
                except WticonvError as e:
                    print(f"{p.key} {sid}: skipped ({e})", file=sys.stderr)
                    continue
                try:
                    with problem_tensors(handle, p) as tens:
                        for _ in range(args.iterations):
                            with dev.profile() as prof:
                                s.run(p, dev, tens, ws)
                            evs = prof.events
                            for ev in evs:
                                ev.wait()
                            if len(evs) != len(launches):
                                sys.exit(f"{p.key} {sid}: {len(evs)} kernels ran for "
                                         f"{len(launches)} planned launches")
                            for j, ev in enumerate(evs):
                                best[j] = min(best[j], (ev.profile.end - ev.profile.start) * 1e-9)
                except WticonvError as e:
                    print(f"{p.key} {sid}: skipped ({e})", file=sys.stderr)
                    continue
                finally:
                    ws.release()
                for j, (ln, m) in enumerate(zip(launches, best, strict=True)):
                    cost = plan.TRANSFORM_COST[kernel_family(dev)].get(ln.kernel, {}).get(t, 1)
                    w.writerow([p.key, p.direction, sid, t, j, ln.kernel, ln.flops,
                                f"{ln.efficiency:.4g}", ln.bytes, cost,
                                f"{predict_seconds([ln], dev):.6g}", f"{m:.6g}", dev.info.name,
                                dev.kind, f"{dev.peak_flops:.6g}", f"{dev.bandwidth:.6g}",
                                f"{overhead:.6g}"])
            f.flush()
            if k % 20 == 0:
                print(f"[{k + 1}/{len(todo)}] {time.monotonic() - t0:5.0f} s {p.key}",
                      file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
