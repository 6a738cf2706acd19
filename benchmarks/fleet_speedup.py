"""Wall time of ``evaluate`` on networks, serial against a fleet (``--cluster``), and the
fleet's scheduling overhead per task against the median task.

Both sides measure every distinct layer of each network in the given directions on every
device of this machine (``--devices``: a kind or ``P:D``; default every usable one, as
``wticonv evaluate NET --cluster`` does):

- ``serial``: per device one handle, the networks one after the other
  (:func:`wticonv.measuring.evaluate.evaluate`, which compiles each network's programs
  ahead, several at once), then the next device: what ``wticonv evaluate NET --device D``
  run for each network and device does;
- ``fleet``: a local cluster of one worker per device (its start-up timed apart and
  counted in the wall time), each network by :func:`wticonv.fleet.evaluate`, every
  device's tasks at once.

Each side starts with a fresh cache directory (a copy of this machine's device figures
and probe verdicts, no compiled program), so both compile what they run. The drivers'
own caches of compiled kernels (PoCL's kcache, NVIDIA's ComputeCache) outlive a run,
though, and would favour whichever side runs second, and other work on a shared machine
only ever slows a side down: the two sides run in turn ``--rounds`` times (default 2),
each with fresh caches, and each network's best wall time per side is kept.

The *scheduling overhead* of a task is the time its worker stood idle before the task's
own work started: from the end of the worker's previous task (or the task's submission,
if later) to the start of :func:`wticonv.fleet.worker.run_task` on the worker (the
workers of a local cluster share the caller's clock). It is compared with the median
task time (the task's own work: its timings, compiling its programs, its scoring).

    python benchmarks/fleet_speedup.py --out results/fleet-h200            # the GPU machine
    python benchmarks/fleet_speedup.py alexnet squeezenet1_1 resnet18 -n 1 \\
        --directions fwd --solvers direct.naive,direct.tiled,gemm.im2col,gemm.1x1 \\
        --out results/fleet-cpu-pocl                                         # a 2-core CPU

Writes DIR/speedup.csv (mode, network, wall s), DIR/tasks.csv (every task's times) and
DIR/summary.txt.
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path


def _problems(network: str, n, directions):
    """problem -> count (how many layers of the network have it), as `evaluate` takes."""
    from wticonv.workloads.networks import load_network

    counts: dict = {}
    for layer in load_network(network, n).layers:
        for d in directions:
            if layer.directions is None or d in layer.directions:
                p = layer.problem.with_direction(d)
                counts[p] = counts.get(p, 0) + layer.count
    return counts


def _fresh_cache(root: Path, name: str) -> Path:
    """A cache directory with this machine's device figures and verdicts only."""
    from wticonv.db.store import Store
    from wticonv.runtime.device import list_devices

    path = root / name
    Store(path).copy_device_records(Store(), [i.key for i, _ in list_devices()])
    return path


def serial(args, targets, cache: Path) -> list[dict]:
    import wticonv
    from wticonv.db.store import Store
    from wticonv.measuring.evaluate import evaluate, summarize
    from wticonv.runtime.device import select_device

    store, rows = Store(cache), []
    for t in targets:
        handle = wticonv.Handle(select_device(t.index, store))
        for net in args.networks:
            counts = _problems(net, args.n, args.directions)
            start = time.monotonic()
            cases = evaluate(handle, list(counts), args.iterations, args.time_cap_ms,
                             counts=counts)
            wall = time.monotonic() - start
            s = summarize(cases)["fallback"]
            rows.append({"mode": "serial", "network": net, "device": t.name,
                         "problems": len(counts), "wall_s": wall,
                         "within_10pct": s["within_10pct"]})
            print(f"serial {t.kind} {net}: {len(counts)} problems in {wall:.1f} s",
                  file=sys.stderr)
    return rows


def fleet(args, cache: Path) -> tuple[list[dict], list[dict], float]:
    from wticonv import fleet as fl
    from wticonv.db.store import Store
    from wticonv.measuring.evaluate import summarize

    os.environ["WTICONV_CACHE_DIR"] = str(cache)          # the workers' own stores too
    store, rows, tasks = Store(cache), [], []
    start = time.monotonic()
    with fl.Fleet(devices=args.devices) as f:
        up = time.monotonic() - start
        print(f"fleet: {len(f.targets())} worker(s) up in {up:.1f} s", file=sys.stderr)
        for net in args.networks:
            counts = _problems(net, args.n, args.directions)
            t0 = time.monotonic()
            report = fl.evaluate(list(counts), f, iterations=args.iterations,
                                 time_cap_ms=args.time_cap_ms, counts=counts, store=store,
                                 resume=False)
            wall = time.monotonic() - t0
            for res, cases in report.cases.items():
                rows.append({"mode": "fleet", "network": net,
                             "device": report.devices[res]["name"],
                             "problems": len(counts), "wall_s": wall,
                             "within_10pct": summarize(cases)["fallback"]["within_10pct"]})
            tasks += [dict(t, network=net) for t in report.timings
                      if "-describe-" not in t["id"]]
            if report.failures:
                print(f"fleet {net}: failures {report.failures}", file=sys.stderr)
            print(f"fleet {net}: {len(counts)} problems x {len(report.cases)} device(s) in "
                  f"{wall:.1f} s", file=sys.stderr)
    return rows, tasks, up


