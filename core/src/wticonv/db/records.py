"""The measured records of the cache database: find-db, calibration factors and perf-db.

A mixin of :class:`wticonv.db.store.Store` (which owns the connection, the schema and the
transactions); see that module for where the database lives and how it is shared.
Every reader validates what it reads: a record whose values are not valid is reported
with a warning and ignored (and, in the perf-db, deleted), never trusted.
"""

from __future__ import annotations

import json
import math
import sqlite3
import time
import warnings

from wticonv.errors import StoreError

__all__ = ["Records", "valid_perf_config", "valid_correction_model", "PERF_CONFIG_MAX_CHARS",
           "RECORD_KINDS"]

#: The kinds of measured record, in the order a database file lists them
#: (:mod:`wticonv.db.transfer`): find-db, perf-db, calibration factors, learned corrections.
RECORD_KINDS = ("find-db", "perf-db", "calibration", "correction")

#: Longest perf config name accepted (see the ``perf_configs`` hook).
PERF_CONFIG_MAX_CHARS = 100


def valid_perf_config(name) -> bool:
    """A perf config name as the ``perf_configs`` hook specifies it: a non-empty str of at
    most :data:`PERF_CONFIG_MAX_CHARS` printable characters."""
    return (isinstance(name, str) and 0 < len(name) <= PERF_CONFIG_MAX_CHARS
            and name.isprintable())



def _valid_model(model, features: int) -> bool:
    """Whether ``model`` is a linear correction of ``features`` finite coefficients, or
    boosted trees (:class:`wticonv.selection.correction.Trees`): complete trees of one
    depth, each with ``2**depth - 1`` split features (indices of ``features``) and finite
    thresholds, and ``2**depth`` finite leaf values."""
    def finite(xs):
        try:
            return all(isinstance(x, (int, float)) and not isinstance(x, bool)
                       and math.isfinite(x) for x in xs)
        except OverflowError:           # an int past a float's range
            return False

    if isinstance(model, list):
        return len(model) == features and finite(model)
    if not isinstance(model, dict):
        return False
    try:
        depth = model["depth"]
        if not (finite([model["base"], depth]) and 1 <= depth <= 12):
            return False
        splits = 2 ** int(depth) - 1
        trees = list(zip(model["feature"], model["threshold"], model["value"], strict=True))
        for feature, threshold, value in trees:
            if len(feature) != splits or len(threshold) != splits or \
                    len(value) != splits + 1 or not finite(threshold) or not finite(value):
                return False
            if not all(isinstance(f, int) and 0 <= f < features for f in feature):
                return False
    except (KeyError, TypeError, ValueError):
        return False
    return bool(trees)


def valid_correction_model(model, features: int) -> bool:
    """Whether ``model`` is a learned correction of ``features`` features that selection
    can evaluate: a list of one finite coefficient per feature, or boosted trees (see
    :meth:`Records.put_correction`)."""
    return _valid_model(model, features)


