"""Problems whose tensors pass 2^31 elements, run for real by every candidate solver
(issue #8: "run correctly on a device with the memory, or declined with a reason").

Two problems, each in fwd, bwd and wrw: a 1x1 layer (N=17, C=K=8, 4096x4096: x and y of
2.28e9 elements, 9.1 GB each) and a 3x3 one (N=33, C=K=4, 4096x4096, pad 1: 2.21e9).
For each direction, every solver immediate mode lists as a candidate is forced in turn;
its result is compared with the float64 reference (wticonv.problem.reference) on the first and
the last image (the last lies past element 2^31) for fwd and bwd, and on the whole
reduction for wrw (rms_range under 1e-4, wrw 1e-3). Solvers that decline are listed
with their reason. Needs about 40 GB of host memory and a device whose largest buffer
holds 9.1 GB (the H200's holds 35 GB; the development machines' CPU device 8 GB, where
every solver declines and the script says so).

    python benchmarks/large_tensors.py --device gpu --json out.json
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

import wticonv
from wticonv import ConvProblem
from wticonv.problem.reference import conv_bwd, conv_fwd, conv_wrw, rms_range

PROBLEMS = {
    "1x1": ConvProblem(17, 8, 4096, 4096, 8, 1, 1),
    "3x3": ConvProblem(33, 4, 4096, 4096, 4, 3, 3, pad_h=1, pad_w=1),
}


def _error(p, d, r, x, w, dy) -> float:
    if d == "wrw":
        ref = np.zeros(p.w_shape)
        for n0 in range(0, p.n, 4):
            ref += conv_wrw(x[n0:n0 + 4], dy[n0:n0 + 4], p.with_batch(min(4, p.n - n0)))
        return rms_range(r, ref)
    one = p.with_batch(1)
    errs = []
    for n0 in (0, p.n - 1):
        ref = (conv_fwd(x[n0:n0 + 1], w, one) if d == "fwd"
               else conv_bwd(dy[n0:n0 + 1], w, one))
        errs.append(rms_range(r[n0:n0 + 1], ref))
    return max(errs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default=None, help="device spec (default: WTICONV_DEVICE "
                    "or the default device)")
    ap.add_argument("--json", default=None, help="write every result here")
    args = ap.parse_args()
    h = wticonv.Handle(args.device)
    print(h.device, "largest buffer", h.device.info.max_alloc_bytes, "bytes", flush=True)
    rng = np.random.default_rng(1)
    results = []
    for name, base in PROBLEMS.items():
        print(name, base.key, "x elements", int(np.prod(base.x_shape)), flush=True)
        try:
            h.select(base)
        except wticonv.WticonvError as e:   # nothing fits: say why, make no data
            print(f"  no candidate: {e}", flush=True)
            results.append((name, "fwd", None, "declined", str(e)))
            continue
        x = rng.standard_normal(base.x_shape, dtype=np.float32)
        dy = rng.standard_normal(base.y_shape, dtype=np.float32)
        w = rng.standard_normal(base.w_shape, dtype=np.float32)
        for d in ("fwd", "bwd", "wrw"):
            p = base.with_direction(d)
            try:
                sel = h.select(p)
            except wticonv.WticonvError as e:
                print(f"  {d}: no candidate: {e}", flush=True)
                results.append((name, d, None, "declined", str(e)))
                continue
            for v in sel.verdicts:
                if not v.applicable or v.reason:
                    print(f"  {d}: {v.solver_id} declined: {v.reason}")
            for v in sel.candidates:
                t = time.time()
                try:
                    r = h.compute(p, x=None if d == "bwd" else x, w=None if d == "wrw" else w,
                                  y=None if d == "fwd" else dy, solver=v.solver_id)
                except wticonv.WticonvError as e:
                    print(f"  {d}: {v.solver_id} FAILED: {e}", flush=True)
                    results.append((name, d, v.solver_id, "failed", str(e)))
                    continue
                err = _error(p, d, r, x, w, dy)
                ok = err < (1e-3 if d == "wrw" else 1e-4)
                print(f"  {d}: {v.solver_id} rms_range {err:.2e} {'OK' if ok else 'WRONG'} "
                      f"({time.time() - t:.1f} s)", flush=True)
                results.append((name, d, v.solver_id, "ok" if ok else "wrong", err))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    bad = [r for r in results if r[3] in ("wrong", "failed")]
    print(f"{len(results)} runs, {len(bad)} wrong or failed")
    raise SystemExit(1 if bad else 0)


if __name__ == "__main__":
    main()
