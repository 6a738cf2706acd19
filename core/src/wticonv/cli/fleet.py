"""``--cluster [ADDRESS]`` of find, tune, evaluate and calibrate, and ``wticonv worker``.

With ``--cluster``, a command runs its work on a fleet (:mod:`wticonv.fleet`): a local
Dask cluster of one worker per device, or the scheduler at ADDRESS. Progress (tasks
done, running, failed and remaining per device) is a live table on stderr when it is a
terminal; results go to stdout as without ``--cluster``, per device. Exit status 1 when
a task failed (the others' results are kept), 130 when interrupted (what was merged is
kept; run the command again to do the rest).
"""

from __future__ import annotations

import sys
import time

import click

from wticonv.cli.commands import _emit_json, cli

__all__ = ["cluster_option", "resume_option", "check_resume", "FleetProgress", "finish",
           "fleet_of"]


def _address(ctx, param, value):
    """``--cluster``'s value: None, ``"local"`` or a scheduler address
    (:func:`wticonv.fleet.cluster.check_address`: the dashboard's ``http://`` address is
    refused with what to give instead); a usage error for a word that is not one (click
    gives ``--cluster`` the word after it: ``--cluster resnet50`` would take the network
    for an address)."""
    if value is None or value == "local":
        return value
    if ":" not in value:
        raise click.BadParameter(f"{value!r} is not a scheduler address (tcp://HOST:PORT): "
                                 "--cluster takes the word after it as the address; put "
                                 "--cluster after the network or flags, or write "
                                 "--cluster=local", param_hint="--cluster")
    from wticonv.errors import FleetError
    from wticonv.fleet.cluster import check_address

    try:
        return check_address(value)
    except FleetError as e:
        raise click.BadParameter(str(e), param_hint="--cluster") from None


def cluster_option(f):
    return click.option(
        "--cluster", "cluster", is_flag=False, flag_value="local", default=None,
        metavar="[ADDRESS]", callback=_address,
        help="Run on a fleet: a local Dask cluster of one worker per device (no ADDRESS), "
             "or the Dask scheduler at ADDRESS (tcp://HOST:PORT) whose workers serve "
             "devices (`wticonv worker`). Needs pip install \"wticonv[cluster]\"; put it "
             "after the network or flags (docs/fleet.md).")(f)


def resume_option(f):
    return click.option("--no-resume", "no_resume", is_flag=True,
                        help="With --cluster: measure again the problems the databases "
                             "already hold for a device (default: skip them). Without "
                             "--cluster every problem is measured, and it is refused.")(f)


def check_resume(no_resume: bool, cluster) -> None:
    """``--no-resume`` without ``--cluster`` is a usage error: a run without a fleet
    measures every problem (it does not resume), so the flag would mean nothing."""
    if no_resume and not cluster:
        raise click.UsageError("--no-resume is for --cluster runs, which skip what the "
                               "databases hold; a run without --cluster measures every "
                               "problem anyway: leave --no-resume out")


def fleet_of(cluster: str, device: str | None):
    """The open :class:`~wticonv.fleet.Fleet` for ``--cluster`` (FleetError, exit status 2,
    when Dask is missing: the message says how to install it)."""
    from wticonv.fleet.cluster import Fleet, require_distributed

    require_distributed()
    return Fleet(cluster, device)


