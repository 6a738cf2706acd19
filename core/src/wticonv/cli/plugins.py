"""Plugin commands: ``wticonv plugins``, ``check``, ``install`` and ``uninstall``.

In the manner of llm's and datasette's plugin commands: ``plugins`` lists what is
installed (distributions, their solvers, the hooks each implements, quarantined entry
points); ``install`` and ``uninstall`` are thin wrappers over pip in wticonv's own
environment (``sys.executable -m pip``), which then say which solvers appeared or
disappeared; ``check`` runs the conformance kit on an installed plugin, isolated.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import click

from wticonv.cli.commands import (
    _device_option,
    _emit_json,
    _handle,
    _json_option,
    cli,
    dynamic_or_error,
)
from wticonv.errors import SolverNotFoundError

__all__ = ["plugins_info", "pip_command", "installed_solvers"]

_PIP = {"ignore_unknown_options": True, "help_option_names": ["-h", "--help"]}


def plugins_info(include_all: bool = False) -> list[dict]:
    """One dict per distribution with solver entry points (see ``wticonv plugins
    --json``): name, version, built_in, skipped (the filter that kept it from loading,
    or None), solvers (id, hooks, hook_api, tunable, tolerance, max_wti, math, dynamic,
    disabled, entry_point) and quarantined (entry_point, solver_id, reason, and the
    traceback with ``WTICONV_DEBUG``). Without ``include_all``, built-in and filtered-out
    distributions are left out."""
    from wticonv.contract.answers import declared_max_wti, declared_tolerance
    from wticonv.contract.ownership import norm_dist
    from wticonv.contract.registry import BUILT_IN_DISTRIBUTIONS, SolverRegistry, debug_enabled

    reg = SolverRegistry()
    built_in = {norm_dist(d) for d in BUILT_IN_DISTRIBUTIONS}
    dists: dict[str, dict] = {}

    def dist(name: str, version: str) -> dict:
        key = norm_dist(name)
        if key not in dists:
            dists[key] = {"name": name, "version": version, "built_in": key in built_in,
                          "skipped": None, "solvers": [], "quarantined": []}
        return dists[key]

    for sid in reg.ids():
        e = reg.solvers[sid]
        dynamic = dynamic_or_error(reg, sid)
        api = getattr(e.obj, "hook_api", None)
        dist(e.distribution or "(registered by hand)", e.version)["solvers"].append({
            "solver_id": sid,
            "hooks": sorted(c.name for c in reg.pm.get_hookcallers(e.obj) or []),
            "hook_api": list(api) if isinstance(api, (tuple, list)) else api,
            "tunable": e.tunable, "tolerance": declared_tolerance(sid, e.obj),
            "max_wti": declared_max_wti(sid, e.obj), "math": e.math, "dynamic": dynamic,
            "disabled": sid in reg.disabled, "entry_point": e.entry_point})
    for q in reg.quarantined:
        row = {"entry_point": q.entry_point, "solver_id": q.solver_id, "reason": q.reason}
        if debug_enabled() and q.traceback:
            row["traceback"] = q.traceback
        dist(q.distribution, q.version)["quarantined"].append(row)
    for name, why in reg.skipped.items():
        dist(name, "")["skipped"] = why
    from wticonv.cli.commands import filter_note

    filter_note(reg)
    rows = sorted(dists.values(), key=lambda d: (not d["built_in"], norm_dist(d["name"])))
    if not include_all:
        rows = [d for d in rows if not d["built_in"] and d["skipped"] is None]
    return rows


def _render(rows: list[dict], include_all: bool) -> None:
    if not rows:
        click.echo("no solver plugins besides the built-in ones are installed"
                   + ("" if include_all else " (wticonv plugins --all lists those too)"))
    for d in rows:
        tags = [t for t in ("built-in" if d["built_in"] else "",
                            f"not loaded: {d['skipped']}" if d["skipped"] else "") if t]
        click.echo(f"{d['name']} {d['version']}".strip()
                   + (f" ({', '.join(tags)})" if tags else ""))
        for s in d["solvers"]:
            dyn = {True: "dynamic", False: "not dynamic"}.get(s["dynamic"], s["dynamic"])
            api = ", ".join(map(str, s["hook_api"])) if s["hook_api"] else "not stated"
            flags = [dyn, f"hook API {api}", f"tolerance {s['tolerance']:g}",
                     f"max_wti {s['max_wti']:g}", f"math {s['math']}"]
            flags += ["tunable"] if s["tunable"] else []
            flags += ["disabled (WTICONV_DISABLE_SOLVERS)"] if s["disabled"] else []
            click.echo(f"  {s['solver_id']}: {'; '.join(flags)}")
            click.echo(f"    hooks: {', '.join(s['hooks'])}")
        for q in d["quarantined"]:
            who = f" (solver {q['solver_id']})" if q["solver_id"] else ""
            click.echo(f"  QUARANTINED {q['entry_point']}{who}: {q['reason']}")
            if q.get("traceback"):
                click.echo("    " + q["traceback"].rstrip().replace("\n", "\n    "))


@cli.command()
@_json_option
@click.option("--all", "include_all", is_flag=True,
              help="Also list the built-in plugins and the distributions a filter "
                   "(WTICONV_LOAD_PLUGINS, --no-plugin) kept from loading.")
def plugins(as_json: bool, include_all: bool) -> int:
    """List installed solver plugins: each distribution, its solvers (the hooks each
    implements, hook API, tunable, tolerance, max_wti, math) and its quarantined entry points,
    with the solver id where it is known and the reason."""
    rows = plugins_info(include_all)
    if as_json:
        _emit_json(rows)
    else:
        _render(rows, include_all)
    return 0


def _targets(name: str, registry) -> tuple[list[str], list]:
    """Solver ids and quarantines of ``name``: a solver id, or a distribution name."""
    from wticonv.contract.ownership import norm_dist

    if name in registry.solvers:
        return [name], [q for q in registry.quarantined if q.solver_id == name]
    want = norm_dist(name)
    ids = [sid for sid, e in sorted(registry.solvers.items())
           if norm_dist(e.distribution) == want]
    held = [q for q in registry.quarantined
            if norm_dist(q.distribution) == want or q.solver_id == name]
    if not ids and not held:
        known = ", ".join(sorted({e.distribution for e in registry.solvers.values()}))
        raise SolverNotFoundError(f"{name!r} is neither an installed solver nor a distribution "
                                  f"with solvers; installed distributions: {known} (see "
                                  "`wticonv plugins --all`)")
    return ids, held


@cli.command()
@click.argument("target", metavar="DIST|SOLVER")
@click.option("--check", "checks", multiple=True, metavar="NAME",
              help="Run only this check (repeatable); default: all of them.")
@click.option("--examples", type=click.IntRange(min=0), default=20, show_default=True,
              help="Problems the reference check draws with hypothesis.")
@click.option("--no-isolate", is_flag=True,
              help="Check beside every installed plugin instead of the built-ins only.")
@_device_option
@_json_option
def check(target, checks, examples, no_isolate, device, as_json) -> int:
    """Run the conformance kit on an installed plugin (every solver of distribution DIST)
    or on one SOLVER, and print a readable report: each check, passed with the number
    of problems it covered, or what failed and on which problem. Exit status 1 if a
    check fails or an entry point of DIST is quarantined."""
    from wticonv.contract.registry import SolverRegistry
    from wticonv.testing import CHECKS, check_solver

    unknown = [c for c in checks if c not in CHECKS]
    if unknown:
        raise click.BadParameter(f"unknown check(s) {', '.join(unknown)}; the checks are "
                                 f"{', '.join(CHECKS)}", param_hint="--check")
    ids, held = _targets(target, SolverRegistry())
    handle = _handle(device)        # says so when it measures the device first
    reports = [check_solver(sid, handle, checks=list(checks) or None, examples=examples,
                            raise_on_failure=False, isolated=not no_isolate) for sid in ids]
    if as_json:
        _emit_json({"target": target, "quarantined": [q.__dict__ | {"traceback": ""}
                                                      for q in held],
                    "solvers": [{"solver_id": r.solver_id, "ok": r.ok,
                                 "results": [vars(c) for c in r.results],
                                 "notes": r.notes} for r in reports]})
    else:
        for q in held:
            click.echo(f"QUARANTINED {q.entry_point} ({q.distribution}"
                       + (f", solver {q.solver_id}" if q.solver_id else "") + f"): {q.reason}")
        for r in reports:
            click.echo(str(r))
        ok = sum(r.ok for r in reports)
        click.echo(f"{ok} of {len(reports)} solver(s) conform"
                   + (f"; {len(held)} entry point(s) quarantined" if held else "")
                   + f" (on {handle.device.info.name.strip()}"
                   + (", isolated: only the built-in solvers beside it)" if not no_isolate
                      else ")"))
    return 0 if all(r.ok for r in reports) and not held else 1


def pip_command(args) -> list[str]:
    """The pip command line of ``args`` in wticonv's own environment."""
    return [sys.executable, "-m", "pip", *args]


