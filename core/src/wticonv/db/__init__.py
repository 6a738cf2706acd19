"""Layer 3, the database: persistent state in one SQLite file, and database files.

- :mod:`~wticonv.db.store`: the :class:`Store` (device figures and verdicts, program
  binaries, find-db, perf-db, calibration), atomic and shared between processes;
- :mod:`~wticonv.db.records`: validation of the records read back;
- :mod:`~wticonv.db.checks`: the records of a database file, their checks, and the units
  an import takes whole;
- :mod:`~wticonv.db.reading`: reading a ``wticonv-db`` file, its header and its records
  checked, bad lines reported;
- :mod:`~wticonv.db.transfer`: the ``wticonv-db`` text format (JSON lines), export and
  import (``wticonv db export`` / ``import``);
- :mod:`~wticonv.db.system`: system databases, read-only records shipped by
  distributions (entry-point group ``wticonv.system_db``).

Imports the problem model (problem keys) and :mod:`wticonv.errors` (and platformdirs,
sqlite3, importlib-metadata).
"""

from wticonv.db.store import Store, default_cache_dir
from wticonv.db.system import system_databases, system_view
from wticonv.db.transfer import KINDS, check_record, export_db, import_db, read_db

__all__ = ["Store", "default_cache_dir", "KINDS", "check_record", "export_db", "import_db",
           "read_db", "system_databases", "system_view"]
