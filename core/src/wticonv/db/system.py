"""System databases: read-only find-db, perf-db and calibration records shipped by a
distribution, for the devices they name.

A distribution declares one in the entry-point group ``wticonv.system_db`` (read with
``importlib-metadata``); the entry point names a package, whose ``*.jsonl`` files are
database files in the ``wticonv-db`` format (:mod:`wticonv.db.transfer`), or one such
file (an ``importlib.resources`` file or a path). ``WTICONV_SYSTEM_DB`` overrides the
entry points: a list of files (separated by ``os.pathsep``); set but empty, no system
database is read. The files are read once per process, on first use.

A system database may name a record's device by a pattern (``*`` any text, ``?`` one
character, as :func:`fnmatch.fnmatchcase`), e.g. every CPU of one PoCL driver version,
``Portable Computing Language|pthread-*|3.1+debian``. For a device, the most specific
matching device wins: its exact key, then the pattern with the most literal characters,
then the database read first (by distribution, then file name); of calibrations, the
most specific that holds a record of an installed solver version
(:func:`pick_calibration`).

A broken system database (an entry point that fails to load, a file that cannot be read
or has no valid header, bad records) is reported once with a warning, and the rest of it
(its good records), and every other database, still serve: never fatal. Which records
count, and how the user's own override them, is selection's business
(:mod:`wticonv.selection.finddb`, :mod:`~wticonv.selection.perfdb`,
:mod:`~wticonv.selection.calibration`): the user's records first, then a system
database's, each only for the installed solver version.
"""

from __future__ import annotations

import os
import threading
import warnings
from dataclasses import dataclass, field

import importlib_metadata

from wticonv.db.transfer import BadRecord, Record, device_matches, is_pattern, read_db
from wticonv.errors import DbFileError

__all__ = ["ENTRY_POINT_GROUP", "ENV", "SystemDb", "SystemDatabases", "DeviceView",
           "calibration_records", "usable_records", "pick_calibration",
           "system_databases", "system_view", "override_view", "reset_system_databases"]

#: The entry-point group system databases are declared in.
ENTRY_POINT_GROUP = "wticonv.system_db"
#: Environment variable: files to read instead of the entry points ("" for none).
ENV = "WTICONV_SYSTEM_DB"


@dataclass
class SystemDb:
    """One system database file.

    Attributes
    ----------
    name : str
        ``"<distribution> <version>: <file name>"``, or the path (``WTICONV_SYSTEM_DB``).
    records : list[Record]
        Its good records.
    bad : list[BadRecord]
        Its refused lines (reported once with a warning).
    error : str
        Why it could not be read at all ("" when it was).
    header : dict
    """

    name: str
    records: list[Record] = field(default_factory=list)
    bad: list[BadRecord] = field(default_factory=list)
    error: str = ""
    header: dict = field(default_factory=dict)

    @property
    def devices(self) -> list[str]:
        """The device keys and patterns its records are for."""
        return sorted({r.device for r in self.records})


@dataclass
class DeviceView:
    """What the system databases hold for one device key (see :meth:`SystemDatabases.view`).

    ``calibrations``: every matching device's calibration, most specific first, as
    ``[(source, calibration, correction, device)]`` (its database's name, what
    :meth:`wticonv.db.store.Store.get_calibration` and ``get_correction`` answer, and the
    device key or pattern its records name); ``shadowed``: ``[(source, device)]``, the
    databases read later whose calibration records repeat, for the same device key or
    pattern, records an earlier database holds (the first read wins);
    :func:`pick_calibration` passes over those of which no record is of an installed
    solver version. ``calibration``, ``correction`` and ``calibration_source`` are the
    first of them ({}, {} and "" when none). ``find`` ``{problem key: ({solver: (version,
    workspace, ms, runs, capped)}, source)}`` and ``perf`` ``{(problem key, solver):
    ((version, config, ms, default ms), source)}``, per problem (per problem and solver)
    from the most specific matching device that has records of it.
    """

    calibrations: list = field(default_factory=list)
    shadowed: list = field(default_factory=list)
    find: dict = field(default_factory=dict)
    perf: dict = field(default_factory=dict)

    @property
    def calibration_source(self) -> str:
        return self.calibrations[0][0] if self.calibrations else ""

    @property
    def calibration(self) -> dict:
        return self.calibrations[0][1] if self.calibrations else {}

    @property
    def correction(self) -> dict:
        return self.calibrations[0][2] if self.calibrations else {}


def calibration_records(calibration: dict, correction: dict):
    """``(solver id, solver version)`` of each record of a calibration (``get_calibration``
    / ``get_correction`` answers: factors keyed ``solver`` or ``solver@direction``)."""
    for key, rec in calibration.items():
        yield key.split("@")[0], rec[0]
    for sid, rec in correction.items():
        yield sid, rec[0]


