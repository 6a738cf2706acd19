"""Persistent state: one SQLite database under the user cache directory.

Location: ``$WTICONV_CACHE_DIR/wticonv.sqlite`` when the variable is set, else
``platformdirs.user_cache_dir("wticonv")/wticonv.sqlite`` (``~/.cache/wticonv`` on Linux).
Deleting the file (or ``wticonv cache --clear``) resets everything; nothing in it is
precious, everything can be measured or compiled again.

Tables (keyed by device key = platform | device name | driver version):

- ``device_figures``: measured peak FP32 FLOP/s and memory bandwidth per device, under
  ``device key#m<FIGURES_METHOD>`` (figures of an older measuring method are not read).
- ``launch_overhead``: measured seconds per kernel launch per device.
- ``device_unusable``: written by versions before the probe; no longer read.
- ``device_verdicts``: each device's probe verdict (usable, or set aside and why), keyed by
  :func:`wticonv.runtime.probe.verdict_key` (device key, the host CPU, the probe kernels), so that
  a driver is tried in a child process once, not on every start (:mod:`wticonv.runtime.probe`).
- ``program_binaries``: compiled OpenCL program binaries per (device, source + options digest).
- ``find_db``: find mode's measured time of every solver per (device, problem key), with
  the solver's version and the workspace it used (MIOpen's find-db, :mod:`wticonv.measuring.find`).
- ``calibration``: per (device, solver) correction factors of the WTI models, fitted by
  ``wticonv calibrate`` (:mod:`wticonv.measuring.calibrate`).
- ``perf_db``: the fastest perf config of each tunable solver per (device, problem key),
  found by ``wticonv tune`` (:mod:`wticonv.measuring.tune`), with its time and the default's.

Writes are single transactions in WAL mode with a busy timeout, so several processes may
share the file (a lock held by another process is waited for); a database that is not an
SQLite file, or lacks columns this version uses, is moved aside to
``wticonv.sqlite.corrupt-<time>`` with a warning and a fresh one is created. Damage found
later, by a query (SQLite's "database disk image is malformed" from a damaged page), is
handled the same way: the file is moved aside, a fresh one started and the query run
again on it, so a damaged cache never stops a convolution. A cache directory that cannot
be created or written makes the store fall back, with one warning, to a temporary
directory for the rest of the process, shared by every store of that directory and
removed at exit (nothing is kept after it). Program binaries are stored with a SHA-256
of their bytes: a damaged one is deleted and its program built from source again, never
handed to the driver.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import math
import os
import random
import shutil
import sqlite3
import tempfile
import threading
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import platformdirs

from wticonv.db.records import Records
from wticonv.db.schema import _COLUMNS, _SCHEMA, _TABLES, FIGURES_METHOD, SCHEMA_VERSION  # noqa: F401
from wticonv.errors import StoreError

__all__ = ["Store", "default_cache_dir"]

#: Cache directories that cannot be used -> the temporary directory standing in for each
#: in this process (see Store._use_temporary).
_TEMPORARY: dict[Path, Path] = {}
_TEMPORARY_LOCK = threading.Lock()
_DIGEST_BYTES = 32     # the SHA-256 stored before each program binary

def _figures_key(device_key: str) -> str:
    return f"{device_key}#m{FIGURES_METHOD}"


def _is_busy(e: sqlite3.OperationalError) -> bool:
    text = str(e).lower()
    return "locked" in text or "busy" in text


def _is_damage(e: sqlite3.DatabaseError) -> bool:
    """A database file that is damaged (not a lock, a full disk or a permission)."""
    if not isinstance(e, sqlite3.OperationalError):
        return True       # DatabaseError proper: malformed image, not a database
    text = str(e).lower()
    return "malformed" in text or "not a database" in text or "corrupt" in text


def _recovering(method):
    """Run a Store method; if the database turns out damaged on the way, move it aside,
    start a fresh one and run the method again (once)."""
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except sqlite3.DatabaseError as e:
            if not _is_damage(e):
                raise StoreError(f"the cache database {self.path} cannot be used ({e}); check "
                                 "the disk, or set WTICONV_CACHE_DIR elsewhere") from None
            self._recover(e)
        try:
            return method(self, *args, **kwargs)
        except sqlite3.DatabaseError as e:
            raise StoreError(f"the cache database {self.path} cannot be used ({e}), even "
                             "after starting a new one; check the disk, or set "
                             "WTICONV_CACHE_DIR elsewhere") from None
    return wrapper


def default_cache_dir() -> Path:
    """``$WTICONV_CACHE_DIR`` if set, else the platform's user cache directory for wticonv."""
    env = os.environ.get("WTICONV_CACHE_DIR")
    return Path(env) if env else Path(platformdirs.user_cache_dir("wticonv"))