_LISTING = ("import json, warnings\nwarnings.simplefilter('ignore')\n"
            "from wticonv.contract.registry import SolverRegistry\nr = SolverRegistry()\n"
            "print(json.dumps({'solvers': {s: f'{e.distribution} {e.version}'.strip() "
            "for s, e in r.solvers.items()}, 'quarantined': [f'{q.entry_point} "
            "({q.distribution}): {q.reason}' for q in r.quarantined]}))\n")


def installed_solvers() -> dict:
    """``{"solvers": {id: "dist version"}, "quarantined": [line, ...]}`` as a fresh
    process sees them (pip's changes are not all visible in this one), every filter off."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("WTICONV_LOAD_PLUGINS", "WTICONV_NO_PLUGINS", "WTICONV_TRACE")}
    out = subprocess.run([sys.executable, "-c", _LISTING], capture_output=True, text=True,
                         env=env, timeout=300)
    if out.returncode != 0:
        return {"solvers": {}, "quarantined": [], "error": out.stderr.strip()[-500:]}
    return json.loads(out.stdout)


def _pip(args) -> int:
    return subprocess.run(pip_command(args)).returncode


def _pip_and_report(args) -> int:
    before = installed_solvers()
    rc = _pip(args)
    after = installed_solvers()
    added = sorted(set(after["solvers"]) - set(before["solvers"]))
    removed = sorted(set(before["solvers"]) - set(after["solvers"]))
    held = [q for q in after["quarantined"] if q not in before["quarantined"]]
    for sid in added:
        click.echo(f"solver added: {sid} ({after['solvers'][sid]})")
    for sid in removed:
        click.echo(f"solver removed: {sid} ({before['solvers'][sid]})")
    for q in held:
        click.echo(f"quarantined (not loaded): {q}")
    if not (added or removed or held):
        click.echo("no solver appeared or disappeared")
    if after.get("error"):
        click.echo(f"wticonv: warning: could not list the solvers: {after['error']}", err=True)
    return rc


@cli.command(context_settings=_PIP)
@click.argument("args", nargs=-1, required=True, type=click.UNPROCESSED)
def install(args) -> int:
    """pip install ARGS into wticonv's own environment (e.g. `wticonv install
    wticonv-myconv`, `wticonv install -e ./wticonv-myconv`), then say which solvers
    appeared. The exit status is pip's."""
    return _pip_and_report(["install", *args])


@cli.command(context_settings=_PIP)
@click.argument("args", nargs=-1, required=True, type=click.UNPROCESSED)
def uninstall(args) -> int:
    """pip uninstall -y ARGS from wticonv's own environment, then say which solvers
    disappeared. The exit status is pip's."""
    return _pip_and_report(["uninstall", "-y", *args])
