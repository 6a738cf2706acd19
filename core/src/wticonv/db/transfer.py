"""Databases that travel: the ``wticonv-db`` text format, export and import.

A database file is JSON lines (one JSON object a line, UTF-8): a header line, then one
measured record a line, sorted, so that two exports of similar databases differ only in
the lines that changed (docs/fleet.md, *Databases that travel*, has the field tables):

- header: ``{"format": "wticonv-db", "version": 1, "wticonv": <version that wrote it>,
  "created": <UTC, ISO 8601>, "devices": [<device keys (or patterns) of the records>]}``,
  ``"figures_method"`` (the store's :data:`~wticonv.db.schema.FIGURES_METHOD` when it was
  written: a calibration is relative to the device figures it was fitted with, so the
  calibration and correction records of a file of another method, or of none, are bad),
  and optionally ``"measured_on"`` (the device keys the records were measured on, where
  ``devices`` are patterns) and ``"comment"`` (e.g. the command that made the file);
- record: ``{"kind", "device", "problem", "solver", "direction", "solver_version",
  "values"}``: ``kind`` one of :data:`KINDS`; ``device`` the device key
  (``platform|device name|driver version``); ``problem`` the find-db key (MIOpen's
  format) of a find-db or perf-db record, null for calibration and correction records
  (they hold for every problem of the device); ``direction`` a calibration factor's
  (``fwd``, ``bwd``, ``wrw``; null: all directions), else null; ``values`` the kind's
  fields (:data:`VALUE_FIELDS`).

Every record is checked as the store checks what it reads (:mod:`wticonv.db.records`):
a record that fails is reported with its line number, what is wrong and how to fix it.
Where the installed solver versions are given, a record of another version (which
selection would never use) or of a solver that is not installed is refused too.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from wticonv._version import __version__
from wticonv.db.checks import (
    FIELDS,
    KINDS,
    VALUE_FIELDS,
    BadRecord,
    Record,
    check_record,
    describe_unit,
    device_matches,
    group_bad,
    is_device_key_form,
    is_pattern,
)
from wticonv.db.reading import FORMAT, FORMAT_VERSION, DbFile, _Bad, read_db
from wticonv.db.schema import FIGURES_METHOD
from wticonv.errors import DbFileError

__all__ = ["FORMAT", "FORMAT_VERSION", "KINDS", "VALUE_FIELDS", "Record", "BadRecord",
           "DbFile", "check_record", "read_db", "format_db", "export_db", "import_db",
           "is_pattern", "device_matches", "bad_report", "header_warnings"]

def format_db(records: Iterable[Record], comment: str | None = None,
              measured_on: Iterable[str] | None = None) -> list[str]:
    """The lines of a database file (no newlines): the header, then ``records`` sorted
    by kind, device, problem, solver and direction."""
    records = sorted(records, key=Record.sort_key)
    header = {"format": FORMAT, "version": FORMAT_VERSION, "wticonv": __version__,
              "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "devices": sorted({r.device for r in records}),
              "figures_method": FIGURES_METHOD}
    if measured_on is not None:
        header["measured_on"] = sorted(set(measured_on))
    if comment:
        header["comment"] = comment
    return [json.dumps(header, ensure_ascii=False)] + [r.line() for r in records]


def _write(lines: list[str], target) -> None:
    """Write ``lines`` to ``target`` (a path: atomically, by renaming a finished temporary
    file over it; ``"-"``: standard output)."""
    text = "".join(line + "\n" for line in lines)
    if target == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    path = Path(target)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent or ".")
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)          # as open() would have made it, not 0600
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def export_db(store, target, devices: Iterable[str] | None = None,
              kinds: Iterable[str] | None = None, match: str | None = None,
              comment: str | None = None, force: bool = False) -> dict:
    """Write the records of ``store`` to ``target`` (a path, or ``"-"``: standard
    output) in the ``wticonv-db`` format.

    Parameters
    ----------
    devices : device keys or patterns (:func:`device_matches`), optional
        Only these devices' records (default: every device the store holds records of).
    kinds : optional
        Only these kinds (:data:`KINDS`; default: all).
    match : str, optional
        Write this device pattern as every record's device (a system database's records
        for several devices, docs/fleet.md); the header keeps the keys measured on in
        ``measured_on``. The records must be of one device.
    comment : str, optional
        Kept in the header (e.g. the command that measured the records).
    force : bool
        Replace an existing ``target`` even when no record matched (a file of a header
        alone); without it, that is refused and the file left as it was.

    Returns
    -------
    dict
        ``{"records": {kind: count}, "devices": [...], "measured_on": [...],
        "left_out": n}``; a stored record that fails the checks of :func:`check_record`
        is left out with a warning (counted in ``left_out``).

    Raises
    ------
    ValueError
        An unknown kind, a ``match`` that is not a device pattern or does not match the
        device the records are of, or ``match`` over the records of several devices.
    DbFileError
        No record matched and ``target`` is an existing file (and not ``force``): an
        empty export would replace it with a header alone.
    OSError
        If ``target`` cannot be written (an existing file is then left as it was).
    """
    import warnings

    kinds = tuple(KINDS if kinds is None else kinds)
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise ValueError(f"unknown record kind(s) {', '.join(unknown)}: the kinds are "
                         f"{', '.join(KINDS)}")
    keys = store.record_device_keys()
    if devices is not None:
        wanted = list(devices)
        keys = [k for k in keys if any(device_matches(k, d) for d in wanted)]
    records, left_out = [], 0
    for kind, dev, pk, sid, direction, ver, values in store.dump_records(keys, kinds):
        obj = dict(zip(FIELDS, (kind, dev, pk, sid, direction, ver, values), strict=True))
        try:
            records.append(check_record(obj))
        except _Bad as e:
            left_out += 1
            warnings.warn(f"wticonv: left out a stored {kind} record of {sid} on {dev} that "
                          f"fails the checks ({e})", stacklevel=2)
    measured_on = None
    if match is not None:
        if not isinstance(match, str) or len(match.split("|")) != 3:
            raise ValueError(f"match={match!r:.80} must be a device pattern: "
                             "platform|device name|driver version with * or ? where any "
                             "text goes, e.g. 'Portable Computing Language|pthread-*|3.1*'")
        measured_on = {r.device for r in records}
        if len(measured_on) > 1:
            raise ValueError(f"match= gives every record one device pattern, but the records "
                             f"are of {len(measured_on)} devices ({', '.join(sorted(measured_on))}"
                             "): export one device")
        if measured_on and not device_matches(next(iter(measured_on)), match):
            raise ValueError(f"match={match!r:.80} does not match {next(iter(measured_on))}, "
                             "the device the records were measured on: a pattern widens a "
                             "device's records to devices like it, and must cover that "
                             "device's own key")
        records = [Record(r.kind, match, r.problem, r.solver, r.direction, r.solver_version,
                          r.values) for r in records]
    if not records and not force and target != "-" and Path(target).exists():
        raise DbFileError(f"no record matched (of {len(keys)} device(s) with records, kinds "
                          f"{', '.join(kinds)}): {target} exists and is left as it was; an "
                          "empty export would replace it with a header alone (`--force` on the "
                          "command line, force=True in Python, writes it all the same)",
                          str(target))
    _write(format_db(records, comment, measured_on), target)
    counts = {k: sum(r.kind == k for r in records) for k in KINDS if k in kinds}
    return {"records": counts, "devices": sorted({r.device for r in records}),
            "measured_on": sorted(measured_on or ()), "left_out": left_out}


def bad_report(bad) -> list[str]:
    """The bad lines as a report lists them (:func:`wticonv.db.checks.group_bad`): alike
    ones once, at most :data:`~wticonv.db.checks.MAX_REPORTED`, then "and N more"."""
    return [f"line {where}: {error}" if where else error
            for where, error in group_bad(bad)]


def header_warnings(db) -> list[str]:
    """Warnings where the header disagrees with the format or the file (edited by hand, or
    two files joined): a ``devices`` that is not a list (a header may leave it out), an
    entry of it that is no device key or pattern (three non-empty parts, platform|device
    name|driver version) or comes twice, devices that records name but the list leaves
    out or that it names and no record does, a ``measured_on`` that is not a list or a
    ``comment`` that is not text. The records count either way; the header is wrong.
    ``db``: anything with ``name``, ``header`` and ``records`` (a :class:`DbFile`, or a
    system database, :class:`wticonv.db.system.SystemDb`). Remade by `wticonv db export`,
    the header is right."""
    mend = "remake the file with `wticonv db export` to mend the header"
    out = []
    for field, kind, ok in (("measured_on", "a list of device keys", list),
                            ("comment", "text", str)):
        if field in db.header and not isinstance(db.header[field], ok):
            out.append(f"{db.name}: the header's {field} is "
                       f"{json.dumps(db.header[field])[:60]}, not {kind}: {mend}")
    if "devices" not in db.header:      # a hand-written file may leave the list out
        return out
    listed = db.header["devices"]
    if not isinstance(listed, list):
        return [f"{db.name}: the header has devices {json.dumps(listed)[:60]}, not a list "
                f"(the device keys or patterns of its records, sorted): {mend}"] + out
    malformed = [d for d in listed if not is_device_key_form(d)]
    if malformed:
        one = len(malformed) == 1
        out.append(f"{db.name}: the header's devices list holds {len(malformed)} "
                   f"{'entry that is' if one else 'entries that are'} no device key or pattern "
                   f"({', '.join(json.dumps(d)[:80] for d in malformed[:3])}"
                   f"{', ...' if len(malformed) > 3 else ''}; each needs three parts, "
                   f"platform|device name|driver version): {mend}")
    strings = [d for d in listed if isinstance(d, str)]
    twice = sorted({d for d in strings if strings.count(d) > 1})
    if twice:
        out.append(f"{db.name}: the header's devices list names {_few(twice)} twice: {mend}")
    named = {r.device for r in db.records}
    missing = sorted(named - set(strings))
    if missing:
        out.append(f"{db.name}: records name {len(missing)} device(s) that the header's "
                   f"devices list leaves out ({_few(missing)}): the records count; {mend}")
    extra = sorted(set(strings) - named - {d for d in malformed if isinstance(d, str)})
    if extra and db.records and not getattr(db, "skipped", 0):   # not cut by a device filter
        out.append(f"{db.name}: the header's devices list names {len(extra)} device(s) "
                   f"that no good record is for ({_few(extra)}): {mend}")
    return out


def _few(items: list[str]) -> str:
    """Up to three of ``items``, quoted, then "..." if there are more."""
    return ", ".join(repr(d) for d in items[:3]) + (", ..." if len(items) > 3 else "")


def _halves(store, records) -> list[str]:
    """Warnings for the devices whose calibration the file holds only half of (factors
    without learned corrections, or the reverse) where ``store`` holds the other half:
    an import replaces a device's whole calibration, so that half goes."""
    out = []
    for dev in sorted({r.device for r in records if r.kind in ("calibration", "correction")}):
        kinds = {r.kind for r in records if r.device == dev}
        try:
            factors, models = store.get_calibration(dev), store.get_correction(dev)
        except Exception:  # noqa: BLE001 - an unreadable store has nothing to lose
            factors, models = {}, {}
        if "correction" not in kinds and models:
            out.append(f"the file holds the calibration factors of {dev} but not its learned "
                       f"corrections: an import replaces a device's whole calibration, so the "
                       f"{len(models)} learned correction(s) stored for it go; export both "
                       "halves together (--kind calibration --kind correction)")
        elif "calibration" not in kinds and factors:
            out.append(f"the file holds the learned corrections of {dev} but not its "
                       "calibration factors: an import replaces a device's whole calibration, "
                       f"so the {len(factors)} factor(s) stored for it go; export both halves "
                       "together (--kind calibration --kind correction)")
    return out


