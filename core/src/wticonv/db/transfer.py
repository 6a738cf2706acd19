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

import fnmatch
import json
import math
import os
import re
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from wticonv._version import __version__
from wticonv.db.records import RECORD_KINDS, valid_correction_model, valid_perf_config
from wticonv.db.schema import FIGURES_METHOD
from wticonv.errors import DbFileError, KeyFormatError
from wticonv.problem.conv import parse_key

__all__ = ["FORMAT", "FORMAT_VERSION", "KINDS", "VALUE_FIELDS", "Record", "BadRecord",
           "DbFile", "check_record", "read_db", "format_db", "export_db", "import_db",
           "is_pattern", "device_matches"]

#: The format's name, the header's ``"format"``.
FORMAT = "wticonv-db"
#: The format version this wticonv writes and reads (the header's ``"version"``).
FORMAT_VERSION = 1
#: The record kinds, in the order a file lists them.
KINDS = RECORD_KINDS
#: The fields of a record, in the order they are written.
FIELDS = ("kind", "device", "problem", "solver", "direction", "solver_version", "values")

#: The kinds fitted to the device figures (relative to the WTI models' predictions).
_FITTED = ("calibration", "correction")
#: Each kind's ``values`` fields.
VALUE_FIELDS = {
    "find-db": ("workspace", "time_ms", "runs", "capped"),
    "perf-db": ("perf_config", "time_ms", "default_ms"),
    "calibration": ("factor", "probes"),
    "correction": ("features", "model", "runs"),
}
_DIRECTIONS = ("fwd", "bwd", "wrw")
#: A solver id, as the registry requires it (wticonv.contract.registry, which this layer
#: cannot import).
_SOLVER_RE = re.compile(r"^[a-z0-9_]+\.[a-z0-9_]+$")
_GLOB = re.compile(r"[*?\[]")
_EXAMPLE_DEVICE = "NVIDIA CUDA|NVIDIA H200|550.54.15"
_EXAMPLE_KEY = "64-56-56-3x3-64-56-56-16-1x1-1x1-1x1-0-NCHW-FP32-F"


@dataclass(frozen=True)
class Record:
    """One measured record of a database file (see the module docstring for the fields)."""

    kind: str
    device: str
    problem: str | None
    solver: str
    direction: str | None
    solver_version: str
    values: dict = field(compare=True, hash=False)

    @property
    def identity(self) -> tuple[str, str, str, str, str]:
        """What two records of one file may not share: kind, device, problem, solver and
        direction (the order of a file's records)."""
        return (self.kind, self.device, self.problem or "", self.solver,
                self.direction or "")

    def sort_key(self) -> tuple:
        return (KINDS.index(self.kind),) + self.identity[1:]

    def as_tuple(self) -> tuple:
        """The record as :meth:`wticonv.db.store.Store.load_records` takes it."""
        return (self.kind, self.device, self.problem, self.solver, self.direction,
                self.solver_version, self.values)

    def line(self) -> str:
        """The record's line (no newline): its fields in order, the values' keys sorted."""
        obj = {"kind": self.kind, "device": self.device, "problem": self.problem,
               "solver": self.solver, "direction": self.direction,
               "solver_version": self.solver_version, "values": _sorted(self.values)}
        return json.dumps(obj, allow_nan=False, ensure_ascii=False)


def _sorted(obj):
    if isinstance(obj, dict):
        return {k: _sorted(obj[k]) for k in sorted(obj)}
    if isinstance(obj, list):
        return [_sorted(x) for x in obj]
    return obj


@dataclass(frozen=True)
class BadRecord:
    """A line of a database file that was refused: its number (1 = the header) and what
    is wrong with it, with how to fix it."""

    line: int
    error: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.error}"


@dataclass
class DbFile:
    """A database file as read: its header, its good records and its bad lines."""

    name: str
    header: dict
    records: list[Record]
    bad: list[BadRecord]
    skipped: int = 0     # good records of devices left out by the caller's filter


class _Bad(ValueError):
    """What is wrong with one record (its message becomes a BadRecord's error)."""


def is_pattern(device: str) -> bool:
    """Whether a record's ``device`` is a pattern (``*``, ``?`` or ``[...]``, as
    :func:`fnmatch.fnmatchcase`), which only a system database may hold."""
    return bool(_GLOB.search(device))


def device_matches(device_key: str, pattern: str) -> bool:
    """Whether ``device_key`` is ``pattern`` or matches it (:func:`fnmatch.fnmatchcase`)."""
    return device_key == pattern or (is_pattern(pattern)
                                     and fnmatch.fnmatchcase(device_key, pattern))


