"""Measure every solver on the corpus's networks and on random probe problems, for replays.

    python benchmarks/measure_corpus.py --networks dev -n 32 --device gpu --out m.csv
    python benchmarks/measure_corpus.py --probes 300 -n 32 --device gpu --out p.csv
    python benchmarks/measure_corpus.py --keys changed.txt --device gpu --out again.csv

Each distinct problem (a layer of any chosen network, or a random problem of
:func:`wticonv.workloads.generator.random_problems`, in each direction) is measured once,
however many networks share it: every applicable solver is timed as ``wticonv evaluate``
times them (:func:`wticonv.measuring.evaluate.evaluate`: find mode without search, fastest
of ``-i`` runs, ``--time-cap-ms``). One CSV row per (problem, solver), in the columns of
``wticonv calibrate --csv`` plus the fallback's choice, so ``tools/heldout.py`` and
``tools/replay_evaluate.py`` read it; the raw predictions are made uncalibrated (a fresh
cache directory unless ``--keep-cache``).

Rows are written as each problem is done, so a run stopped by ``--budget-s`` (or killed)
keeps what it measured; ``--skip FILE`` leaves out the problems a file already holds, to
go on in another run. ``--solvers 'fft.*'`` times only the matching solvers (a new
solver's rows, merged in a replay with earlier files' rows of the others). ``--keys FILE`` measures the problems named in a file (one problem
key per line, ``#`` comments): after a model change that changes a solver's launches, the
problems whose measurements it made stale (a replay reads the later file's rows over the
earlier's).
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import tempfile
import time

COLUMNS = ("problem", "direction", "solver", "predicted_ms", "measured_ms",
           "fallback_choice", "fastest", "device", "kind", "compute_units", "peak_flops",
           "bandwidth", "launch_overhead_s", "vector_width")


def keys_file_problems(path: str) -> list:
    """The problems a keys file names, in order, once each (one problem key per line;
    ``#`` starts a comment). Exits with a message naming the file and line of a key that
    cannot be parsed, or if the file is missing or names none."""
    from wticonv.errors import ProblemError
    from wticonv.problem.conv import parse_key

    try:
        with open(path) as f:
            lines = [ln.split("#")[0].strip() for ln in f]
    except OSError as e:
        sys.exit(f"--keys {path}: {e.strerror}")
    out: dict = {}
    for i, ln in enumerate(lines, 1):
        if ln:
            try:
                out.setdefault(parse_key(ln))
            except ProblemError as e:
                sys.exit(f"--keys {path}, line {i}: {e}")
    if not out:
        sys.exit(f"--keys {path}: no problem keys in it (one key per line, as the CSVs' "
                 "problem column)")
    return list(out)


def problems_of(args) -> list:
    from wticonv.measuring.bench import parse_directions
    from wticonv.workloads.generator import random_problems
    from wticonv.workloads.networks import corpus_networks, load_network

    dirs = parse_directions(args.directions)
    if args.keys:
        return keys_file_problems(args.keys)
    fwd: list = []
    if args.probes:
        fwd += random_problems(args.probes, args.n, seed=args.seed)
    if args.calibration_probes:
        from wticonv.measuring.calibrate import probe_problems

        return probe_problems(args.kind, args.calibration_probes)
    if args.networks:
        names = []
        for spec in args.networks.split(","):
            names += ([c.name for c in corpus_networks(None if spec == "all" else spec)]
                      if spec in ("dev", "test", "all") else [spec])
        for name in names:
            fwd += [layer.problem for layer in load_network(name, args.n).layers]
    out: dict = {}
    for p in fwd:
        for d in dirs:
            out.setdefault(p.with_direction(d))
    return list(out)


def _positive(kind, infinite: bool = False):
    """An argparse type: a number of ``kind`` above zero, finite unless ``infinite``."""
    def parse(text: str):
        try:
            v = kind(text)
        except ValueError:
            what = "a whole number" if kind is int else "a number"
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if not (0 < v and (infinite or v < float("inf"))):
            raise argparse.ArgumentTypeError(
                f"{text} must be a{'' if infinite else ' finite'} number above 0")
        return v
    return parse


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    what = ap.add_argument_group("what to measure (--keys, else --calibration-probes, else "
                                 "--networks and --probes together)")
    what.add_argument("--networks", default="", help="comma-separated corpus or built-in "
                      "names, or dev / test / all (the corpus's splits)")
    what.add_argument("--probes", type=int, default=0,
                      help="random problems to add (default 0)")
    what.add_argument("--seed", type=int, default=0, help="seed of --probes (default 0)")
    what.add_argument("--calibration-probes", type=int, default=0, metavar="COUNT",
                      help="measure instead the first COUNT probes `wticonv calibrate` draws "
                           "for a --kind device (several batch sizes, one direction each)")
    what.add_argument("--keys", metavar="FILE", help="measure instead the problems this file "
                      "names, one key per line (as the CSVs' problem column; each key holds "
                      "its batch size and direction)")
    what.add_argument("--kind", choices=("gpu", "cpu"), default="gpu",
                      help="device kind whose probes --calibration-probes draws (default gpu)")
    what.add_argument("-n", type=int, default=32,
                      help="batch size of --networks and --probes (default 32)")
    what.add_argument("--directions", default="fwd,bwd,wrw",
                      help="directions of --networks and --probes (default fwd,bwd,wrw)")
    how = ap.add_argument_group("how")
    how.add_argument("-i", "--iterations", type=_positive(int), default=5,
                     help="timed runs per solver (default 5)")
    how.add_argument("--time-cap-ms", type=_positive(float), default=50.0,
                     help="kernel time after which a solver's runs are cut short (default 50)")
    how.add_argument("--device", default=None,
                     help="OpenCL device: gpu, cpu or P:D (default: as wticonv chooses)")
    how.add_argument("--budget-s", type=_positive(float, infinite=True), default=float("inf"),
                     help="stop (keeping what was measured) after this many seconds")
    how.add_argument("--skip", action="append", default=[], metavar="FILE",
                     help="leave out the problems this CSV already holds")
    how.add_argument("--solvers", default="", metavar="GLOBS",
                     help="comma-separated solver-id patterns (fnmatch, e.g. 'fft.*'): time "
                          "only these solvers; the rows of a replay's other solvers come from "
                          "earlier files (default: every installed solver)")
    how.add_argument("--keep-cache", action="store_true",
                     help="use the usual cache directory (its calibration and perf-db); "
                          "else a temporary one, removed when the run ends (not when it is "
                          "killed)")
    ap.add_argument("--out", required=True, help="CSV to append the rows to")
    args = ap.parse_args(argv)
    from wticonv.errors import WticonvError

    try:                                  # bad input ends here, before any device is used
        todo_all = problems_of(args)
    except WticonvError as e:
        ap.error(str(e))
    if not todo_all:
        ap.error("nothing to measure: give --networks, --probes, --calibration-probes or --keys")
    skip = set()
    for path in args.skip:
        try:
            with open(path, newline="") as f:
                skip |= {r["problem"] for r in csv.DictReader(f)}
        except OSError as e:
            ap.error(f"--skip {path}: {e.strerror}")
        except KeyError:
            ap.error(f"--skip {path}: no 'problem' column (a CSV of this script or of "
                     "wticonv calibrate/evaluate --csv)")
    out_dir = os.path.dirname(os.path.abspath(args.out))
    if not os.path.isdir(out_dir):
        ap.error(f"--out {args.out}: folder {out_dir} does not exist")
    if not args.keep_cache:
        import atexit
        import shutil

        cache = tempfile.mkdtemp(prefix="wticonv-measure-")
        atexit.register(shutil.rmtree, cache, True)
        os.environ["WTICONV_CACHE_DIR"] = cache
    import wticonv
    from wticonv.measuring.evaluate import evaluate

    todo = [p for p in todo_all if p.key not in skip]
    registry = None
    if args.solvers:
        import fnmatch

        from wticonv.contract.registry import SolverRegistry

        globs = [g.strip() for g in args.solvers.split(",") if g.strip()]
        registry = SolverRegistry()
        keep = {s for s in registry.ids() if any(fnmatch.fnmatchcase(s, g) for g in globs)}
        if not keep:
            ap.error(f"--solvers {args.solvers}: no installed solver matches (installed: "
                     f"{', '.join(registry.ids())})")
        registry.disabled |= set(registry.ids()) - keep
    handle = wticonv.Handle(args.device, registry=registry)
    dev = handle.device
    figures = (dev.info.name, dev.kind, dev.info.compute_units, f"{dev.peak_flops:.6g}",
               f"{dev.bandwidth:.6g}", f"{dev.launch_overhead_s:.6g}", dev.info.vector_width)
    new = not os.path.exists(args.out) or os.path.getsize(args.out) == 0
    if not new:
        # appending to a file written before the vector_width column: keep its columns
        with open(args.out, newline="") as f:
            header = next(csv.reader(f), [])
        if "vector_width" not in header:
            figures = figures[:len(header) - COLUMNS.index("device")]
    t0 = time.monotonic()
    done = 0
    with open(args.out, "a", newline="") as f:
        w = csv.writer(f)
        if new:
            w.writerow(COLUMNS)
        for i, p in enumerate(todo):
            if time.monotonic() - t0 > args.budget_s:
                print(f"budget of {args.budget_s:g} s spent: {done} of {len(todo)} problems "
                      "measured", file=sys.stderr)
                break
            for c in evaluate(handle, [p], args.iterations, args.time_cap_ms):
                for sid, t in sorted(c.measured_ms.items(), key=lambda kv: kv[1]):
                    pred = c.predicted_ms.get(sid)
                    w.writerow([p.key, p.direction, sid, "" if pred is None else f"{pred:.6g}",
                                f"{t:.6g}", int(c.chosen.get("fallback") == sid),
                                int(c.best == sid), *figures])
            f.flush()
            done += 1
            if i % 50 == 0:
                print(f"[{i + 1}/{len(todo)}] {time.monotonic() - t0:6.0f} s {p.key}",
                      file=sys.stderr)
    print(f"{done} problem{'s' * (done != 1)} measured in {time.monotonic() - t0:.0f} s to "
          f"{args.out}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
