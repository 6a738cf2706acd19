"""Time immediate-mode selection on the host: a new problem, and one seen before.

Issue #6's targets: a problem seen before under 20 us, a new problem under 500 us, with
every built-in solver installed.

Times ``Handle.select`` on every distinct layer and direction of a network: first the
new problems (each selection ranks every installed solver: their four query hooks, their
launch planning and WTI models, the find-db lookup), then the same problems again (the
handle remembers its selections). Reports the median and the 90th percentile per call.

    python benchmarks/selection_cost.py resnet50 -n 8 [--profile 30]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import wticonv
from wticonv.measuring.bench import parse_directions
from wticonv.workloads.networks import load_network


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("network", nargs="?", default="resnet50")
    ap.add_argument("-n", type=int, default=8)
    ap.add_argument("--device", default=None)
    ap.add_argument("--batches", type=int, default=20,
                    help="batch sizes to try per layer (each one a new problem)")
    ap.add_argument("--profile", type=int, default=0, metavar="TOP",
                    help="after timing, profile the new problems again (more batch sizes) "
                         "and print the TOP functions by own time")
    args = ap.parse_args(argv)
    if args.batches < 1 or args.n < 1:
        ap.error("-n and --batches must be at least 1")
    try:
        net = load_network(args.network, args.n)
        handle = wticonv.Handle(args.device)
    except wticonv.WticonvError as e:
        print(f"selection_cost: error: {str(e).splitlines()[0]}", file=sys.stderr)
        return 2
    base = [layer.problem.with_direction(d) for layer in net.layers
            for d in parse_directions("all")]
    handle.select(base[0])  # imports, first-use set-up
    problems = [p.with_batch(args.n + 1 + b) for b in range(args.batches) for p in base]
    new, seen = [], []
    for p in problems:
        t = time.perf_counter()
        handle.select(p)
        new.append((time.perf_counter() - t) * 1e6)
    for p in problems:
        t = time.perf_counter()
        handle.select(p)
        seen.append((time.perf_counter() - t) * 1e6)
    print(f"{handle.device.info.name}: {len(handle.registry.ids())} solvers, "
          f"{len(problems)} problems ({args.network} layers x directions x batch sizes)")
    for name, xs, target in (("new problem", new, 500.0), ("seen before", seen, 20.0)):
        xs = sorted(xs)
        med, p90 = statistics.median(xs), xs[int(0.9 * (len(xs) - 1))]
        print(f"{name:12}: median {med:8.1f} us, 90th percentile {p90:8.1f} us "
              f"(target < {target:.0f} us: {'met' if med < target else 'NOT met'})")
    if args.profile:
        import cProfile
        import pstats

        again = [p.with_batch(args.n + 1 + args.batches + b) for b in range(args.batches)
                 for p in base]
        prof = cProfile.Profile()
        prof.runcall(lambda: [handle.select(p) for p in again])
        pstats.Stats(prof, stream=sys.stdout).sort_stats("tottime").print_stats(args.profile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