def _number(v, what: str, positive: bool) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
            or (positive and v <= 0):
        raise _Bad(f"values.{what} = {json.dumps(v)[:40]} must be a "
                   + ("positive " if positive else "") + "finite number"
                   + (" of ms" if what.endswith("_ms") else "")
                   + ": give the measured figure, or remove the record")
    return float(v)


def _count(v, what: str, least: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < least:
        raise _Bad(f"values.{what} = {json.dumps(v)[:40]} must be a whole number >= {least}")
    return v


def _values(kind: str, v) -> dict:
    """The checked ``values`` of a ``kind`` record (numbers as the store keeps them)."""
    if not isinstance(v, dict):
        raise _Bad(f"values must be an object with {', '.join(VALUE_FIELDS[kind])}")
    want = VALUE_FIELDS[kind]
    missing, extra = [f for f in want if f not in v], sorted(set(v) - set(want))
    if missing or extra:
        raise _Bad(f"a {kind} record's values are {', '.join(want)}"
                   + (f"; missing {', '.join(missing)}" if missing else "")
                   + (f"; unknown {', '.join(extra)}" if extra else ""))
    if kind == "find-db":
        if not isinstance(v["capped"], bool):
            raise _Bad("values.capped must be true or false (whether the runs were cut "
                       "short by the time cap)")
        return {"workspace": _count(v["workspace"], "workspace", 0),
                "time_ms": _number(v["time_ms"], "time_ms", True),
                "runs": _count(v["runs"], "runs", 1), "capped": v["capped"]}
    if kind == "perf-db":
        if not valid_perf_config(v["perf_config"]):
            raise _Bad(f"values.perf_config = {json.dumps(v['perf_config'])[:60]} must be a "
                       "non-empty printable name of at most 100 characters")
        return {"perf_config": v["perf_config"],
                "time_ms": _number(v["time_ms"], "time_ms", True),
                "default_ms": _number(v["default_ms"], "default_ms", True)}
    if kind == "calibration":
        return {"factor": _number(v["factor"], "factor", True),
                "probes": _count(v["probes"], "probes", 0)}
    names = v["features"]
    if not (isinstance(names, list) and names and all(isinstance(n, str) and n
                                                      for n in names)):
        raise _Bad("values.features must be a non-empty list of feature names")
    if not valid_correction_model(v["model"], len(names)):
        raise _Bad(f"values.model is not a usable correction of {len(names)} features: "
                   "one finite coefficient per feature, or boosted trees of finite arrays "
                   "(as `wticonv calibrate` stores them); export it again")
    return {"features": list(names), "model": v["model"], "runs": _count(v["runs"], "runs", 0)}


def check_record(obj, patterns: bool = False,
                 versions: Mapping[str, str] | None = None) -> Record:
    """``obj`` (a parsed line) checked as a record, with its problem key in the canonical
    form; ``patterns`` allows a device pattern (system databases only); ``versions``
    (``{solver_id: installed version}``) refuses records of solvers that are not
    installed, or of another version.

    Raises
    ------
    ValueError
        What is wrong, and how to fix it (one line).
    """
    if not isinstance(obj, dict):
        raise _Bad(f"a record must be a JSON object with the fields {', '.join(FIELDS)}")
    kind = obj.get("kind")
    if "format" in obj and "kind" not in obj:
        raise _Bad("a second header line (two files joined?): a file has one header, on "
                   "its first line; remove this one")
    if kind not in KINDS:
        raise _Bad(f"unknown kind {json.dumps(kind)[:40]}: the kinds are {', '.join(KINDS)}")
    missing, extra = [f for f in FIELDS if f not in obj], sorted(set(obj) - set(FIELDS))
    if missing or extra:
        raise _Bad(f"a record has the fields {', '.join(FIELDS)}"
                   + (f"; missing {', '.join(missing)}" if missing else "")
                   + (f"; unknown {', '.join(extra)} (a file of a newer wticonv? export it "
                      "with this one)" if extra else ""))
    device = obj["device"]
    parts = device.split("|") if isinstance(device, str) else []
    if len(parts) != 3 or not all(p.strip() for p in parts):
        raise _Bad(f"device {json.dumps(device)[:80]} is not a device key: platform|device "
                   f"name|driver version, as `wticonv devices` and `wticonv db export` name "
                   f"it (e.g. {_EXAMPLE_DEVICE!r})")
    if is_pattern(device) and not patterns:
        raise _Bad(f"device {device!r} is a pattern, which only a system database may hold "
                   "(docs/fleet.md): give the exact device key")
    problem = obj["problem"]
    if kind in ("find-db", "perf-db"):
        if not isinstance(problem, str):
            raise _Bad(f"a {kind} record's problem must be a find-db key such as "
                       f"{_EXAMPLE_KEY!r}")
        try:
            problem = parse_key(problem).key
        except KeyFormatError as e:
            raise _Bad(str(e)) from None
    elif problem is not None:
        raise _Bad(f"a {kind} record holds for every problem of its device: its problem "
                   "must be null")
    solver, version = obj["solver"], obj["solver_version"]
    if not isinstance(solver, str) or not _SOLVER_RE.match(solver):
        raise _Bad(f"solver {json.dumps(solver)[:60]} is not a solver id ('<plugin>."
                   "<variant>', lowercase, e.g. 'gemm.im2col')")
    if not isinstance(version, str) or not version.strip():
        raise _Bad("solver_version must be the solver's version, a non-empty string")
    direction = obj["direction"]
    if kind == "calibration" and direction not in (None,) + _DIRECTIONS:
        raise _Bad(f"direction {json.dumps(direction)[:20]} must be fwd, bwd, wrw or null "
                   "(all directions)")
    if kind != "calibration" and direction is not None:
        raise _Bad(f"a {kind} record's direction must be null (the problem key names it)")
    values = _values(kind, obj["values"])
    if versions is not None:
        installed = versions.get(solver)
        if installed is None:
            raise _Bad(f"solver {solver} is not installed: install the plugin that ships it "
                       "(`wticonv plugins` lists the installed ones), or leave the record out")
        if installed != version:
            raise _Bad(f"{solver} {version} measured it, but {installed} is installed: "
                       "records count only for the version that measured them; measure "
                       "again (`wticonv find`, `tune`, `calibrate`) or leave the record out")
    return Record(kind, device, problem, solver, direction, version, values)


def _check_header(obj) -> dict:
    if not isinstance(obj, dict) or "format" not in obj:
        raise _Bad(f"no header: the first line must be {{\"format\": \"{FORMAT}\", "
                   f"\"version\": {FORMAT_VERSION}, ...}}, as `wticonv db export` writes it")
    if obj["format"] != FORMAT:
        raise _Bad(f"format {json.dumps(obj['format'])[:40]} is not {FORMAT!r}: not a "
                   "wticonv database file")
    version = obj.get("version")
    if version != FORMAT_VERSION or isinstance(version, bool):
        newer = isinstance(version, int) and not isinstance(version, bool) \
            and version > FORMAT_VERSION
        raise _Bad(f"format version {json.dumps(version)[:20]}: this wticonv "
                   f"({__version__}) reads version {FORMAT_VERSION}"
                   + ("; upgrade wticonv to read it" if newer else
                      "; export the database again with this wticonv"))
    return obj


def _lines(source) -> tuple[str, list[str]]:
    """The name and text lines of ``source``: a path, ``"-"`` (standard input), an
    :mod:`importlib.resources` file, or an open text file."""
    if source == "-":
        return "-", sys.stdin.read().splitlines()
    if hasattr(source, "read") and not hasattr(source, "read_text"):
        return getattr(source, "name", "<stream>"), source.read().splitlines()
    name = str(source)
    try:
        if hasattr(source, "read_text"):          # pathlib.Path or a Traversable
            return name, source.read_text(encoding="utf-8").splitlines()
        return name, Path(source).read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError:
        raise DbFileError(f"{name} is not a text (UTF-8) file: not a wticonv database file",
                          name, [BadRecord(1, "not UTF-8 text")]) from None
    except OSError as e:
        raise DbFileError(f"cannot read {name}: {e.strerror or e}", name,
                          [BadRecord(0, f"cannot read: {e.strerror or e}")]) from None


def read_db(source, patterns: bool = False, versions: Mapping[str, str] | None = None,
            devices: Iterable[str] | None = None) -> DbFile:
    """Read and check a database file (``source`` as :func:`import_db` takes it).

    ``patterns``, ``versions``: as :func:`check_record`; ``devices``: device keys or
    patterns, the records of other devices are left out (counted in ``skipped``). Bad
    records are collected in the result's ``bad``, in line order (a record repeating an
    earlier one's kind, device, problem, solver and direction is bad too).

    Raises
    ------
    DbFileError
        If the file cannot be read, or its header is missing or of another format version
        (nothing of such a file can be trusted).
    """
    name, lines = _lines(source)
    header, records, bad, skipped = None, [], [], 0
    seen: dict[tuple, int] = {}
    wanted = list(devices) if devices is not None else None
    for number, text in enumerate(lines, 1):
        if not text.strip():
            continue
        try:
            obj = json.loads(text)
        except ValueError as e:
            error = (f"not valid JSON ({e.msg} at column {e.colno}): each line is one JSON "
                     "object; fix the line or remove it")
            if header is None:
                raise DbFileError(f"{name}: line {number}: {error}", name,
                                  [BadRecord(number, error)]) from None
            bad.append(BadRecord(number, error))
            continue
        if header is None:
            try:
                header = _check_header(obj)
            except _Bad as e:
                raise DbFileError(f"{name}: line {number}: {e}", name,
                                  [BadRecord(number, str(e))]) from None
            continue
        try:
            rec = check_record(obj, patterns, versions)
            if rec.kind in _FITTED and header.get("figures_method") != FIGURES_METHOD:
                raise _Bad(f"a {rec.kind} record of a file whose header says "
                           f"figures_method {json.dumps(header.get('figures_method'))}: it "
                           "was fitted to device figures measured by another method than "
                           f"this wticonv's ({FIGURES_METHOD}), and would mis-correct its "
                           "predictions; calibrate the device again and export it")
        except _Bad as e:
            bad.append(BadRecord(number, str(e)))
            continue
        if rec.identity in seen:
            bad.append(BadRecord(number, f"repeats the {rec.kind} record of line "
                                         f"{seen[rec.identity]} (same device, problem, "
                                         "solver and direction): keep one of them"))
            continue
        seen[rec.identity] = number
        if wanted is not None and not any(device_matches(rec.device, d) for d in wanted):
            skipped += 1
            continue
        records.append(rec)
    if header is None:
        raise DbFileError(f"{name} is empty: a database file starts with its header line "
                          f"({{\"format\": \"{FORMAT}\", ...}}; `wticonv db export` writes "
                          "one)", name, [BadRecord(1, "no header: the file is empty")])
    return DbFile(name, header, records, bad, skipped)


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
              comment: str | None = None) -> dict:
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

    Returns
    -------
    dict
        ``{"records": {kind: count}, "devices": [...], "measured_on": [...],
        "left_out": n}``; a stored record that fails the checks of :func:`check_record`
        is left out with a warning (counted in ``left_out``).

    Raises
    ------
    ValueError
        An unknown kind, a ``match`` that is not a device pattern, or ``match`` over the
        records of several devices.
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
                             "text goes, e.g. 'Portable Computing Language|pthread-*|3.1'")
        measured_on = {r.device for r in records}
        if len(measured_on) > 1:
            raise ValueError(f"match= gives every record one device pattern, but the records "
                             f"are of {len(measured_on)} devices ({', '.join(sorted(measured_on))}"
                             "): export one device")
        records = [Record(r.kind, match, r.problem, r.solver, r.direction, r.solver_version,
                          r.values) for r in records]
    _write(format_db(records, comment, measured_on), target)
    counts = {k: sum(r.kind == k for r in records) for k in KINDS if k in kinds}
    return {"records": counts, "devices": sorted({r.device for r in records}),
            "measured_on": sorted(measured_on or ()), "left_out": left_out}


