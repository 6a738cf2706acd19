"""Outputs shared by the measuring commands with and without ``--cluster``: files
written with a one-line error, the probe CSV, the evaluation and factor tables."""

from __future__ import annotations

import sys

import click

__all__ = ["PROBE_CSV_COLUMNS", "print_evaluation", "print_factors", "write_output",
           "write_probe_csv"]


def write_output(write, path: str, what: str, quiet: bool = False) -> None:
    """Run ``write(path)`` and say so on stderr (unless ``quiet``); an OSError (the file
    went away or filled the disk during the run) is a one-line error naming the option."""
    try:
        write(path)
    except OSError as e:
        raise click.ClickException(f"{what} {path!r} could not be written: "
                                   f"{e.strerror or e}") from None
    if not quiet:
        print(f"wrote {path}", file=sys.stderr)


#: Columns of ``calibrate --csv``: each probe run, and the device figures the raw
#: predictions were made with (tools/replay_evaluate.py reads them).
PROBE_CSV_COLUMNS = ("problem", "direction", "solver", "predicted_ms", "measured_ms",
                     "device", "kind", "compute_units", "peak_flops", "bandwidth",
                     "launch_overhead_s", "vector_width")


def write_probe_csv(path: str, measured: list, device) -> None:
    """Write calibration probe measurements (problem, solver, raw predicted ms, measured
    ms), each row with the device's name, kind, compute units, measured figures and
    preferred float vector width (the CPU kernels' plans depend on it)."""
    import csv

    # every float in full (repr: the shortest text that reads back as the same double):
    # the learned correction's trees split on these values, and times rounded to 6 digits
    # moved a replay's predictions by up to 5 % (tools/heldout.py refits from this file)
    dev = (device.info.name, device.kind, device.info.compute_units,
           repr(float(device.peak_flops)), repr(float(device.bandwidth)),
           repr(float(device.launch_overhead_s)), device.info.vector_width)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(PROBE_CSV_COLUMNS)
        for p, sid, pred, t in measured:
            w.writerow([p.key, p.direction, sid, repr(float(pred)), repr(float(t)), *dev])


def print_evaluation(cases, summary) -> None:
    """Each case (its count as xN), then per rule: cases, within 10 %, top-1, mean and
    worst slowdown, and the time-weighted slowdown (the network's conv time with the
    rule's choices over its time with the fastest solvers); cases timed a second time
    (a rule missed by more than 10 % on the first) say so."""
    for c in cases:
        fb = c.slowdown["fallback"]
        click.echo(f"{c.problem.key:60} x{c.count:<3} best {c.best:20} fallback "
                   f"{c.chosen['fallback']:20} " + ("-" if fb is None else f"{fb:.2f}x")
                   + ("  (timed twice)" if c.retimed else ""))
    click.echo(f"{'rule':18} {'cases':>5} {'within 10%':>10} {'top-1':>6} {'mean':>6} "
               f"{'worst':>6} {'time-wtd':>8}")
    for rule, sm in summary.items():
        click.echo(f"{rule:18} {sm['cases']:5d} {sm['within_10pct'] * 100:9.0f}% "
                   f"{sm['top1'] * 100:5.0f}% {sm['mean_slowdown']:6.3f} "
                   f"{sm['worst_slowdown']:6.2f} {sm['time_weighted']:8.3f}")
    twice = sum(1 for c in cases if c.retimed)
    if twice:
        click.echo(f"{twice} of {len(cases)} cases timed twice: a rule missed by more "
                   "than 10 % on the first timing; each solver keeps its faster time")


def print_factors(factors) -> None:
    """The median factors per solver and direction, with the probes measured."""
    click.echo("median factors: WTI x factor (factor < 1: slower than its model "
               "predicts), probes measured in brackets")
    # a column as wide as its largest probe count needs (a CPU calibration counts 1000+)
    digits = max([2] + [len(str(c[1])) for c in factors.values()])
    width = 9 + digits
    click.echo(f"  {'solver':22} " + " ".join(f"{d:>{width}}"
                                              for d in ("all", "fwd", "bwd", "wrw")))
    for sid in sorted(k for k in factors if "@" not in k):
        cells = [factors.get(sid if d == "all" else f"{sid}@{d}")
                 for d in ("all", "fwd", "bwd", "wrw")]
        click.echo(f"  {sid:22} " + " ".join(
            f"{c[0]:6.3f} ({c[1]:{digits}d})" if c else f"{'-':>{width}}" for c in cells))
