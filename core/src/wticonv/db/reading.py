"""Reading a ``wticonv-db`` file: its lines (UTF-8, a BOM and CRLF allowed), its header
and every record checked (:mod:`wticonv.db.checks`), bad lines reported with their number;
:mod:`wticonv.db.transfer` has the format's description, the export and the import."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from wticonv._version import __version__
from wticonv.db.checks import (
    BadInput,
    BadRecord,
    Record,
    check_record,
    device_matches,
    unit_of,
)
from wticonv.db.schema import FIGURES_METHOD
from wticonv.errors import DbFileError

__all__ = ["FORMAT", "FORMAT_VERSION", "DbFile", "read_db"]

#: The format's name, the header's ``"format"``.
FORMAT = "wticonv-db"
#: The format version this wticonv writes and reads (the header's ``"version"``).
FORMAT_VERSION = 1
#: The kinds fitted to the device figures (relative to the WTI models' predictions).
_FITTED = ("calibration", "correction")
_Bad = BadInput


@dataclass
class DbFile:
    """A database file as read: its header, its good records and its bad lines."""

    name: str
    header: dict
    records: list[Record]
    bad: list[BadRecord]
    skipped: int = 0     # good records of devices left out by the caller's filter


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


def _not_utf8(name: str, data: bytes) -> str:
    """Why ``data`` (a file that is not UTF-8) cannot be read, and what to do."""
    if data[:2] == b"\x1f\x8b":
        return (f"{name} is not a text (UTF-8) file: it is gzip-compressed; decompress it "
                "(gunzip) and import the .jsonl file")
    head = data[:4096]
    if head[:2] in (b"\xff\xfe", b"\xfe\xff") or head.count(b"\x00") > len(head) // 4:
        what = "it looks like UTF-16 text"
    elif b"\x00" not in head:
        what = "it looks like text in another encoding (Latin-1, Windows-1252?)"
    else:
        return f"{name} is not a text (UTF-8) file: not a wticonv database file"
    return (f"{name} is not a text (UTF-8) file: {what}; save it as UTF-8 (a wticonv "
            "database file is UTF-8 JSON lines)")


def _lines(source) -> tuple[str, list[str]]:
    """The name and text lines of ``source``: a path, ``"-"`` (standard input), an
    :mod:`importlib.resources` file, or an open text file. A UTF-8 byte order mark (which
    some editors write) is dropped."""
    if source == "-":
        text = sys.stdin.read()
        return "-", text.removeprefix("\ufeff").splitlines()
    if hasattr(source, "read") and not hasattr(source, "read_text"):
        text = source.read()
        return getattr(source, "name", "<stream>"), text.removeprefix("\ufeff").splitlines()
    name = str(source)
    try:
        data = source.read_bytes() if hasattr(source, "read_bytes") else \
            Path(source).read_bytes()       # a pathlib.Path or Traversable, else a path
    except OSError as e:
        raise DbFileError(f"cannot read {name}: {e.strerror or e}", name,
                          [BadRecord(0, f"cannot read: {e.strerror or e}")]) from None
    try:
        return name, data.decode("utf-8-sig").splitlines()
    except UnicodeDecodeError:
        why = _not_utf8(name, data)
        raise DbFileError(why, name, [BadRecord(1, why.split(": ", 1)[1])]) from None


def _figures_error(header: dict) -> str:
    method = header.get("figures_method")
    said = (f"is {json.dumps(method)}" if "figures_method" in header else "is missing")
    return (f"the header's figures_method {said}, not this wticonv's ({FIGURES_METHOD}): "
            "the file's calibration and correction records were fitted to device figures "
            "measured by another method and would mis-correct the predictions made from "
            "today's; calibrate the device again and export it (its other records are not "
            "affected)")


def read_db(source, patterns: bool = False, versions: Mapping[str, str] | None = None,
            devices: Iterable[str] | None = None,
            solver_check: Callable[[Record], None] | None = None) -> DbFile:
    """Read and check a database file (``source`` as
    :func:`wticonv.db.transfer.import_db` takes it).

    ``patterns``, ``versions``: as :func:`check_record`; ``devices``: device keys or
    patterns, the records of other devices are left out (counted in ``skipped``; a
    record whose device is a pattern that matches one of ``devices`` is kept);
    ``solver_check(record)``, when given, raises ValueError for a record its installed
    solver cannot use (:func:`wticonv.selection.perfdb.perf_record_check`: a perf-db
    record of a solver that is not tunable, a perf config it does not offer). Bad
    records are collected in the result's ``bad``, in line order (a record repeating an
    earlier one's kind, device, problem, solver and direction is bad too; calibration and
    correction records of a header whose ``figures_method`` is not this wticonv's are bad
    for what the header says, ``of_header``).

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
        except (ValueError, RecursionError) as e:
            # JSONDecodeError has a message and a column; Python refuses integers of over
            # 4300 digits with a plain ValueError, nesting past its recursion limit with a
            # RecursionError
            why = (f"{e.msg} at column {e.colno}" if isinstance(e, json.JSONDecodeError)
                   else "nested too deep" if isinstance(e, RecursionError)
                   else str(e).split(";")[0][:100])
            error = (f"not valid JSON ({why}): each line is one JSON object; fix the line "
                     "or remove it")
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
        fields = obj if isinstance(obj, dict) else {}
        unit = unit_of(fields.get("kind"), fields.get("device"), fields.get("problem"))
        if fields.get("kind") in _FITTED and header.get("figures_method") != FIGURES_METHOD:
            bad.append(BadRecord(number, _figures_error(header), unit, of_header=True))
            continue
        try:
            rec = check_record(obj, patterns, versions)
            if solver_check is not None:
                solver_check(rec)
        except ValueError as e:
            bad.append(BadRecord(number, str(e), unit))
            continue
        if rec.identity in seen:
            bad.append(BadRecord(number, f"repeats the {rec.kind} record of line "
                                         f"{seen[rec.identity]} (same device, problem, "
                                         "solver and direction): keep one of them", unit))
            continue
        seen[rec.identity] = number
        if wanted is not None and not any(device_matches(rec.device, d)
                                          or device_matches(d, rec.device) for d in wanted):
            skipped += 1
            continue
        records.append(rec)
    if header is None:
        raise DbFileError(f"{name} is empty: a database file starts with its header line "
                          f"({{\"format\": \"{FORMAT}\", ...}}; `wticonv db export` writes "
                          "one)", name, [BadRecord(1, "no header: the file is empty")])
    return DbFile(name, header, records, bad, skipped)
