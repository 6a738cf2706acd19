"""The subcommands of ``wticonv`` (see ``wticonv --help``)."""

from __future__ import annotations

import json
import sys

import click
import numpy as np
import pyopencl as cl

from wticonv._version import __version__
from wticonv.cli import render
from wticonv.cli.amounts import Amount
from wticonv.cli.amounts import finite as _finite
from wticonv.errors import (
    DriverArgsError,
    KernelBuildError,
    ProblemError,
    StoreError,
    WticonvError,
    one_line,
)
from wticonv.handle import Handle
from wticonv.measuring.bench import measure, parse_directions, run_bench
from wticonv.problem.conv import parse_key
from wticonv.workloads.driver import parse_driver_args
from wticonv.workloads.networks import load_network

_PASSTHROUGH = {"ignore_unknown_options": True, "allow_extra_args": True,
                "help_option_names": ["-h", "--help"]}


def _device_option(f):
    return click.option("--device", "device", metavar="SPEC", default=None,
                        help="OpenCL device: gpu, cpu or P:D (default: WTICONV_DEVICE, else "
                             "the first GPU, else the fastest CPU device).")(f)


def _json_option(f):
    return click.option("--json", "as_json", is_flag=True,
                        help="Print machine-readable JSON instead of tables.")(f)


def _trace_option(f):
    def enable(ctx, param, value):
        if value:
            import os

            os.environ["WTICONV_TRACE"] = "1"
        return value

    return click.option("--trace", is_flag=True, expose_value=False, callback=enable,
                        is_eager=True,
                        help="Print every solver hook call to stderr (WTICONV_TRACE=1).")(f)


#: Where ``--math`` leaves the caller's math mode for :func:`_handle` (click's ctx.meta).
_MATH_KEY = "wticonv.allow_tf32"


def _math_option(f):
    def keep(ctx, param, value):
        ctx.meta[_MATH_KEY] = value == "tf32"
        return value

    return click.option("--math", type=click.Choice(["fp32", "tf32"]), default="fp32",
                        show_default=True, expose_value=False, callback=keep,
                        help="fp32: rank only FP32-accurate solvers (math class fp32 or "
                             "3xtf32); tf32: also TF32-only ones (10-bit mantissa), as "
                             "PyTorch's allow_tf32.")(f)


def _limit_option(f):
    return click.option("--workspace-limit", "workspace_limit", type=click.IntRange(min=0),
                        default=None, metavar="BYTES",
                        help="Most device workspace a solver may use (default: no limit).")(f)


def _network_options(f):
    """-n/--batch and --directions, for the commands that take a network."""
    f = click.option("--directions", default="fwd,bwd,wrw", show_default=True,
                     help="Comma-separated directions: fwd, bwd, wrw, or all.")(f)
    return click.option("-n", "--batch", "n", type=click.IntRange(min=1), default=None,
                        help="Batch size N (default: 1 for built-ins; a file's own "
                             "otherwise).")(f)


def _time_cap_option(f):
    return click.option("--time-cap-ms", type=Amount("milliseconds", min=0, min_open=True),
                        default=1000.0, show_default=True, callback=_finite("milliseconds"),
                        help="Kernel time after which a solver's runs are cut short.")(f)


def _directions(directions: str) -> list[str]:
    """``--directions`` parsed; a click usage error (exit 2) when it names none."""
    try:
        return parse_directions(directions)
    except (ValueError, ProblemError) as e:
        raise click.BadParameter(str(e), param_hint="--directions") from None


def _network_counts(network: str, n: int | None, directions: str) -> dict:
    """Every distinct layer of ``network`` in every requested direction (a driver line's
    ``-F`` limits its layer further, as in bench), each with how many layers of the
    network it stands for: problem -> count, in order (each direction carries its
    layer's count; layers that come to the same problem add theirs)."""
    dirs = _directions(directions)
    net = load_network(network, n)
    counts: dict = {}
    for layer in net.layers:
        for d in dirs:
            if layer.directions is None or d in layer.directions:
                p = layer.problem.with_direction(d)
                counts[p] = counts.get(p, 0) + layer.count
    return counts


