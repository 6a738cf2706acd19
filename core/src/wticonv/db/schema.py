"""The database's tables: the SQL that creates them, the columns this version reads (a file
lacking one is moved aside and started afresh), and the tables ``clear`` and ``summary``
cover. The meaning of each table is in :mod:`wticonv.db.store`."""

from __future__ import annotations

__all__ = ["SCHEMA_VERSION", "FIGURES_METHOD"]

SCHEMA_VERSION = 1

#: The measuring method of the device figures this version reads (wticonv.runtime.peak).
#: 2: the peak kernel's multiply-adds are fused on CPUs with FMA units (PoCL's mad() is a
#: separate multiply and add there, which read half the peak; kernels/common.h). Figures
#: of an older method are not returned, so the device is measured again; storing the new
#: ones drops the old, and the device's calibration, which was fitted to them. Exported
#: databases name it in their header, and calibrations fitted under another method are
#: not imported (wticonv.db.transfer).
FIGURES_METHOD = 2
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS device_figures (
    device_key TEXT PRIMARY KEY,
    peak_flops REAL NOT NULL,
    bandwidth REAL NOT NULL,
    measured_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS launch_overhead (
    device_key TEXT PRIMARY KEY,
    seconds REAL NOT NULL,
    measured_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS device_unusable (
    device_key TEXT PRIMARY KEY,
    reason TEXT NOT NULL,
    noted_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS device_verdicts (
    verdict_key TEXT PRIMARY KEY,
    usable INTEGER NOT NULL,
    reason TEXT NOT NULL,
    noted_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS find_db (
    device_key TEXT NOT NULL,
    problem_key TEXT NOT NULL,
    solver_id TEXT NOT NULL,
    solver_version TEXT NOT NULL,
    workspace INTEGER NOT NULL,
    time_ms REAL NOT NULL,
    runs INTEGER NOT NULL,
    capped INTEGER NOT NULL,
    measured_at REAL NOT NULL,
    PRIMARY KEY (device_key, problem_key, solver_id)
);
CREATE TABLE IF NOT EXISTS calibration (
    device_key TEXT NOT NULL,
    solver_id TEXT NOT NULL,
    solver_version TEXT NOT NULL,
    factor REAL NOT NULL,
    probes INTEGER NOT NULL,
    measured_at REAL NOT NULL,
    PRIMARY KEY (device_key, solver_id)
);
CREATE TABLE IF NOT EXISTS calibration_models (
    device_key TEXT NOT NULL,
    solver_id TEXT NOT NULL,
    solver_version TEXT NOT NULL,
    features TEXT NOT NULL,
    coefficients TEXT NOT NULL,
    runs INTEGER NOT NULL,
    measured_at REAL NOT NULL,
    PRIMARY KEY (device_key, solver_id)
);
CREATE TABLE IF NOT EXISTS perf_db (
    device_key TEXT NOT NULL,
    problem_key TEXT NOT NULL,
    solver_id TEXT NOT NULL,
    solver_version TEXT NOT NULL,
    perf_config TEXT NOT NULL,
    time_ms REAL NOT NULL,
    default_ms REAL NOT NULL,
    tuned_at REAL NOT NULL,
    PRIMARY KEY (device_key, problem_key, solver_id)
);
CREATE TABLE IF NOT EXISTS program_binaries (
    device_key TEXT NOT NULL,
    digest TEXT NOT NULL,
    binary BLOB NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (device_key, digest)
);
"""


_COLUMNS = {
    "meta": {"name", "value"},
    "device_figures": {"device_key", "peak_flops", "bandwidth", "measured_at"},
    "launch_overhead": {"device_key", "seconds", "measured_at"},
    "device_unusable": {"device_key", "reason", "noted_at"},
    "device_verdicts": {"verdict_key", "usable", "reason", "noted_at"},
    "program_binaries": {"device_key", "digest", "binary", "created_at"},
    "find_db": {"device_key", "problem_key", "solver_id", "solver_version", "workspace",
                "time_ms", "runs", "capped", "measured_at"},
    "calibration": {"device_key", "solver_id", "solver_version", "factor", "probes",
                    "measured_at"},
    "calibration_models": {"device_key", "solver_id", "solver_version", "features",
                           "coefficients", "runs", "measured_at"},
    "perf_db": {"device_key", "problem_key", "solver_id", "solver_version", "perf_config",
                "time_ms", "default_ms", "tuned_at"},
}
_TABLES = ("device_figures", "launch_overhead", "device_unusable", "device_verdicts",
           "program_binaries", "find_db",
           "calibration", "calibration_models",
           "perf_db")
