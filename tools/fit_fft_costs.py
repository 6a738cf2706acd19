"""Fit the FFT solver's transform constants to per-launch times.

    python tools/fit_fft_costs.py LAUNCHES.csv [...]

The inputs are files of ``benchmarks/fft_launches.py`` (one device each, or several: each
device kind is fitted on its own rows). Every tile transform (``fft_tiles``,
``ifft_tiles``) is modelled as its traffic times a factor per kind, kernel and tile side
(``wticonv_fft.plan.TRANSFORM_COST``); every filter transform (``fft_filter``,
``fft_filter_grad``) as its traffic plus its FLOPs at an efficiency per kind and kernel
(``plan.FILTER_EFFICIENCY``); each launch also pays the device's launch overhead. The
factor or efficiency minimizes the squared relative error of the predicted time over the
launches that took more than 3 launch overheads (shorter ones are the overhead's, not the
kernel's). Prints the fitted tables as Python literals, and per group the launches fitted
and the 10th, 50th and 90th percentiles of predicted over measured time.

Fit only on the calibration probes and the development networks
(``benchmarks/fft_measure.sh fit32 fit1``); the test networks judge the result
(``tools/heldout.py --split test``).
"""

from __future__ import annotations

import argparse
import collections
import csv
import sys

import numpy as np

TRANSFORMS = ("fft_tiles", "ifft_tiles")
FILTERS = ("fft_filter", "fft_filter_grad")
#: Launches shorter than this many launch overheads are left out of the fit.
MIN_OVERHEADS = 3.0


def load(paths):
    rows = []
    for path in paths:
        with open(path, newline="") as f:
            part = list(csv.DictReader(f))
        if part and "cost" not in part[0]:
            sys.exit(f"{path}: no 'cost' column: a file of an older fft_launches.py, measured "
                     "under other constants; measure again")
        rows += part
    return rows


def fit_group(rows, kind_of_fit):
    """``(value, n, (p10, p50, p90))`` for one group of rows."""
    bw = np.array([float(r["bandwidth"]) for r in rows])
    peak = np.array([float(r["peak_flops"]) for r in rows])
    ov = np.array([float(r["launch_overhead_s"]) for r in rows])
    m = np.array([float(r["measured_s"]) for r in rows])
    if kind_of_fit == "cost":
        x = np.array([float(r["bytes"]) / float(r["cost"]) for r in rows]) / bw
        rest = ov
    else:
        x = np.array([float(r["flops"]) for r in rows]) / peak
        rest = ov + np.array([float(r["bytes"]) for r in rows]) / bw
    big = m > MIN_OVERHEADS * ov
    if big.sum() < 3:
        return None, int(big.sum()), None
    w = 1.0 / m[big]
    coef = float(np.sum(x[big] * w * (m[big] - rest[big]) * w) / np.sum((x[big] * w) ** 2))
    coef = max(coef, 1e-3)
    ratio = (rest + coef * x)[big] / m[big]
    value = coef if kind_of_fit == "cost" else 1.0 / coef
    return value, int(big.sum()), tuple(np.percentile(ratio, [10, 50, 90]))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("launches", nargs="+", metavar="LAUNCHES.csv")
    args = ap.parse_args(argv)
    groups = collections.defaultdict(list)
    for r in load(args.launches):
        kind = r["kind"]
        if r["kernel"] in TRANSFORMS:
            groups[(kind, r["kernel"], int(r["tile"]))].append(r)
        elif r["kernel"] in FILTERS:
            groups[(kind, r["kernel"], None)].append(r)
    costs = collections.defaultdict(lambda: collections.defaultdict(dict))
    effs = collections.defaultdict(dict)
    for (kind, kernel, t), rows in sorted(groups.items(), key=lambda kv: str(kv[0])):
        how = "cost" if t is not None else "efficiency"
        value, n, spread = fit_group(rows, how)
        name = f"{kind} {kernel}" + (f" T={t}" if t else "")
        if value is None:
            print(f"{name}: {n} launches above {MIN_OVERHEADS:g} overheads, too few to fit")
            continue
        print(f"{name}: {how} {value:.3g} from {n} of {len(rows)} launches; predicted / "
              f"measured p10 {spread[0]:.2f}, median {spread[1]:.2f}, p90 {spread[2]:.2f}")
        if t is not None:
            costs[kind][kernel][t] = round(value, 2)
        else:
            effs[kind][kernel] = round(value, 3)
    print("TRANSFORM_COST =", {k: {kk: dict(sorted(vv.items())) for kk, vv in v.items()}
                               for k, v in costs.items()})
    print("FILTER_EFFICIENCY =", dict(effs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
