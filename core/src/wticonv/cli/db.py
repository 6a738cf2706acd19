"""``wticonv db``: databases that travel (export, import) and the system databases.

The files are in the ``wticonv-db`` format (:mod:`wticonv.db.transfer`, docs/fleet.md):
JSON lines, a header, then one record a line, sorted.
"""

from __future__ import annotations

import sys

import click

from wticonv.cli.commands import _emit_json, _json_option, cli
from wticonv.db.transfer import KINDS, is_pattern
from wticonv.errors import DbFileError, WticonvError

_DEVICE_HELP = ("Only this device's records (repeatable): gpu, cpu or P:D as `wticonv "
                "devices` lists them, or a device key or pattern (platform|name|driver "
                "version, * for any text).")


#: Groups of bad records (alike ones once) `wticonv db system` lists per system database
#: (the rest are counted in a last line).
BAD_SHOWN = 20


@cli.group("db")
def db_group() -> None:
    """Export and import the find-db, perf-db and calibration as text files (the
    wticonv-db format: JSON lines, a header line, then one record a line, sorted); list
    the system databases that installed distributions ship.

    \b
      wticonv db export my.jsonl                 every record of the cache
      wticonv db export - --device gpu --kind find-db | less
      wticonv db import my.jsonl                 all or nothing: a bad record stops it
      wticonv db import my.jsonl --skip-bad      import the good records, report the bad
      wticonv db system                          system databases and what they serve here
    """


def _device_keys(specs: tuple[str, ...], store) -> list[str] | None:
    """``--device`` values as device keys or patterns (None: no filter). A device key or
    pattern is taken as it is; ``gpu``, ``cpu`` and ``P:D`` name a device of this machine
    (opened as every command does, so that ``cpu`` means the same device)."""
    if not specs:
        return None
    from wticonv.runtime.device import select_device

    return [s if "|" in s or is_pattern(s) else select_device(s, store).key for s in specs]


def _counts(counts: dict) -> str:
    parts = [f"{k} {n}" for k, n in counts.items() if n]
    return ", ".join(parts) or "none"


@db_group.command("export")
@click.argument("file", metavar="FILE")
@click.option("--device", "devices", multiple=True, metavar="SPEC", help=_DEVICE_HELP)
@click.option("--kind", "kinds", multiple=True, type=click.Choice(KINDS),
              help="Only records of this kind (repeatable; default: all). calibration: the "
                   "factors, correction: the learned models; `wticonv calibrate` writes "
                   "both.")
@click.option("--match", default=None, metavar="PATTERN",
              help="Write this device pattern as every record's device, for a system "
                   "database serving several devices (docs/fleet.md); the records must be "
                   "of one device.")
@click.option("--comment", default=None, metavar="TEXT",
              help="Keep TEXT in the header (e.g. the command that measured the records).")
@click.option("--force", is_flag=True,
              help="Replace an existing FILE even when no record matched (a header alone).")
@_json_option
def export_command(file, devices, kinds, match, comment, force, as_json) -> int:
    """Write the cache's records to FILE ('-': standard output).

    One header line (format, version, wticonv version, date, devices), then one record a
    line, sorted by kind, device, problem and solver, so that two exports diff well.
    Without --device, every device's records. An existing FILE is replaced whole, once
    the export is complete; when no record matched, it is left as it was (exit status
    2) unless --force.
    """
    from wticonv.db.store import Store
    from wticonv.db.transfer import export_db

    if as_json and file == "-":
        raise click.UsageError("--json prints a summary on standard output, where FILE '-' "
                               "writes the records: give a file name")
    if not file:
        raise click.BadParameter("an empty file name", param_hint="FILE")
    store = Store()
    keys = _device_keys(devices, store)
    try:
        summary = export_db(store, file, keys, kinds or None, match, comment, force)
    except DbFileError as e:
        print(f"wticonv: error: {e}", file=sys.stderr)
        return 2
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--match") from None
    except OSError as e:
        # exit status 2, as every other error of the file's: one line, no traceback
        print(f"wticonv: error: FILE {file!r} could not be written: {e.strerror or e}",
              file=sys.stderr)
        return 2
    total = sum(summary["records"].values())
    if as_json:
        _emit_json(dict(summary, file=file))
        return 0
    say = sys.stderr if file == "-" else sys.stdout
    print(f"exported {total} record(s) ({_counts(summary['records'])}) of "
          f"{len(summary['devices'])} device(s) to {file}", file=say)
    if not total:
        print("wticonv: note: no record matched" + (" --device " + ", ".join(devices)
              if devices else "") + (" --kind " + ", ".join(kinds) if kinds else "")
              + ": `wticonv cache` counts what the cache holds", file=sys.stderr)
    elif kinds and ("calibration" in kinds) != ("correction" in kinds):
        print("wticonv: note: calibration and correction are the two halves of one "
              "calibration: importing one alone replaces the device's whole calibration "
              "there (export them together: --kind calibration --kind correction)",
              file=sys.stderr)
    return 0


