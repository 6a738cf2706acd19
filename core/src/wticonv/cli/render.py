"""Human-readable output of the ``wticonv`` commands (rich tables on stdout)."""

from __future__ import annotations

import math
import os
import sys

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
from rich.progress import Progress as _RichProgress
from rich.table import Table
from rich.text import Text

# Tables are never squeezed below 160 columns (keys and solver ids stay on one line; a
# narrower terminal wraps the lines instead); piped output gets 200.
_width = Console().width if sys.stdout.isatty() or "COLUMNS" in os.environ else 200
# markup off: solver names, scopes, reasons and notes come from plugins, and a "[" in them
# is text (a "[/x]" would raise MarkupError); the few styled lines ask for markup=True
_out = Console(highlight=False, soft_wrap=False, width=max(_width, 160), markup=False)
_err = Console(stderr=True, highlight=False, markup=False)


def _num(v, fmt: str = "{:.3g}", none: str = "-") -> str:
    if v is None:
        return none
    if isinstance(v, float) and math.isnan(v):
        return "nan"
    return fmt.format(v)


def _flops(n: int) -> str:
    for unit, scale in (("TFLOP", 1e12), ("GFLOP", 1e9), ("MFLOP", 1e6), ("kFLOP", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n} FLOP"


def _ms(v) -> str:
    """Milliseconds with 4 significant digits."""
    return "-" if v is None else f"{v:.4g}"


def _bytes(n) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def solvers(rows: list[dict], bad: list[dict]) -> None:
    t = Table(title="Installed solvers", box=box.SIMPLE_HEAD)
    for col in ("solver", "distribution", "version", "dynamic", "math", "scope",
                "entry point"):
        t.add_column(col, overflow="fold", max_width=44 if col == "scope" else None)
    for r in rows:
        dyn = "yes" if r["dynamic"] is True else "no" if r["dynamic"] is False else r["dynamic"]
        name = r["solver"] + (" (disabled)" if r["disabled"] else "")
        t.add_row(name, r["distribution"], r["version"], str(dyn), r["math"], r["scope"],
                  r["entry_point"])
    if not rows:
        t.add_row("(none)", "", "", "", "", "", "")
    _out.print(t)
    if bad:
        q = Table(title="Quarantined entry points (not loaded)", box=box.SIMPLE_HEAD)
        for col in ("entry point", "distribution", "reason"):
            q.add_column(col, overflow="fold")
        for b in bad:
            q.add_row(b["entry_point"], f"{b['distribution']} {b['version']}".strip(),
                      b["reason"])
        _out.print(q)


def devices(rows: list[dict]) -> None:
    t = Table(title="OpenCL devices", box=box.SIMPLE_HEAD)
    for col in ("P:D", "kind", "name", "platform / driver", "CUs", "MHz", "memory",
                "tensor cores", "status", "peak GFLOP/s", "GB/s"):
        t.add_column(col)
    for r in rows:
        t.add_row(r["index"], r["kind"], r["name"], f"{r['platform']} / {r['driver']}",
                  str(r["compute_units"]), str(r["clock_mhz"]), _bytes(r["global_mem_bytes"]),
                  "yes" if r["tensor_cores"] else "no", r["status"],
                  _num(r["peak_gflops"], "{:.1f}"), _num(r["bandwidth_gbs"], "{:.1f}"))
    _out.print(t)
    for r in rows:
        if r["set_aside"]:
            _out.print(f"{r['index']} {r['name']!r} is set aside: {r['set_aside']}")
    if any(r["peak_gflops"] is None and r["status"] == "usable" for r in rows):
        _out.print("Figures not measured yet: wticonv devices --measure")


def _perf(v) -> str:
    """A tunable solver's perf config and its source, e.g. ``64x128/s4 (perf-db)``."""
    if not v.perf_source:
        return "-"
    return f"{v.perf_config or 'default'}" + (f" ({v.perf_source})" if v.perf_config else "")


def selection(s, device) -> None:
    p = s.problem
    _out.print(f"[bold]{escape(p.describe())}[/bold]  key {p.key}", markup=True)
    _out.print(f"device {device.info.name}: peak {device.peak_flops / 1e9:.1f} GFLOP/s; "
               f"direct FLOPs {_flops(p.flops)}; mode {s.mode}; math "
               + ("tf32 allowed" if s.allow_tf32 else "FP32-accurate (fp32, 3xtf32)")
               + (f"; workspace limit {_bytes(s.workspace_limit)}"
                  if s.workspace_limit is not None else ""))
    t = Table(box=box.SIMPLE_HEAD)
    for col in ("rank", "solver", "math", "applicable", "dynamic", "WTI", "workspace",
                "predicted ms", "measured ms", "ranked by", "perf config", "verdict"):
        t.add_column(col, no_wrap=col != "verdict", overflow="fold",
                     min_width=12 if col == "verdict" else None)
    notes = _shared_reasons(s.verdicts)
    for v in s.verdicts:
        verdict = "CHOSEN" if v.chosen else (v.reason or "candidate")
        if not v.chosen and v.reason in notes:
            verdict = f"see note {notes[v.reason]}"
        if v.note:
            verdict += f" ({v.note})"
        t.add_row(_num(v.rank, "{}"), v.solver_id, v.math, "yes" if v.applicable else "no",
                  "-" if v.dynamic is None else ("yes" if v.dynamic else "no"),
                  _num(v.wti, "{:.3g}") + (f" (raw {v.raw_wti:.3g})" if v.raw_wti else ""),
                  _bytes(v.workspace), _ms(v.predicted_ms),
                  _ms(v.measured_ms), v.source or v.wti_source or "-", _perf(v), verdict)
    _out.print(t)
    for reason, n in notes.items():
        _out.print(f"note {n}: {reason}", soft_wrap=True)
    for source, db in dict.fromkeys((v.source, v.system_db) for v in s.verdicts
                                    if v.system_db):
        _out.print(f"{source}: the system database {db} (`wticonv db system`; your own "
                   "records, once measured, replace it)", soft_wrap=True)
    if s.calibration_note:
        _out.print(f"note: {s.calibration_note}", soft_wrap=True)


def _shared_reasons(verdicts) -> dict[str, int]:
    """``{reason: note number}`` for the reasons several solvers give (the tensor-core
    solvers' "computes on tensor cores ..." on other devices), printed once under the table
    instead of in every row."""
    count: dict[str, int] = {}
    for v in verdicts:
        if v.reason and not v.chosen:
            count[v.reason] = count.get(v.reason, 0) + 1
    shared = [r for r, c in count.items() if c > 1]
    return {r: i for i, r in enumerate(shared, 1)}


_NAMES = {"fwd": ("Forward Conv.", "Forward Convolution"),
          "bwd": ("Backward Data Conv.", "Backward Convolution Data"),
          "wrw": ("Backward Weights Conv.", "Backward Convolution Weights")}


def conv_result(r: dict, wall: bool) -> None:
    short, long = _NAMES[r["direction"]]
    if "solver" not in r:
        _out.print(f"{long} FAILED: {r['message']}", soft_wrap=True)
        return
    tuned = (f", perf config {r['perf_config']} ({r['perf_source']})"
             if r.get("perf_config") else "")
    _out.print(f"{short} Algorithm: {r['solver']} (WTI {_num(r['wti'], '{:.4g}')}, "
               f"workspace {r['workspace']} bytes{tuned})", soft_wrap=True)
    _out.print(f"GPU Kernel Time {short} Elapsed: {r['kernel_ms']:.6f} ms (average of "
               f"{r['iterations']}), {_num(r['gflops'], '{:.2f}')} GFLOP/s")
    if wall:
        _out.print(f"Wall-clock Time {short} Elapsed: {r['wall_ms']:.6f} ms")
    if r.get("note"):
        _out.print(f"{long}: {r['note']}", soft_wrap=True)
    if r["verified"]:
        if r["ok"]:
            _out.print(f"{long} Verifies OK on CPU reference "
                       f"({r['error']:.3g} < {r['tolerance']:.3g})")
        else:
            _out.print(f"{long} FAILED: {r['error']:.3g} > {r['tolerance']:.3g}")


def bench_report(rep) -> None:
    batch = f"N={rep.batch}" if rep.batch is not None else "N from the file"
    _out.print(f"[bold]{escape(rep.network)}[/bold] ({escape(rep.source)}), {batch}, on "
               f"{escape(rep.device)}, peak {rep.peak_gflops:.1f} GFLOP/s", markup=True)
    t = Table(box=box.SIMPLE_HEAD)
    for col, just in (("layer", "left"), ("key", "left"), ("x", "right"), ("solver", "left"),
                      ("WTI", "right"), ("workspace", "right"), ("pred. ms", "right"),
                      ("meas. ms", "right"), ("GFLOP/s", "right"), ("% peak", "right"),
                      ("error", "right"), ("", "left")):
        t.add_column(col, justify=just, no_wrap=col not in ("layer", ""),
                     overflow="fold" if col == "" else "ellipsis",
                     max_width=24 if col == "layer" else None)
    notes: list[str] = []
    for r in rep.rows:
        frac = (r.gflops / rep.peak_gflops * 100) if r.gflops else None
        if r.declined:     # a forced solver's reasons repeat: one note per distinct reason
            if r.message not in notes:
                notes.append(r.message)
            status = f"declined, see note {notes.index(r.message) + 1}"
        elif r.ok:
            status = "ok" if not r.message else f"ok, see note {len(notes) + 1}"
        else:
            status = Text.from_markup(f"[red]FAIL[/red], see note {len(notes) + 1}")
        if r.message and not r.declined:
            notes.append(f"{r.direction} {r.key}: {r.message}")
        t.add_row(r.layer, r.key, str(r.count), r.solver or "-", _num(r.wti, "{:.3g}"),
                  _bytes(r.workspace), _ms(r.predicted_ms), _ms(r.measured_ms),
                  _num(r.gflops, "{:.2f}"),
                  _num(frac, "{:.1f}"), _num(r.error, "{:.1e}"), status)
    _out.print(t)
    for i, note in enumerate(notes, 1):
        _out.print(f"note {i}: {note}", soft_wrap=True)
    measured = rep.total_ms("measured_ms")
    tflops = rep.total_flops / (measured * 1e-3) / 1e9 if measured else None
    _out.print(f"layers: {rep.layers} distinct x {len(rep.directions)} direction(s): "
               f"{len(rep.rows) - len(rep.declines)} runs done; failures: "
               f"{len(rep.failures)}"
               + (f"; {len(rep.declines)} declined by {rep.declines[0].solver} (not "
                  "failures)" if rep.declines else ""))
    _out.print(f"network time (each layer x its count): measured {measured:.2f} ms, predicted "
               f"{rep.total_ms('predicted_ms'):.2f} ms; {_num(tflops, '{:.2f}')} GFLOP/s "
               "overall")
    _out.print(f"kernel builds: {rep.source_builds + rep.binary_loads} "
               f"({rep.source_builds} from source, {rep.binary_loads} from the disk cache)")
    for note in rep.notes:
        _out.print(f"note: {note}")
    if rep.failures:
        _out.print(f"[red]{len(rep.failures)} layer run(s) FAILED[/red]", markup=True)
    if rep.interrupted:
        _out.print("[yellow]interrupted: only the runs above were done[/yellow]", markup=True)
    elif rep.nothing_ran:
        _out.print(f"[red]nothing ran: {rep.declines[0].solver} declined every layer[/red] "
                   "(see the notes); leave out -S to let the fallback choose", markup=True)
    elif not rep.failures:
        ran = [r for r in rep.rows if not r.declined]
        verified = sum(r.error is not None for r in ran)
        _out.print(("all layers verified" if verified == len(ran) else
                    f"all layers ran; {verified} of {len(ran)} verified")
                   + (f" ({len(rep.declines)} declined)" if rep.declines else ""))


class Progress:
    """A progress bar on stderr (or nothing), driven by ``update(done, total, label)``."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._p = None
        self._task = None

    def __enter__(self) -> Progress:
        if self.enabled:
            # labels as written: "[probe 7, 9/240 s] KEY" is text, not a Rich style
            self._p = _RichProgress(TextColumn("{task.description}", markup=False),
                                    BarColumn(),
                                    MofNCompleteColumn(), TimeElapsedColumn(), console=_err,
                                    transient=True)
            self._p.__enter__()
        return self

    def update(self, done: int, total: int, label: str) -> None:
        if self._p is None:
            return
        if self._task is None:
            self._task = self._p.add_task(label, total=total)
        self._p.update(self._task, completed=done, description=f"{label[:48]:48}")

    def __exit__(self, *exc) -> None:
        if self._p is not None:
            self._p.__exit__(*exc)