def import_db(store, source, versions: Mapping[str, str] | None = None,
              devices: Iterable[str] | None = None, skip_bad: bool = False,
              check: bool = False) -> dict:
    """Import a database file into ``store``, in one transaction.

    ``source``: a path, ``"-"`` (standard input), a resource file or an open text file.
    Every record is checked (:func:`check_record`; ``versions``: the installed solvers'
    versions, ``{solver_id: version}``, to refuse records selection would never use).
    ``devices`` (keys or patterns) imports only those devices' records; ``check`` checks
    and writes nothing. What a record replaces: :meth:`wticonv.db.store.Store.load_records`.

    Returns ``{"records": {kind: count}, "devices": [...], "bad": [BadRecord, ...],
    "skipped": n, "written": bool}``.

    Raises
    ------
    DbFileError
        If the file cannot be read or has no valid header; or if it holds bad records and
        ``skip_bad`` is false: then nothing is imported, and the error lists every bad
        line (with ``skip_bad`` the good records are imported and the bad ones returned).
    """
    db = read_db(source, versions=versions, devices=devices)
    if db.bad and not skip_bad:
        lines = "\n".join(f"  {b}" for b in db.bad)
        raise DbFileError(f"{db.name}: {len(db.bad)} bad record(s), nothing imported:\n"
                          f"{lines}\nfix or remove them, or import the {len(db.records)} good "
                          "one(s) alone (skip_bad=True, `--skip-bad`)", db.name, db.bad,
                          len(db.records))
    if not check and db.records:
        store.load_records([r.as_tuple() for r in db.records])
    return {"records": {k: sum(r.kind == k for r in db.records) for k in KINDS},
            "devices": sorted({r.device for r in db.records}), "bad": db.bad,
            "skipped": db.skipped, "written": not check and bool(db.records)}
