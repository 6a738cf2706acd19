"""Held-out figures of the fallback, network by network, from recorded measurements.

    python tools/heldout.py --probes PROBES.csv MEASURED.csv [...] [--fit correction]

For judging a change of the WTI models or of the calibration without the device, and never
on the data it was fitted to. The inputs are files of ``benchmarks/measure_corpus.py`` (or
``wticonv evaluate --csv`` / ``calibrate --csv``): every solver's measured time on each
problem. ``PROBES.csv`` holds the calibration's probe problems (random problems of
:func:`wticonv.workloads.generator.random_problems`, in no network); the others the
corpus's networks (``data/corpus.csv``).

Every solver is re-predicted with the source in this checkout, on a stand-in device with
the measured device's figures. The correction (``--fit``) is fitted to the probes only:
``none`` (raw models), ``factors`` (one factor per solver and direction) or
``correction`` (the learned correction, :mod:`wticonv.selection.correction`, with the
factors ``wticonv calibrate`` stores beside it); so every network is held out. ``--from-networks`` adds the measurements of the other networks to
the fit, as ``wticonv calibrate --from-find-db`` adds a user's find-db: held out one
network (``--hold-out network``) or one family (``family``) at a time, every problem of
the held-out unit left out of the fit even where another network shares it. Of the probes,
only the runs ``calibrate`` makes are fitted (the solvers predicted within
``SKIP_SLOWER_THAN`` of the fastest); network measurements are fitted whole, as the
find-db is. Probes that are a scored network's layers (at any batch size or direction:
``wticonv calibrate`` probes the development corpus's layers) are left out of the fit that
scores that network (``--shared-probes keep`` fits them, as the product does).

For each network of the corpus whose problems at a batch size are all measured, it prints
the cases (layer x direction), the share within 10 % of the best, top-1, the mean and
worst slowdown, and the time-weighted slowdown (conv time of the network with the
fallback's choices over its time with the fastest solver per case, layers counted); then
the overall share, mean, the geometric mean of the networks' time-weighted slowdowns, and
the worst network and case.
"""

from __future__ import annotations

import argparse
import collections
import copy
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from replay_evaluate import (  # noqa: E402
    FitStore, ReplayError, device_for, load, raw_predictions)

from wticonv.contract.registry import SolverRegistry  # noqa: E402
from wticonv.measuring.calibrate import SKIP_SLOWER_THAN, fit_factors  # noqa: E402
from wticonv.measuring.correction_fit import RIDGE, fit_correction  # noqa: E402
from wticonv.problem.conv import parse_key  # noqa: E402
from wticonv.selection.calibration import apply_factors  # noqa: E402
from wticonv.selection.ranking import rank_key, select  # noqa: E402
from wticonv.workloads.networks import corpus_networks, load_network  # noqa: E402


class Replay:
    """Raw candidates (re-predicted) of every measured problem, and choices under a fit."""

    def __init__(self, registry, device, rows):
        self.registry, self.device = registry, device
        self.measured: dict[str, dict[str, float]] = collections.defaultdict(dict)
        for r in rows:
            if r["measured_ms"]:
                self.measured[r["problem"]][r["solver"]] = float(r["measured_ms"])
        self._cands: dict[str, list] = {}

    def candidates(self, key):
        if key not in self._cands:
            self.device.store = None
            sel = select(self.registry, parse_key(key), self.device, measured=False,
                         calibrated=False)
            self._cands[key] = sel.candidates
        return self._cands[key]

    def runs(self, keys):
        """``(problem, solver, raw predicted ms, measured ms)`` of ``keys``' measurements."""
        out = []
        for key in keys:
            p = parse_key(key)
            for v in self.candidates(key):
                t = self.measured[key].get(v.solver_id)
                if t is not None and v.predicted_ms:
                    out.append((p, v.solver_id, v.predicted_ms, t))
        return out

    def choose(self, key, store):
        vs = copy.deepcopy(self.candidates(key))
        self.device.store = store
        p = parse_key(key)
        apply_factors(self.registry, self.device, vs, p.direction, p)
        self.device.store = None
        return min(vs, key=rank_key).solver_id if vs else None


def probe_runs(replay, keys):
    """The runs of probe ``keys`` that ``wticonv calibrate`` would time: the solvers
    predicted within SKIP_SLOWER_THAN of the fastest on each probe."""
    runs, fastest = replay.runs(keys), {}
    for p, _sid, pred, _t in runs:
        fastest[p.key] = min(fastest.get(p.key, pred), pred)
    return [r for r in runs if r[2] <= SKIP_SLOWER_THAN * fastest[r[0].key]]