def _network_problems(network: str, n: int | None, directions: str) -> list:
    """The problems of :func:`_network_counts`, each once."""
    return list(_network_counts(network, n, directions))


def _handle(device: str | None) -> Handle:
    """The command's handle on ``device``, in the math mode of its ``--math`` option."""
    _announce_probes()
    ctx = click.get_current_context(silent=True)
    handle = Handle(device, allow_tf32=bool(ctx and ctx.meta.get(_MATH_KEY, False)))
    filter_note(handle.registry, quarantined=True)
    return handle


def _announce_probes() -> None:
    """Print the probe's progress line (a device's first use) to stderr."""
    import logging

    from wticonv.runtime.probe import log

    if not log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
        log.propagate = False


def dynamic_or_error(reg, sid: str):
    """``is_dynamic``'s checked answer for a listing, or ``"error: ..."`` (a listing
    reports a broken solver, never crashes on it)."""
    from wticonv.contract.answers import dynamic_answer

    try:
        return dynamic_answer(reg.call(sid, "is_dynamic"))
    except Exception as exc:  # noqa: BLE001 - report, never crash a listing
        return f"error: {exc}"


def _emit_json(data) -> None:
    click.echo(json.dumps(data, indent=2, default=float))


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="wticonv")
@click.option("--trace", is_flag=True, help="Print every solver hook call to stderr "
              "(same as WTICONV_TRACE=1).")
@click.option("--no-plugin", "no_plugin", multiple=True, metavar="DIST",
              help="Do not load this plugin distribution in this run (repeatable; as "
                   "pytest's -p no:NAME; WTICONV_NO_PLUGINS=DIST,... does the same).")
@click.option("--debug", is_flag=True, help="Show tracebacks: of errors, of plugins that "
              "fail to import, of solvers set aside (same as WTICONV_DEBUG=1).")
def cli(trace: bool, no_plugin: tuple[str, ...], debug: bool) -> None:
    """Convolutions on OpenCL devices, with the solver chosen by Wall-Time Index.

    \b
    Start with:
      wticonv solvers                      installed solvers and refused plugins
      wticonv plugins                      plugin distributions (install, check, uninstall)
      wticonv bench resnet50 -n 1          the main job: a whole network, verified
      wticonv explain -n 16 -c 64 -H 56 -W 56 -k 64 -y 3 -x 3 -p 1 -q 1
      wticonv conv -n 16 -c 64 -H 56 -W 56 -k 64 -y 3 -x 3 -p 1 -q 1 -F 1
    """
    import os

    if trace:
        os.environ["WTICONV_TRACE"] = "1"
    if debug:
        os.environ["WTICONV_DEBUG"] = "1"
    if no_plugin:
        have = [v for v in os.environ.get("WTICONV_NO_PLUGINS", "").split(",") if v.strip()]
        os.environ["WTICONV_NO_PLUGINS"] = ",".join(have + list(no_plugin))


@cli.command()
@_trace_option
@_json_option
def solvers(as_json: bool) -> int:
    """List installed solvers and quarantined plugin entry points."""
    from wticonv.contract.registry import SolverRegistry

    reg = SolverRegistry()
    rows = []
    for sid in reg.ids():
        e = reg.solvers[sid]
        rows.append({"solver": sid, "distribution": e.distribution, "version": e.version,
                     "dynamic": dynamic_or_error(reg, sid), "math": e.math, "scope": e.scope,
                     "disabled": sid in reg.disabled, "entry_point": e.entry_point})
    bad = [{"entry_point": q.entry_point, "distribution": q.distribution,
            "version": q.version, "solver_id": q.solver_id, "reason": q.reason}
           for q in reg.quarantined]
    if as_json:
        _emit_json({"solvers": rows, "quarantined": bad})
    else:
        render.solvers(rows, bad)
    filter_note(reg)
    return 0


