"""The measuring subcommands of ``wticonv``: find, tune, evaluate, calibrate.

Each runs solvers on the device and writes what it measured to the cache database (find-db,
perf-db, calibration); progress goes to stderr, results to stdout (``--json`` for JSON).
"""

from __future__ import annotations

import sys
import time

import click

from wticonv.cli.amounts import Amount
from wticonv.cli.amounts import finite as _finite
from wticonv.cli.commands import (
    _PASSTHROUGH,
    _device_option,
    _emit_json,
    _handle,
    _json_option,
    _limit_option,
    _math_option,
    _network_counts,
    _network_options,
    _network_problems,
    _problem_from,
    _time_cap_option,
    _trace_option,
    cli,
)
from wticonv.cli.fleet import check_resume, cluster_option, resume_option
from wticonv.cli.outputs import PROBE_CSV_COLUMNS  # noqa: F401 - the probe CSV's columns
from wticonv.cli.outputs import print_evaluation as _print_evaluation
from wticonv.cli.outputs import print_factors as _print_factors
from wticonv.cli.outputs import write_output as _write_output
from wticonv.cli.outputs import write_probe_csv as _write_probe_csv
from wticonv.errors import DriverArgsError


def _targets(command: str, args: tuple[str, ...], n: int | None, directions: str) -> list:
    """The problems named by ``args``: a network (every distinct layer, in ``directions``),
    a find-db key or MIOpenDriver conv flags."""
    if not args or not args[0].strip():
        raise DriverArgsError(f"{command} needs a network (e.g. resnet50), a find-db key or "
                              "conv flags such as -n 16 -c 64 -H 56 -W 56 -k 64 -y 3 -x 3")
    if len(args) == 1 and not args[0].startswith("-") and "NCHW" not in args[0]:
        import os
        import re

        if re.fullmatch(r"\d+(-\w+)+", args[0]) and not os.path.exists(args[0]):
            raise DriverArgsError(f"{args[0]!r} is not a find-db key (they look like "
                                  "64-56-56-3x3-64-56-56-16-1x1-1x1-1x1-0-NCHW-FP32-F: see "
                                  "`wticonv explain --help`), a network or a file")
        return _network_problems(args[0], n, directions)
    if directions != _ALL_DIRECTIONS:
        raise DriverArgsError("--directions applies to networks; for conv flags use -F (1 "
                              "fwd, 2 bwd, 4 wrw), a find-db key names its own direction")
    if len(args) == 1 and not args[0].startswith("-"):      # a find-db key
        p = _problem_from(args)[1][0]
        return [p if n is None else p.with_batch(n)]
    # -n is taken by the command's option: it is the flags' batch size too
    return _problem_from(("-n", str(n)) + tuple(args) if n is not None else args)[1]


#: ``--directions``' default.
_ALL_DIRECTIONS = "fwd,bwd,wrw"


def _writable(path: str | None, what: str, suffixes: tuple[str, ...] = ()) -> None:
    """Check before a long run that ``path`` can be written (a file name, not a folder, in
    a folder that exists and takes the file) and has one of ``suffixes``; a usage error
    otherwise. A file created by the check is removed again."""
    if path is None:
        return
    import os
    from pathlib import Path

    p = Path(path)
    if not path:
        raise click.BadParameter("an empty file name", param_hint=what)
    if suffixes and p.suffix.lower() not in suffixes:
        raise click.BadParameter(f"{path!r}: {what} must end in {' or '.join(suffixes)}",
                                 param_hint=what)
    if p.is_dir():
        raise click.BadParameter(f"{path!r} is a folder; give a file name in it",
                                 param_hint=what)
    if not p.parent.is_dir():
        raise click.BadParameter(f"{path!r}: the folder {str(p.parent)!r} does not exist",
                                 param_hint=what)
    existed = p.exists()
    try:
        with open(p, "a"):
            pass
    except OSError as e:
        raise click.BadParameter(f"{path!r} cannot be written ({e.strerror or e}); give "
                                 "another file", param_hint=what) from None
    if not existed:
        os.unlink(p)