def fit(replay, probe_keys, network_keys, how, ridge):
    # the correction as calibrate fits it now; factors as the earlier calibrate, every run
    probes = probe_runs(replay, probe_keys) if how == "correction" else replay.runs(probe_keys)
    runs = probes + replay.runs(network_keys)
    if how == "none":
        return FitStore(replay.registry)
    if how == "factors":
        return FitStore(replay.registry, factors=fit_factors(runs))
    # both, as `wticonv calibrate` stores them (store_fit): the learned correction, and the
    # factors that serve solvers predicted over CORRECT_WITHIN times the fastest
    return FitStore(replay.registry, factors=fit_factors(runs),
                    correction=fit_correction(runs, replay.device, ridge))


def networks_measured(replay, split):
    """``[(name, family, n, [(key, count)])]``: corpus networks whose every case at some
    batch size is measured."""
    batches = sorted({parse_key(k).n for k in replay.measured})
    out = []
    for c in corpus_networks(split):
        for n in batches:
            cases = [(layer.problem.with_direction(d).key, layer.count)
                     for layer in load_network(c.name, n).layers for d in ("fwd", "bwd", "wrw")]
            if all(k in replay.measured for k, _ in cases):
                out.append((c.name, c.family, n, cases))
    return out


def shape(key):
    """A problem key's layer, whatever its batch size and direction."""
    return parse_key(key).with_batch(1).with_direction("fwd").key