def filter_note(reg, quarantined: bool = False) -> None:
    """A line on stderr naming the distributions a filter kept from loading, if any; with
    ``quarantined``, one more counting the quarantined plugin entry points (commands that
    run solvers say so; the listings show them in full)."""
    if reg.skipped:
        names = ", ".join(f"{d} ({why})" for d, why in sorted(reg.skipped.items()))
        print(f"wticonv: note: a plugin filter is active; not loaded: {names} "
              "(`wticonv plugins --all` lists them)", file=sys.stderr)
    if quarantined and reg.quarantined:
        names = ", ".join(sorted({q.distribution or q.entry_point for q in reg.quarantined}))
        print(f"wticonv: note: {len(reg.quarantined)} plugin entry point(s) quarantined, not "
              f"used: {names} (`wticonv solvers` says why)", file=sys.stderr)


@cli.command()
@_trace_option
@_json_option
@click.option("--measure", is_flag=True,
              help="Measure every usable device now (the cache keeps the best of all "
                   "measurements: a busy machine reads low).")
@click.option("--probe", "reprobe", is_flag=True,
              help="Forget every device's verdict and test each driver again, in a child "
                   "process (after installing or fixing a driver).")
def devices(as_json: bool, measure: bool, reprobe: bool) -> int:
    """List OpenCL devices: usable or set aside (and why), peak FP32 rate and bandwidth.

    A GPU or CPU device seen for the first time on this host is tested first, in a child
    process: a test kernel, then the peak and bandwidth measurement (once; cached)."""
    from wticonv.db.store import Store
    from wticonv.runtime.device import Device, list_devices
    from wticonv.runtime.kit import tensor_cores_of
    from wticonv.runtime.probe import ensure_verdict, stored_verdict

    store = Store()
    rows = []
    listed = list_devices()
    if reprobe:
        for info, _ in listed:
            store.forget_device_verdicts(info.key)
    _announce_probes()
    for info, cl_dev in listed:
        verdict = (ensure_verdict(info, store, warn=False) if info.kind in ("gpu", "cpu")
                   else stored_verdict(info, store))
        figs = store.get_device_figures(info.key)
        set_aside = verdict.reason if verdict is not None and not verdict.usable else None
        if measure and verdict is not None and verdict.usable:
            dev = Device(cl_dev, info, store)
            try:
                figs = dev.measure_figures() if figs is not None else (dev.peak_flops,
                                                                       dev.bandwidth)
            except (KernelBuildError, cl.Error) as e:
                set_aside = str(e)
        status = ("set aside" if set_aside else "usable" if verdict is not None
                  else "not used by default")
        rows.append({"index": info.index, "kind": info.kind, "name": info.name,
                     "platform": info.platform, "driver": info.driver_version,
                     "compute_units": info.compute_units, "clock_mhz": info.clock_mhz,
                     "global_mem_bytes": info.global_mem_bytes,
                     "local_mem_bytes": info.local_mem_bytes,
                     "vector_width": info.vector_width,
                     "tensor_cores": tensor_cores_of(info, cl_dev),
                     "peak_gflops": figs[0] / 1e9 if figs and not set_aside else None,
                     "bandwidth_gbs": figs[1] / 1e9 if figs and not set_aside else None,
                     "status": status, "set_aside": set_aside})
    if as_json:
        _emit_json(rows)
    else:
        render.devices(rows)
    return 0


def _problem_from(args: tuple[str, ...]):
    """A find-db key (one word) or MIOpenDriver flags -> (DriverCommand-like, problems)."""
    if len(args) == 1 and not args[0].startswith("-"):
        p = parse_key(args[0])
        return None, [p]
    if len(args) > 1 and not args[0].startswith("-") and args[0] != "conv":
        raise DriverArgsError(
            f"one problem at a time: a find-db key alone, or conv flags (-n -c -H ...); "
            f"got {len(args)} words ({' '.join(args[:3])}{' ...' if len(args) > 3 else ''})")
    if args and args[0] == "conv":
        args = args[1:]
    cmd = parse_driver_args(list(args))
    return cmd, cmd.problems


