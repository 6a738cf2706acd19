"""Fit ``direct.chanvec``'s efficiency constants to measured runs.

    python tools/fit_chanvec.py CALIBRATE.csv [...]

The inputs are ``wticonv calibrate --csv`` files of CPUs (they carry each run's device
figures; ``wticonv evaluate --csv`` files do not); only the rows of ``direct.chanvec``
are used. For each run
the efficiency ``e`` that makes the plan's modelled time
(:func:`wticonv.runtime.kit.launches_seconds` of :func:`wticonv_direct.chanvec_plan.plan`,
with the row's device figures) equal the measured time is found by bisection; runs whose
measured time is below the model's floor (its launches and packing at any efficiency)
are left out and counted. Then each direction's constants are chosen on a grid to
minimize the rms of ``log(model e / implied e)`` over its runs (wticonv_direct.chanvec):

- forward: ``BLOCK_EFFICIENCY[block] x q / (q + REDUCTION_HALF + TAP_OVERHEAD x R x S)``,
  ``q = C/G x R x S``: one set of constants over every run; the solver keeps a second
  (``ONE_BLOCK_EFFICIENCY``, ``ONE_BLOCK_REDUCTION_HALF``) for the problems whose forward
  runs one block a work-item (``chanvec_plan.fwd_split``), and the "current constants"
  line scores the solver's own model, each run on its path's constants;
- backward weights: ``WRW_EFFICIENCY[block] x L / (rows x (Wo + WRW_ROW_OVERHEAD) +
  WRW_ITEM_OVERHEAD) x fill x used x (WRW_POINTWISE for 1x1 filters)``, rows = N x Ho,
  L = rows x Wo, fill and used as :func:`chanvec.wrw_fill_used` computes them (known,
  not fitted), the model uncapped; and with them ``chanvec_plan.PACK_BYTES_FACTOR``, the packing pass's
  share of the bandwidth (the implied efficiencies are found again for each value).

Prints per direction the fit, the current constants' error, and the implied efficiency
by reduction length (forward) or filter (backward weights).

Fit only on calibration probes; the test networks judge the
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
ROWS = (0, 1, 2, 4, 8)
ITEMS = (0, 8, 16, 32, 64, 128, 256)
PACKS = (1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0)
POINTWISE = tuple(np.round(np.arange(0.50, 1.21, 0.05), 2))
GRID = np.round(np.arange(0.30, 1.60, 0.02), 2)
#: The columns of a calibrate CSV the fit reads.
NEEDED = ("problem", "solver", "measured_ms", "kind", "compute_units", "peak_flops",
          "bandwidth", "launch_overhead_s", "vector_width")


def implied(rows):
    """[(problem, block, implied efficiency, compute units, vector width)] of the runs
    above the model's floor (each planned for its own device's vector width: AVX2's
    blocks are not AVX-512's), and the number left out."""
    out, floor = [], 0
    for r in rows:
        p = parse_key(r["problem"])
        units, width = int(r["compute_units"]), int(r["vector_width"])
        dev = RecordingDevice("cpu", compute_units=units, peak_flops=float(r["peak_flops"]),
                              bandwidth=float(r["bandwidth"]),
                              launch_overhead_s=float(r["launch_overhead_s"]),
                              vector_width=width)
        measured = float(r["measured_ms"]) / 1e3
        lo, hi = E_LOW, E_HIGH
        for _ in range(60):
            mid = math.sqrt(lo * hi)
            if launches_seconds(chanvec_plan.plan(p, mid, width), dev) > measured:
                lo = mid
            else:
                hi = mid
        if not E_LOW * 1.01 < mid < E_HIGH * 0.99:
            floor += 1
            continue
        out.append((p, chanvec_plan.block(p, width), mid, units, width))
    return out, floor


def fwd_errors(data, block_eff, half, tap):
    return np.array([math.log(block_eff[b] * q / (q + half + tap * rs) / e)
                     for b, q, rs, e in data])