class Store(Records):
    """The SQLite database of one cache directory (thread-safe: one connection per thread).

    Parameters
    ----------
    cache_dir : path-like, optional
        Directory of the database; :func:`default_cache_dir` when omitted. Created if
        missing.
    """

    def __init__(self, cache_dir: str | os.PathLike | None = None) -> None:
        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self.path = self.cache_dir / "wticonv.sqlite"
        self._local = threading.local()
        self._init_lock = threading.Lock()
        self._initialised = False
        self._factors: dict[str, dict] = {}
        self._perf: dict[str, dict] = {}
        #: Bumped each time the file is replaced; a thread's connection to an older file is
        #: reopened (see _recover).
        self._generation = 0
        #: The cache directory asked for, when it could not be used and a temporary one
        #: stands in for it (else None).
        self.fallback_from: Path | None = None

    # ------------------------------------------------------------------ connection
    def _connect(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            if self._local.generation == self._generation:
                return conn
            conn.close()                   # the file was replaced by another thread
            self._local.conn = None
        with self._init_lock:
            reason = self._unusable_dir()
            if reason is not None:
                self._use_temporary(reason)
            conn = self._open_checked()
            self._local.generation = self._generation
        self._local.conn = conn
        return conn

    def _unusable_dir(self) -> str | None:
        """Why the cache directory cannot hold the database (None when it can)."""
        try:
            self.cache_dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            return f"cannot create it: {e}"
        if not self.cache_dir.is_dir():
            return "it is not a directory"
        if not os.access(self.cache_dir, os.W_OK | os.X_OK):
            return "it is not writable"
        if self.path.exists() and not os.access(self.path, os.R_OK | os.W_OK):
            return f"{self.path.name} in it is not readable and writable"
        return None

    def _use_temporary(self, reason: str) -> None:
        """Move this store to the temporary directory standing in for its cache directory
        in this process (made, with a warning, by the first store that needs it; removed at
        exit)."""
        was = self.cache_dir
        with _TEMPORARY_LOCK:
            tmp = _TEMPORARY.get(was)
            if tmp is None:
                tmp = _TEMPORARY[was] = Path(tempfile.mkdtemp(prefix="wticonv-cache-"))
                atexit.register(shutil.rmtree, tmp, True)
                warnings.warn(f"wticonv: the cache directory {was} cannot be used ({reason}); "
                              f"using the temporary {tmp} for this process, whose kernels, "
                              "measurements and records are not kept; set WTICONV_CACHE_DIR "
                              "to a writable directory", stacklevel=5)
        self.fallback_from, self.cache_dir = was, tmp
        self.path = tmp / "wticonv.sqlite"
        self._initialised = False

    def _recover(self, error: Exception) -> None:
        """The database turned out damaged: move it aside and start afresh (unless another
        thread already did since this thread's connection was opened)."""
        with self._init_lock:
            conn = getattr(self._local, "conn", None)
            if conn is not None:
                conn.close()
                self._local.conn = None
            if getattr(self._local, "generation", None) == self._generation:
                self._start_afresh(error)

    def _start_afresh(self, error: Exception) -> None:
        """Move the damaged file aside and have every thread open a new one (called with
        the init lock held)."""
        self._move_aside(error)
        self._generation += 1
        self._initialised = False
        self._factors.clear()
        self._perf.clear()

    def _open_checked(self) -> sqlite3.Connection:
        """Open (and on first use initialise) the database.

        A database locked by another process is waited for (up to a minute); one that is
        not an SQLite file, or whose tables lack columns this version uses, is moved aside
        with a warning and replaced by a new one.
        """
        deadline = time.monotonic() + 60.0
        while True:
            try:
                return self._open_and_init()
            except sqlite3.OperationalError as e:
                if not _is_busy(e):
                    raise StoreError(f"the cache database {self.path} cannot be used ({e}); "
                                     "check the disk, or set WTICONV_CACHE_DIR elsewhere"
                                     ) from None
                if time.monotonic() > deadline:
                    raise StoreError(f"the cache database {self.path} stayed locked by another "
                                     "process for a minute; try again, or set "
                                     "WTICONV_CACHE_DIR elsewhere") from None
                time.sleep(0.02 + random.random() * 0.08)
            except sqlite3.DatabaseError as e:
                self._start_afresh(e)

    def _open_and_init(self) -> sqlite3.Connection:
        conn = self._open()
        try:
            if not self._initialised:
                with conn:
                    conn.executescript(_SCHEMA)
                    conn.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)",
                                 (str(SCHEMA_VERSION),))
                self._check_schema(conn)
                self._initialised = True
        except BaseException:
            conn.close()
            raise
        return conn

    def _move_aside(self, error: Exception) -> None:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        aside = self.path.with_name(f"{self.path.name}.corrupt-{stamp}")
        n = 1
        while aside.exists():          # never overwrite an earlier copy
            n += 1
            aside = self.path.with_name(f"{self.path.name}.corrupt-{stamp}-{n}")
        warnings.warn(f"wticonv: the cache database {self.path} cannot be used ({error}); "
                      f"moved it to {aside} and started a new one", stacklevel=4)
        for suffix in ("", "-wal", "-shm"):
            p = Path(str(self.path) + suffix)
            if p.exists():
                os.replace(p, Path(str(aside) + suffix))

    @contextmanager
    def exclusive(self, name: str, waiting=None) -> Iterator[None]:
        """Hold an inter-process lock (a locked file ``<name>.lock`` in the cache directory)
        while the block runs: used so that only one process measures a device at a time.
        ``waiting``, when given, is called once if another process holds the lock (before
        waiting for it). Where file locks are not available, the block runs unlocked."""
        self._connect()  # creates and checks the directory
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX
            yield
            return
        with open(self.cache_dir / f"{name}.lock", "a") as f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if waiting is not None:
                    waiting()
                fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    @staticmethod
    def _check_schema(conn: sqlite3.Connection) -> None:
        """Raise sqlite3.DatabaseError if a table lacks a column this version uses (a file
        written by another program or version); the caller then starts afresh."""
        for table, columns in _COLUMNS.items():
            have = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
            missing = columns - have
            if missing:
                raise sqlite3.DatabaseError(
                    f"table {table} lacks column(s) {', '.join(sorted(missing))}")

    def _open(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None,
                               check_same_thread=False)
        conn.execute("PRAGMA busy_timeout = 30000")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return conn

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (taken at once, so writers queue instead of deadlocking);
        rolled back if the block raises, so a record is written whole or not at all."""
        conn = self._connect()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def _write(self, sql: str, params: tuple) -> None:
        with self._transaction() as conn:
            conn.execute(sql, params)

    def close(self) -> None:
        """Close this thread's connection (others close when their thread ends)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    # --------------------------------------------------------------- device figures
    def get_device_figures(self, device_key: str) -> tuple[float, float] | None:
        """Measured ``(peak_flops, bandwidth)`` of a device, in FLOP/s and bytes/s, or None
        (none measured, or only by an older method: :data:`FIGURES_METHOD`)."""
        row = self._connect().execute(
            "SELECT peak_flops, bandwidth FROM device_figures WHERE device_key = ?",
            (_figures_key(device_key),)).fetchone()
        try:
            peak, bw = float(row[0]), float(row[1])
        except (TypeError, ValueError):  # no row, or a value that is not a number
            return None
        if not (peak > 0 and bw > 0 and math.isfinite(peak) and math.isfinite(bw)):
            return None
        return peak, bw

    def put_device_figures(self, device_key: str, peak_flops: float, bandwidth: float,
                           keep_best: bool = False) -> tuple[float, float]:
        """Record a device's measured figures (FLOP/s, bytes/s) and return what is stored.

        ``keep_best`` keeps the larger of the stored and the new value of each figure: a
        measurement disturbed by other work on the machine only ever reads low. Figures of
        an older measuring method (:data:`FIGURES_METHOD`) are replaced, and the device's
        calibration (factors and learned correction, fitted to predictions made from them)
        is deleted with a warning to calibrate again.
        """
        if keep_best:
            old = self.get_device_figures(device_key)
            if old is not None:
                peak_flops, bandwidth = max(peak_flops, old[0]), max(bandwidth, old[1])
        dropped = False
        with self._transaction() as conn:
            conn.execute("INSERT OR REPLACE INTO device_figures VALUES (?, ?, ?, ?)",
                         (_figures_key(device_key), float(peak_flops), float(bandwidth),
                          time.time()))
            if conn.execute("DELETE FROM device_figures WHERE device_key = ?",
                            (device_key,)).rowcount:
                dropped = sum(conn.execute(f"DELETE FROM {table} WHERE device_key = ?",
                                           (device_key,)).rowcount
                              for table in ("calibration", "calibration_models")) > 0
        if dropped:
            self._factors.pop(device_key, None)
            self._factors.pop(("models", device_key), None)
            name = (device_key.split("|") + [device_key])[1]
            warnings.warn(f"wticonv: the device figures of {name!r} were "
                          "measured again with a new method (fused multiply-adds); its "
                          "calibration was fitted to the old figures and is removed: run "
                          "`wticonv calibrate` again", stacklevel=2)
        return float(peak_flops), float(bandwidth)

    def get_launch_overhead(self, device_key: str) -> float | None:
        """A device's measured launch overhead in seconds (wticonv.runtime.peak), or None."""
        row = self._connect().execute(
            "SELECT seconds FROM launch_overhead WHERE device_key = ?", (device_key,)).fetchone()
        try:
            seconds = float(row[0])
        except (TypeError, ValueError):  # no row, or a value that is not a number
            return None
        return seconds if seconds > 0 and math.isfinite(seconds) else None

    def put_launch_overhead(self, device_key: str, seconds: float) -> float:
        """Record a device's launch overhead (s) unless one is stored; return the stored
        one (the first measurement wins, so every process ranks with the same figure)."""
        self._write("INSERT OR IGNORE INTO launch_overhead VALUES (?, ?, ?)",
                    (device_key, float(seconds), time.time()))
        stored = self.get_launch_overhead(device_key)
        return float(seconds) if stored is None else stored

    def get_device_verdict(self, verdict_key: str) -> tuple[bool, str] | None:
        """A device's probe verdict ``(usable, reason)`` (reason empty when usable), or None
        when it has not been probed (see :mod:`wticonv.runtime.probe`)."""
        row = self._connect().execute(
            "SELECT usable, reason FROM device_verdicts WHERE verdict_key = ?",
            (verdict_key,)).fetchone()
        return (bool(row[0]), str(row[1])) if row else None

    def put_device_verdict(self, verdict_key: str, usable: bool, reason: str = "") -> None:
        """Record a device's probe verdict (``reason``: why it is set aside)."""
        self._write("INSERT OR REPLACE INTO device_verdicts VALUES (?, ?, ?, ?)",
                    (verdict_key, int(bool(usable)), str(reason), time.time()))

    def forget_device_verdicts(self, device_key: str) -> int:
        """Remove every probe verdict of ``device_key`` (any host, any probe version), so
        that the device is probed again; returns how many were removed."""
        with self._transaction() as conn:
            cur = conn.execute("DELETE FROM device_verdicts WHERE substr(verdict_key, 1, ?) "
                               "= ?", (len(device_key) + 1, device_key + "#"))
            return cur.rowcount

    def copy_device_records(self, other: Store, device_keys) -> None:
        """Copy the figures and probe verdicts of ``device_keys`` from store ``other``
        (a fresh store for a test or a new cache directory starts with what is known of
        its devices; nothing else is copied)."""
        for key in device_keys:
            figures = other.get_device_figures(key)
            if figures is not None:
                self.put_device_figures(key, *figures)
            overhead = other.get_launch_overhead(key)
            if overhead is not None:
                self.put_launch_overhead(key, overhead)
            rows = other._connect().execute(
                "SELECT verdict_key, usable, reason FROM device_verdicts "
                "WHERE substr(verdict_key, 1, ?) = ?", (len(key) + 1, key + "#")).fetchall()
            for vkey, usable, reason in rows:
                self.put_device_verdict(vkey, bool(usable), reason)

    # --------------------------------------------------------------- program binaries
    def get_program_binary(self, device_key: str, digest: str) -> bytes | None:
        """The stored binary of a program, or None. A binary whose bytes no longer match
        the SHA-256 stored with them (damaged on disk) is deleted with a warning and None
        returned: a driver handed a damaged binary may crash the process."""
        row = self._connect().execute(
            "SELECT binary FROM program_binaries WHERE device_key = ? AND digest = ?",
            (device_key, digest)).fetchone()
        if not row:
            return None
        blob = bytes(row[0])
        check, binary = blob[:_DIGEST_BYTES], blob[_DIGEST_BYTES:]
        if not binary or hashlib.sha256(binary).digest() != check:
            warnings.warn(f"wticonv: a stored program binary in {self.path} is damaged; "
                          "deleted it, the program is built from source again", stacklevel=3)
            self.delete_program_binary(device_key, digest)
            return None
        return binary

    def put_program_binary(self, device_key: str, digest: str, binary: bytes) -> None:
        """Store a program binary, with the SHA-256 of its bytes (checked on reading)."""
        blob = hashlib.sha256(binary).digest() + bytes(binary)
        self._write("INSERT OR REPLACE INTO program_binaries VALUES (?, ?, ?, ?)",
                    (device_key, digest, sqlite3.Binary(blob), time.time()))

    def delete_program_binary(self, device_key: str, digest: str) -> None:
        """Forget a program binary (used when a stored binary no longer loads)."""
        self._write("DELETE FROM program_binaries WHERE device_key = ? AND digest = ?",
                    (device_key, digest))

    def summary(self) -> dict[str, int]:
        """Row counts per table, for ``wticonv cache``."""
        conn = self._connect()
        return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in _TABLES}

    def clear(self) -> None:
        """Delete every record (the file stays)."""
        with self._transaction() as conn:
            for table in _TABLES:
                conn.execute(f"DELETE FROM {table}")
        self._factors.clear()
        self._perf.clear()


# Every public record method recovers from a database found damaged while it runs.
for _cls in (Store, Records):
    for _name, _fn in list(vars(_cls).items()):
        if (not _name.startswith("_") and callable(_fn) and _name != "exclusive"
                and not isinstance(_fn, (staticmethod, classmethod))):
            setattr(Store, _name, _recovering(_fn))
del _cls, _name, _fn