@cli.command(context_settings=_PASSTHROUGH)
@_trace_option
@_json_option
@_device_option
@_limit_option
@_math_option
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def explain(args, as_json, device, workspace_limit) -> int:
    """Rank every solver for one problem, without running anything.

    The problem is a find-db key (e.g. 64-56-56-3x3-64-56-56-16-1x1-1x1-1x1-0-NCHW-FP32-F)
    or MIOpenDriver conv flags (-n -c -H -W -k -y -x -p -q -u -v -l -j -g -F; -S forces a
    solver). With flags, -F 0 (the default) explains all three directions.
    """
    if not args:
        raise DriverArgsError("explain needs a problem: a find-db key or conv flags such as "
                              "-n 16 -c 64 -H 56 -W 56 -k 64 -y 3 -x 3 -p 1 -q 1")
    cmd, problems = _problem_from(args)
    handle = _handle(device)
    forced = cmd.solver if cmd is not None else None
    if forced is not None:
        handle.registry.get(forced)
    selections = [handle.select(p, workspace_limit, forced) for p in problems]
    if as_json:
        _emit_json({"device": handle.device.info.name,
                    "peak_gflops": handle.device.peak_flops / 1e9,
                    "selections": [s.to_dict() for s in selections]})
    else:
        for s in selections:
            render.selection(s, handle.device)
    return 0


@cli.command(context_settings=_PASSTHROUGH)
@_trace_option
@_json_option
@_device_option
@_limit_option
@_math_option
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def conv(args, as_json, device, workspace_limit) -> int:
    """Run one convolution as MIOpenDriver does: select, run, time, verify.

    Flags as MIOpenDriver's conv: -n -c -H -W -k -y -x -p -q -u -v -l -j -g for the
    problem; -F 0 all directions (default), 1 fwd, 2 bwd, 4 wrw; -V 1 verify against the
    float64 reference (default); -i iterations (default 10); -t 1 also print wall-clock
    time; -S SOLVER force a solver id, and --perf-config NAME (wticonv's own flag) one of
    its perf configs ('default': its own). -b is accepted for compatibility and ignored (the
    convolution has no bias term; the Python API adds a bias on the host).
    Exit status 1 if any direction fails verification.
    """
    if args and args[0] == "conv":
        args = args[1:]
    cmd = parse_driver_args(list(args))
    handle = _handle(device)
    if cmd.solver is not None:
        handle.registry.get(cmd.solver)
    results = []
    for p in cmd.problems:
        try:
            r = _conv_one(handle, p, cmd, workspace_limit)
        except WticonvError as e:
            r = {"direction": p.direction, "key": p.key, "ok": False,
                 "message": one_line(e)}
        results.append(r)
        if not as_json:
            render.conv_result(r, cmd.time)
    if as_json:
        _emit_json({"device": handle.device.info.name, "results": results})
    return 0 if all(r["ok"] for r in results) else 1


def _conv_one(handle: Handle, p, cmd, workspace_limit) -> dict:
    m = measure(handle, p, cmd.iterations, verify=cmd.verify,
                workspace_limit=workspace_limit, solver=cmd.solver, seed=12345678,
                perf_config=cmd.perf_config)
    ms = float(np.mean(m.kernel_ms))
    return {"direction": p.direction, "key": p.key, "solver": m.solver_id,
            "math": m.verdict.math, "allow_tf32": handle.allow_tf32,
            "wti": m.verdict.wti, "workspace": m.workspace, "kernel_ms": ms,
            "perf_config": m.verdict.perf_config, "perf_source": m.verdict.perf_source,
            "wall_ms": float(np.mean(m.wall_ms)) if m.wall_ms else None,
            "gflops": p.flops / (ms * 1e-3) / 1e9 if ms else None,
            "iterations": cmd.iterations, "verified": m.error is not None, "ok": m.ok,
            "error": m.error, "tolerance": m.tolerance, "note": m.note}