class FleetProgress:
    """A live table on stderr of each device's tasks: done, running, failed, remaining
    (nothing when stderr is not a terminal or ``enabled`` is false)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled and sys.stderr.isatty()
        self._live = None
        self._start = time.monotonic()

    def __enter__(self) -> FleetProgress:
        if self.enabled:
            from rich.console import Console
            from rich.live import Live

            self._live = Live(console=Console(stderr=True, markup=False), refresh_per_second=4,
                              transient=True)
            self._live.__enter__()
        return self

    def __call__(self, snapshot: dict) -> None:
        if self._live is not None:
            self._live.update(self.table(snapshot, time.monotonic() - self._start))

    @staticmethod
    def table(snapshot: dict, elapsed: float):
        from rich import box
        from rich.table import Table

        t = Table(title=f"fleet: {elapsed:.0f} s", box=box.SIMPLE_HEAD)
        for col in ("device", "done", "running", "failed", "remaining"):
            t.add_column(col, justify="left" if col == "device" else "right")
        for res, c in sorted(snapshot.items(), key=lambda rc: (rc[1].get("device", rc[0]),
                                                             rc[0])):
            t.add_row(c.get("device", res), str(c["done"]), str(c["running"]),
                      str(c["failed"]), str(c["remaining"]))
        return t

    def __exit__(self, *exc) -> None:
        if self._live is not None:
            self._live.__exit__(*exc)


def finish(report, as_json: bool, payload: dict, keeps_parts: bool = True) -> int:
    """Print the report's refused workers (once each), failures (alike ones on one line
    per device) and resumed counts on stderr, each naming the device, and the JSON
    ``payload`` with them under ``--json``; the exit status (130 interrupted, 1 a task
    failed or a worker was refused, else 0). ``keeps_parts``: whether what finished before
    an interruption was stored (find, tune and evaluate merge each task's records;
    calibrate stores its fit only at the end)."""
    failures = [{"device": report.device_name(r), "resource": r, "task": label,
                 "reason": why} for r, label, why in report.failures]
    if as_json:
        _emit_json({**payload, "devices": report.devices, "skipped": report.skipped,
                    "failures": failures, "refused_workers": report.refused,
                    "interrupted": report.interrupted})
    for res, k in sorted(report.skipped.items()):
        if k:
            print(f"wticonv: {report.device_name(res)}: {k} problem(s) skipped, already in "
                  "the databases (--no-resume measures them again)", file=sys.stderr)
    for why in report.refused.values():
        print(f"wticonv: error: {why}", file=sys.stderr)
    alike: dict[tuple, list] = {}
    for f in failures:
        alike.setdefault((f["device"], f["reason"]), []).append(f["task"])
    for (device, reason), tasks in alike.items():
        what = tasks[0] if len(tasks) == 1 else f"{len(tasks)} tasks ({tasks[0]}, ...)"
        print(f"wticonv: failed on {device}: {what}: {reason}", file=sys.stderr)
    if report.interrupted:
        print("wticonv: interrupted; what finished was merged, run the command again to "
              "do the rest" if keeps_parts else "wticonv: interrupted; nothing was stored "
              "(a calibration is fitted once all its probes are in): run it again",
              file=sys.stderr)
        return 130
    return 1 if failures or report.refused else 0


@cli.command()
@click.argument("scheduler", metavar="ADDRESS")
@click.option("--device", "device", metavar="SPEC", default=None,
              help="Only this device (gpu, cpu or P:D); default: every usable one.")
@click.option("--print", "print_only", is_flag=True,
              help="Print the equivalent `dask worker` command lines instead.")
def worker(scheduler, device, print_only) -> int:
    """Serve this machine's devices to the Dask scheduler at ADDRESS: one worker each.

    Each worker advertises its device's resource (wticonv-KIND-NAME), runs one task at a
    time, keeps its own cache directory (fleet/NAME in the cache) and is started again
    by its nanny if it dies. Runs until Ctrl-C (exit status 0); when the scheduler goes
    away (closed, restarted), the workers stop and it exits with status 2, saying so:
    start it again once the scheduler is back (a service manager can). Then, anywhere:
    wticonv evaluate resnet50 --cluster ADDRESS.
    """
    from wticonv.fleet.cluster import require_distributed
    from wticonv.fleet.serve import serve, worker_commands

    require_distributed()
    if print_only:
        for line in worker_commands(scheduler, device):
            click.echo(line)
        return 0

    def ready(names):
        print(f"wticonv: {len(names)} worker(s) joined {scheduler}: {', '.join(names)}; "
              "Ctrl-C stops them", file=sys.stderr)

    serve(scheduler, device, ready)
    return 0
