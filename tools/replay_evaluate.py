"""Replay a calibration and an evaluation against the WTI models in this checkout.

For developing WTI models without the device: ``wticonv calibrate --csv CAL.csv`` and
``wticonv evaluate NETWORK --csv EVAL.csv`` record what the device measured; this script
re-predicts every solver with the current source (on a stand-in device with the measured
device's compute units, peak and bandwidth), refits the calibration factors from the
probe measurements exactly as ``wticonv calibrate`` does (wticonv.calibrate.fit_factors),
lets immediate mode choose (wticonv.selection.select, calibrated, find-db ignored) and
scores each choice by the measured times, as ``wticonv evaluate`` does.

    python tools/replay_evaluate.py --calibration cal.csv evaluate-inception3-n32-h200.csv

A replay is exact while a model change leaves the measured solvers' kernels as they were;
a change that makes a tunable solver pick another perf config by default is replayed with
the time measured for the old default, so such changes need a real evaluation.
"""

from __future__ import annotations

import argparse
import collections
import csv
import statistics
import sys

from wticonv import keys
from wticonv.calibrate import fit_factors
from wticonv.plugins import SolverRegistry
from wticonv.selection import select
from wticonv.testing.launches import RecordingDevice


class _FactorStore:
    """The part of a Store that selection reads: calibration factors, no perf-db."""

    def __init__(self, registry, factors):
        self._factors = {key: (registry.solvers[key.split("@")[0]].version, f)
                         for key, (f, _) in factors.items()
                         if key.split("@")[0] in registry.solvers}

    def get_calibration(self, device_key):
        return self._factors

    def get_perf_records(self, device_key):
        return {}


def _read(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def raw_predictions(registry, device, problem):
    """``{solver id: raw predicted ms}`` of the solvers immediate mode could choose."""
    sel = select(registry, problem, device, measured=False, calibrated=False)
    return {v.solver_id: v.predicted_ms for v in sel.verdicts
            if v.applicable and v.predicted_ms}


def replay(registry, device, cal_rows, eval_rows, verbose=False, label=""):
    """Refit the factors from ``cal_rows``, choose for every case of ``eval_rows`` and
    return ``(share within 10 %, mean slowdown, misses)``; misses are ``(slowdown,
    problem key, chosen, fastest)``."""
    runs = []
    for r in cal_rows:
        p = keys.parse_key(r["problem"])
        pred = raw_predictions(registry, device, p).get(r["solver"])
        if pred:
            runs.append((p, r["solver"], pred, float(r["measured_ms"])))
    device.store = _FactorStore(registry, fit_factors(runs))
    measured = collections.defaultdict(dict)
    for r in eval_rows:
        if r["measured_ms"]:
            measured[r["problem"]][r["solver"]] = float(r["measured_ms"])
    slowdowns, misses = [], []
    for key, times in measured.items():
        p = keys.parse_key(key)
        chosen = select(registry, p, device, measured=False).solver_id
        t = times.get(chosen)
        if t is None:
            continue
        best = min(min(times.values()), t)
        s = t / best
        slowdowns.append(s)
        if s > 1.1:
            misses.append((s, key, chosen, min(times, key=times.get)))
    within = sum(s <= 1.1 for s in slowdowns) / len(slowdowns)
    mean = statistics.mean(slowdowns)
    print(f"{label}: {len(slowdowns)} cases, within 10 % {within:.1%}, mean {mean:.3f}, "
          f"worst {max(slowdowns):.2f}")
    if verbose:
        for s, key, chosen, fastest in sorted(misses, reverse=True):
            print(f"    {s:5.2f} {key} chose {chosen}, fastest {fastest}")
    return within, mean, misses


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("evaluations", nargs="+", help="evaluate --csv files")
    ap.add_argument("--calibration", required=True, help="calibrate --csv file")
    ap.add_argument("--kind", choices=("gpu", "cpu"), default="gpu")
    ap.add_argument("--compute-units", type=int, default=None,
                    help="default: 132 for gpu (H200), 2 for cpu")
    ap.add_argument("--peak", type=float, default=None,
                    help="the measured device's FP32 FLOP/s, as `wticonv devices` shows it "
                         "(default: an H200's; a CPU's differs from machine to machine)")
    ap.add_argument("--bandwidth", type=float, default=None,
                    help="the measured device's bytes/s, as `wticonv devices` shows it")
    ap.add_argument("-v", "--verbose", action="store_true", help="list the misses")
    args = ap.parse_args(argv)
    registry = SolverRegistry()
    device = RecordingDevice(args.kind, compute_units=args.compute_units,
                             peak_flops=args.peak, bandwidth=args.bandwidth)
    cal = _read(args.calibration)
    for path in args.evaluations:
        replay(registry, device, cal, _read(path), args.verbose, label=path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
