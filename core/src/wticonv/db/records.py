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

__all__ = ["Records", "valid_perf_config", "PERF_CONFIG_MAX_CHARS"]

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
        return all(isinstance(x, (int, float)) and not isinstance(x, bool)
                   and math.isfinite(x) for x in xs)

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