def _distinct(paths: dict) -> None:
    """A usage error when two of ``paths`` (option: path or None) name the same file: an
    output would overwrite the network read or the other output."""
    import os

    seen: dict = {}
    for what, path in paths.items():
        if not path or not os.path.exists(path) and what == "NETWORK":
            continue
        real = os.path.realpath(path)
        if real in seen:
            raise click.BadParameter(f"{path!r} is also the {seen[real]}: give another file",
                                     param_hint=what)
        seen[real] = what


def _compile_progress(as_json: bool):
    """A precompile progress callback that says on standard error what was compiled ahead
    (nothing with --json, whose standard output is the answer)."""
    start = time.monotonic()

    def progress(done: int, total: int) -> None:
        if not as_json and done == total:
            print(f"compiled {total} program(s) ahead, several at once, in "
                  f"{time.monotonic() - start:.1f} s", file=sys.stderr)
    return None if as_json else progress


@cli.command(context_settings=_PASSTHROUGH)
@_trace_option
@_json_option
@_device_option
@_math_option
@_limit_option
@click.option("-i", "--iterations", type=click.IntRange(min=1), default=5, show_default=True,
              help="Timed runs per solver after one warm-up (4x for kernels under 50 us); "
                   "the fastest is kept.")
@_time_cap_option
@_network_options
@click.option("--no-search", is_flag=True,
              help="Do not tune: time tunable solvers with their current perf config only.")
@cluster_option
@resume_option
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def find(args, as_json, device, workspace_limit, iterations, time_cap_ms, n,
         directions, no_search, cluster, no_resume) -> int:
    """Time every applicable solver and record the results in the find-db.

    The target is a network (a built-in name, a MIOpenDriver line file or an .onnx model:
    every distinct layer), a find-db key, or MIOpenDriver conv flags. Tunable solvers are
    tuned first (every perf config; the fastest goes to the perf-db) unless --no-search.
    Immediate mode then ranks the timed solvers by their measured time (`wticonv explain`
    shows "find-db").
    """
    from wticonv.measuring.find import find as find_problem
    from wticonv.measuring.precompile import precompile_problems

    check_resume(no_resume, cluster)
    problems = _targets("find", args, n, directions)
    if cluster:
        from wticonv.cli.fleet_runs import find_on

        return find_on(cluster, device, problems, as_json, iterations, time_cap_ms,
                       workspace_limit, not no_search, not no_resume)
    handle = _handle(device)
    if len(problems) > 1:                   # every layer's programs, several at once
        precompile_problems(handle, problems, workspace_limit, not no_search,
                            _compile_progress(as_json))
    out = []
    for i, p in enumerate(problems, 1):
        results = find_problem(handle, p, iterations, time_cap_ms, workspace_limit,
                               search=not no_search)
        out.append({"problem": p.key, "results": [r.__dict__ for r in results]})
        if not as_json:
            best = results[0] if results and results[0].time_ms is not None else None
            ran = sum(r.time_ms is not None for r in results)
            cfg = f" ({best.perf_config})" if best and best.perf_config else ""
            why = next((r.reason for r in results if r.reason), "no solver is installed")
            click.echo(f"[{i}/{len(problems)}] {p.key}: {ran} solver(s) timed; fastest "
                       + (f"{best.solver_id}{cfg} {best.time_ms:.4f} ms" if best
                          else f"none ({why})"))
    if as_json:
        _emit_json({"device": handle.device.info.name, "finds": out})
    return 0


@cli.command()
@_trace_option
@_json_option
@_device_option
@_math_option
@_limit_option
@click.argument("network", metavar="NETWORK")
@_network_options
@click.option("-i", "--iterations", type=click.IntRange(min=1), default=3, show_default=True,
              help="Timed runs per solver after one warm-up (4x for kernels under 50 us); "
                   "the fastest is kept.")
@_time_cap_option
@click.option("--csv", "csv_path", default=None, metavar="FILE",
              help="Write every measurement (predicted and measured ms) to this CSV file.")
@click.option("--plot", "plot_path", default=None, metavar="FILE.png",
              help="Draw predicted against measured time per solver (needs matplotlib).")