def usable_records(calibration: dict, correction: dict, versions: dict) -> int:
    """How many records of a calibration are of the installed solver versions
    ``versions`` (``{solver id: version}``)."""
    return sum(versions.get(sid) == ver for sid, ver in calibration_records(calibration,
                                                                           correction))


def pick_calibration(own: tuple[dict, dict], view: DeviceView, versions: dict | None
                     ) -> tuple[dict, dict, str, str]:
    """``(calibration, correction, source, system database)`` that corrects a device: the
    user's own (``own``, source ``"user calibration"``) if it holds a record of an
    installed solver version, else the most specific system calibration that does
    (``"system calibration"`` and its database's name). A calibration none of whose
    records counts (all of other solver versions: made before an upgrade) is passed over,
    so that it does not hide one that counts; where none counts, the first of them is
    returned all the same (selection then corrects nothing and explain says why), and
    ``({}, {}, "", "")`` where there is none. ``versions`` None: no check, the first."""
    cands = ([(own[0], own[1], "user calibration", "")] if own[0] or own[1] else [])
    cands += [(cal, corr, "system calibration", name)
              for name, cal, corr, _device in view.calibrations]
    if not cands:
        return {}, {}, "", ""
    if versions is not None:
        for cand in cands:
            if any(versions.get(sid) == ver for sid, ver in calibration_records(*cand[:2])):
                return cand
    return cands[0]


def _specificity(pattern: str) -> tuple[int, int]:
    """Exact keys first, then patterns by their count of literal characters."""
    if not is_pattern(pattern):
        return (1, len(pattern))
    return (0, sum(c not in "*?[]" for c in pattern))


class SystemDatabases:
    """The system databases read (:attr:`databases`, in order) and their records by
    device, for selection (:meth:`view`)."""

    def __init__(self, databases: list[SystemDb]) -> None:
        self.databases = databases
        self._views: dict[str, DeviceView] = {}
        self._lock = threading.Lock()
        #: device key or pattern -> [(database name, record)], first database first
        self._by_device: dict[str, list[tuple[str, Record]]] = {}
        #: device key or pattern -> databases whose calibration records an earlier one hid
        self._shadowed: dict[str, list[str]] = {}
        seen: set[tuple] = set()
        for db in databases:
            for rec in db.records:
                if rec.identity in seen:        # an earlier database has it: first wins
                    hidden = self._shadowed.setdefault(rec.device, [])
                    if rec.kind in ("calibration", "correction") and db.name not in hidden:
                        hidden.append(db.name)
                    continue
                seen.add(rec.identity)
                self._by_device.setdefault(rec.device, []).append((db.name, rec))

    def view(self, device_key: str) -> DeviceView:
        """The system records that serve ``device_key`` (built once per key)."""
        view = self._views.get(device_key)
        if view is not None:
            return view
        with self._lock:
            view = self._views.get(device_key)
            if view is None:
                view = self._views[device_key] = self._build(device_key)
        return view

    def _build(self, device_key: str) -> DeviceView:
        view = DeviceView()
        matching = sorted((p for p in self._by_device if device_matches(device_key, p)),
                          key=_specificity, reverse=True)
        for pattern in matching:
            entries = self._by_device[pattern]
            calibrated = [(n, r) for n, r in entries if r.kind in ("calibration", "correction")]
            if calibrated:
                factors, models = {}, {}
                for _, r in calibrated:
                    v = r.values
                    if r.kind == "calibration":
                        key = r.solver + (f"@{r.direction}" if r.direction else "")
                        factors[key] = (r.solver_version, v["factor"])
                    else:
                        models[r.solver] = (r.solver_version, tuple(v["features"]),
                                            v["model"])
                name = ", ".join(dict.fromkeys(n for n, _ in calibrated))
                view.calibrations.append((name, factors, models, pattern))
            view.shadowed += [(n, pattern) for n in self._shadowed.get(pattern, [])]
            finds: dict[str, tuple[dict, str]] = {}
            for name, r in entries:
                v = r.values
                if r.kind == "find-db" and r.problem not in view.find:
                    group = finds.setdefault(r.problem, ({}, name))[0]
                    group[r.solver] = (r.solver_version, v["workspace"], v["time_ms"],
                                       v["runs"], v["capped"])
                elif r.kind == "perf-db" and (r.problem, r.solver) not in view.perf:
                    view.perf[(r.problem, r.solver)] = (
                        (r.solver_version, v["perf_config"], v["time_ms"], v["default_ms"]),
                        name)
            view.find.update(finds)
        return view


_LOCK = threading.Lock()
_LOADED: dict[str | None, SystemDatabases] = {}


