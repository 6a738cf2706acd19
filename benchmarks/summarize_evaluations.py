"""Issue #18's figures from a folder of ``wticonv evaluate --csv`` files, against its targets.

    python benchmarks/summarize_evaluations.py OUTDIR [--csv ALL.csv] [--noise-floor OTHERDIR]
        [--without SOLVER]

Reads ``OUTDIR/eval-NETWORK.csv`` (as ``benchmarks/evaluate_after_calibrate.sh`` writes
them) and prints, per network: cases, the share within 10 % of the best measured solver,
the mean and worst per-case slowdown and the time-weighted slowdown (the network's conv
time with the fallback's choices over its time with the best solver, each layer counted
as often as the network runs it); then the overall figures: the share within 10 % over
every case, the geometric mean of the networks' time-weighted slowdowns, the worst
network and the worst case, each against its target. ``--csv`` writes every row of every
file to one CSV with a leading ``network`` column.

``--noise-floor OTHERDIR`` scores, instead of the fallback's choices, the fastest solver
of another measurement of the same networks (OTHERDIR's ``eval-NETWORK.csv``, among the
solvers both measured): what a perfect model of that run would score in this one. On a
device whose timings vary from run to run, it is the best figure a fallback can be
expected to reach (docs/find-and-tune.md, *Noise floor*).

``--without SOLVER`` also prints, per network, its conv time with the fallback's choices
over its time with the choices the fallback makes when SOLVER is not installed (the
lowest ``predicted_ms`` among the other solvers, which is how the fallback ranks), both
from this run's measurements, and their geometric mean: what installing SOLVER does to
the user's time, without a second run (cases where either choice has no measurement are
left out).

A case whose fallback choice has no measurement (it failed or was cut short) is left out
and counted in the ``missing`` column. A file that is not an evaluate CSV (a missing
column, a time that is not a positive number, a count under 1) ends the run with one line
naming the file and row.
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
from collections import defaultdict
from pathlib import Path

from wticonv.measuring.evaluate import Case, summarize

#: Issue #18's targets: time-weighted per network, geometric mean, mean per network,
#: share within 10 %, worst case.
TARGETS = {"time_weighted": 1.03, "geomean": 1.015, "mean": 1.05, "within": 0.93,
           "worst": 2.0}


#: Columns every evaluate CSV has (``wticonv evaluate --csv``).
COLUMNS = ("problem", "solver", "measured_ms", "fallback_choice")


def check_rows(rows: list[dict]) -> None:
    """Raise ValueError naming the first row (1 = the header) that is not an evaluate row:
    a missing column, a measured time that is not a positive number (empty: not
    measured), a count that is not a whole number of at least 1."""
    if not rows:
        raise ValueError("no rows; expected the file of `wticonv evaluate --csv`")
    missing = [c for c in COLUMNS if c not in rows[0]]
    if missing:
        raise ValueError(f"no column {', '.join(missing)}; expected the file of "
                         "`wticonv evaluate --csv`")
    for line, r in enumerate(rows, start=2):
        t, count = r["measured_ms"], r.get("count") or "1"
        try:
            ok = not t or t == "nan" or (math.isfinite(float(t)) and float(t) > 0)
        except ValueError:
            ok = False
        if not ok:
            raise ValueError(f"line {line}: measured_ms {t!r} is not a positive number "
                             "of ms")
        if not count.isdigit() or int(count) < 1:
            raise ValueError(f"line {line}: count {count!r} is not a whole number of at "
                             "least 1")


def fastest_of(rows: list[dict]) -> dict[str, dict[str, float]]:
    """Problem key -> {solver: measured ms} of evaluate rows (measured runs only)."""
    out: dict[str, dict[str, float]] = defaultdict(dict)
    for r in rows:
        if r["measured_ms"] and math.isfinite(float(r["measured_ms"])):
            out[r["problem"]][r["solver"]] = float(r["measured_ms"])
    return out


def network_figures(rows: list[dict], other: dict | None = None) -> dict:
    """Figures of one network's evaluate rows (see the module docstring; rows checked by
    :func:`check_rows`). With ``other`` (:func:`fastest_of` another run), the choice in
    each case is the solver fastest in ``other`` among those both runs measured."""
    check_rows(rows)
    runs_of: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        runs_of[r["problem"]].append(r)
    cases, missing = [], 0
    for key, runs in runs_of.items():
        times = {r["solver"]: float(r["measured_ms"]) for r in runs if r["measured_ms"]
                 and math.isfinite(float(r["measured_ms"]))}
        choice = [r["solver"] for r in runs if r["fallback_choice"] == "1"]
        if other is not None:
            theirs = {s: t for s, t in other.get(key, {}).items() if s in times}
            choice = [min(theirs, key=theirs.get)] if theirs else []
        if not times or not choice or choice[0] not in times:
            missing += 1
            continue
        best = min(times, key=times.get)
        cases.append(Case(key, best, chosen={"fallback": choice[0]},
                          slowdown={"fallback": times[choice[0]] / times[best]},
                          measured_ms=times, count=int(runs[0].get("count") or 1)))
    if not cases:
        raise ValueError("no case has a measured fallback choice")
    g = summarize(cases)["fallback"]            # the figures `wticonv evaluate` prints
    return {"cases": g["cases"], "missing": missing, "within": g["within_10pct"],
            "mean": g["mean_slowdown"], "worst": g["worst_slowdown"],
            "time_weighted": g["time_weighted"]}


def without_ratio(rows: list[dict], solver: str) -> tuple[float, float]:
    """(time with the fallback's choices, time with its choices among the solvers but
    ``solver``), each case counted ``count`` times, in ms."""
    cases: dict = defaultdict(list)
    for r in rows:
        cases[(r["problem"], r.get("direction", ""))].append(r)
    def ms(r: dict) -> float | None:          # "" or "nan": not measured
        t = r["measured_ms"]
        return float(t) if t and t != "nan" else None

    with_ms = without_ms = 0.0
    for rs in cases.values():
        chosen = [r for r in rs if r["fallback_choice"] == "1"]
        others = [r for r in rs if r["solver"] != solver and r.get("predicted_ms")]
        if not chosen or not others or ms(chosen[0]) is None:
            continue
        alt = min(others, key=lambda r: float(r["predicted_ms"]))
        if ms(alt) is None:
            continue
        n = int(chosen[0].get("count") or 1)
        with_ms += n * ms(chosen[0])
        without_ms += n * ms(alt)
    return with_ms, without_ms


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("outdir", type=Path, help="folder holding eval-NETWORK.csv files")
    ap.add_argument("--csv", type=Path, metavar="ALL.csv",
                    help="write every row, with a leading network column, to this file")
    ap.add_argument("--noise-floor", type=Path, metavar="OTHERDIR",
                    help="score the fastest solvers of another run of the same networks "
                         "(OTHERDIR/eval-NETWORK.csv) instead of the fallback's choices")
    ap.add_argument("--without", metavar="SOLVER",
                    help="also compare each network's time with the choices made without "
                         "SOLVER (from the same measurements)")
    args = ap.parse_args(argv)

    def error(text: str) -> int:
        print(f"summarize_evaluations: error: {text}", file=sys.stderr)
        return 2

    if not args.outdir.is_dir():
        return error(f"{args.outdir} is not a folder (give the OUTDIR of "
                     "benchmarks/evaluate_after_calibrate.sh)")
    files = sorted(args.outdir.glob("eval-*.csv"))
    if args.csv is not None:
        if args.csv.resolve() in {f.resolve() for f in files} or (
                args.csv.resolve().parent == args.outdir.resolve()
                and args.csv.name.startswith("eval-")):
            return error(f"--csv {args.csv} would be read as a network the next time: "
                         "write it outside the folder, or under a name not eval-*.csv")
        if not args.csv.parent.is_dir():
            return error(f"--csv {args.csv}: the folder {args.csv.parent} does not exist")
    if not files:
        return error(f"no eval-*.csv file in {args.outdir}")
    if args.noise_floor is not None and not args.noise_floor.is_dir():
        return error(f"--noise-floor {args.noise_floor} is not a folder")
    per, every = {}, []
    for f in files:
        net = f.stem[len("eval-"):]
        try:
            with f.open(newline="", encoding="utf-8") as fh:
                rows = list(csv.DictReader(fh))
            other = None
            if args.noise_floor is not None:
                g = args.noise_floor / f.name
                if not g.is_file():
                    return error(f"--noise-floor: {g} does not exist (both folders must "
                                 "hold the same networks)")
                try:
                    with g.open(newline="", encoding="utf-8") as fh:
                        theirs = list(csv.DictReader(fh))
                    check_rows(theirs)
                except (OSError, UnicodeDecodeError, csv.Error, ValueError) as e:
                    return error(f"--noise-floor: {g}: {e}")
                other = fastest_of(theirs)
            per[net] = network_figures(rows, other)
        except (OSError, UnicodeDecodeError, csv.Error, ValueError) as e:
            return error(f"{f}: {e}")
        every += [{"network": net, **r} for r in rows]
    if args.without is not None:
        if not any(r["solver"] == args.without for r in every):
            solvers = sorted({r["solver"] for r in every})
            return error(f"--without {args.without!r}: no run of it in {args.outdir} (the "
                         f"solvers measured there: {', '.join(solvers)})")
        if not all(r.get("predicted_ms") for r in every):
            return error("--without needs each row's predicted_ms (the fallback ranks by "
                         "it), and these files lack it: remake them with `wticonv evaluate "
                         "--csv`")
    if args.noise_floor is not None:
        print(f"choices: the fastest solvers of {args.noise_floor} (noise floor)")
    print(f"{'network':34} {'cases':>5} {'missing':>7} {'within10':>8} {'mean':>6} "
          f"{'worst':>6} {'time-wtd':>8}")
    for net, g in per.items():
        print(f"{net:34} {g['cases']:5d} {g['missing']:7d} {100 * g['within']:7.1f}% "
              f"{g['mean']:6.3f} {g['worst']:6.2f} {g['time_weighted']:8.3f}")
    cases = sum(g["cases"] for g in per.values())
    within = sum(g["within"] * g["cases"] for g in per.values()) / cases
    geo = math.exp(sum(math.log(g["time_weighted"]) for g in per.values()) / len(per))
    worst_net = max(per, key=lambda n: per[n]["time_weighted"])
    worst = max(g["worst"] for g in per.values())
    max_mean = max(g["mean"] for g in per.values())
    t = TARGETS

    def mark(ok: bool) -> str:
        return "met" if ok else "NOT met"

    print(f"overall: {len(per)} networks, {cases} cases; "
          f"within 10 % {100 * within:.1f}% ({mark(within >= t['within'])}), "
          f"geomean time-weighted {geo:.4f} ({mark(geo <= t['geomean'])}), "
          f"worst network {worst_net} {per[worst_net]['time_weighted']:.3f} "
          f"({mark(per[worst_net]['time_weighted'] <= t['time_weighted'])}), "
          f"largest mean {max_mean:.3f} ({mark(max_mean <= t['mean'])}), "
          f"worst case {worst:.2f}x ({mark(worst <= t['worst'])})")
    if args.without is not None:
        print(f"with / without {args.without} (the network's conv time, the fallback's "
              "choices):")
        logs = []
        for net in per:
            with_ms, without_ms = without_ratio([r for r in every if r["network"] == net],
                                                args.without)
            if with_ms and without_ms:
                logs.append(math.log(with_ms / without_ms))
                print(f"  {net:32} {with_ms:10.1f} ms {without_ms:10.1f} ms "
                      f"{with_ms / without_ms:6.3f}")
        if logs:
            print(f"  geometric mean {math.exp(sum(logs) / len(logs)):.3f}")
    if args.csv:
        fields = list(dict.fromkeys(k for r in every for k in r))    # every file's columns
        with args.csv.open("w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=fields, restval="")
            w.writeheader()
            w.writerows(every)
    return 0


if __name__ == "__main__":
    sys.exit(main())
