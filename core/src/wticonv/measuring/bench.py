"""The main job: run a network's convolutions in immediate mode, verify them, time them.

For every distinct layer and direction: select a solver without running anything
(immediate mode), run it once on random data (seeded per layer), compare the result with
the float64 reference (MIOpen's rms_range against the solver's tolerance), then run it
``iterations`` more times and take the median kernel time (OpenCL profiling events).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from wticonv.contract.answers import tolerance_for
from wticonv.errors import HostMemoryError, SolverNotApplicableError, WticonvError, one_line
from wticonv.handle import Handle
from wticonv.measuring.inputs import available_host_bytes, check_host, random_inputs
from wticonv.problem.conv import DIRECTIONS, ConvProblem
from wticonv.problem.reference import reference, rms_range
from wticonv.problem.tensors import OUTPUT_TENSOR, ConvTensors
from wticonv.selection.ranking import Selection, Verdict
from wticonv.workloads.networks import Network

__all__ = ["BenchRow", "BenchReport", "Measurement", "measure", "run_bench", "parse_directions",
           "random_inputs"]


@dataclass
class BenchRow:
    """One layer in one direction.

    Times in ms, ``gflops`` in GFLOP/s (direct-algorithm FLOPs / measured time),
    ``workspace`` in bytes, ``error`` is rms_range against the float64 reference.
    """

    layer: str
    key: str
    direction: str
    count: int
    flops: int
    solver: str = ""
    #: The solver's numerical class (``fp32``, ``3xtf32`` or ``tf32``).
    math: str = ""
    wti: float | None = None
    workspace: int | None = None
    predicted_ms: float | None = None
    measured_ms: float | None = None
    gflops: float | None = None
    error: float | None = None
    tolerance: float | None = None
    ok: bool = False
    message: str = ""
    declined: bool = False


@dataclass
class BenchReport:
    """Everything ``wticonv bench`` measured (``--json`` prints :meth:`to_dict`)."""

    network: str
    source: str
    batch: int | None
    device: str
    peak_gflops: float
    directions: list[str]
    iterations: int
    layers: int = 0
    #: Whether TF32-only solvers were ranked (the handle's math mode, ``--math tf32``).
    allow_tf32: bool = False
    rows: list[BenchRow] = field(default_factory=list)
    interrupted: bool = False
    source_builds: int = 0
    binary_loads: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def failures(self) -> list[BenchRow]:
        """Rows that failed verification or could not run (a forced solver declining a
        layer is no failure: see :attr:`declines`)."""
        return [r for r in self.rows if not r.ok and not r.declined]

    @property
    def declines(self) -> list[BenchRow]:
        """Rows a forced solver (``-S``) declined; their message says "declined: reason"."""
        return [r for r in self.rows if r.declined]

    @property
    def nothing_ran(self) -> bool:
        """A forced solver declined every layer (so no layer ran at all)."""
        return bool(self.rows) and len(self.declines) == len(self.rows)

    def total_ms(self, which: str = "measured_ms") -> float:
        """Network time: sum over rows of count x time (ms), for ``measured_ms`` or
        ``predicted_ms``; rows without a time are left out."""
        return sum(r.count * getattr(r, which) for r in self.rows
                   if getattr(r, which) is not None)

    @property
    def total_flops(self) -> int:
        """Direct FLOPs of the network, counting repeats."""
        return sum(r.count * r.flops for r in self.rows)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["total_measured_ms"] = self.total_ms("measured_ms")
        d["total_predicted_ms"] = self.total_ms("predicted_ms")
        d["total_flops"] = self.total_flops
        d["failures"] = len(self.failures)
        d["declined"] = len(self.declines)
        d["kernel_builds"] = self.source_builds + self.binary_loads
        return d


def parse_directions(text: str | Sequence[str]) -> list[str]:
    """``"fwd,bwd"`` -> ``["fwd", "bwd"]``; ``"all"`` -> all three. Raises ValueError."""
    from wticonv.problem.conv import normalize_direction

    items = text.split(",") if isinstance(text, str) else list(text)
    if [i.strip().lower() for i in items] == ["all"]:
        return list(DIRECTIONS)
    out = []
    for item in items:
        if item.strip():
            d = normalize_direction(item)
            if d not in out:
                out.append(d)
    if not out:
        raise ValueError("no direction given: use fwd, bwd, wrw (comma-separated) or all")
    return out


@dataclass
class Measurement:
    """One problem run by :func:`measure`.

    Attributes
    ----------
    selection : Selection
        The immediate-mode (or forced) choice.
    verdict : Verdict
        The verdict of the solver that ran (the chosen one, or the next candidate when the
        chosen one failed).
    solver_id : str
        The solver that ran.
    workspace : int
        Bytes.
    kernel_ms, wall_ms : list[float]
        Per timed iteration: kernel time (OpenCL profiling events) and host wall-clock
        time including launch overhead, in ms.
    error, tolerance : float or None
        rms_range against the float64 reference and the solver's tolerance (None when
        not verified).
    note : str
        Why the result was not verified although asked (the reference would not fit the
        host's memory), else "".
    """

    selection: Selection
    verdict: Verdict
    solver_id: str
    workspace: int
    kernel_ms: list[float]
    wall_ms: list[float]
    error: float | None = None
    tolerance: float | None = None
    note: str = ""

    @property
    def ok(self) -> bool:
        """Verified within tolerance (or not verified)."""
        return bool(self.error is None or self.error <= self.tolerance)


def measure(handle: Handle, p: ConvProblem, iterations: int, verify: bool = True,
            workspace_limit: int | None = None, solver: str | None = None,
            seed: int = 0, perf_config: str | None = None) -> Measurement:
    """Select, run once on random data, time ``iterations`` more runs (after one warm-up),
    then verify the first run's result (optionally). ``perf_config`` forces a perf config
    of the forced ``solver`` (see :meth:`Handle.select`).

    Raises as :meth:`Handle.select` and :meth:`Handle.run`.
    """

    sel = handle.select(p, workspace_limit, solver, perf_config)
    dev = handle.device
    shapes = {"x": p.x_shape, "w": p.w_shape, "y": p.y_shape}
    nbytes = {name: 4 * math.prod(shape) for name, shape in shapes.items()}
    for name, shape in shapes.items():
        dev.check_alloc(nbytes[name], f"tensor {name} {shape}")
    check_host(sum(nbytes.values()), f"the arrays of {p.key}")
    skip_reason = _reference_too_big(p) if verify else None
    if skip_reason:
        verify = False
    try:
        data = random_inputs(p, seed)
    except MemoryError:
        raise HostMemoryError(f"the host cannot hold the input arrays of {p.key} "
                              f"({sum(nbytes.values()) / 2**30:.1f} GiB)") from None
    out_name = OUTPUT_TENSOR[p.direction]
    bufs = {}
    try:
        for name, shape in shapes.items():
            bufs[name] = (dev.upload(data[name]) if name in data
                          else dev.alloc(4 * int(np.prod(shape))))
        tensors = ConvTensors(bufs["x"], bufs["w"], bufs["y"])
        first = handle.run(p, tensors, selection=sel)
        m = Measurement(sel, first.verdict, first.solver_id, first.workspace, [], [],
                        note=skip_reason or "")
        sel = first.selection_used()
        result = dev.download(bufs[out_name], shapes[out_name]) if verify else None
        # Time before computing the reference: the reference's BLAS threads may keep
        # spinning for a while and would steal cores from the device's runtime.
        if iterations:
            handle.run(p, tensors, selection=sel)  # warm-up
        for _ in range(iterations):
            t0 = time.perf_counter()
            m.kernel_ms.append(handle.run(p, tensors, selection=sel).kernel_ms)
            m.wall_ms.append((time.perf_counter() - t0) * 1e3)
        if not m.kernel_ms:
            m.kernel_ms.append(first.kernel_ms)
        if verify:
            ref = reference(p, x=data.get("x"), w=data.get("w"), y=data.get("y"))
            m.error = float(rms_range(result, ref))
            m.tolerance = float(tolerance_for(handle.registry, m.solver_id, p))
        return m
    finally:
        for b in bufs.values():
            if b is not None:
                b.release()


def _reference_too_big(p: ConvProblem) -> str | None:
    """Why the float64 reference of ``p`` would not fit the host's free memory, or None.

    Estimate: the float64 copies of x, w and y, one tap's column matrix (N x C x Ho x Wo)
    and the float64 result, i.e. 8 bytes x (2 |x| + |w| + 2 |y| + N C Ho Wo)."""
    avail = available_host_bytes()
    if avail is None:
        return None
    x, w, y = (math.prod(s) for s in (p.x_shape, p.w_shape, p.y_shape))
    need = 8 * (2 * x + w + 2 * y + p.n * p.c * p.ho * p.wo)
    if need <= 0.6 * avail:
        return None
    return (f"not verified: the float64 reference needs about {need / 2**30:.1f} GiB of host "
            f"memory, more than the {avail / 2**30:.1f} GiB available")


def _bench_one(handle: Handle, p: ConvProblem, row: BenchRow, iterations: int, verify: bool,
               workspace_limit: int | None, solver: str | None, seed: int) -> None:
    m = measure(handle, p, iterations, verify, workspace_limit, solver, seed)
    v = m.verdict
    row.solver, row.wti, row.workspace, row.predicted_ms = (m.solver_id, v.wti, m.workspace,
                                                            v.predicted_ms)
    row.math = v.math
    row.error, row.tolerance = m.error, m.tolerance
    row.measured_ms = statistics.median(m.kernel_ms)
    if row.measured_ms > 0:
        row.gflops = p.flops / (row.measured_ms * 1e-3) / 1e9
    row.ok = m.ok
    if m.note:
        row.message = m.note
    if not row.ok:
        row.message = (f"verification FAILED: rms_range {row.error:.3g} > tolerance "
                       f"{row.tolerance:.3g}")


def run_bench(handle: Handle, network: Network, directions: Sequence[str] = DIRECTIONS,
              iterations: int = 3, verify: bool = True, workspace_limit: int | None = None,
              solver: str | None = None,
              progress: Callable[[int, int, str], None] | None = None) -> BenchReport:
    """Benchmark every distinct layer of ``network`` in each of ``directions``.

    Parameters
    ----------
    iterations : int
        Timed runs after the verification run (median reported).
    progress : callable(done, total, label), optional
        Called before each layer/direction and once at the end.

    A layer that cannot run (no solver, a solver failure) becomes a failed row with its
    message; the bench goes on. Ctrl-C stops it: the report holds the rows done so far and
    ``interrupted`` is set.
    """
    dev = handle.device
    counters = dev.programs.counters
    builds0, loads0 = counters.source_builds, counters.binary_loads
    batches = {layer.problem.n for layer in network.layers}
    report = BenchReport(
        network=network.name, source=network.source,
        batch=batches.pop() if len(batches) == 1 else None,
        device=f"{dev.info.name} ({dev.info.platform} {dev.info.driver_version})",
        peak_gflops=dev.peak_flops / 1e9, directions=list(directions), iterations=iterations,
        layers=len(network.layers), notes=list(network.notes),
        allow_tf32=handle.allow_tf32)
    jobs = [(i, layer, d) for i, layer in enumerate(network.layers) for d in directions
            if layer.directions is None or d in layer.directions]
    for done, (i, layer, d) in enumerate(jobs):
        p = layer.problem.with_direction(d)
        if progress is not None:
            progress(done, len(jobs), f"{d} {layer.name}")
        row = BenchRow(layer=layer.name, key=p.key, direction=d, count=layer.count,
                       flops=p.flops)
        try:
            _bench_one(handle, p, row, iterations, verify, workspace_limit, solver, seed=i)
        except SolverNotApplicableError as e:
            row.ok = False
            if e.declined is not None:
                row.declined, row.solver, row.message = True, solver, f"declined: {e.declined}"
                row.math = handle.registry.get(solver).math
            else:
                row.message = one_line(e)
        except WticonvError as e:
            row.ok = False
            row.message = one_line(e)
        except KeyboardInterrupt:
            report.interrupted = True
            break
        report.rows.append(row)
    if progress is not None:
        progress(len(jobs), len(jobs), "done")
    report.source_builds = counters.source_builds - builds0
    report.binary_loads = counters.binary_loads - loads0
    return report