@cluster_option
@resume_option
def evaluate(as_json, device, workspace_limit, network, n, directions, iterations,
             time_cap_ms, csv_path, plot_path, cluster, no_resume) -> int:
    """Score the immediate-mode fallback on a network: its choice against the fastest.

    Every applicable solver is timed on each distinct layer and direction (find mode; the
    times are recorded in the find-db), and the fallback's choice by the WTI models alone
    is compared with the fastest, as are two baselines (always GEMM, lowest workspace):
    share within 10 % of the best, top-1 agreement, mean and worst slowdown, and the
    time-weighted slowdown (time-wtd), what a user feels: the network's conv time with
    the rule's choices (each layer at its count) over its time with the fastest solvers.
    A case some rule misses by more than 10 % is timed once more (every rule's choice
    and the fastest, interleaved; each keeps its faster time; marked "timed twice"), so
    that a slow spell of the machine is not scored as a miss.
    """
    from wticonv.measuring import evaluate as ev
    check_resume(no_resume, cluster)
    _writable(csv_path, "--csv")
    _writable(plot_path, "--plot", (".png", ".pdf", ".svg"))
    _distinct({"NETWORK": network, "--csv": csv_path, "--plot": plot_path})
    if plot_path:
        import importlib.util

        if importlib.util.find_spec("matplotlib") is None:
            raise click.UsageError("--plot needs matplotlib: pip install 'wticonv[plot]' "
                                   "(or leave out --plot)")
    counts = _network_counts(network, n, directions)
    if cluster:
        from wticonv.cli.fleet_runs import evaluate_on

        return evaluate_on(cluster, device, counts, as_json, iterations, time_cap_ms,
                           workspace_limit, not no_resume, csv_path, plot_path, network)
    handle = _handle(device)

    def progress(i, count, p):
        if not as_json:
            print(f"[{i + 1}/{count}] {p.key}", file=sys.stderr)

    from wticonv.measuring.precompile import precompile_problems

    precompile_problems(handle, list(counts), workspace_limit,
                        progress=_compile_progress(as_json))
    cases = ev.evaluate(handle, list(counts), iterations, time_cap_ms, workspace_limit,
                        progress, counts=counts)
    summary = ev.summarize(cases)
    if as_json:
        _emit_json({"device": handle.device.info.name, "network": network,
                    "summary": summary,
                    "cases": [{"problem": c.problem.key, "count": c.count, "best": c.best,
                               "chosen": c.chosen, "slowdown": c.slowdown,
                               "measured_ms": c.measured_ms,
                               "predicted_ms": c.predicted_ms,
                               "retimed": list(c.retimed)} for c in cases]})
    else:
        _print_evaluation(cases, summary)
    if csv_path:
        _write_output(lambda f: ev.write_csv(cases, f, handle.device), csv_path, "--csv",
                      as_json)
    if plot_path:
        _write_output(lambda f: ev.write_plot(cases, f), plot_path, "--plot", as_json)
    return 0


def _plural(k: int, word: str) -> str:
    return f"{k} {word}{'' if k == 1 else 's'}"


#: Fewer probes than this draw a warning from ``calibrate``.
FEW_PROBES = 30


@cli.command()
@_trace_option
@_json_option
@_device_option
@_math_option
@click.option("-n", "--batch", "n", type=click.IntRange(min=1), default=None,
              help="Measure every probe at this batch size (default: batch sizes 1-64 on "
                   "GPUs, 1-8 on CPUs).")
@click.option("--budget-s", type=Amount("seconds", min=0, max=86400, min_open=True),
              default=None, callback=_finite("seconds"),
              help="Seconds of probe measurements (default: 50 on GPUs, 240 on CPUs); more "
                   "probes fit the correction better.")
@click.option("--from-find-db", is_flag=True,
              help="Fit to this device's find-db records too (from `wticonv find` and "
                   "`evaluate` runs), so that your own find runs improve the fallback.")
@click.option("--csv", "csv_path", default=None, metavar="FILE",
              help="Also write every probe measurement (problem, direction, solver, raw "
                   "predicted and measured ms) to this CSV file.")
@click.option("--strict", is_flag=True,
              help="Fail, storing nothing, when the device reads more than 25 % faster "
                   "after the probes than the figures the fit uses (they were read while "
                   "the machine was busy); without it, a warning.")