class Records:
    """find-db, calibration and perf-db access (mixed into :class:`~wticonv.db.store.Store`)."""

    # ------------------------------------------------------------------------ find-db
    def put_find_records(self, device_key: str, problem_key: str, records) -> None:
        """Replace the find-db records of one problem on one device, in one transaction.

        ``records``: iterable of ``(solver_id, solver_version, workspace_bytes, time_ms,
        runs, capped)``.

        Raises
        ------
        ValueError
            If a record's time is not a positive finite number, its workspace is negative
            or its run count below 1 (nothing is written).
        """
        rows = [(device_key, problem_key, str(sid), str(ver), int(ws), float(t), int(n),
                 int(bool(capped)), time.time()) for sid, ver, ws, t, n, capped in records]
        for row in rows:
            if not (math.isfinite(row[5]) and row[5] > 0 and row[4] >= 0 and row[6] >= 1):
                raise ValueError(f"find-db record {row[2:8]} is invalid: the time must be a "
                                 "positive finite number of ms, the workspace >= 0, runs >= 1")
        with self._transaction() as conn:
            conn.execute("DELETE FROM find_db WHERE device_key = ? AND problem_key = ?",
                         (device_key, problem_key))
            conn.executemany("INSERT INTO find_db VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)

    def find_problem_keys(self, device_key: str) -> list[str]:
        """The problem keys the find-db holds records of for one device, sorted."""
        rows = self._connect().execute(
            "SELECT DISTINCT problem_key FROM find_db WHERE device_key = ? ORDER BY "
            "problem_key", (device_key,)).fetchall()
        return [r[0] for r in rows]

    def get_find_records(self, device_key: str, problem_key: str) -> dict[str, tuple]:
        """``{solver_id: (solver_version, workspace_bytes, time_ms, runs, capped)}`` for one
        problem on one device. Rows whose values are not valid (a time that is not a
        positive finite number, a negative workspace) are left out with a warning: a
        corrupt record is ignored, never trusted."""
        rows = self._connect().execute(
            "SELECT solver_id, solver_version, workspace, time_ms, runs, capped FROM find_db "
            "WHERE device_key = ? AND problem_key = ?", (device_key, problem_key)).fetchall()
        out = {}
        for sid, ver, ws, t, n, capped in rows:
            try:
                ok = (isinstance(sid, str) and isinstance(ver, str) and int(ws) >= 0
                      and math.isfinite(float(t)) and float(t) > 0 and int(n) >= 1)
            except (TypeError, ValueError):
                ok = False
            if not ok:
                warnings.warn(f"wticonv: ignoring a corrupt find-db record of solver {sid!r} "
                              f"for {problem_key}; run `wticonv find` again to replace it",
                              stacklevel=2)
                continue
            out[sid] = (ver, int(ws), float(t), int(n), bool(capped))
        return out

    # -------------------------------------------------------------------- calibration
    def put_calibration(self, device_key: str, factors) -> None:
        """Replace a device's WTI correction factors, in one transaction.

        ``factors``: iterable of ``(solver_id, solver_version, factor, probes)``.

        Raises
        ------
        ValueError
            If a factor is not a positive finite number (nothing is written).
        """
        rows = [(device_key, str(sid), str(ver), float(f), int(k), time.time())
                for sid, ver, f, k in factors]
        for row in rows:
            if not (math.isfinite(row[3]) and row[3] > 0):
                raise ValueError(f"calibration factor {row[3]!r} of {row[1]} must be a "
                                 "positive finite number")
        with self._transaction() as conn:
            conn.execute("DELETE FROM calibration WHERE device_key = ?", (device_key,))
            conn.executemany("INSERT INTO calibration VALUES (?, ?, ?, ?, ?, ?)", rows)
        self._factors.pop(device_key, None)

    def get_calibration(self, device_key: str) -> dict[str, tuple[str, float]]:
        """``{solver_id: (solver_version, factor)}`` of a device (cached in memory until
        this store writes new ones); invalid rows are left out with a warning."""
        cached = self._factors.get(device_key)
        if cached is not None:
            return cached
        rows = self._connect().execute(
            "SELECT solver_id, solver_version, factor FROM calibration WHERE device_key = ?",
            (device_key,)).fetchall()
        out = {}
        for sid, ver, f in rows:
            try:
                ok = math.isfinite(float(f)) and float(f) > 0
            except (TypeError, ValueError):
                ok = False
            if not ok:
                warnings.warn(f"wticonv: ignoring a corrupt calibration factor of {sid!r}; "
                              "run `wticonv calibrate` again", stacklevel=2)
                continue
            out[sid] = (ver, float(f))
        self._factors[device_key] = out
        return out

    def put_correction(self, device_key: str, models) -> None:
        """Replace a device's learned WTI corrections (:mod:`wticonv.selection.correction`),
        in one transaction.

        ``models``: iterable of ``(solver_id, solver_version, feature names, model, runs)``;
        a model is a list of one coefficient per feature, or boosted trees (a dict,
        :class:`wticonv.selection.correction.Trees`).

        Raises
        ------
        ValueError
            If the coefficients are not finite or not one per feature (nothing written).
        """
        rows = []
        for sid, ver, names, model, runs in models:
            if not _valid_model(model, len(names)):
                raise ValueError(f"the correction of {sid} must have one finite coefficient "
                                 f"per feature ({len(names)}) or be boosted trees of finite "
                                 f"arrays, not {model!r:.80}")
            rows.append((device_key, str(sid), str(ver), json.dumps(list(names)),
                         json.dumps(model), int(runs), time.time()))
        with self._transaction() as conn:
            conn.execute("DELETE FROM calibration_models WHERE device_key = ?", (device_key,))
            conn.executemany("INSERT INTO calibration_models VALUES (?, ?, ?, ?, ?, ?, ?)",
                             rows)
        self._factors.pop(("models", device_key), None)

    def get_correction(self, device_key: str) -> dict[str, tuple[str, tuple, list | dict]]:
        """``{solver_id: (solver_version, feature names, model)}`` of a device
        (cached in memory until this store writes new ones); unreadable rows are left out
        with a warning."""
        cached = self._factors.get(("models", device_key))
        if cached is not None:
            return cached
        rows = self._connect().execute(
            "SELECT solver_id, solver_version, features, coefficients FROM "
            "calibration_models WHERE device_key = ?", (device_key,)).fetchall()
        out = {}
        for sid, ver, names, coefs in rows:
            try:
                names, coefs = tuple(json.loads(names)), json.loads(coefs)
                ok = _valid_model(coefs, len(names))
            except (TypeError, ValueError):
                ok = False
            if not ok:
                warnings.warn(f"wticonv: ignoring a corrupt learned correction of {sid!r}; "
                              "run `wticonv calibrate` again", stacklevel=2)
                continue
            out[sid] = (ver, names, coefs)
        self._factors[("models", device_key)] = out
        return out

    # ------------------------------------------------------------------------ perf-db
    def put_perf_record(self, device_key: str, problem_key: str, solver_id: str,
                        solver_version: str, perf_config: str, time_ms: float,
                        default_ms: float) -> None:
        """Store (or replace) a tunable solver's best perf config for one problem.

        ``time_ms``: its measured kernel time; ``default_ms``: the solver's default's.

        Raises
        ------
        ValueError
            If the config name is not valid (:func:`valid_perf_config`) or a time is not a
            positive finite number of ms (nothing is written).
        """
        times = (float(time_ms), float(default_ms))
        if not valid_perf_config(perf_config) or not all(math.isfinite(t) and t > 0
                                                          for t in times):
            raise ValueError(f"perf-db record ({solver_id}, {perf_config!r}, {times}) is "
                             "invalid: the config must be a non-empty printable name of at "
                             f"most {PERF_CONFIG_MAX_CHARS} characters, the times positive ms")
        self._write("INSERT OR REPLACE INTO perf_db VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (device_key, problem_key, str(solver_id), str(solver_version),
                     perf_config, *times, time.time()))
        self._perf.pop(device_key, None)

    def delete_perf_record(self, device_key: str, problem_key: str, solver_id: str) -> None:
        """Forget one perf-db record (a stale or invalid one)."""
        self._write("DELETE FROM perf_db WHERE device_key = ? AND problem_key = ? AND "
                    "solver_id = ?", (device_key, problem_key, solver_id))
        self._perf.pop(device_key, None)

    def get_perf_records(self, device_key: str) -> dict[tuple[str, str], tuple]:
        """``{(problem_key, solver_id): (solver_version, perf_config, time_ms, default_ms)}``
        of a device, read once and kept in memory until this store writes to the perf-db.

        Rows with invalid values (a config name that is not valid, a time that is not a
        positive number) are left out with a warning and deleted: a corrupt record is
        reported and replaced by the solver's default, never trusted."""
        cached = self._perf.get(device_key)
        if cached is not None:
            return cached
        rows = self._connect().execute(
            "SELECT problem_key, solver_id, solver_version, perf_config, time_ms, default_ms "
            "FROM perf_db WHERE device_key = ?", (device_key,)).fetchall()
        out, bad = {}, []
        for pk, sid, ver, cfg, t, t0 in rows:
            try:
                ok = (isinstance(ver, str) and valid_perf_config(cfg)
                      and all(math.isfinite(float(v)) and float(v) > 0 for v in (t, t0)))
            except (TypeError, ValueError):
                ok = False
            if ok:
                out[(pk, sid)] = (ver, cfg, float(t), float(t0))
            else:
                bad.append((pk, sid))
        for pk, sid in bad:
            warnings.warn(f"wticonv: ignoring a corrupt perf-db record of solver {sid!r} for "
                          f"{pk}; deleted it (its default perf config runs; `wticonv tune` "
                          "stores a new one)", stacklevel=2)
            try:
                self.delete_perf_record(device_key, pk, sid)
            except (StoreError, sqlite3.Error):  # read-only or locked: ignored all the same
                pass
        self._perf[device_key] = out
        return out

    # ------------------------------------------------------------- whole databases
    def record_device_keys(self) -> list[str]:
        """Every device key the find-db, perf-db or calibration holds records of, sorted."""
        rows = self._connect().execute(
            "SELECT device_key FROM find_db UNION SELECT device_key FROM perf_db UNION "
            "SELECT device_key FROM calibration UNION SELECT device_key FROM "
            "calibration_models ORDER BY 1").fetchall()
        return [r[0] for r in rows]

    def dump_records(self, device_keys=None, kinds=RECORD_KINDS) -> list[tuple]:
        """The measured records of ``device_keys`` (None: every device) as they are stored,
        unchecked: ``(kind, device_key, problem_key or None, solver_id, direction or None,
        solver_version, values)`` tuples, ``values`` a dict of the kind's fields (the
        ``wticonv-db`` format's, :mod:`wticonv.db.transfer`, which checks them)."""
        conn = self._connect()
        keys = self.record_device_keys() if device_keys is None else sorted(set(device_keys))
        out: list[tuple] = []
        for dev in keys:
            if "find-db" in kinds:
                out += [("find-db", dev, pk, sid, None, ver,
                         {"workspace": ws, "time_ms": t, "runs": n, "capped": bool(c)})
                        for pk, sid, ver, ws, t, n, c in conn.execute(
                            "SELECT problem_key, solver_id, solver_version, workspace, "
                            "time_ms, runs, capped FROM find_db WHERE device_key = ?", (dev,))]
            if "perf-db" in kinds:
                out += [("perf-db", dev, pk, sid, None, ver,
                         {"perf_config": cfg, "time_ms": t, "default_ms": t0})
                        for pk, sid, ver, cfg, t, t0 in conn.execute(
                            "SELECT problem_key, solver_id, solver_version, perf_config, "
                            "time_ms, default_ms FROM perf_db WHERE device_key = ?", (dev,))]
            if "calibration" in kinds:
                for key, ver, f, k in conn.execute(
                        "SELECT solver_id, solver_version, factor, probes FROM calibration "
                        "WHERE device_key = ?", (dev,)):
                    sid, _, direction = str(key).partition("@")
                    out.append(("calibration", dev, None, sid, direction or None, ver,
                                {"factor": f, "probes": k}))
            if "correction" in kinds:
                for sid, ver, names, model, runs in conn.execute(
                        "SELECT solver_id, solver_version, features, coefficients, runs FROM "
                        "calibration_models WHERE device_key = ?", (dev,)):
                    try:
                        names, model = json.loads(names), json.loads(model)
                    except (TypeError, ValueError):
                        names = model = None       # reported by the caller's check
                    out.append(("correction", dev, None, sid, None, ver,
                                {"features": names, "model": model, "runs": runs}))
        return out

    def load_records(self, records) -> None:
        """Write checked records (the tuples of :meth:`dump_records`) in one transaction:
        all of them, or on an error none.

        What a record replaces is what the command that measures it writes at once: the
        find-db records of a (device, problem) replace that problem's records on that
        device (``wticonv find`` times every solver of a problem together); a perf-db
        record replaces the one of its (device, problem, solver); calibration factors and
        learned corrections of a device replace both of that device's (``wticonv
        calibrate`` fits them together: half of an older calibration is never kept).
        """
        now = time.time()
        finds: dict[tuple[str, str], list] = {}
        perf, factors, models = [], [], []
        calibrated: set[str] = set()
        for kind, dev, pk, sid, direction, ver, v in records:
            if kind == "find-db":
                finds.setdefault((dev, pk), []).append(
                    (dev, pk, sid, ver, int(v["workspace"]), float(v["time_ms"]),
                     int(v["runs"]), int(bool(v["capped"])), now))
            elif kind == "perf-db":
                perf.append((dev, pk, sid, ver, v["perf_config"], float(v["time_ms"]),
                             float(v["default_ms"]), now))
            elif kind == "calibration":
                calibrated.add(dev)
                factors.append((dev, sid + (f"@{direction}" if direction else ""), ver,
                                float(v["factor"]), int(v["probes"]), now))
            elif kind == "correction":
                calibrated.add(dev)
                models.append((dev, sid, ver, json.dumps(list(v["features"])),
                               json.dumps(v["model"]), int(v["runs"]), now))
            else:
                raise ValueError(f"unknown record kind {kind!r}")
        with self._transaction() as conn:
            for (dev, pk), rows in finds.items():
                conn.execute("DELETE FROM find_db WHERE device_key = ? AND problem_key = ?",
                             (dev, pk))
                conn.executemany("INSERT INTO find_db VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
            conn.executemany("INSERT OR REPLACE INTO perf_db VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                             perf)
            for dev in calibrated:
                conn.execute("DELETE FROM calibration WHERE device_key = ?", (dev,))
                conn.execute("DELETE FROM calibration_models WHERE device_key = ?", (dev,))
            conn.executemany("INSERT INTO calibration VALUES (?, ?, ?, ?, ?, ?)", factors)
            conn.executemany("INSERT INTO calibration_models VALUES (?, ?, ?, ?, ?, ?, ?)",
                             models)
        for dev in {r[0] for r in perf} | calibrated:
            self._perf.pop(dev, None)
            self._factors.pop(dev, None)
            self._factors.pop(("models", dev), None)