def import_db(store, source, versions: Mapping[str, str] | None = None,
              devices: Iterable[str] | None = None, skip_bad: bool = False,
              check: bool = False,
              solver_check: Callable[[Record], None] | None = None) -> dict:
    """Import a database file into ``store``, in one transaction.

    ``source``: a path, ``"-"`` (standard input), a resource file or an open text file.
    Every record is checked (:func:`check_record`; ``versions``: the installed solvers'
    versions, ``{solver_id: version}``, to refuse records selection would never use;
    ``solver_check``: as :func:`read_db`). ``devices`` (keys or patterns) imports only
    those devices' records; ``check`` checks and writes nothing, and accepts devices
    named by pattern (a system database's file, :mod:`wticonv.db.system`, which an
    import refuses: ``"patterns"`` in the result lists them). What a record replaces:
    :meth:`wticonv.db.store.Store.load_records`.

    Records go in by units (:func:`wticonv.db.checks.unit_of`): a device's calibration
    (factors and learned corrections) and a find-db problem's records on a device are
    imported whole or not at all, so with ``skip_bad`` a bad record leaves out its whole
    unit (listed in ``left_out``).

    Returns ``{"records": {kind: count}, "devices": [...], "bad": [BadRecord, ...],
    "left_out": [(unit in words, good records left out, bad lines)], "warnings": [str],
    "skipped": n, "written": bool, "patterns": [device patterns]}``; ``warnings`` name
    the devices whose calibration the file holds half of while the store holds the other
    half, which the import drops, and the devices records name that the header's
    ``devices`` list leaves out.

    Raises
    ------
    DbFileError
        If the file cannot be read or has no valid header; or if it holds bad records and
        ``skip_bad`` is false: then nothing is imported, and the error lists the bad lines
        (alike ones once; its ``good`` is how many records ``skip_bad`` would import).
    """
    db = read_db(source, patterns=check, versions=versions, devices=devices,
                 solver_check=solver_check)
    broken: dict[tuple, list[int]] = {}
    for b in db.bad:
        if b.unit is not None:
            broken.setdefault(b.unit, []).append(b.line)
    keep = [r for r in db.records if r.unit not in broken]
    left_out = [(describe_unit(u), sum(r.unit == u for r in db.records), lines)
                for u, lines in broken.items() if any(r.unit == u for r in db.records)]
    if db.bad and not skip_bad:
        lines = "\n".join(f"  {line}" for line in bad_report(db.bad))
        more = (f"import the {len(keep)} good one(s) alone (skip_bad=True, `--skip-bad`)"
                if keep else "no record of it is good")
        raise DbFileError(f"{db.name}: {len(db.bad)} bad record(s), nothing imported:\n"
                          f"{lines}\nfix or remove them, or {more}", db.name, db.bad,
                          len(keep), sorted({r.device for r in db.records
                                             if is_pattern(r.device)}),
                          header_warnings(db))
    warnings = _halves(store, keep) + header_warnings(db)
    if not check and keep:
        store.load_records([r.as_tuple() for r in keep])
    return {"records": {k: sum(r.kind == k for r in keep) for k in KINDS},
            "devices": sorted({r.device for r in keep}), "bad": db.bad,
            "left_out": left_out, "warnings": warnings, "skipped": db.skipped,
            "written": not check and bool(keep),
            "patterns": sorted({r.device for r in keep if is_pattern(r.device)})}