@cluster_option
def calibrate(as_json, device, n, budget_s, from_find_db, csv_path, strict,
              cluster) -> int:
    """Fit per-device corrections to the solvers' WTI models (under a minute on a GPU).

    Every applicable solver runs on random realistic probe problems (every kind of layer,
    several batch sizes, three directions) for a time budget. Per solver, a learned
    correction of measured / predicted time on the problem's features (sizes, parallel
    work against the device, reduction length, picture, filter, stride, groups) is stored
    for this device and corrects its WTI per problem from then on (`explain` shows the
    raw and the calibrated WTI): boosted trees with scikit-learn (the `learn` extra), else
    a ridge regression. The table shows each solver's median factor (predicted / measured)
    per direction. A new calibration replaces the device's last one.
    """
    import time

    from wticonv.measuring.calibrate import BUDGET_S
    from wticonv.measuring.calibrate import calibrate as run_calibration

    _writable(csv_path, "--csv")
    if cluster:
        if from_find_db or strict:
            raise click.UsageError(f"{'--from-find-db' if from_find_db else '--strict'} "
                                   "works on a device's own machine: run it without "
                                   "--cluster, on the machine of the device")
        from wticonv.cli.fleet_runs import calibrate_on

        return calibrate_on(cluster, device, as_json, n, budget_s, csv_path)
    handle = _handle(device)
    start = time.monotonic()
    budget = budget_s or BUDGET_S.get(handle.device.kind, BUDGET_S["cpu"])

    budget_start: list[float] = []      # the budget runs from the first probe on

    def progress(i, count, p):
        if not budget_start:
            budget_start.append(time.monotonic())
        if not as_json:
            spent = time.monotonic() - budget_start[0]
            print(f"[probe {i + 1}, {spent:.0f}/{budget:.0f} s] {p.key}", file=sys.stderr)

    from wticonv.measuring.correction_fit import (
        MIN_RUNS,
        MIN_TREE_RUNS,
        model_kind,
        trees_available,
    )

    measured: list = []
    factors = run_calibration(handle, n, progress=progress, measurements=measured,
                              budget_s=budget, from_find_db=from_find_db, strict=strict)
    probes = len({p for p, *_ in measured})
    models = handle.device.store.get_correction(handle.device.key)
    kinds = {k: sum(1 for m in models.values() if model_kind(m[2]) == k)
             for k in ("trees", "ridge", "constant")}
    kind = "boosted trees" if trees_available() else "ridge regression"
    if probes < FEW_PROBES:
        print(f"wticonv: only {_plural(probes, 'probe')} measured: the correction is rough "
              "and can choose worse than no calibration (solvers no probe ran keep their "
              "raw models while the others are corrected); give a larger --budget-s for a "
              "better fit (this calibration replaced the device's last one)",
              file=sys.stderr)
    if as_json:
        _emit_json({"device": handle.device.info.name, "probes": probes,
                    "solver_runs": len(measured), "correction": kind,
                    "learned_solvers": kinds["trees"] + kinds["ridge"], "models": kinds,
                    "factors": {sid: {"factor": f, "probes": k}
                                for sid, (f, k) in factors.items()}})
    else:
        parts = [f"{label} for {_plural(kinds[k], 'solver')}{why}"
                 for k, label, why in (
                     ("trees", "boosted trees", ""),
                     ("ridge", "a ridge regression",
                      f" (under {MIN_TREE_RUNS} runs)" if trees_available() else ""),
                     ("constant", "a constant factor", f" (under {MIN_RUNS} runs)"))
                 if kinds[k]]
        click.echo(f"calibrated {handle.device.info.name}: {_plural(probes, 'probe')}, "
                   f"{_plural(len(measured), 'solver run')} in {time.monotonic() - start:.0f} "
                   f"s; learned correction: " + (", ".join(parts) or "none")
                   + ("" if trees_available() else " (pip install 'wticonv[learn]' for "
                      "boosted trees, closer to the best on networks nobody tuned to)"))
        _print_factors(factors)
    if csv_path:
        _write_output(lambda f: _write_probe_csv(f, measured, handle.device), csv_path,
                      "--csv", as_json)
    return 0