def _entry_point_files() -> list[tuple[str, object]]:
    """``(name, file)`` of every system database the entry points declare; an entry point
    that fails to load is a :class:`SystemDb` with its error instead."""
    import importlib.resources
    import types

    out: list = []
    eps = sorted(importlib_metadata.entry_points(group=ENTRY_POINT_GROUP),
                 key=lambda ep: (ep.dist.metadata["Name"] if ep.dist else "", ep.name))
    seen = set()
    for ep in eps:
        dist = f"{ep.dist.metadata['Name']} {ep.dist.version}" if ep.dist else ep.value
        if (dist, ep.name, ep.value) in seen:       # the same distribution twice on sys.path
            continue
        seen.add((dist, ep.name, ep.value))
        try:
            obj = ep.load()
            if isinstance(obj, types.ModuleType):
                files = sorted((f for f in importlib.resources.files(obj).iterdir()
                                if f.name.endswith(".jsonl") and f.is_file()),
                               key=lambda f: f.name)
            elif isinstance(obj, (str, os.PathLike)) or hasattr(obj, "read_text"):
                files = [obj]
            else:
                raise TypeError(f"it names {type(obj).__name__} {obj!r:.60}, neither a "
                                "package of .jsonl files nor a file")
        except Exception as e:  # noqa: BLE001 - a broken distribution is reported, not fatal
            out.append((f"{dist} (entry point {ep.name} = {ep.value})",
                        SystemDb(f"{dist} (entry point {ep.name} = {ep.value})",
                                 error=f"{type(e).__name__}: {e}")))
            continue
        out += [(f"{dist}: {getattr(f, 'name', None) or os.path.basename(str(f))}", f)
                for f in files]
    return out


def _read(name: str, source) -> SystemDb:
    if isinstance(source, SystemDb):
        return source
    try:
        db = read_db(source, patterns=True)
    except DbFileError as e:
        return SystemDb(name, error=str(e))
    except Exception as e:  # noqa: BLE001 - never fatal
        return SystemDb(name, error=f"{type(e).__name__}: {e}")
    return SystemDb(name, db.records, db.bad, header=db.header)


def load_system_databases(env: str | None = None) -> SystemDatabases:
    """Read the system databases afresh: the files of ``env`` (``WTICONV_SYSTEM_DB``'s
    value) if not None, else the entry points'; each broken one is reported with one
    warning."""
    if env is not None:
        sources = [(p, p) for p in env.split(os.pathsep) if p.strip()]
    else:
        try:
            sources = _entry_point_files()
        except Exception as e:  # noqa: BLE001 - unreadable metadata: no system databases
            sources = [("entry points", SystemDb(f"{ENTRY_POINT_GROUP} entry points",
                                                 error=f"{type(e).__name__}: {e}"))]
    dbs = [_read(name, src) for name, src in sources]
    # a file named in the variable is the user's own to mend; a distribution's, its authors'
    mend = (f"mend the file, or drop it from {ENV}" if env is not None else
            "reinstall it or tell its authors")
    for db in dbs:
        if db.error:
            warnings.warn(f"wticonv: the system database {db.name} cannot be used "
                          f"({db.error}); it is ignored ({mend}; "
                          f"`{ENV}=` turns system databases off)", stacklevel=4)
        elif db.bad:
            more = "; `wticonv db system` lists them" if len(db.bad) > 1 else ""
            used = (f"its {len(db.records)} good one(s) are used" if db.records else
                    "it has no good record, so it serves nothing")
            warnings.warn(f"wticonv: the system database {db.name} has {len(db.bad)} bad "
                          f"record(s), ignored (first: {db.bad[0]}{more}); {used} ({mend})",
                          stacklevel=4)
    return SystemDatabases(dbs)


def system_databases() -> SystemDatabases:
    """The system databases of this process, read on first use (and again when
    ``WTICONV_SYSTEM_DB`` changes)."""
    env = os.environ.get(ENV)
    dbs = _LOADED.get(env)
    if dbs is None:
        with _LOCK:
            dbs = _LOADED.get(env)
            if dbs is None:
                dbs = _LOADED[env] = load_system_databases(env)
    return dbs


_OVERRIDES: dict[str, DeviceView] = {}


def system_view(device_key: str) -> DeviceView:
    """What the system databases hold for ``device_key`` (:meth:`SystemDatabases.view`),
    or the view :func:`override_view` set for it."""
    view = _OVERRIDES.get(device_key)
    return view if view is not None else system_databases().view(device_key)


def override_view(device_key: str, view: DeviceView | None) -> None:
    """Make :func:`system_view` answer ``view`` for ``device_key`` in this process,
    whatever the system databases hold (None: them again). A fleet's worker predicts so
    with the system records of its caller, not with its own installed ones
    (:mod:`wticonv.fleet.jobs_worker`)."""
    with _LOCK:
        if view is None:
            _OVERRIDES.pop(device_key, None)
        else:
            _OVERRIDES[device_key] = view


def reset_system_databases() -> None:
    """Forget the databases read (and the views :func:`override_view` set), so that the
    next use reads them again (after installing a distribution in this process; tests)."""
    with _LOCK:
        _LOADED.clear()
        _OVERRIDES.clear()
