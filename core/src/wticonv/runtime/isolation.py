"""Child processes that stand between the user's process and an OpenCL driver.

A driver can abort the whole process (PoCL's LLVM ends with ``LLVM ERROR: Cannot select``,
then ``abort()``), hang, or crash with a signal. wticonv therefore never makes the first
contact with a driver, nor compiles a program no process has compiled before, in the user's
process: :mod:`wticonv.runtime.probe` and :mod:`wticonv.runtime.build_helper` run that work
in a child Python process started with ``python -c`` (never ``fork``: a process that has an
OpenCL context must not fork), and this module holds what both share: the child's
environment, how its end is described, and the tail of what it printed.

Environment:

- ``WTICONV_CHILD`` is set to the child's role (``"probe"`` or ``"build"``) in the child;
  code running there never starts a child of its own.
- ``WTICONV_ISOLATE=0`` makes the user's process do the work itself (no child), for an
  environment that cannot start Python processes; a driver fault then ends the process.
"""

from __future__ import annotations

import os
import signal
import sys

from wticonv.errors import DeviceError

__all__ = ["CHILD_ENV", "MAX_TIMEOUT_S", "TIMEOUT_VARIABLES", "check_timeouts", "child_argv",
           "child_env", "describe_exit", "in_child", "isolation_enabled", "error_tail",
           "timeout_from_env"]

#: Set in a child process to its role ("probe" or "build").
CHILD_ENV = "WTICONV_CHILD"


def in_child() -> bool:
    """True in a probe or build child (which must do its work itself)."""
    return bool(os.environ.get(CHILD_ENV))


def isolation_enabled() -> bool:
    """True unless ``WTICONV_ISOLATE`` is ``0`` (or ``no``/``off``/``false``) or this is a
    child process already."""
    if in_child():
        return False
    return os.environ.get("WTICONV_ISOLATE", "1").strip().lower() not in ("0", "no", "off",
                                                                          "false")


#: The longest time limit the environment may set, seconds (one day): longer limits
#: overflow the operating system's timers.
MAX_TIMEOUT_S = 86400.0
#: The time limits read from the environment, with their defaults in seconds.
TIMEOUT_VARIABLES = {"WTICONV_PROBE_TIMEOUT": 180.0, "WTICONV_BUILD_TIMEOUT": 300.0}


def timeout_from_env(name: str, default: float) -> float:
    """Seconds from the environment variable ``name`` (a number in (0, 86400]), else
    ``default``.

    Raises
    ------
    DeviceError
        If the variable is set to something else; the message names the variable and how
        to fix it (the command line exits with status 2).
    """
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 < value <= MAX_TIMEOUT_S:
        raise DeviceError(f"{name}={raw!r} is not a number of seconds between 0 and "
                          f"{MAX_TIMEOUT_S:g}; unset it or set e.g. {name}={int(default)}")
    return value


def check_timeouts() -> None:
    """Raise :class:`DeviceError` now if a time limit in the environment is invalid
    (:data:`TIMEOUT_VARIABLES`), before any device work starts: a bad build limit found
    only at a cold build would look like every solver failing."""
    for name, default in TIMEOUT_VARIABLES.items():
        timeout_from_env(name, default)


def child_argv(module: str, *args: str) -> list[str]:
    """The command line that runs ``module.main(args)`` with this interpreter (as ``python
    -c``: ``-m`` would import the module twice, once through the package)."""
    code = f"import sys; from {module} import main; sys.exit(main(sys.argv[1:]))"
    return [sys.executable, "-c", code, *args]


def child_env(role: str) -> dict[str, str]:
    """The environment of a child: this one, with :data:`CHILD_ENV` set to ``role`` and the
    parent's ``sys.path`` appended to ``PYTHONPATH``, so that the child imports the same
    wticonv and pyopencl even when the parent was started from a source tree."""
    env = dict(os.environ)
    env[CHILD_ENV] = role
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    paths += [p for p in sys.path if p and os.path.isdir(p) and p not in paths]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    # A child's Python warnings would only reach its own stderr: the parent reports.
    env.setdefault("PYTHONWARNINGS", "ignore")
    return env


def describe_exit(returncode: int) -> str:
    """How a child ended, in words: ``"aborted (SIGABRT)"``, ``"was killed by signal
    SIGSEGV"``, ``"exited with status 3"``. ``returncode`` is :attr:`Popen.returncode`
    (negative: the signal that ended it)."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        if name == "SIGABRT":
            return "aborted (SIGABRT)"
        return f"was killed by {name}"
    return f"exited with status {returncode}"


def error_tail(text: str, limit: int = 300) -> str:
    """The line of a child's stderr that says most about its end: the last line naming an
    error (``LLVM ERROR: ...``, ``error: ...``, ``...Error: ...``), else its last line;
    empty when it printed nothing. At most ``limit`` characters."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    noisy = ("warning", "compilerwarning", "lambda:", "warnings.warn")
    lines = [ln for ln in lines if not ln.lower().startswith(noisy)]
    if not lines:
        return ""
    errors = [ln for ln in lines if "error" in ln.lower()]
    line = errors[-1] if errors else lines[-1]
    return line if len(line) <= limit else line[:limit - 3] + "..."
