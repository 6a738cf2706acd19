"""Replay a calibration and an evaluation against the WTI models in this checkout.

For developing WTI models without the device: ``wticonv calibrate --csv CAL.csv`` and
``wticonv evaluate NETWORK --csv EVAL.csv`` record what the device measured; this script
re-predicts every solver with the current source (on a stand-in device with the measured
device's compute units, peak and bandwidth), refits the calibration factors from the
probe measurements exactly as ``wticonv calibrate`` does (wticonv.measuring.calibrate.fit_factors
and wticonv.measuring.correction_fit.fit_correction),
lets immediate mode choose (wticonv.selection.ranking.select, calibrated, find-db ignored) and
scores each choice by the measured times, as ``wticonv evaluate`` does.

    python tools/replay_evaluate.py --calibration cal.csv evaluate-inception3-n32-h200.csv

``--fit-from OTHER.csv`` fits the calibration to another device's probes instead (each
predicted with that device's figures) and applies it on this one: whether a calibration
travels, as a system database's device pattern makes it (docs/fleet.md);
``--uncalibrated`` replays the raw models.

It prints, per evaluation, what ``wticonv evaluate`` prints on its "fallback" line (cases,
share within 10 % of the best, top-1, mean and worst slowdown); ``-v`` lists the misses.

A replay is exact while a model change leaves the measured solvers' kernels as they were;
a change that makes a tunable solver pick another perf config by default is replayed with
the time measured for the old default, so such changes need a real evaluation.
"""

from __future__ import annotations

import argparse
import collections
import csv
import math
import statistics
import sys
from typing import NamedTuple

from wticonv.errors import KeyFormatError
from wticonv.problem.conv import parse_key
from wticonv.measuring.calibrate import fit_factors
from wticonv.measuring.correction_fit import fit_correction
from wticonv.selection.correction import FEATURES
from wticonv.contract.registry import SolverRegistry
from wticonv.selection.ranking import select
from wticonv.testing.launches import RecordingDevice


class FitStore:
    """The part of a Store that selection reads: calibration factors and learned
    corrections (as ``wticonv calibrate`` stores them), no perf-db."""

    def __init__(self, registry, factors=None, correction=None):
        ver = {sid: e.version for sid, e in registry.solvers.items()}
        self._factors = {k: (ver[k.split("@")[0]], f) for k, (f, _) in (factors or {}).items()
                         if k.split("@")[0] in ver}
        self._models = {sid: (ver[sid], FEATURES, coef)
                        for sid, (coef, _) in (correction or {}).items() if sid in ver}

    def get_calibration(self, device_key):
        return self._factors

    def get_correction(self, device_key):
        return self._models

    def get_perf_records(self, device_key):
        return {}


class ReplayError(Exception):
    """A file or an option the replay cannot use; the message says which and why."""


#: Columns each kind of file must have (``calibrate --csv``, ``evaluate --csv``).
CALIBRATION_COLUMNS = ("problem", "solver", "predicted_ms", "measured_ms")
EVALUATION_COLUMNS = ("problem", "solver", "measured_ms", "fallback_choice", "fastest")


