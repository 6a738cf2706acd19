"""The one exception hierarchy of wticonv.

Every error raised on purpose by wticonv derives from :class:`WticonvError`. Errors caused
by bad input also derive from :class:`ValueError` (or :class:`LookupError`), so code that
already catches those keeps working. Messages say which problem or solver is concerned,
what is wrong, and how to fix it.
"""

from __future__ import annotations

__all__ = [
    "WticonvError",
    "ProblemError",
    "KeyFormatError",
    "DriverArgsError",
    "ArgumentError",
    "TensorError",
    "DeviceError",
    "KernelBuildError",
    "DeviceMemoryError",
    "StoreError",
    "DbFileError",
    "HostMemoryError",
    "PluginError",
    "ContractError",
    "SolverNotFoundError",
    "SolverNotApplicableError",
    "NoApplicableSolverError",
    "SolverRunError",
    "NetworkError",
    "FleetError",
    "SolverWarning",
    "one_line",
]


class WticonvError(Exception):
    """Base class of every error wticonv raises on purpose."""


class ProblemError(WticonvError, ValueError):
    """A convolution problem is invalid.

    The message names the field, its value and the rule it breaks, e.g.
    ``"invalid problem: groups=3 must divide c=64 (c % groups == 0)"``.
    """


class KeyFormatError(ProblemError):
    """A find-db key (MIOpen's problem key format) cannot be parsed."""


class DriverArgsError(ProblemError):
    """MIOpenDriver-style ``conv`` arguments cannot be parsed."""


class ArgumentError(WticonvError, ValueError):
    """An API argument other than an array or the problem is invalid (e.g. a negative
    ``workspace_limit``, a non-integer ``input_size``)."""


class TensorError(WticonvError, ValueError):
    """An array passed to the API does not match the problem (shape, dtype, dimensions)."""


class DeviceError(WticonvError):
    """No OpenCL device matches the request, or the OpenCL runtime is missing."""


class DeviceMemoryError(WticonvError):
    """A buffer does not fit the device (larger than its largest allocation, or out of
    memory); the message says how many bytes and what the device allows."""


class HostMemoryError(WticonvError):
    """The host (CPU RAM) cannot hold the arrays of a run or of its reference check."""


class StoreError(WticonvError):
    """The cache directory cannot be used (not a directory, not writable)."""


class DbFileError(WticonvError, ValueError):
    """A database file (``wticonv db import``, the ``wticonv-db`` format of
    :mod:`wticonv.db.transfer`) cannot be read, or holds bad records.

    The message says what is wrong with each bad line and how to fix it; nothing of the
    file was imported.

    Attributes
    ----------
    path : str
        The file (``"-"``: standard input).
    bad : list
        One :class:`wticonv.db.transfer.BadRecord` (line number, what is wrong and how to
        fix it) per bad line; the header's when the file cannot be read at all.
    good : int
        How many records were good (``--skip-bad`` imports those).
    patterns : list of str
        The device patterns the file's readable records name (a system database's, checked
        with ``--check``); empty for a file of device keys.
    warnings : list of str
        Where the file's header disagrees with it
        (:func:`wticonv.db.transfer.header_warnings`).
    """

    def __init__(self, message: str = "", path: str = "", bad=(), good: int = 0,
                 patterns=(), warnings=()) -> None:
        super().__init__(message)
        self.path = path
        self.bad = list(bad)
        self.warnings = list(warnings)
        self.good = good
        self.patterns = list(patterns)


class KernelBuildError(WticonvError):
    """An OpenCL program failed to build; the message carries the build log."""


class PluginError(WticonvError):
    """A solver plugin does not honour the contract (bad object, hooks, or id)."""


class ContractError(PluginError, ValueError):
    """A solver's hook answered a value the hook reference forbids (a NaN WTI, a negative
    workspace, ``None`` from ``is_applicable``); the message names the hook and the value."""


class SolverNotFoundError(WticonvError, LookupError):
    """A solver id was asked for that no installed plugin provides."""


class SolverNotApplicableError(WticonvError):
    """A forced solver (``solver=``, ``-S``) cannot run the problem (it declined, a hook
    failed, or its workspace does not fit).

    Attributes
    ----------
    declined : str or None
        The solver's own reason when its ``is_applicable`` declined the problem (a
        :class:`~wticonv.Decline`'s reason, or "declined (no reason given)"); None when
        something else stops it.
    """

    def __init__(self, message: str = "", declined: str | None = None) -> None:
        super().__init__(message)
        self.declined = declined


class NoApplicableSolverError(WticonvError):
    """Immediate mode found no candidate; the message lists every solver and why it declined."""


class SolverRunError(WticonvError):
    """A solver raised while running a problem."""


class NetworkError(WticonvError, ValueError):
    """A network description (built-in name, driver-command file or ONNX model) is unusable."""


class FleetError(WticonvError):
    """A fleet (``--cluster``, :mod:`wticonv.fleet`) cannot run: Dask's ``distributed`` is
    not installed (the message says ``pip install "wticonv[cluster]"``), the scheduler
    cannot be reached, or no worker serves a device asked for."""


class SpeedChangedWarning(UserWarning):
    """The device ran faster after a calibration's probes than the figures the calibration
    was fitted to say (they were read while the machine was busy): its predictions will be
    too fast on a quiet machine. ``wticonv calibrate --strict`` makes it an error."""


class SolverWarning(UserWarning):
    """A solver misbehaved (raised in a hook, returned a bad value, failed to run) and was
    set aside for the problem; the next-ranked solver was used instead."""


def one_line(error: BaseException | str) -> str:
    """The message of ``error`` on one line: its lines joined by ``"; "`` (by a space after
    a line that ends with a colon, such as the head of a list), runs of blanks made one."""
    lines = [" ".join(ln.split()) for ln in str(error).splitlines()]
    text = ""
    for ln in filter(None, lines):
        text += ln if not text else (" " if text.endswith(":") else "; ") + ln
    return text
