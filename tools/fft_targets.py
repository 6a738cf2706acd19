"""The FFT solvers against every other solver on the target layers, from a measured file.

    python tools/fft_targets.py benchmarks/results/fft-targets32-h200.csv [--markdown]

The input is a file of ``benchmarks/fft_measure.sh OUT targetsN`` (every solver timed on
the stride-1, one-group layers with a filter side of 5 or more and C, K >= 64 of the
built-in and corpus networks, in each direction). For each case it prints the fastest FFT
solver, the fastest other solver and their ratio; then the share of cases (and of cases
whose filter is at least 5x5 on both axes) where the FFT is the faster.
"""

from __future__ import annotations

import argparse
import collections
import csv
import sys

from wticonv.problem.conv import parse_key


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("measured", metavar="TARGETS.csv")
    ap.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = ap.parse_args(argv)
    times: dict[str, dict[str, float]] = collections.defaultdict(dict)
    with open(args.measured, newline="") as f:
        for r in csv.DictReader(f):
            if r["measured_ms"]:
                times[r["problem"]][r["solver"]] = float(r["measured_ms"])
    wins = {"all": [0, 0], "5x5+": [0, 0]}
    if args.markdown:
        print("| layer (key) | dir | FFT solver | ms | best other | ms | ratio |")
        print("| --- | --- | --- | --- | --- | --- | --- |")
    for key, t in times.items():
        ffts = {s: v for s, v in t.items() if s.startswith("fft.")}
        others = {s: v for s, v in t.items() if not s.startswith("fft.")}
        if not ffts or not others:
            print(f"{key}: {'no FFT' if not ffts else 'no other'} solver measured",
                  file=sys.stderr)
            continue
        fs, ft = min(ffts.items(), key=lambda kv: kv[1])
        os_, ot = min(others.items(), key=lambda kv: kv[1])
        p = parse_key(key)
        for group in ("all",) + (("5x5+",) if min(p.r, p.s) >= 5 else ()):
            wins[group][0] += ft < ot
            wins[group][1] += 1
        if args.markdown:
            print(f"| `{key}` | {p.direction} | {fs} | {ft:.3f} | {os_} | {ot:.3f} | "
                  f"{ft / ot:.2f} |")
        else:
            print(f"{key:58} {fs:17} {ft:8.3f}  {os_:22} {ot:8.3f}  {ft / ot:5.2f}")
    for group, (w, n) in wins.items():
        if n:
            print(f"FFT faster on {w} of {n} cases ({w / n:.0%}), "
                  f"{'every target layer' if group == 'all' else 'filters 5x5 and larger'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