def _read(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def load(path, kind: str) -> list[dict]:
    """The rows of a ``calibrate --csv`` (``kind`` "calibration") or ``evaluate --csv``
    ("evaluation") file, or of either or ``benchmarks/measure_corpus.py`` ("measurements"),
    checked: readable, the columns of that kind of file, at least one
    row, valid problem keys and times.

    Raises
    ------
    ReplayError
        Saying which file and what is wrong with it.
    """
    want = {"calibration": CALIBRATION_COLUMNS, "evaluation": EVALUATION_COLUMNS,
            "measurements": ("problem", "solver", "measured_ms")}[kind]
    try:
        rows = _read(path)
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise ReplayError(f"{path}: cannot be read as a CSV file ({e})") from None
    cols = set(rows[0]) if rows else set()
    if kind == "calibration" and "fallback_choice" in cols:
        raise ReplayError(f"{path} is an `evaluate --csv` file; --calibration takes the file "
                          "of `wticonv calibrate --csv`")
    missing = [c for c in want if c not in cols]
    if missing:
        other = {"calibration": "`wticonv calibrate --csv`",
                 "evaluation": "`wticonv evaluate --csv`",
                 "measurements": "`wticonv calibrate --csv`, `wticonv evaluate --csv` or "
                                 "benchmarks/measure_corpus.py"}[kind]
        raise ReplayError(f"{path}: {'no rows' if not rows else 'no column ' + ', '.join(missing)}"
                          f"; expected the file of {other}")
    for i, r in enumerate(rows, start=2):
        try:
            parse_key(r["problem"])
            t = float(r["measured_ms"]) if r["measured_ms"] else None
            if kind == "calibration":
                float(r["predicted_ms"])
        except (KeyFormatError, ValueError) as e:
            raise ReplayError(f"{path}, line {i}: {e}") from None
        if t is None and kind == "calibration":
            raise ReplayError(f"{path}, line {i}: no measured_ms (every probe run of a "
                              "calibration is measured)")
        if t is not None and not 0 < t < float("inf"):
            raise ReplayError(f"{path}, line {i}: measured_ms must be a positive finite "
                              f"number, not {r['measured_ms']}")
        if (r.get("device"), r.get("kind")) != (rows[0].get("device"), rows[0].get("kind")):
            raise ReplayError(f"{path}, line {i}: measured on {r.get('device')} "
                              f"({r.get('kind')}), line 2 on {rows[0].get('device')} "
                              f"({rows[0].get('kind')}): one device per file")
    return rows


def device_for(cal_rows, kind=None, compute_units=None, peak=None, bandwidth=None,
               vector_width=None, registry=None, launch_overhead=None):
    """The stand-in device a replay predicts on: the figures recorded in the calibration
    rows (``calibrate --csv`` writes kind, compute units, peak, bandwidth and launch
    overhead), overridden by the arguments given; files without them take the arguments
    or an H200's (GPU) or a 2-core CPU's figures. A GPU whose rows hold runs of a
    tensor-core solver (one whose declared math class, in ``registry`` or the installed
    solvers', is not ``fp32``: only a device with tensor cores runs them) had them: its
    stand-in gets an NVIDIA compute capability (:data:`TENSOR_CORE_STAND_IN`), so those
    solvers are predicted and chosen in the replay as on the device.

    Raises
    ------
    ReplayError
        A figure that cannot be right (a peak under 1 GFLOP/s: GFLOP/s given where FLOP/s
        are meant), or a ``kind`` other than the calibration's.
    """
    rec = cal_rows[0] if cal_rows else {}
    rec_kind = rec.get("kind") or None
    if kind and rec_kind and kind != rec_kind:
        raise ReplayError(f"the calibration was measured on a {rec_kind} device "
                          f"({rec.get('device')}); --kind {kind} does not match it")
    kind = kind or rec_kind or "gpu"

    def number(column, cast):
        try:
            return cast(rec[column]) if rec.get(column) else None
        except ValueError:
            raise ReplayError(f"the calibration's {column} {rec[column]!r} is not a "
                              f"{'whole ' if cast is int else ''}number") from None

    def figure(given, column, least, unit, example):
        value = given if given is not None else number(column, float)
        if value is not None and not math.isfinite(value):
            raise ReplayError(f"{column.replace('_', ' ')} {value:g} is not a finite "
                              f"number of {unit}")
        if value is not None and not value >= least:
            raise ReplayError(f"{column.replace('_', ' ')} {value:g} is too small: give "
                              f"{unit} (e.g. {example}), not G{unit}")
        return value

    peak = figure(peak, "peak_flops", 1e9, "FLOP/s", "4.49e11")
    bandwidth = figure(bandwidth, "bandwidth", 1e8, "bytes/s", "6.05e10")
    if compute_units is not None and compute_units < 1:
        raise ReplayError(f"--compute-units {compute_units} must be at least 1")
    cu = compute_units or number("compute_units", int)
    overhead = launch_overhead if launch_overhead is not None else number(
        "launch_overhead_s", float)
    if overhead is not None and not 0 < overhead < 1:
        raise ReplayError(f"launch overhead {overhead:g} s cannot be right: the column "
                          "launch_overhead_s holds seconds per launch (e.g. 1.8e-05)")
    # the CPU kernels' plans follow the preferred vector width (files from before the
    # column, without --vector-width: RecordingDevice's default, 16 on CPUs)
    width = vector_width if vector_width is not None else number("vector_width", int)
    if width is not None and width < 1:
        raise ReplayError(f"vector width {width} must be at least 1")
    tc = kind == "gpu" and ran_tensor_cores(cal_rows, registry)
    return RecordingDevice(kind, compute_units=cu, peak_flops=peak, bandwidth=bandwidth,
                           launch_overhead_s=overhead, vector_width=width,
                           compute_capability=TENSOR_CORE_STAND_IN if tc else None)


#: Compute capability of a replay's stand-in for a GPU that ran tensor-core solvers: the
#: major only (8, Ampere: the least :func:`wticonv.runtime.kit.tensor_cores` takes), so no
#: solver's sm_90a-only path (:func:`wticonv.runtime.kit.wgmma`) is assumed from it.
TENSOR_CORE_STAND_IN = (8, None)


def ran_tensor_cores(rows, registry=None) -> bool:
    """Whether ``rows`` hold a run of a solver whose math class is not ``fp32`` in
    ``registry`` (default: the installed solvers); ids it does not know count as FP32."""
    registry = registry or SolverRegistry()
    known = set(registry.ids())
    return any(registry.get(sid).math != "fp32"
               for sid in {r.get("solver") for r in rows} if sid in known)


def raw_predictions(registry, device, problem):
    """``{solver id: raw predicted ms}`` of the solvers immediate mode could choose."""
    sel = select(registry, problem, device, measured=False, calibrated=False)
    return {v.solver_id: v.predicted_ms for v in sel.verdicts
            if v.applicable and v.predicted_ms}


def calibration_runs(registry, device, cal_rows) -> list:
    """The runs ``(problem, solver id, raw predicted ms, measured ms)`` that ``wticonv
    calibrate`` fits, from the rows of its CSV: each probe predicted on ``device`` with
    this checkout's models (rows of solvers not installed or not predicted are left out)."""
    runs, predicted = [], {}
    for r in cal_rows:
        p = parse_key(r["problem"])
        if r["problem"] not in predicted:       # one ranking per probe, not per solver row
            predicted[r["problem"]] = raw_predictions(registry, device, p)
        pred = predicted[r["problem"]].get(r["solver"])
        if pred:
            runs.append((p, r["solver"], pred, float(r["measured_ms"])))
    return runs


def replay(registry, device, cal_rows, eval_rows, verbose=False, label="",
           fit_device=None):
    """Refit the factors from ``cal_rows``, choose for every case of ``eval_rows`` and
    return ``(share within 10 %, mean slowdown, misses)``; misses are ``(slowdown,
    problem key, chosen, fastest)``. ``fit_device``: the device ``cal_rows`` were
    measured on, when it is not the evaluation's ``device`` (a calibration that travels
    to another device, as a system database's device pattern makes it); no ``cal_rows``:
    no calibration."""
    fit_device = fit_device or device
    runs = calibration_runs(registry, fit_device, cal_rows)
    device.store = FitStore(registry, fit_factors(runs),
                            fit_correction(runs, fit_device) if runs else {})
    measured = collections.defaultdict(dict)
    counts = {}
    for r in eval_rows:
        if r["measured_ms"]:
            measured[r["problem"]][r["solver"]] = float(r["measured_ms"])
            counts[r["problem"]] = float(r.get("count") or 1)
    unknown = sorted({sid for times in measured.values() for sid in times
                      if sid not in registry.solvers})
    if unknown:
        print(f"{label}: warning: solvers not installed here: {', '.join(unknown)}; cases "
              "they were fastest in score against the others", file=sys.stderr)
    slowdowns, misses, skipped = [], [], collections.Counter()
    chosen_time = best_time = 0.0
    for key, times in measured.items():
        p = parse_key(key)
        chosen = select(registry, p, device, measured=False).solver_id
        t = times.get(chosen)
        if t is None:
            skipped[chosen] += 1
            continue
        best = min(min(times.values()), t)
        s = t / best
        slowdowns.append(s)
        chosen_time += counts[key] * t
        best_time += counts[key] * best
        if s > 1.1:
            misses.append((s, key, chosen, min(times, key=times.get)))
    if skipped:
        print(f"{label}: warning: {sum(skipped.values())} case(s) left out, their choice not "
              "measured in the file: " + ", ".join(f"{sid} ({n})" for sid, n in
                                                  sorted(skipped.items())), file=sys.stderr)
    if not slowdowns:
        raise ReplayError(f"{label}: no case whose chosen solver was measured (another "
                          "device kind's evaluation, or other solvers installed?)")
    within = sum(s <= 1.1 for s in slowdowns) / len(slowdowns)
    top1 = sum(s == 1.0 for s in slowdowns) / len(slowdowns)
    mean = statistics.mean(slowdowns)
    weighted = chosen_time / best_time
    print(f"{label}: {len(slowdowns)} cases, within 10 % {within:.1%}, top-1 {top1:.0%}, "
          f"mean {mean:.3f}, worst {max(slowdowns):.2f}, time-weighted {weighted:.3f}")
    if verbose:
        for s, key, chosen, fastest in sorted(misses, reverse=True):
            print(f"    {s:5.2f} {key} chose {chosen}, fastest {fastest}")
    return Replayed(within, mean, misses, len(slowdowns), max(slowdowns), weighted)


class Replayed(NamedTuple):
    """One evaluation file replayed: the share of its cases within 10 % of the fastest,
    the mean slowdown, the misses (as :func:`replay` lists them), the cases, the worst
    slowdown and the time-weighted slowdown (counts from the file's ``count`` column)."""

    within: float
    mean: float
    misses: list
    cases: int
    worst: float
    weighted: float


def overall(results: list[Replayed]) -> str:
    """The line over several files (networks): the share within 10 % over all cases, the
    geometric mean of the time-weighted slowdowns, the worst network, the largest mean
    and the worst case, the figures of the selection-quality targets."""
    cases = sum(r.cases for r in results)
    within = sum(r.within * r.cases for r in results) / cases
    geo = math.exp(statistics.mean(math.log(r.weighted) for r in results))
    return (f"overall: {len(results)} files, {cases} cases; within 10 % {within:.1%}, "
            f"geomean time-weighted {geo:.4f}, worst file {max(r.weighted for r in results):.3f}, "
            f"largest mean {max(r.mean for r in results):.3f}, "
            f"worst case {max(r.worst for r in results):.2f}x")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="The device figures default to those `wticonv calibrate --csv` records in "
               "the calibration file; files without them take the options, else an H200's "
               "(gpu) or a 2-core CPU's (cpu) figures.")
    ap.add_argument("evaluations", nargs="+", metavar="EVAL.csv",
                    help="files of `wticonv evaluate --csv`")
    ap.add_argument("--calibration", required=True, metavar="CAL.csv",
                    help="the file of `wticonv calibrate --csv` measured with them")
    ap.add_argument("--kind", choices=("gpu", "cpu"), default=None,
                    help="the measured device's kind (default: the calibration's, else gpu)")
    ap.add_argument("--compute-units", type=int, default=None,
                    help="its compute units (default: the calibration's, else 132 for gpu "
                         "and 2 for cpu); this and the figures below override the "
                         "calibration's, for what-if replays")
    ap.add_argument("--peak", type=float, default=None, metavar="FLOP/S",
                    help="its measured FP32 peak in FLOP/s, e.g. 4.49e11 (`wticonv devices` "
                         "shows GFLOP/s)")
    ap.add_argument("--bandwidth", type=float, default=None, metavar="BYTES/S",
                    help="its measured bandwidth in bytes/s, e.g. 6.05e10 (`wticonv "
                         "devices` shows GB/s)")
    ap.add_argument("--vector-width", type=int, default=None, metavar="FLOATS",
                    help="its preferred float vector width, which the CPU kernels' plans "
                         "follow (`wticonv devices --json` shows it; default: the "
                         "calibration's vector_width column, else 16 on CPUs)")
    ap.add_argument("--launch-overhead", type=float, default=None, metavar="S",
                    help="seconds each kernel launch costs in the models, e.g. 2e-06 "
                         "(default: the calibration's launch_overhead_s column)")
    ap.add_argument("--fit-from", default=None, metavar="OTHER_CAL.csv",
                    help="fit the calibration to this file's probes (measured on another "
                         "device, and predicted with its figures) instead, and replay the "
                         "evaluation on --calibration's device with it: whether a "
                         "calibration travels (a system database's device pattern)")
    ap.add_argument("--uncalibrated", action="store_true",
                    help="replay without any calibration (the raw WTI models)")
    ap.add_argument("-v", "--verbose", action="store_true", help="list the misses")
    args = ap.parse_args(argv)
    try:
        cal = load(args.calibration, "calibration")
        evaluations = [(path, load(path, "evaluation")) for path in args.evaluations]
        measured_on = (cal[0].get("device"), cal[0].get("kind"))
        for path, rows in evaluations:
            on = (rows[0].get("device"), rows[0].get("kind"))
            if all(measured_on) and all(on) and on != measured_on:
                raise ReplayError(f"{path} was measured on {on[0]} ({on[1]}), the "
                                  f"calibration on {measured_on[0]} ({measured_on[1]}): "
                                  "replay an evaluation with its own device's calibration")
        registry = SolverRegistry()
        device = device_for(cal, args.kind, args.compute_units, args.peak, args.bandwidth,
                            args.vector_width, registry, args.launch_overhead)
        fit_rows, fit_device = cal, None
        if args.fit_from:
            fit_rows = load(args.fit_from, "calibration")
            fit_device = device_for(fit_rows, registry=registry,
                                    launch_overhead=args.launch_overhead)
        results = [replay(registry, device, [] if args.uncalibrated else fit_rows, rows,
                          args.verbose, label=path, fit_device=fit_device)
                   for path, rows in evaluations]
        if len(results) > 1:
            print(overall(results))
    except ReplayError as e:
        print(f"replay_evaluate: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
