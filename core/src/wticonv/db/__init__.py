"""Layer 3, the database: persistent state in one SQLite file.

- :mod:`~wticonv.db.store`: the :class:`Store` (device figures and verdicts, program
  binaries, find-db, perf-db, calibration), atomic and shared between processes;
- :mod:`~wticonv.db.records`: validation of the records read back.

Imports only :mod:`wticonv.errors` (and platformdirs, sqlite3).
"""

from wticonv.db.store import Store, default_cache_dir

__all__ = ["Store", "default_cache_dir"]