def overheads(tasks: list[dict]) -> list[dict]:
    """Each task with ``gap_s`` (its worker's idle time before it) and ``task_s``."""
    by_worker: dict = {}
    for t in sorted(tasks, key=lambda t: t["started"]):
        prev = by_worker.get(t["worker"])
        ready = max(t["submitted"], prev["ended"]) if prev else t["submitted"]
        t["gap_s"] = max(0.0, t["started"] - ready)
        t["task_s"] = t["ended"] - t["started"]
        by_worker[t["worker"]] = t
    return tasks


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("networks", nargs="*", default=["resnet50", "vgg16", "inception3"])
    ap.add_argument("-n", type=int, default=None, help="batch size (default: 1)")
    ap.add_argument("--directions", default="fwd,bwd,wrw")
    ap.add_argument("-i", "--iterations", type=int, default=3)
    ap.add_argument("--time-cap-ms", type=float, default=100.0)
    ap.add_argument("--devices", default=None, help="gpu, cpu or P:D (default: every one)")
    ap.add_argument("--solvers", default=None,
                    help="comma-separated solver ids to time (default: every installed)")
    ap.add_argument("--out", required=True, help="folder for the CSVs and the summary")
    ap.add_argument("--rounds", type=int, default=2,
                    help="serial and fleet in turn this many times; the best is kept")
    ap.add_argument("--fleet-first", action="store_true",
                    help="in each round the fleet before the serial side (the side that "
                         "runs second finds the drivers' kernel caches warm)")
    args = ap.parse_args()
    args.directions = [d.strip() for d in args.directions.split(",") if d.strip()]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.solvers:
        from wticonv.contract.registry import SolverRegistry

        keep = {s.strip() for s in args.solvers.split(",")}
        os.environ["WTICONV_DISABLE_SOLVERS"] = ",".join(
            s for s in SolverRegistry().ids() if s not in keep)
    from wticonv.fleet.targets import local_targets

    targets = local_targets(args.devices)
    root = Path(tempfile.mkdtemp(prefix="wticonv-fleet-bench-"))
    serial_rows, fleet_rows, tasks, ups = [], [], [], []
    for r in range(args.rounds):
        if not args.fleet_first:
            serial_rows += [dict(row, round=r) for row in
                            serial(args, targets, _fresh_cache(root, f"serial-{r}"))]
        rows, ts, up = fleet(args, _fresh_cache(root, f"fleet-{r}"))
        if args.fleet_first:
            serial_rows += [dict(row, round=r) for row in
                            serial(args, targets, _fresh_cache(root, f"serial-{r}"))]
        fleet_rows += [dict(row, round=r) for row in rows]
        tasks += overheads([dict(t, round=r) for t in ts])
        ups.append(up)
        # after every round, so that a run stopped in a later one keeps the earlier
        print(_write(out, args, targets, serial_rows, fleet_rows, tasks, ups, r + 1))
    return 0


def _write(out: Path, args, targets, serial_rows, fleet_rows, tasks, ups, rounds) -> str:
    """Writes DIR/speedup.csv, DIR/tasks.csv and DIR/summary.txt from the ``rounds``
    rounds done so far; returns the summary."""
    with open(out / "speedup.csv", "w", newline="") as f:
        w = csv.DictWriter(f, ["round", "mode", "network", "device", "problems", "wall_s",
                               "within_10pct"])
        w.writeheader()
        w.writerows(serial_rows + fleet_rows)
    with open(out / "tasks.csv", "w", newline="") as f:
        cols = ["round", "network", "id", "resource", "worker", "submitted", "started",
                "ended", "merged", "gap_s", "task_s"]
        w = csv.DictWriter(f, cols, extrasaction="ignore")
        w.writeheader()
        w.writerows(tasks)

    def best(rows):           # per network, the best round (devices added up: serial)
        per: dict = {}
        for r in rows:
            key = (r["round"], r["network"])
            per[key] = per.get(key, 0.0) + r["wall_s"] if r["mode"] == "serial" \
                else r["wall_s"]
        return sum(min(v for (_, n), v in per.items() if n == net) for net in args.networks)

    serial_s = best(serial_rows)
    up = min(ups)
    fleet_s = up + best(fleet_rows)
    gaps = sorted(t["gap_s"] for t in tasks)
    work = [t["task_s"] for t in tasks]
    med_gap, med_task = statistics.median(gaps), statistics.median(work)
    p90 = gaps[int(0.9 * (len(gaps) - 1))]
    lines = [
        f"devices: {', '.join(f'{t.kind} {t.name}' for t in targets)}",
        f"networks: {' '.join(args.networks)}, N={args.n or 1}, directions "
        f"{','.join(args.directions)}, {args.iterations} timed run(s), solvers "
        f"{args.solvers or 'all'}; best of {rounds} round(s) per network",
        f"serial wall: {serial_s:.1f} s",
        f"fleet wall: {fleet_s:.1f} s (of which {up:.1f} s starting the workers)",
        f"speed-up: {serial_s / fleet_s:.2f}x",
        f"tasks: {len(tasks)} (all rounds); median task {med_task * 1e3:.1f} ms",
        f"scheduling overhead per task: median {med_gap * 1e3:.2f} ms "
        f"({100 * med_gap / med_task:.2f} % of the median task), 90th percentile "
        f"{p90 * 1e3:.2f} ms, mean {statistics.fmean(gaps) * 1e3:.2f} ms",
    ]
    (out / "summary.txt").write_text("\n".join(lines) + "\n")
    return "\n".join(lines)


if __name__ == "__main__":       # the workers are spawned processes: they import this file
    sys.exit(main())
