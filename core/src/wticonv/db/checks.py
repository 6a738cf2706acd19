"""The records of a ``wticonv-db`` file and their checks (:mod:`wticonv.db.transfer` reads
and writes the files).

A record is checked as the store checks what it reads (:mod:`wticonv.db.records`): its
fields, its kind, its device key, its problem key (parsed and consistent), its solver id
and its numbers (finite, in range, whole numbers below 2**63, what SQLite stores). A
record that fails is a :class:`BadRecord`: its line number, what is wrong and how to fix
it. Records come in *units* that go into a cache whole or not at all (:func:`unit_of`): a
device's calibration (its factors and learned corrections, fitted together by ``wticonv
calibrate``) and a find-db problem's records on a device (timed together by ``wticonv
find``); a perf-db record is a unit of its own.
"""

from __future__ import annotations

import fnmatch
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from wticonv.db.records import RECORD_KINDS, valid_correction_model, valid_perf_config
from wticonv.errors import KeyFormatError
from wticonv.problem.conv import parse_key

__all__ = ["KINDS", "FIELDS", "VALUE_FIELDS", "INT_LIMIT", "Record", "BadRecord",
           "BadInput", "check_record", "is_pattern", "is_device_key_form", "device_matches",
           "unit_of", "describe_unit", "group_bad", "MAX_REPORTED", "ONLY_SYSTEM_DBS"]

#: The words of a bad record's error when its device is a pattern outside a system
#: database (the command line adds a note on system databases where it finds them).
ONLY_SYSTEM_DBS = "which only a system database may hold"

#: The record kinds, in the order a file lists them.
KINDS = RECORD_KINDS
#: The fields of a record, in the order they are written.
FIELDS = ("kind", "device", "problem", "solver", "direction", "solver_version", "values")
#: Each kind's ``values`` fields.
VALUE_FIELDS = {
    "find-db": ("workspace", "time_ms", "runs", "capped"),
    "perf-db": ("perf_config", "time_ms", "default_ms"),
    "calibration": ("factor", "probes"),
    "correction": ("features", "model", "runs"),
}
#: Whole numbers must be below this: SQLite stores an INTEGER in 8 bytes, signed
#: (https://www.sqlite.org/datatype3.html); Python's sqlite3 raises OverflowError past it.
INT_LIMIT = 2 ** 63
#: Bad lines (or groups of alike ones) a report lists before "and N more".
MAX_REPORTED = 20

_DIRECTIONS = ("fwd", "bwd", "wrw")
#: A solver id, as the registry requires it (wticonv.contract.registry, which this layer
#: cannot import).
_SOLVER_RE = re.compile(r"^[a-z0-9_]+\.[a-z0-9_]+$")
_GLOB = re.compile(r"[*?\[]")
_EXAMPLE_DEVICE = "NVIDIA CUDA|NVIDIA H200|550.54.15"
_EXAMPLE_KEY = "64-56-56-3x3-64-56-56-16-1x1-1x1-1x1-0-NCHW-FP32-F"


def unit_of(kind, device, problem) -> tuple | None:
    """The unit a record of ``kind`` on ``device`` (and ``problem``) belongs to, which goes
    into a cache whole or not at all: ``("calibration", device)`` for calibration and
    correction records, ``("find-db", device, problem key)`` for find-db records; None for
    a perf-db record (a unit of its own) or fields too broken to say."""
    if not isinstance(device, str):
        return None
    if kind in ("calibration", "correction"):
        return ("calibration", device)
    if kind == "find-db" and isinstance(problem, str):
        try:
            problem = parse_key(problem).key
        except KeyFormatError:
            pass
        return ("find-db", device, problem)
    return None


def describe_unit(unit: tuple) -> str:
    """A unit (:func:`unit_of`) in words."""
    if unit[0] == "calibration":
        return f"the calibration (factors and learned corrections) of {unit[1]}"
    return f"the find-db records of {unit[2]} on {unit[1]}"