@db_group.command("import")
@click.argument("file", metavar="FILE")
@click.option("--device", "devices", multiple=True, metavar="SPEC", help=_DEVICE_HELP)
@click.option("--skip-bad", is_flag=True,
              help="Import the good records of a file that has bad ones (each bad one is "
                   "reported); without it, a bad record imports nothing.")
@click.option("--check", is_flag=True, help="Check every record; import nothing.")
@_json_option
def import_command(file, devices, skip_bad, check, as_json) -> int:
    """Import the records of FILE ('-': standard input) into the cache.

    Every record is checked: its fields and numbers, its problem key, that its solver
    is installed in the version that measured it (records of another version are never
    used), and that a perf-db record's solver is tunable and offers its perf config (on
    this machine's devices). Each bad record is reported with its line, what is wrong and
    how to fix it (alike ones once), and the file imports nothing (exit status 2) unless
    --skip-bad: then a bad record leaves out its whole unit, a device's calibration
    (factors and learned corrections) or a find-db problem's records on a device. The
    good records go in in one transaction. A record replaces what the command that
    measures it would: a problem's find-db records on its device, one perf-db record, a
    device's whole calibration.
    """
    from wticonv.contract.registry import SolverRegistry
    from wticonv.db.checks import group_bad
    from wticonv.db.store import Store
    from wticonv.db.transfer import import_db
    from wticonv.selection.perfdb import perf_record_check

    registry = SolverRegistry()
    versions = {sid: e.version for sid, e in registry.solvers.items()}
    store = Store()
    keys = _device_keys(devices, store)
    try:
        result = import_db(store, file, versions, keys, skip_bad, check,
                           perf_record_check(registry, store))
    except DbFileError as e:
        return _refused(e, as_json, check)
    total = sum(result["records"].values())
    absent = _absent_devices([d for d in result["devices"] if d not in result["patterns"]])
    left_out = [{"unit": u, "records": n, "bad_lines": lines}
                for u, n, lines in result["left_out"]]
    if as_json:
        _emit_json({"file": file, "written": result["written"], "check": check,
                    "records": result["records"], "devices": result["devices"],
                    "skipped_devices": result["skipped"],
                    "bad": [{"line": b.line, "error": b.error} for b in result["bad"]],
                    "left_out": left_out, "warnings": result["warnings"],
                    "not_on_this_machine": absent, "patterns": result["patterns"]})
        return 0
    for where, error in group_bad(result["bad"]):
        print(f"wticonv: warning: {file}:{where}: {error} (skipped)" if where else
              f"wticonv: warning: {error} (skipped)", file=sys.stderr)
    for u in left_out:
        print(f"wticonv: warning: {file}: left out {u['unit']} whole ({u['records']} good "
              f"record(s)), for its bad line(s) {', '.join(map(str, u['bad_lines']))}: it "
              "goes in whole or not at all", file=sys.stderr)
    for w in result["warnings"]:
        print(f"wticonv: warning: {w}", file=sys.stderr)
    verb = "checked" if check else "imported"
    pats = len(result["patterns"])
    keys = len(result["devices"]) - pats
    of = " and ".join([f"{keys} device(s)"] * bool(keys or not pats)
                      + [f"{pats} device pattern(s)"] * bool(pats))
    click.echo(f"{verb} {total} record(s) ({_counts(result['records'])}) of {of} from {file}"
               + (f"; {len(result['bad'])} bad record(s) skipped" if result["bad"] else "")
               + (f", {sum(u['records'] for u in left_out)} good one(s) of their units left "
                  "out" if left_out else "")
               + (f"; {result['skipped']} record(s) of other devices left out"
                  if result["skipped"] else "")
               + ("; nothing written (--check)" if check else ""))
    if result["patterns"]:
        print(f"wticonv: note: {'standard input' if file == '-' else file} names devices "
              "by pattern ("
              f"{', '.join(repr(p) for p in result['patterns'])}): a system database, "
              "which `db import` refuses; ship it in a distribution's wticonv.system_db "
              "entry point, or name it in WTICONV_SYSTEM_DB (docs/fleet.md)",
              file=sys.stderr)
    for key in absent:
        print(f"wticonv: note: {key} is not a device of this machine (or not with this "
              f"driver version): its records {'would be' if check else 'are'} kept, and "
              "used only where it is", file=sys.stderr)
    return 0