def wrw_errors(data, block_eff, row, pointwise, item):
    return np.array([math.log(block_eff[b] * rows * wo / (rows * (wo + row) + item) * known
                              * (pointwise if rs == 1 else 1.0) / e)
                     for b, wo, rs, rows, known, e in data])


def _best_blocks(data, blocks, err):
    """Per block the grid value with the least squared error of its own runs (the blocks'
    constants separate), given ``err(subset, {block: value})``."""
    return {b: min(GRID, key=lambda g: float(np.sum(err([d for d in data if d[0] == b],
                                                         {b: g}) ** 2)))
            for b in blocks}


def fit_fwd(runs) -> None:
    # backward data runs the forward kernel on its forward view (chanvec_plan.forward_view)
    views = [chanvec_plan.forward_view(p) for p, *_ in runs]
    data = [(b, (f.c // f.groups) * f.r * f.s, f.r * f.s, e)
            for f, (_, b, e, _, _) in zip(views, runs)]
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
            eff = _best_blocks(data, blocks, lambda sub, be: fwd_errors(sub, be, half, tap))
            rms = float(np.sqrt(np.mean(fwd_errors(data, eff, half, tap) ** 2)))
            if best is None or rms < best[0] - 1e-9:
                best = (rms, half, tap, eff)
    rms, half, tap, eff = best
    err = fwd_errors(data, eff, half, tap)
    print(f"fit: BLOCK_EFFICIENCY = {{{', '.join(f'{b}: {e:.2f}' for b, e in eff.items())}}}"
          f", REDUCTION_HALF = {half}, TAP_OVERHEAD = {tap}: rms log error {rms:.3f}, "
          f"median {np.median(err):+.3f}")
    # the solver's own model, each run with the constants of the path its forward view
    # takes (chanvec_plan.fwd_split: 16 positions a work-item or one block)
    now = np.array([math.log(chanvec.efficiency(p, units, width) / e)
                    for p, _, e, units, width in runs])
    sixteen = sum(chanvec_plan.fwd_split(f, r[4])[1] > 1 for f, r in zip(views, runs))
    print(f"{sixteen} of the {len(runs)} runs take the 16-position path, "
          f"{len(runs) - sixteen} one block a work-item")
    print(f"current constants: rms log error {np.sqrt(np.mean(now ** 2)):.3f}, "
          f"median {np.median(now):+.3f}")
    for direction in ("fwd", "bwd"):
        sel = np.array([p.direction == direction for p, *_ in runs])
        if sel.any() and not sel.all():
            print(f"  {direction} alone: {sel.sum()} runs, fitted rms log error "
                  f"{np.sqrt(np.mean(err[sel] ** 2)):.3f}, current "
                  f"{np.sqrt(np.mean(now[sel] ** 2)):.3f}")


def _wrw_data(runs):
    data = []
    for p, b, e, units, width in runs:
        data.append((b, p.wo, p.r * p.s, p.n * p.ho,
                     chanvec.wrw_fill_used(p, units, width), e))
    return data


def _fit_wrw_data(data):
    blocks = sorted({d[0] for d in data})
    best = None
    for row in ROWS:
        for item in ITEMS:
            for pw in POINTWISE:
                eff = _best_blocks(data, blocks,
                                   lambda sub, be: wrw_errors(sub, be, row, pw, item))
                rms = float(np.sqrt(np.mean(wrw_errors(data, eff, row, pw, item) ** 2)))
                if best is None or rms < best[0] - 1e-9:
                    best = (rms, row, item, pw, eff)
    return best


def fit_wrw(rows_csv) -> None:
    best, now = None, None
    for pack in PACKS:
        with _pack_factor(pack):
            runs, _ = implied(rows_csv)
        runs = [r for r in runs if r[0].direction == "wrw"]
        data = _wrw_data(runs)
        fit = _fit_wrw_data(data)
        if best is None or fit[0] < best[0][0] - 1e-9:
            best = (fit, pack, data)
        if pack == chanvec_plan.PACK_BYTES_FACTOR:
            now = data
    (rms, row, item, pw, eff), pack, data = best
    for b in sorted(eff):
        for name, pick in (("1x1 filters", lambda d: d[2] == 1),
                           ("larger filters", lambda d: d[2] > 1)):
            es = np.array([d[5] / d[4] for d in data if d[0] == b and pick(d)])
            if len(es):
                print(f"block {b}, {name}: {len(es):3d} runs, implied efficiency over fill "
                      f"and used channels: median {np.median(es):.3f} "
                      f"(range {es.min():.3f}-{es.max():.3f})")
    err = wrw_errors(data, eff, row, pw, item)
    print(f"fit: WRW_EFFICIENCY = {{{', '.join(f'{b}: {e:.2f}' for b, e in eff.items())}}}"
          f", WRW_ROW_OVERHEAD = {row}, WRW_ITEM_OVERHEAD = {item}, WRW_POINTWISE = "
          f"{pw:.2f}, PACK_BYTES_FACTOR = {pack}: rms log error {rms:.3f}, "
          f"median {np.median(err):+.3f}")
    if now is not None:
        cur = wrw_errors(now, {b: chanvec.WRW_EFFICIENCY[b] for b in eff},
                         chanvec.WRW_ROW_OVERHEAD, chanvec.WRW_POINTWISE,
                         chanvec.WRW_ITEM_OVERHEAD)
        print(f"current constants: rms log error {np.sqrt(np.mean(cur ** 2)):.3f}, "
              f"median {np.median(cur):+.3f}")


class _pack_factor:
    """Sets chanvec_plan.PACK_BYTES_FACTOR for the implied efficiencies, then restores it."""

    def __init__(self, value: float) -> None:
        self.value, self.saved = value, chanvec_plan.PACK_BYTES_FACTOR

    def __enter__(self):
        chanvec_plan.PACK_BYTES_FACTOR = self.value

    def __exit__(self, *exc):
        chanvec_plan.PACK_BYTES_FACTOR = self.saved


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv", nargs="+", help="calibrate or evaluate --csv files")
    args = ap.parse_args(argv)
    rows = []
    for path in args.csv:
        try:
            with open(path, newline="") as f:
                reader = csv.DictReader(f)
                part = list(reader)
                fields = reader.fieldnames or []
        except (OSError, UnicodeDecodeError, csv.Error) as e:
            print(f"fit_chanvec: cannot read {path}: {e}", file=sys.stderr)
            return 2
        missing = [c for c in NEEDED if c not in fields]
        if missing:
            print(f"fit_chanvec: {path} is not a `wticonv calibrate --csv` file: no column "
                  f"{', '.join(missing)}", file=sys.stderr)
            return 2
        rows += [r for r in part
                 if r["solver"] == chanvec.ChanvecSolver.solver_id and r["kind"] == "cpu"]
    if not rows:
        print("fit_chanvec: no CPU runs of direct.chanvec in the files", file=sys.stderr)
        return 1
    runs, floor = implied(rows)
    print(f"{len(rows)} runs, {floor} below the model's floor (left out)")
    fwd = [r for r in runs if r[0].direction in ("fwd", "bwd")]
    if fwd:
        print(f"-- fwd and bwd (the forward kernel): {len(fwd)} runs, "
              f"{sum(r[0].direction == 'bwd' for r in fwd)} of them bwd")
        fit_fwd(fwd)
    wrw = [r for r in rows if r["direction"] == "wrw"]
    if wrw:
        print(f"-- wrw: {sum(r[0].direction == 'wrw' for r in runs)} runs")
        fit_wrw(wrw)
    return 0


if __name__ == "__main__":
    sys.exit(main())