@dataclass(frozen=True)
class Record:
    """One measured record of a database file (:mod:`wticonv.db.transfer` has the fields)."""

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

    @property
    def unit(self) -> tuple | None:
        """The unit it goes into a cache with (:func:`unit_of`)."""
        return unit_of(self.kind, self.device, self.problem)

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
    is wrong with it, with how to fix it; ``unit`` (:func:`unit_of`), when its fields say,
    and ``of_header``: refused for what the header says, not for its own fields."""

    line: int
    error: str
    unit: tuple | None = field(default=None, compare=False)
    of_header: bool = field(default=False, compare=False)

    def __str__(self) -> str:
        return f"line {self.line}: {self.error}"


class BadInput(ValueError):
    """What is wrong with one record (its message becomes a BadRecord's error)."""


def _ranges(numbers) -> str:
    """``[3, 4, 5, 9]`` as ``"3-5, 9"``."""
    out, run = [], []
    for n in sorted(numbers):
        if run and n == run[-1] + 1:
            run.append(n)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [n]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ", ".join(out)


def group_bad(bad, limit: int | None = MAX_REPORTED) -> list[tuple[str, str]]:
    """The bad lines to report, alike ones once: ``[(where, error)]`` in line order, where
    ``where`` is a line number (``"3"``), lines sharing one error (``"126-163 (38
    records)"``) or, for records refused for what the header says, ``"1"`` (the header)
    with the records' lines in the error. Past ``limit`` groups, a last ``("", "and N
    more bad record(s)")``."""
    groups: dict[str, list] = {}
    for b in bad:
        groups.setdefault(b.error, []).append(b)
    out = []
    for error, items in sorted(groups.items(), key=lambda g: g[1][0].line):
        lines = [b.line for b in items]
        if items[0].of_header:
            out.append(("1", f"{error} ({len(lines)} record(s) refused: line(s) "
                             f"{_ranges(lines)})", len(lines)))
        elif len(lines) == 1:
            out.append((str(lines[0]), error, 1))
        else:
            out.append((f"{_ranges(lines)} ({len(lines)} records)", error, len(lines)))
    if limit is not None and len(out) > limit:
        rest = sum(n for _, _, n in out[limit:])
        out = out[:limit] + [("", f"and {rest} more bad record(s)", rest)]
    return [(where, error) for where, error, _ in out]


def is_pattern(device: str) -> bool:
    """Whether a record's ``device`` is a pattern (``*``, ``?`` or ``[...]``, as
    :func:`fnmatch.fnmatchcase`), which only a system database may hold."""
    return bool(_GLOB.search(device))


def is_device_key_form(device) -> bool:
    """Whether ``device`` has a device key's form (or a pattern's): a string of three
    non-empty parts, platform|device name|driver version."""
    parts = device.split("|") if isinstance(device, str) else []
    return len(parts) == 3 and all(p.strip() for p in parts)


def device_matches(device_key: str, pattern: str) -> bool:
    """Whether ``device_key`` is ``pattern`` or matches it (:func:`fnmatch.fnmatchcase`)."""
    return device_key == pattern or (is_pattern(pattern)
                                     and fnmatch.fnmatchcase(device_key, pattern))


#: The range a measured time (ms) in an imported record may take: a kernel launch takes
#: well over a nanosecond and no timed run of find or tune a day; a time outside it (5e-324
#: from a damaged file) would otherwise win every ranking it enters.
TIME_MS_RANGE = (1e-6, 86_400_000.0)


def _number(v, what: str, positive: bool) -> float:
    try:
        ok = not isinstance(v, bool) and isinstance(v, (int, float)) \
            and math.isfinite(float(v)) and (not positive or v > 0)
    except OverflowError:                  # an int past a float's range
        ok = False
    if not ok:
        raise BadInput(f"values.{what} = {json.dumps(v)[:40]} must be a "
                       + ("positive " if positive else "") + "finite number"
                       + (" of ms" if what.endswith("_ms") else "")
                       + ": give the measured figure, or remove the record")
    lo, hi = TIME_MS_RANGE
    if what.endswith("_ms") and not lo <= float(v) <= hi:
        raise BadInput(f"values.{what} = {json.dumps(v)[:40]} is not a time a kernel takes "
                       f"(from {lo:g} ms to {hi:g} ms, a day): a damaged record? give the "
                       "measured figure, or remove the record")
    return float(v)


def _count(v, what: str, least: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < least:
        raise BadInput(f"values.{what} = {json.dumps(v)[:40]} must be a whole number "
                       f">= {least}")
    if v >= INT_LIMIT:
        raise BadInput(f"values.{what} = {str(v)[:40]}{'...' if len(str(v)) > 40 else ''} "
                       "is too large: a whole number here must be below 2**63 "
                       f"({INT_LIMIT - 1} at most, what the cache database stores); give "
                       "the measured figure, or remove the record")
    return v


#: The calibration factors a record may hold: a model off by a million either way is not
#: one to correct but a damaged file (the median factors of every calibration measured lie
#: between 0.3 and 3: docs/wti-models.md, benchmarks/results/calibrate-*.txt).
FACTOR_RANGE = (1e-6, 1e6)


def _values(kind: str, v) -> dict:
    """The checked ``values`` of a ``kind`` record (numbers as the store keeps them)."""
    if not isinstance(v, dict):
        raise BadInput(f"values must be an object with {', '.join(VALUE_FIELDS[kind])}")
    want = VALUE_FIELDS[kind]
    missing, extra = [f for f in want if f not in v], sorted(set(v) - set(want))
    if missing or extra:
        raise BadInput(f"a {kind} record's values are {', '.join(want)}"
                       + (f"; missing {', '.join(missing)}" if missing else "")
                       + (f"; unknown {', '.join(extra)}" if extra else ""))
    if kind == "find-db":
        if not isinstance(v["capped"], bool):
            raise BadInput("values.capped must be true or false (whether the runs were cut "
                           "short by the time cap)")
        return {"workspace": _count(v["workspace"], "workspace", 0),
                "time_ms": _number(v["time_ms"], "time_ms", True),
                "runs": _count(v["runs"], "runs", 1), "capped": v["capped"]}
    if kind == "perf-db":
        if not valid_perf_config(v["perf_config"]):
            raise BadInput(f"values.perf_config = {json.dumps(v['perf_config'])[:60]} must "
                           "be a non-empty printable name of at most 100 characters")
        return {"perf_config": v["perf_config"],
                "time_ms": _number(v["time_ms"], "time_ms", True),
                "default_ms": _number(v["default_ms"], "default_ms", True)}
    if kind == "calibration":
        factor = _number(v["factor"], "factor", True)
        if not FACTOR_RANGE[0] <= factor <= FACTOR_RANGE[1]:
            raise BadInput(f"values.factor = {factor:g} is no plausible calibration factor "
                           f"(a median of predicted / measured time, {FACTOR_RANGE[0]:g} to "
                           f"{FACTOR_RANGE[1]:g}; calibrations measured 0.3-3): a damaged "
                           "file? export it again")
        return {"factor": factor, "probes": _count(v["probes"], "probes", 0)}
    names = v["features"]
    if not (isinstance(names, list) and names and all(isinstance(n, str) and n
                                                      for n in names)):
        raise BadInput("values.features must be a non-empty list of feature names")
    if not valid_correction_model(v["model"], len(names)):
        raise BadInput(f"values.model is not a usable correction of {len(names)} features: "
                       "one finite coefficient per feature, or boosted trees of finite "
                       "arrays (as `wticonv calibrate` stores them); export it again")
    return {"features": list(names), "model": v["model"],
            "runs": _count(v["runs"], "runs", 0)}


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
        raise BadInput(f"a record must be a JSON object with the fields {', '.join(FIELDS)}")
    kind = obj.get("kind")
    if "format" in obj and "kind" not in obj:
        raise BadInput("a second header line (two files joined?): a file has one header, on "
                       "its first line; remove this one")
    if kind not in KINDS:
        raise BadInput(f"unknown kind {json.dumps(kind)[:40]}: the kinds are "
                       f"{', '.join(KINDS)}")
    missing, extra = [f for f in FIELDS if f not in obj], sorted(set(obj) - set(FIELDS))
    if missing or extra:
        raise BadInput(f"a record has the fields {', '.join(FIELDS)}"
                       + (f"; missing {', '.join(missing)}" if missing else "")
                       + (f"; unknown {', '.join(extra)} (a file of a newer wticonv? export "
                          "it with this one)" if extra else ""))
    device = obj["device"]
    if not is_device_key_form(device):
        raise BadInput(f"device {json.dumps(device)[:80]} is not a device key: platform|"
                       "device name|driver version, as `wticonv devices` and `wticonv db "
                       f"export` name it (e.g. {_EXAMPLE_DEVICE!r})"
                       + ("; a pattern has the same three parts, with * ? or [...] "
                          "inside them (e.g. 'Portable Computing Language|pthread-*|3.1*'), "
                          "and only a system database may hold one"
                          if isinstance(device, str) and is_pattern(device) else ""))
    if is_pattern(device) and not patterns:
        raise BadInput(f"device {device!r} is a pattern, {ONLY_SYSTEM_DBS} (docs/fleet.md): "
                       "give the exact device key")
    problem = obj["problem"]
    if kind in ("find-db", "perf-db"):
        if not isinstance(problem, str):
            raise BadInput(f"a {kind} record's problem must be a find-db key such as "
                           f"{_EXAMPLE_KEY!r}")
        try:
            problem = parse_key(problem).key
        except KeyFormatError as e:
            raise BadInput(str(e)) from None
    elif problem is not None:
        raise BadInput(f"a {kind} record holds for every problem of its device: its problem "
                       "must be null")
    solver, version = obj["solver"], obj["solver_version"]
    if not isinstance(solver, str) or not _SOLVER_RE.match(solver):
        raise BadInput(f"solver {json.dumps(solver)[:60]} is not a solver id ('<plugin>."
                       "<variant>', lowercase, e.g. 'gemm.im2col')")
    if not isinstance(version, str) or not version.strip():
        raise BadInput("solver_version must be the solver's version, a non-empty string")
    direction = obj["direction"]
    if kind == "calibration" and direction not in (None,) + _DIRECTIONS:
        raise BadInput(f"direction {json.dumps(direction)[:20]} must be fwd, bwd, wrw or "
                       "null (all directions)")
    if kind != "calibration" and direction is not None:
        raise BadInput(f"a {kind} record's direction must be null (the problem key names "
                       "it)")
    values = _values(kind, obj["values"])
    if versions is not None:
        installed = versions.get(solver)
        if installed is None:
            raise BadInput(f"solver {solver} is not installed: install the plugin that ships "
                           "it (`wticonv plugins` lists the installed ones), or leave the "
                           "record out")
        if installed != version:
            raise BadInput(f"{solver} {version} measured it, but {installed} is installed: "
                           "records count only for the version that measured them; measure "
                           "again (`wticonv find`, `tune`, `calibrate`) or leave the record "
                           "out")
    return Record(kind, device, problem, solver, direction, version, values)