@cli.command(context_settings=_PASSTHROUGH)
@_trace_option
@_json_option
@_device_option
@_math_option
@_limit_option
@click.option("-i", "--iterations", type=click.IntRange(min=1), default=3, show_default=True,
              help="Timed runs per perf config after one warm-up.")
@click.option("--time-cap-ms", type=Amount("milliseconds", min=0, min_open=True), default=500.0,
              show_default=True, help="Kernel time after which a perf config's runs are cut "
                                      "short.")
@_network_options
@click.option("-S", "--solver", "solvers", multiple=True, metavar="ID",
              help="Tune only this solver (repeatable; default: every tunable solver).")
@cluster_option
@resume_option
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def tune(args, as_json, device, workspace_limit, iterations, time_cap_ms, n, directions,
         solvers, cluster, no_resume) -> int:
    """Search the perf configs of tunable solvers and store the fastest in the perf-db.

    The target is a network (every distinct layer), a find-db key, or MIOpenDriver conv
    flags. Each tunable solver's default and every perf config it offers are timed; the
    fastest is stored for this device and used by immediate mode from then on (`wticonv
    explain` shows the perf config and "perf-db"). `wticonv cache --clear` forgets them.
    """
    from wticonv.measuring.tune import MIN_GAIN
    from wticonv.measuring.tune import tune as tune_problem

    check_resume(no_resume, cluster)
    problems = _targets("tune", args, n, directions)
    if cluster:
        from wticonv.cli.fleet_runs import tune_on
        from wticonv.contract.registry import SolverRegistry

        reg = SolverRegistry()
        for sid in solvers:
            if not reg.get(sid).tunable:
                raise DriverArgsError(f"solver {sid!r} is not tunable (it has no "
                                      "perf_configs hook)")
        return tune_on(cluster, device, problems, as_json, iterations, time_cap_ms,
                       workspace_limit, solvers, not no_resume)
    handle = _handle(device)
    for sid in solvers:
        if not handle.registry.get(sid).tunable:
            raise DriverArgsError(f"solver {sid!r} is not tunable (it has no perf_configs "
                                  "hook)")
    out = []
    for i, p in enumerate(problems, 1):
        def progress(sid, cfg, k, count, i=i, p=p):
            if not as_json and sys.stderr.isatty():
                print(f"\r[{i}/{len(problems)}] {p.key}: {sid} {cfg or 'default'} "
                      f"({k + 1}/{count})".ljust(100), end="", file=sys.stderr, flush=True)

        results = tune_problem(handle, p, workspace_limit, iterations, time_cap_ms,
                               solvers=solvers or None, progress=progress)
        out.append({"problem": p.key, "results": [dict(r.__dict__, speedup=r.speedup)
                                                  for r in results]})
        if as_json:
            continue
        if sys.stderr.isatty():
            print("\r".ljust(101), end="\r", file=sys.stderr)
        declined = [r.solver_id for r in results if r.declined]
        if declined:    # one line: `wticonv explain` gives each decline's reason
            click.echo(f"[{i}/{len(problems)}] {p.key}: not applicable: "
                       f"{', '.join(declined)} (`wticonv explain` says why)")
        for r in results:
            if r.declined:
                continue
            if r.reason:
                click.echo(f"[{i}/{len(problems)}] {p.key} {r.solver_id}: {r.reason}")
                continue
            default = "-" if r.default_ms is None else f"{r.default_ms:.4f} ms"
            if r.best_config == "default":
                click.echo(f"[{i}/{len(problems)}] {p.key} {r.solver_id}: the default is "
                           f"fastest, {default} ({len(r.times)} perf config(s) timed; none "
                           f"faster by {(MIN_GAIN - 1) * 100:.0f} %)")
                continue
            click.echo(f"[{i}/{len(problems)}] {p.key} {r.solver_id}: best {r.best_config} "
                       f"{r.best_ms:.4f} ms, default {default}"
                       + (f" ({r.speedup:.2f}x)" if r.speedup else "")
                       + (f"; kept the perf-db's {r.kept}, tuned with more workspace than "
                          "--workspace-limit" if r.kept else ""))
    if as_json:
        _emit_json({"device": handle.device.info.name, "tunes": out})
    return 0
