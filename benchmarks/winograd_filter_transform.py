"""The Winograd filter transform on a CPU: winograd_cpu.cl's vector kernel against the
work-item-per-filter kernel of winograd.cl, on the same device, interleaved.

    python benchmarks/winograd_filter_transform.py [--device cpu] [-i 7] [--rounds 3]

For each 3x3 layer of ResNet-50 (N=8, forward and backward data) and each of F(2x2,3x3)
and F(4x4,3x3), runs the first launch of the CPU plan (``filter_transform_vec``) and of
the GPU plan (``filter_transform``, work-groups of 64) in turn, ``--rounds`` times, and
prints each kernel's fastest run (OpenCL profiling events) in ms, the ratio new / old, and
the bytes the transform moves (filters read, U written) over its time in GB/s.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("-i", "--iterations", type=int, default=7)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)

    import wticonv
    from wticonv.runtime import kit
    from wticonv.workloads.networks import load_network
    from wticonv_winograd import plan as wplan
    from wticonv_winograd.base import _pieces_buffer
    from wticonv_winograd.f2x3 import solver as f2x3
    from wticonv_winograd.f4x3 import solver as f4x3

    handle = wticonv.Handle(device=args.device)
    dev = handle.device
    layers = {layer.problem.with_direction("fwd") for layer in load_network("resnet50", 8).layers
              if (layer.problem.r, layer.problem.s) == (3, 3) and layer.problem.stride_h == 1}
    print(f"{dev.info.name}: fastest of {args.iterations} runs x {args.rounds} rounds, ms")
    print(f"{'layer':<52} {'dir':>3} {'variant':>7} {'old':>7} {'new':>7} {'new/old':>7} "
          f"{'GB/s new':>8}")
    for p0 in sorted(layers, key=lambda p: (p.c * p.k, p.h)):
        for direction in ("fwd", "bwd"):
            p = p0.with_direction(direction)
            for name, solver in (("f2x3", f2x3), ("f4x3", f4x3)):
                v = solver.covers(p)
                w = dev.upload(np.random.default_rng(0).uniform(-1, 1, p.w_shape)
                               .astype(np.float32))
                best = {"cpu": float("inf"), "gpu": float("inf")}
                runs = {}
                for kind in best:
                    layout = wplan.workspace_layout(p, v, kind, dev.info.compute_units, 2**34)
                    first = wplan.plan(p, v, kind, dev.info.compute_units, layout,
                                       dev.info.vector_width)[0]
                    bufs = {"w": w, "ws": dev.alloc(layout.bytes),
                            "pc": _pieces_buffer(dev, p, v)}
                    runs[kind] = (first, bufs)
                for _ in range(args.rounds):
                    for kind, (first, bufs) in runs.items():
                        for _ in range(args.iterations):
                            with dev.profile() as prof:
                                kit.enqueue(dev, [first], bufs)
                            for ev in prof.events:
                                ev.wait()
                                best[kind] = min(best[kind],
                                                 (ev.profile.end - ev.profile.start) * 1e-6)
                w.release()                 # "pc" is the solver's cached pieces table
                for _first, bufs in runs.values():
                    bufs["ws"].release()
                geo = wplan.geometry(p, v)
                moved = 4 * (p.k * p.c * 9 + v.positions * geo.O * geo.I)
                print(f"{p.key:<52} {direction:>3} {name:>7} {best['gpu']:7.3f} "
                      f"{best['cpu']:7.3f} {best['cpu'] / best['gpu']:7.2f} "
                      f"{moved / best['cpu'] / 1e6:8.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