def _refused(e: DbFileError, as_json: bool, check: bool = False) -> int:
    """Report a file that imported nothing: its bad lines (alike ones once, at most
    MAX_REPORTED), then what to do; status 2."""
    from wticonv.db.checks import ONLY_SYSTEM_DBS, group_bad

    if as_json:
        _emit_json({"file": e.path, "written": False, "good": e.good,
                    "patterns": e.patterns, "warnings": e.warnings,
                    "bad": [{"line": b.line, "error": b.error} for b in e.bad],
                    "error": str(e).splitlines()[0]})
        return 2
    if len(e.bad) == 1 and not e.good and str(e).count("\n") == 0:
        print(f"wticonv: error: {e}", file=sys.stderr)       # the file itself is unusable
        return 2
    for where, error in group_bad(e.bad):
        print(f"wticonv: error: {e.path}:{where}: {error}" if where else
              f"wticonv: error: {error}", file=sys.stderr)
    for warning in e.warnings:
        print(f"wticonv: warning: {warning}", file=sys.stderr)
    if e.patterns:          # a system database, checked (--check): never imported
        print(f"wticonv: error: {len(e.bad)} bad record(s) in {e.path}, a system database "
              f"(devices by pattern: {', '.join(repr(p) for p in e.patterns)}): fix or "
              "remove them before shipping it; where it is installed, selection leaves "
              "them out and `wticonv db system` lists them", file=sys.stderr)
        return 2
    more = (f", or pass --skip-bad to import the {e.good} good one(s)" if e.good else
            ": --skip-bad would import nothing, since every record is bad or goes in whole "
            "with a bad one (a device's calibration, a problem's find-db records on a "
            "device)")
    done = "checked (--check)" if check else "nothing imported"
    print(f"wticonv: error: {len(e.bad)} bad record(s) in {e.path}: {done}; fix or remove "
          f"them{more}", file=sys.stderr)
    if any(ONLY_SYSTEM_DBS in b.error for b in e.bad):
        print("wticonv: note: a file that names devices by pattern is a system database: "
              "`wticonv db import FILE --check` checks it as one; it serves from a "
              "distribution's wticonv.system_db entry point or WTICONV_SYSTEM_DB "
              "(docs/fleet.md)", file=sys.stderr)
    return 2


def _absent_devices(keys: list[str]) -> list[str]:
    """The device keys among ``keys`` that are not an OpenCL device of this machine."""
    from wticonv.runtime.discovery import list_devices

    try:
        here = {info.key for info, _ in list_devices()}
    except WticonvError:
        here = set()
    return [k for k in keys if k not in here]


