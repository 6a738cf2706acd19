"""Every applicable solver's error on every layer of a network, each direction, against
the float64 reference, next to its declared tolerance: which solver the fallback chose,
and which solvers miss their own tolerance on real shapes.

The error is MIOpen's rms_range (:func:`wticonv.problem.reference.rms_range`) of the
solver's float32 result against :func:`wticonv.problem.reference.reference` on the same
random inputs (standard normal, one seed per layer). TF32-only solvers are left out
unless ``--tf32``.

    python benchmarks/solver_errors.py resnet18 -n 2 --device gpu [--json F]

Prints one line per layer, direction and solver (``*`` marks the fallback's choice,
``!`` an error above the declared tolerance) and exits 1 if any solver missed its own.
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np
import wticonv
from wticonv.problem.reference import reference, rms_range
from wticonv.workloads.networks import load_network


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("network")
    ap.add_argument("-n", type=int, default=2)
    ap.add_argument("--device", default=None, help="gpu, cpu or P:D")
    ap.add_argument("--directions", default="fwd,bwd,wrw")
    ap.add_argument("--tf32", action="store_true", help="TF32-only solvers too")
    ap.add_argument("--json", default=None, help="write the rows to this file")
    args = ap.parse_args(argv)
    handle = wticonv.Handle(args.device, allow_tf32=args.tf32)
    net = load_network(args.network, args.n)
    print(f"{args.network} N={args.n} on {handle.device.info.name}")
    rows, missed = [], 0
    seen = set()
    for li, layer in enumerate(net.layers):
        for d in args.directions.split(","):
            p = layer.problem.with_direction(d)
            if p.key in seen:
                continue
            seen.add(p.key)
            rng = np.random.default_rng(li)
            x = rng.standard_normal(p.x_shape, dtype=np.float32)
            w = rng.standard_normal(p.w_shape, dtype=np.float32)
            y = rng.standard_normal(p.y_shape, dtype=np.float32)
            ref = reference(p, x.astype(np.float64), w.astype(np.float64),
                            y.astype(np.float64))
            sel = handle.select(p)
            for v in sel.candidates:
                tol = handle.registry.solvers[v.solver_id].tolerance
                try:
                    out = handle.compute(p, x, w, y, solver=v.solver_id)
                    err = rms_range(out, ref)
                except wticonv.WticonvError as e:
                    print(f"  {p.key} {v.solver_id}: failed: {e}")
                    continue
                bad = tol is not None and not err <= tol
                missed += bad
                mark = ("*" if v.solver_id == sel.solver_id else " ") + ("!" if bad else " ")
                print(f"{mark} {layer.name[:14]:14} {d} {p.key:58} {v.solver_id:22} "
                      f"err {err:.2e}  tol {tol if tol is not None else '-'}")
                rows.append({"layer": layer.name, "direction": d, "key": p.key,
                             "solver": v.solver_id, "chosen": v.solver_id == sel.solver_id,
                             "error": err, "tolerance": tol})
    print(f"{missed} solver run(s) above their declared tolerance")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
