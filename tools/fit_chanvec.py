"""Fit ``direct.chanvec``'s efficiency constants to measured runs.

    python tools/fit_chanvec.py CALIBRATE.csv [...]

The inputs are ``wticonv calibrate --csv`` files (or ``wticonv evaluate --csv`` files of
development networks) of CPUs; only the rows of ``direct.chanvec`` are used. For each run
the efficiency ``e`` that makes the plan's modelled time
(:func:`wticonv.runtime.kit.launches_seconds` of :func:`wticonv_direct.chanvec_plan.plan`,
with the row's device figures) equal the measured time is found by bisection; runs whose
measured time is below the model's floor (its launches and packing at any efficiency)
are left out and counted. Then ``BLOCK_EFFICIENCY`` (per register block),
``REDUCTION_HALF`` and ``TAP_OVERHEAD`` are chosen on a grid to minimize the rms of
``log(model e / implied e)``, the model being
``BLOCK_EFFICIENCY[block] x q / (q + REDUCTION_HALF + TAP_OVERHEAD x R x S)``,
``q = C/G x R x S`` (wticonv_direct.chanvec). Prints the fit, the current constants' error, and the implied
efficiency by reduction length.

Fit only on calibration probes and development networks; the test networks judge the
result (``benchmarks/evaluate_after_calibrate.sh``, ``tools/heldout.py --split test``).
"""

from __future__ import annotations

import argparse
import csv
import math
import sys

import numpy as np

from wticonv.problem.conv import parse_key
from wticonv.runtime.kit import launches_seconds
from wticonv.testing.launches import RecordingDevice
from wticonv_direct import chanvec, chanvec_plan

#: The bisection's bounds on the implied efficiency; a run at a bound is left out.
E_LOW, E_HIGH = 1e-3, 5.0
HALVES = (10, 20, 30, 40, 50, 60, 80, 100, 120, 150, 200)
TAPS = (0, 1, 2, 3, 5, 10)
GRID = np.round(np.arange(0.30, 1.60, 0.02), 2)


def implied(rows):
    """[(block, q, R x S, implied efficiency)] of the runs above the model's floor, and
    the number left out."""
    out, floor = [], 0
    for r in rows:
        p = parse_key(r["problem"])
        dev = RecordingDevice("cpu", compute_units=int(r["compute_units"]),
                              peak_flops=float(r["peak_flops"]),
                              bandwidth=float(r["bandwidth"]),
                              launch_overhead_s=float(r["launch_overhead_s"]),
                              vector_width=int(r["vector_width"]))
        measured = float(r["measured_ms"]) / 1e3
        lo, hi = E_LOW, E_HIGH
        for _ in range(60):
            mid = math.sqrt(lo * hi)
            if launches_seconds(chanvec_plan.plan(p, mid), dev) > measured:
                lo = mid
            else:
                hi = mid
        if not E_LOW * 1.01 < mid < E_HIGH * 0.99:
            floor += 1
            continue
        out.append((chanvec_plan.block(p), (p.c // p.groups) * p.r * p.s, p.r * p.s, mid))
    return out, floor


def errors(data, block_eff, half, tap):
    return np.array([math.log(block_eff[b] * q / (q + half + tap * rs) / e)
                     for b, q, rs, e in data])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv", nargs="+", help="calibrate or evaluate --csv files")
    args = ap.parse_args(argv)
    rows = []
    for path in args.csv:
        with open(path, newline="") as f:
            rows += [r for r in csv.DictReader(f)
                     if r["solver"] == chanvec.ChanvecSolver.solver_id and r["kind"] == "cpu"]
    if not rows:
        print("fit_chanvec: no CPU runs of direct.chanvec in the files", file=sys.stderr)
        return 1
    data, floor = implied(rows)
    print(f"{len(rows)} runs, {floor} below the model's floor (left out)")
    blocks = sorted({d[0] for d in data})
    for b in blocks:
        qs = np.array([d[1] for d in data if d[0] == b])
        es = np.array([d[3] for d in data if d[0] == b])
        print(f"block {b}: {len(qs)} runs")
        for lo, hi in ((0, 64), (64, 160), (160, 400), (400, 1200), (1200, 10**9)):
            m = (qs >= lo) & (qs < hi)
            if m.any():
                print(f"  q in [{lo}, {hi}): {m.sum():3d} runs, implied efficiency median "
                      f"{np.median(es[m]):.3f} (range {es[m].min():.3f}-{es[m].max():.3f})")
    best = None
    for half in HALVES:
        for tap in TAPS:
            # the blocks' constants separate: each minimizes its own runs' squared error
            eff = {}
            for b in blocks:
                sub = [d for d in data if d[0] == b]
                eff[b] = min(GRID, key=lambda g: float(np.sum(
                    errors(sub, {b: g}, half, tap) ** 2)))
            rms = float(np.sqrt(np.mean(errors(data, eff, half, tap) ** 2)))
            if best is None or rms < best[0] - 1e-9:
                best = (rms, half, tap, eff)
    rms, half, tap, eff = best
    err = errors(data, eff, half, tap)
    print(f"fit: BLOCK_EFFICIENCY = {{{', '.join(f'{b}: {e:.2f}' for b, e in eff.items())}}}"
          f", REDUCTION_HALF = {half}, TAP_OVERHEAD = {tap}: rms log error {rms:.3f}, "
          f"median {np.median(err):+.3f}")
    now = errors(data, {b: chanvec.BLOCK_EFFICIENCY[b] for b in blocks},
                 chanvec.REDUCTION_HALF, chanvec.TAP_OVERHEAD)
    print(f"current constants: rms log error {np.sqrt(np.mean(now ** 2)):.3f}, "
          f"median {np.median(now):+.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
