"""Each launch of gemm.im2col's plan timed alone on problems, and its column pass against
the device's bandwidth: how many times its traffic's time the buffer pass takes (the
factors of ``wticonv_gemm.plan``: ``STRIDED_COL_PASS_FACTOR``, ``ROW_PASS_FACTOR``).

    python benchmarks/col_pass_times.py KEY [KEY ...] [-i ITER] [--solver ID]

KEY is a find-db key (``wticonv explain`` prints them). The traffic of the first launch
(the column or row buffer pass) is the buffer written plus x read, in bytes (C R S Ho Wo
+ C H W floats per image, as the plan counts it); its time is the best of ``-i`` runs
(OpenCL profiling, each launch's own time).
"""

from __future__ import annotations

import argparse
import sys

import wticonv
from wticonv.problem.conv import parse_key
from wticonv.testing.buffers import device_tensors, random_data


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("keys", nargs="+")
    ap.add_argument("-i", "--iterations", type=int, default=5)
    ap.add_argument("--solver", default="gemm.im2col")
    ap.add_argument("--device", default=None)
    args = ap.parse_args(argv)
    h = wticonv.Handle(args.device)
    dev = h.device
    print(f"{args.solver} on {dev.info.name}, bandwidth {dev.bandwidth / 1e9:.1f} GB/s; "
          "launch times in ms, best of", args.iterations)
    for key in args.keys:
        p = parse_key(key)
        with device_tensors(dev, p, random_data(p)) as t:
            best = None
            for _ in range(args.iterations):
                with dev.profile() as prof:
                    h.run(p, t.tensors, solver=args.solver)
                times = []
                for ev in prof.events:
                    ev.wait()
                    times.append((ev.profile.end - ev.profile.start) * 1e-6)
                if best is None or sum(times) < sum(best):
                    best = times
        traffic = p.n * (p.c * p.r * p.s * p.ho * p.wo + p.c * p.h * p.w) * 4
        ratio = best[0] * 1e-3 / (traffic / dev.bandwidth)
        print(f"{key}: {' '.join(f'{x:.2f}' for x in best)} (total {sum(best):.2f}); "
              f"first launch {ratio:.2f}x its traffic's time ({traffic / 1e6:.0f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