def score(replay, cases, store):
    """Slowdowns of the choices for ``cases`` under ``store``: (per-case list with
    key/chosen/best, time-weighted)."""
    per, chosen_t, best_t = [], 0.0, 0.0
    for key, count in cases:
        times = replay.measured[key]
        sid = replay.choose(key, store)
        if sid not in times:
            continue
        best = min(times.values())
        per.append((times[sid] / best, key, sid, min(times, key=times.get)))
        chosen_t += count * times[sid]
        best_t += count * best
    return per, chosen_t / best_t if best_t else math.nan


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("measurements", nargs="+", metavar="MEASURED.csv",
                    help="network measurements: files of `wticonv evaluate --csv` or "
                         "benchmarks/measure_corpus.py")
    ap.add_argument("--probes", required=True, metavar="PROBES.csv",
                    help="measurements of the calibration's probe problems")
    ap.add_argument("--fit", choices=("none", "factors", "correction"), default="correction",
                    help="none: raw models; factors: one per solver and direction; "
                         "correction (default): the learned correction, as calibrate fits it")
    ap.add_argument("--from-networks", action="store_true",
                    help="fit to the other networks' measurements too (held out)")
    ap.add_argument("--hold-out", choices=("network", "family"), default="network",
                    help="with --from-networks: leave out one network (default) or its "
                         "whole family at a time")
    ap.add_argument("--split", choices=("dev", "test", "all"), default="dev",
                    help="score the corpus networks of this split (default dev) that the "
                         "files measure fully")
    ap.add_argument("--shared-probes", choices=("drop", "keep"), default="drop",
                    help="drop (default): leave probes that are a scored network's layers out "
                         "of its fit; keep: fit them, as the product does for a network "
                         "that shares layers with the development corpus")
    ap.add_argument("--ridge", type=float, default=RIDGE,
                    help=f"ridge penalty of the linear correction (default {RIDGE}; used "
                         "without scikit-learn, and for solvers with too few runs for trees)")
    ap.add_argument("--vector-width", type=int, default=None, metavar="FLOATS",
                    help="the device's preferred float vector width, which the CPU "
                         "kernels' plans follow (`wticonv devices --json` shows it; default: "
                         "the probes' vector_width column, else 16 on CPUs)")
    ap.add_argument("-v", "--verbose", action="store_true", help="list the cases over 1.1x")
    ap.add_argument("--classes", type=int, default=0, metavar="K",
                    help="list the K classes (direction, chosen, fastest solver) that lose "
                         "the most time: each case's excess (chosen minus fastest, layers "
                         "counted) as a share of its network's time with the fastest, "
                         "summed over the networks")
    args = ap.parse_args(argv)
    try:
        probes = load(args.probes, "measurements")
        rows = [r for path in args.measurements for r in load(path, "measurements")]
        registry = SolverRegistry()
        # the probes' figures (first rows); tensor cores if any file ran them
        device = device_for(probes + rows, vector_width=args.vector_width, registry=registry)
        on = (probes[0].get("device"), probes[0].get("kind"))
        for path in args.measurements:
            first = load(path, "measurements")[0]
            if all(on) and first.get("device") and (first.get("device"),
                                                    first.get("kind")) != on:
                raise ReplayError(f"{path} was measured on {first.get('device')}, the probes "
                                  f"on {on[0]}: score a device's networks with its own probes")
        if not 0 < args.ridge < float("inf"):
            raise ReplayError(f"--ridge {args.ridge} must be a positive finite number")
    except ReplayError as e:
        print(f"heldout: error: {e}", file=sys.stderr)
        return 2
    replay = Replay(registry, device, probes + rows)
    probe_keys = sorted({r["problem"] for r in probes})
    nets = networks_measured(replay, None if args.split == "all" else args.split)
    if not nets:
        print("heldout: error: no corpus network is fully measured in these files: every "
              "distinct layer of a network, in all three directions (fwd, bwd, wrw), at one "
              "batch size (benchmarks/measure_corpus.py --networks NAME measures them)",
              file=sys.stderr)
        return 2
    # probes drawn from a scored network's layers (calibrate probes the dev corpus) are
    # left out of the fit that scores it, whatever their batch size and direction
    probe_shapes = {k: shape(k) for k in probe_keys}
    overlap: dict[str, set[str]] = {}
    for nm, _f, _n, cases in nets:
        layers = {shape(c) for c, _ in cases}
        overlap.setdefault(nm, set()).update(
            k for k in probe_keys if args.shared_probes == "drop" and probe_shapes[k] in layers)
    base = None if args.from_networks or any(overlap.values()) else \
        fit(replay, probe_keys, [], args.fit, args.ridge)
    all_net_keys = {k for *_, cases in nets for k, _ in cases}
    from wticonv.measuring.correction_fit import MIN_TREE_RUNS, trees_available

    kind = (f"boosted trees (ridge {args.ridge:g} for solvers under {MIN_TREE_RUNS} runs)"
            if trees_available() else f"ridge {args.ridge:g}") \
        if args.fit == "correction" else args.fit
    dropped = [len(v) for v in overlap.values() if v]
    print(f"fit: {kind}, to {len(probe_keys)} probe problems"
          + (f" and the other networks (held out by {args.hold_out})"
             if args.from_networks else "")
          + (f"; probes that are a scored network's layers left out of its fit "
             f"({len(dropped)} networks, {min(dropped)}-{max(dropped)} probes each)"
             if dropped else "; no probe is a scored network's layer"
             if args.shared_probes == "drop" else "; shared probes kept"), file=sys.stderr)
    print(f"{'network':34} {'n':>3} {'cases':>5} {'within10':>8} {'top-1':>6} {'mean':>6} "
          f"{'worst':>6} {'time-wtd':>8}")
    every, tw, fits = [], [], {}
    lost: collections.Counter = collections.Counter()
    for name, family, n, cases in nets:
        store = base
        if store is None:
            unit = {nm for nm, fam, *_ in nets
                    if (nm == name if args.hold_out == "network" else fam == family)}
            held = {k for nm, _, _, cs in nets if nm in unit for k, _ in cs}
            probes_left = [k for k in probe_keys
                           if not any(k in overlap[nm] for nm in unit)]
            nets_left = sorted(all_net_keys - held) if args.from_networks else []
            key = (tuple(probes_left), tuple(nets_left))
            if key not in fits:
                fits[key] = fit(replay, probes_left, nets_left, args.fit, args.ridge)
            store = fits[key]
        per, weighted = score(replay, cases, store)
        xs = [s for s, *_ in per]
        if args.classes:
            counts = dict(cases)
            best_t = sum(counts[k] * min(replay.measured[k].values()) for _, k, *_ in per)
            for _s, key, sid, fastest in per:
                times = replay.measured[key]
                lost[(parse_key(key).direction, sid, fastest)] += \
                    counts[key] * (times[sid] - times[fastest]) / best_t
        every += per
        tw.append(weighted)
        print(f"{name:34} {n:3d} {len(xs):5d} {sum(x <= 1.1 for x in xs) / len(xs):8.1%} "
              f"{sum(x <= 1.0 for x in xs) / len(xs):6.0%} {statistics.fmean(xs):6.3f} "
              f"{max(xs):6.2f} {weighted:8.3f}")
        if args.verbose:
            for s, key, sid, best in sorted(per, reverse=True):
                if s > 1.1:
                    print(f"      {s:5.2f} {key} chose {sid}, fastest {best}")
    xs = [s for s, *_ in every]
    geo = math.exp(statistics.fmean(math.log(t) for t in tw))
    print(f"overall: {len(nets)} networks, {len(xs)} cases, within 10 % "
          f"{sum(x <= 1.1 for x in xs) / len(xs):.1%}, mean {statistics.fmean(xs):.3f}, "
          f"time-weighted geomean {geo:.4f}, worst network {max(tw):.3f}, worst case "
          f"{max(xs):.2f}")
    if args.classes:
        print("time lost, share of the network's time summed over the networks: "
              "direction, chosen, fastest")
        for (d, sid, fastest), share in lost.most_common(args.classes):
            print(f"  {share:7.4f}  {d}  {sid} -> {fastest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