@cli.command()
@_trace_option
@click.argument("network", metavar="NETWORK")
@_network_options
@click.option("-i", "--iterations", type=click.IntRange(min=1), default=3, show_default=True,
              help="Timed runs per layer and direction after the verification run.")
@click.option("--no-verify", is_flag=True, help="Skip the comparison with the reference.")
@click.option("-S", "--solver", default=None, metavar="ID", help="Force this solver.")
@_limit_option
@_math_option
@_device_option
@_json_option
@click.option("--no-progress", is_flag=True, help="No progress bar.")
def bench(network, n, directions, iterations, no_verify, solver, workspace_limit, device,
          as_json, no_progress) -> int:
    """The main job: every distinct conv layer of NETWORK, in immediate mode.

    NETWORK is a built-in name (resnet50, vgg16, mobilenetv2, inception3), a text file of
    MIOpenDriver 'conv ...' lines, or an .onnx model. Each layer and direction is selected
    without benchmarking, run, verified against the float64 reference and timed. Exit
    status 1 if any layer fails verification.
    """
    dirs = _directions(directions)
    net = load_network(network, n)
    handle = _handle(device)
    if solver is not None:
        handle.registry.get(solver)
    show = not (no_progress or as_json) and sys.stderr.isatty()
    with render.Progress(enabled=show) as prog:
        report = run_bench(handle, net, dirs, iterations=iterations, verify=not no_verify,
                           workspace_limit=workspace_limit, solver=solver,
                           progress=prog.update)
    if as_json:
        _emit_json(report.to_dict())
    else:
        render.bench_report(report)
    if report.interrupted:
        print("wticonv: interrupted; the rows above are the layers done so far",
              file=sys.stderr)
        return 130
    return 1 if report.failures or report.nothing_ran else 0


@cli.command("new-solver")
@click.argument("name")
@click.option("--dir", "parent", default=".", show_default=True, metavar="PATH",
              help="Folder to create the plugin's folder in.")
def new_solver(name: str, parent: str) -> int:
    """Create the skeleton of a solver plugin, wticonv-NAME, that passes the conformance kit.

    \b
    It holds the solver NAME.direct (forward convolution in its own OpenCL kernel), the
    entry point that registers it, and a conformance test. NAME must not be taken: not
    an installed distribution wticonv-NAME, package wticonv_NAME or solver-id prefix.
    Then:
      cd wticonv-NAME && wticonv install -e '.[test]' && pytest tests && wticonv plugins
    """
    from wticonv.errors import ArgumentError
    from wticonv.scaffold import new_solver as scaffold

    try:
        root = scaffold(name, parent)
    except ArgumentError as e:
        raise click.BadParameter(str(e), param_hint="NAME") from None
    click.echo(f"created {root} (solver {name}.direct); next: cd {root} && wticonv install "
               "-e '.[test]' && pytest tests && wticonv check " + f"{name}.direct")
    return 0


@cli.command()
@_trace_option
@click.option("--clear", is_flag=True,
              help="Delete every record (measured figures, binaries, find-db, perf-db, "
                   "calibration).")
@_json_option
def cache(clear: bool, as_json: bool) -> int:
    """Show (or clear) the on-disk cache: where it is and what it holds."""
    from wticonv.db.store import Store

    store = Store()
    tables = store.summary()          # opens the database (or falls back to a temporary one)
    if store.fallback_from is not None:
        if clear:
            raise StoreError(f"the cache directory {store.fallback_from} cannot be used "
                             "(see the warning above): nothing was cleared; delete "
                             f"{store.fallback_from / 'wticonv.sqlite'} by hand if you can")
        click.echo(f"the cache directory {store.fallback_from} cannot be used; this "
                   "process uses a temporary one:", err=True)
    if clear:
        store.clear()
        tables = store.summary()
    info = {"path": str(store.path), "tables": tables}
    if as_json:
        _emit_json(info)
    else:
        if clear:
            click.echo("cleared every record")
        click.echo(f"cache database: {info['path']}")
        for table, count in info["tables"].items():
            click.echo(f"  {table}: {count} record(s)")
    return 0
