"""The ``wticonv`` command.

Errors in what the user typed or set (bad flags, invalid problems, unknown networks, devices
or solvers, a cache database that cannot be used) print one line on stderr,
``wticonv: error: ...``, and exit with status 2, without a traceback. Failures found while
working (a layer that fails verification, no solver for a problem) exit with status 1.
Warnings print as ``wticonv: warning: ...``. With ``--debug`` (or ``WTICONV_DEBUG=1``)
errors also print their traceback, and so do quarantined plugins and set-aside solvers.
"""

from __future__ import annotations

import sys
import warnings

import click

from wticonv.cli import (
    db,  # noqa: F401 - registers db export, db import, db system
    fleet,  # noqa: F401 - registers worker
    measuring,  # noqa: F401 - registers find, tune, evaluate, calibrate
    networks,  # noqa: F401 - registers networks
    plugins,  # noqa: F401 - registers plugins, check, install, uninstall
)
from wticonv.cli.commands import cli
from wticonv.errors import (
    DbFileError,
    DeviceError,
    FleetError,
    NetworkError,
    ProblemError,
    SolverNotFoundError,
    StoreError,
    TensorError,
    WticonvError,
    one_line,
)

__all__ = ["main", "cli"]

#: Errors that mean "what you typed (or set: WTICONV_DEVICE, WTICONV_CACHE_DIR) is
#: wrong": exit status 2.
_USAGE_ERRORS = (ProblemError, TensorError, NetworkError, DeviceError, SolverNotFoundError,
                 StoreError, DbFileError, FleetError)


def _show_warning(message, category, filename, lineno, file=None, line=None):
    text = str(message)
    if text.startswith("wticonv: "):
        text = text[len("wticonv: "):]
    print(f"wticonv: warning: {text}", file=sys.stderr)


#: Environment variables the group's options set for one run (restored afterwards, so
#: that ``main`` called twice in one process does not carry them over).
_PER_RUN = ("WTICONV_NO_PLUGINS", "WTICONV_DEBUG")


def main(argv: list[str] | None = None) -> int:
    """Run the command line ``argv`` (``sys.argv[1:]`` when None); return the exit status."""
    import os

    saved = {k: os.environ.get(k) for k in _PER_RUN}
    try:
        return _main(argv)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _debug_traceback() -> None:
    from wticonv.contract.registry import debug_enabled

    if debug_enabled():
        import traceback

        traceback.print_exc(file=sys.stderr)


def _main(argv: list[str] | None) -> int:
    warnings.showwarning = _show_warning
    args = sys.argv[1:] if argv is None else list(argv)
    if not args:
        click.echo(cli.get_help(click.Context(cli, info_name="wticonv")))
        return 0
    try:
        rv = cli.main(args=args, prog_name="wticonv", standalone_mode=False)
    except click.exceptions.Exit as e:
        return e.exit_code
    except click.UsageError as e:
        cmd = e.ctx.command_path if e.ctx is not None else "wticonv"
        msg = e.format_message().replace("\n", " ")
        print(f"wticonv: error: {msg} (see '{cmd} --help')", file=sys.stderr)
        return 2
    except click.ClickException as e:
        print(f"wticonv: error: {e.format_message()}", file=sys.stderr)
        return e.exit_code
    except _USAGE_ERRORS as e:
        _debug_traceback()
        print(f"wticonv: error: {one_line(e)}", file=sys.stderr)
        return 2
    except WticonvError as e:
        _debug_traceback()
        print(f"wticonv: error: {e}", file=sys.stderr)
        return 1
    except (click.Abort, KeyboardInterrupt):
        print("wticonv: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    return rv if isinstance(rv, int) else 0


def entry() -> None:  # pragma: no cover - console-script shim
    sys.exit(main())
