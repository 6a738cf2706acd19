"""wticonv: OpenCL 2-D convolutions, chosen without benchmarking.

Every installed solver plugin reports whether it applies to a problem, its Wall-Time Index
(predicted fraction of the device's peak) and its workspace; the core runs the one with
the largest WTI, then the smallest workspace (MIOpen's immediate-mode fallback).

Quick start::

    import numpy as np, wticonv
    x = np.random.rand(8, 64, 56, 56).astype(np.float32)
    w = np.random.rand(64, 64, 3, 3).astype(np.float32)
    y = wticonv.conv2d(x, w, padding=1)          # as torch.nn.functional.conv2d
    print(wticonv.explain(wticonv.ConvProblem(8, 64, 56, 56, 64, 3, 3, pad_h=1, pad_w=1)))
"""

from __future__ import annotations

from wticonv import _moved
from wticonv._version import __version__
from wticonv.api import conv2d, conv2d_input, conv2d_weight
from wticonv.contract.answers import (
    DEFAULT_TOLERANCE,
    reduction_length,
    tolerance_for,
)
from wticonv.contract.hookspecs import WTI_UNKNOWN, Decline, hookimpl
from wticonv.errors import (
    ArgumentError,
    ContractError,
    DbFileError,
    DeviceError,
    DeviceMemoryError,
    DriverArgsError,
    HostMemoryError,
    KernelBuildError,
    KeyFormatError,
    NetworkError,
    NoApplicableSolverError,
    PluginError,
    ProblemError,
    SolverNotApplicableError,
    SolverNotFoundError,
    SolverRunError,
    SolverWarning,
    TensorError,
    WticonvError,
)
from wticonv.handle import Handle, RunResult, get_handle
from wticonv.problem.conv import DIRECTIONS, ConvProblem
from wticonv.problem.reference import reference, rms_range
from wticonv.problem.tensors import ConvTensors
from wticonv.runtime.device import Device, DeviceInfo, list_devices, select_device
from wticonv.selection.ranking import Selection, Verdict


def explain(problem: ConvProblem, workspace_limit: int | None = None,
            solver: str | None = None, handle: Handle | None = None,
            allow_tf32: bool | None = None) -> Selection:
    """Rank every installed solver for ``problem`` without running anything.

    Returns the :class:`Selection`: the chosen solver and, per solver, whether it applies
    (or why not), its math class, WTI, workspace and predicted time. ``allow_tf32`` (None:
    the handle's) also ranks TF32-only solvers. Raises as
    :func:`wticonv.selection.ranking.select`.
    """
    if handle is not None and not isinstance(handle, Handle):
        raise ArgumentError(f"handle={handle!r:.60} is not a wticonv.Handle; make one with "
                            "wticonv.Handle(device) (a device spec such as 'cpu' or 'gpu' "
                            "goes there)")
    return (handle or get_handle()).select(problem, workspace_limit, solver,
                                           allow_tf32=allow_tf32)


def solver_tolerance(handle: Handle, solver_id: str, problem: ConvProblem | None = None
                     ) -> float:
    """The rms_range tolerance for ``solver_id`` (on ``problem``).

    The solver's declared ``tolerance`` (else :data:`DEFAULT_TOLERANCE`; the registry
    refuses, at load time, a solver declaring one that is not a number between 0 and 1,
    see :mod:`wticonv.contract.answers`) holds for sums of
    up to 1024 products; beyond, it grows as sqrt(length / 1024) (:func:`reduction_length`),
    as the rounding error of a float32 sum of random terms does. E.g. a backward-weights
    pass over 2 x 499 x 496 pixels allows 22 x the base tolerance.
    """
    return tolerance_for(handle.registry, solver_id, problem)


def export_db(file, devices=None, kinds=None, store=None, match: str | None = None,
              comment: str | None = None, force: bool = False) -> dict:
    """Write the cache's find-db, perf-db and calibration records to ``file`` (a path, or
    ``"-"`` for standard output) in the ``wticonv-db`` format (``wticonv db export``;
    docs/fleet.md): a header line, then one record a line, sorted.

    ``devices``: device keys or patterns (``*`` any text) whose records to write (default:
    all); ``kinds``: some of ``"find-db"``, ``"perf-db"``, ``"calibration"``,
    ``"correction"`` (default: all); ``store``: a :class:`wticonv.db.Store` (default: the
    user's cache); ``match``, ``comment``, ``force``: see
    :func:`wticonv.db.transfer.export_db`, which this calls (an existing ``file`` is not
    replaced by an export that matched no record, :class:`DbFileError`, unless ``force``).
    Returns its summary (record counts per kind, devices).
    """
    from wticonv.db.store import Store
    from wticonv.db.transfer import export_db as export

    return export(store if store is not None else Store(), file, devices, kinds, match,
                  comment, force)


def import_db(file, devices=None, skip_bad: bool = False, check: bool = False,
              store=None) -> dict:
    """Import a ``wticonv-db`` file (a path, ``"-"`` or an open text file) into the cache,
    in one transaction (``wticonv db import``).

    Every record is checked, that its solver is installed in the version that measured
    it, and that a perf-db record's solver is tunable and offers its perf config. A file
    with a bad record imports nothing and raises :class:`DbFileError` (each bad line with
    what is wrong and how to fix it) unless ``skip_bad``: then the good ones are imported
    (a bad record leaves out its whole unit: a device's calibration, a find-db problem's
    records on a device) and the bad ones returned. ``devices``
    (device keys or patterns) imports only those devices' records; ``check`` imports
    nothing. Returns :func:`wticonv.db.transfer.import_db`'s summary.
    """
    from wticonv.contract.registry import SolverRegistry
    from wticonv.db.store import Store
    from wticonv.db.transfer import import_db as load
    from wticonv.selection.perfdb import perf_record_check

    registry = SolverRegistry()
    versions = {sid: e.version for sid, e in registry.solvers.items()}
    store = store if store is not None else Store()
    return load(store, file, versions, devices, skip_bad, check,
                perf_record_check(registry, store))


_moved.install()

__all__ = [
    "conv2d", "conv2d_input", "conv2d_weight", "explain", "solver_tolerance",
    "export_db", "import_db", "DbFileError",
    "reduction_length",
    "ConvProblem", "DIRECTIONS", "ConvTensors", "Device", "DeviceInfo", "Handle", "RunResult",
    "Selection", "Verdict", "Decline", "hookimpl", "WTI_UNKNOWN", "DEFAULT_TOLERANCE",
    "get_handle", "list_devices", "select_device", "reference", "rms_range",
    "WticonvError", "ArgumentError", "ProblemError", "KeyFormatError", "DriverArgsError",
    "TensorError",
    "DeviceError", "DeviceMemoryError", "HostMemoryError", "KernelBuildError", "PluginError",
    "ContractError", "SolverNotFoundError",
    "SolverNotApplicableError", "NoApplicableSolverError", "SolverRunError", "NetworkError",
    "SolverWarning", "__version__",
]