@db_group.command("system")
@_json_option
def system_command(as_json) -> int:
    """List the system databases (read-only records that installed distributions ship
    through the entry-point group wticonv.system_db, or WTICONV_SYSTEM_DB's files) and
    which serve this machine's devices.

    A system database's records are used where the cache holds none of its own: a
    device's calibration, a problem's find-db records, a perf-db record. `wticonv
    explain` names the source of each ranking.
    """
    import os

    from wticonv.contract.registry import SolverRegistry
    from wticonv.db.checks import group_bad
    from wticonv.db.store import Store
    from wticonv.db.system import (
        ENV,
        calibration_records,
        pick_calibration,
        system_databases,
        usable_records,
    )
    from wticonv.db.transfer import header_warnings
    from wticonv.runtime.discovery import list_devices

    versions = {sid: e.version for sid, e in SolverRegistry().solvers.items()}

    def usable(solver, version) -> bool:
        return versions.get(solver) == version

    dbs = system_databases()
    rows = [{"name": d.name, "error": d.error, "bad": len(d.bad),
             "bad_records": [f"line {w}: {e}" if w else e
                             for w, e in group_bad(d.bad, limit=BAD_SHOWN)],
             "records": {k: sum(r.kind == k for r in d.records) for k in KINDS},
             "unusable": sum(not usable(r.solver, r.solver_version) for r in d.records),
             "devices": d.devices, "measured_on": d.header.get("measured_on", []),
             "comment": d.header.get("comment", ""), "created": d.header.get("created", ""),
             "warnings": header_warnings(d)}
            for d in dbs.databases]
    store = Store()
    try:
        listed = [info for info, _ in list_devices()]
    except WticonvError:
        listed = []
    here = []
    for info in listed:
        view = dbs.view(info.key)
        own_cal = (store.get_calibration(info.key), store.get_correction(info.key))
        # the system calibration selection would use: the most specific that counts here
        factors, models, _, name = pick_calibration(({}, {}), view, versions)
        own = bool(usable_records(*own_cal, versions))
        cal = list(calibration_records(factors, models))
        # the other system calibrations that match this device, and why they are not used
        others = [{"name": n, "device": dev,
                   "why": "no record usable here" if not usable_records(c, m, versions)
                   else "less specific"}
                  for n, c, m, dev in view.calibrations if c is not factors or m is not models]
        others += [{"name": n, "device": dev, "why": "the same device key or pattern as a "
                    "database read before it, whose records win"} for n, dev in view.shadowed]
        used_for = next((dev for _n, c, m, dev in view.calibrations
                         if c is factors and m is models), "")
        here.append({"device": info.index, "name": info.name, "key": info.key,
                     "calibration": name, "calibration_device": used_for,
                     "own_calibration": own, "passed_over": others,
                     "calibration_records": len(cal),
                     "calibration_usable": sum(usable(sid, ver) for sid, ver in cal),
                     "find_db_problems": len(view.find), "perf_db_records": len(view.perf)})
    source = (f"{ENV}={os.environ[ENV]!r}" if ENV in os.environ
              else "entry points of wticonv.system_db")
    if as_json:
        _emit_json({"source": source, "databases": rows, "devices": here})
        return 0
    click.echo(f"system databases ({source}): {len(rows) or 'none'}")
    for r in rows:
        total, unusable = sum(r["records"].values()), r["unusable"]
        state = (f"cannot be used: {r['error']}" if r["error"] else
                 f"{total} record(s) ({_counts(r['records'])})"
                 + (f", {r['bad']} bad one(s) ignored" if r["bad"] else "")
                 + ("; none of them usable here (all of other solver versions, or of "
                    "solvers not installed)" if unusable and unusable == total else
                    f"; {unusable} of them not usable here (other solver versions, or "
                    "solvers not installed)" if unusable else ""))
        click.echo(f"  {r['name']}: {state}")
        for bad in r["bad_records"]:
            click.echo(f"    bad: {bad}")
        for warning in r["warnings"]:
            click.echo(f"    warning: {warning}")
        for dev in r["devices"]:
            click.echo(f"    for {dev}")
        if r["comment"]:
            click.echo(f"    comment: {r['comment']}")
    for h in here:
        cal, n, ok = h["calibration"], h["calibration_records"], h["calibration_usable"]
        if not cal:
            what = "calibration: none"
        elif not ok:
            what = (f"calibration: {cal}: none of its {n} record(s) usable here (other "
                    "solver versions, or solvers not installed): not used")
        else:
            what = (f"calibration: {cal}"
                    + (f" for {h['calibration_device']!r}" if h["passed_over"] else "")
                    + (" (yours overrides it)" if h["own_calibration"] else " (used)")
                    + (f"; {n - ok} of its {n} record(s) not usable here (other solver "
                       "versions, or solvers not installed)" if ok < n else ""))
        click.echo(f"{h['device']} {h['name']!r}: {what}; find-db records of "
                   f"{h['find_db_problems']} problem(s), {h['perf_db_records']} perf-db "
                   "record(s)")
        for o in h["passed_over"]:
            click.echo(f"    also matches: {o['name']} for {o['device']!r}, passed over "
                       f"({o['why']})")
        if h["passed_over"]:
            click.echo("    (of the system calibrations that match a device, the most "
                       "specific device key or pattern with a record of an installed "
                       "solver version serves it)")
    return 0
