"""The bodies of find, tune, evaluate and calibrate with ``--cluster``
(:mod:`wticonv.cli.fleet`): the same results as without it, per device of the fleet."""

from __future__ import annotations

import sys
import time
from types import SimpleNamespace

import click

from wticonv.cli.commands import _MATH_KEY, filter_note
from wticonv.cli.fleet import FleetProgress, finish, fleet_of

__all__ = ["find_on", "tune_on", "evaluate_on", "calibrate_on", "device_view"]


def _allow_tf32() -> bool:
    ctx = click.get_current_context(silent=True)
    return bool(ctx and ctx.meta.get(_MATH_KEY, False))


def _note_filters() -> None:
    from wticonv.contract.registry import SolverRegistry

    filter_note(SolverRegistry(), quarantined=True)


def device_view(dev: dict):
    """A stand-in for a :class:`~wticonv.runtime.device.Device` of a worker's device
    (``info.name``, ``kind``, the figures), for the CSV writers."""
    info = SimpleNamespace(name=dev["name"], compute_units=dev.get("compute_units"),
                           vector_width=dev.get("vector_width"))
    return SimpleNamespace(info=info, kind=dev["kind"], peak_flops=dev.get("peak_flops"),
                           bandwidth=dev.get("bandwidth"),
                           launch_overhead_s=dev.get("launch_overhead_s"))


def _name(report, res: str) -> str:
    return report.device_name(res)


def find_on(cluster, device, problems, as_json, iterations, time_cap_ms, workspace_limit,
            search, resume) -> int:
    from wticonv import fleet

    _note_filters()
    with fleet_of(cluster, device) as f, FleetProgress(not as_json) as progress:
        report = fleet.find(problems, f, iterations=iterations, time_cap_ms=time_cap_ms,
                            workspace_limit=workspace_limit, search=search,
                            allow_tf32=_allow_tf32(), resume=resume, progress=progress)
    out = []
    for res, items in sorted(report.results.items()):
        for item in items:
            records = sorted(item["records"], key=lambda r: r[3])
            out.append({"device": _name(report, res), "problem": item["problem"],
                        "results": [{"solver_id": r[0], "version": r[1], "workspace": r[2],
                                     "time_ms": r[3], "runs": r[4], "capped": r[5]}
                                    for r in records], "reasons": item["reasons"]})
            if not as_json:
                best = (f"{records[0][0]} {records[0][3]:.4f} ms" if records else
                        f"none ({next(iter(item['reasons'].values()), 'no solver')})")
                click.echo(f"{_name(report, res)}: {item['problem']}: {len(records)} "
                           f"solver(s) timed; fastest {best}")
    return finish(report, as_json, {"finds": out})


def tune_on(cluster, device, problems, as_json, iterations, time_cap_ms, workspace_limit,
            solvers, resume) -> int:
    from wticonv import fleet

    _note_filters()
    with fleet_of(cluster, device) as f, FleetProgress(not as_json) as progress:
        report = fleet.tune(problems, f, iterations=iterations, time_cap_ms=time_cap_ms,
                            workspace_limit=workspace_limit, solvers=solvers or None,
                            resume=resume, progress=progress)
    out = []
    for res, items in sorted(report.results.items()):
        for item in items:
            out.append({"device": _name(report, res), **item})
            for r in item["results"] if not as_json else ():
                head = f"{_name(report, res)}: {item['problem']} {r['solver_id']}"
                if r["reason"]:
                    click.echo(f"{head}: {r['reason']}")
                    continue
                default = "-" if r["default_ms"] is None else f"{r['default_ms']:.4f} ms"
                click.echo(f"{head}: best {r['best_config']} {r['best_ms']:.4f} ms, "
                           f"default {default}")
    return finish(report, as_json, {"tunes": out})


def evaluate_on(cluster, device, counts, as_json, iterations, time_cap_ms, workspace_limit,
                resume, csv_path, plot_path, network) -> int:
    from wticonv import fleet
    from wticonv.cli.outputs import print_evaluation as _print_evaluation
    from wticonv.cli.outputs import write_output as _write_output
    from wticonv.measuring import evaluate as ev

    _note_filters()
    with fleet_of(cluster, device) as f, FleetProgress(not as_json) as progress:
        report = fleet.evaluate(list(counts), f, iterations=iterations,
                                time_cap_ms=time_cap_ms, workspace_limit=workspace_limit,
                                counts=counts, allow_tf32=_allow_tf32(), resume=resume,
                                progress=progress)
    devices = sorted(report.cases)
    payload = []
    for res in devices:
        cases = report.cases[res]
        summary = ev.summarize(cases)
        payload.append({"device": _name(report, res), "summary": summary,
                        "cases": [{"problem": c.problem.key, "count": c.count, "best": c.best,
                                   "chosen": c.chosen, "slowdown": c.slowdown,
                                   "measured_ms": c.measured_ms,
                                   "predicted_ms": c.predicted_ms,
                                   "retimed": list(c.retimed)} for c in cases]})
        if not as_json:
            click.echo(f"== {_name(report, res)}")
            _print_evaluation(cases, summary)

    def write_all(path):
        for i, res in enumerate(devices):
            ev.write_csv(report.cases[res], path, device_view(report.devices[res]),
                         append=i > 0)

    if csv_path and devices:
        _write_output(write_all, csv_path, "--csv", as_json)
    if plot_path and devices:
        everything = [c for res in devices for c in report.cases[res]]
        _write_output(lambda p: ev.write_plot(everything, p), plot_path, "--plot", as_json)
    return finish(report, as_json, {"network": network, "evaluations": payload})


def calibrate_on(cluster, device, as_json, n, budget_s, csv_path) -> int:
    from wticonv import fleet
    from wticonv.cli.outputs import print_factors as _print_factors
    from wticonv.cli.outputs import write_output as _write_output
    from wticonv.cli.outputs import write_probe_csv as _write_probe_csv

    _note_filters()
    start = time.monotonic()
    measured: dict = {}
    with fleet_of(cluster, device) as f, FleetProgress(not as_json) as progress:
        report = fleet.calibrate(f, n=n, budget_s=budget_s, progress=progress,
                                 measurements=measured)
    out = {}
    for res, factors in sorted(report.factors.items()):
        runs = measured.get(res, [])
        probes = len({p for p, *_ in runs})
        out[_name(report, res)] = {"probes": probes, "solver_runs": len(runs),
                                   "factors": {k: {"factor": f_, "probes": k_}
                                               for k, (f_, k_) in factors.items()}}
        if not as_json:
            click.echo(f"calibrated {_name(report, res)}: {probes} probe(s), {len(runs)} "
                       f"solver run(s) in {time.monotonic() - start:.0f} s")
            _print_factors(factors)
    if csv_path and measured:
        def write_all(path):
            import os

            tmp = f"{path}.part"
            rows = []
            for res, runs in sorted(measured.items()):
                _write_probe_csv(tmp, runs, device_view(report.devices[res]))
                with open(tmp) as fh:
                    lines = fh.readlines()
                rows += lines if not rows else lines[1:]
            os.unlink(tmp)
            with open(path, "w") as fh:
                fh.writelines(rows)
        _write_output(write_all, csv_path, "--csv", as_json)
    if not report.factors and not report.interrupted:
        print("wticonv: no device was calibrated", file=sys.stderr)
    return finish(report, as_json, {"calibrations": out}, keeps_parts=False)
