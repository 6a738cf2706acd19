"""The conformance checks: what every solver plugin must honour (see docs/hooks.md).

Each check is a function ``check_<name>(sut)`` of a :class:`SolverUnderTest`; it returns
nothing when the solver passes and raises :class:`CheckFailure` saying what is wrong
otherwise. :data:`CHECKS` lists them in the order :func:`wticonv.testing.check_solver`
runs them. They run real kernels on the handle's device, on small problems (a second or
two per check on a CPU through PoCL, kernel builds aside).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import time
from dataclasses import dataclass, field

import numpy as np

from ..errors import WticonvError
from ..hookspecs import HOOK_NAMES, WTI_UNKNOWN
from ..problem import DIRECTIONS, ConvProblem
from ..reference import reference, rms_range
from ..tensors import OUTPUT_TENSOR

__all__ = ["CheckFailure", "SolverUnderTest", "CHECKS", "QUERY_BUDGET_S", "DEFAULT_MAX_WTI",
           "GUARD_BYTES"]

#: Mean time one query hook may take per call, seconds: generous against the
#: microseconds the hook reference asks for, so that a loaded CI machine does not fail it.
QUERY_BUDGET_S = 2e-3
#: Largest WTI a solver may report unless it declares ``max_wti`` (direct-algorithm FLOPs
#: at the device's peak: 1.0; algorithms that do fewer multiplications, such as Winograd,
#: declare their saving, e.g. F(4x4, 3x3): 144/36 = 4).
DEFAULT_MAX_WTI = 1.0



class CheckFailure(AssertionError):
    """A solver broke the contract; the message says how (and on which problem)."""


@dataclass
class SolverUnderTest:
    """One solver, its handle and the problems to check it on.

    Attributes
    ----------
    handle : Handle
        The handle whose registry holds the solver and whose device runs it.
    solver_id : str
    corpus : list[ConvProblem]
        Problems to check, in every direction (problems the solver declines are skipped).
    examples : int
        Problems the ``reference`` check draws from :func:`wticonv.testing.problems`.
    """

    handle: object
    solver_id: str
    corpus: list = field(default_factory=list)
    examples: int = 20
    _accepted: list | None = field(default=None, repr=False)

    @property
    def entry(self):
        return self.handle.registry.get(self.solver_id)

    def call(self, hook: str, problem: ConvProblem, limit: int | None = None):
        """The solver's answer to a query hook; CheckFailure naming the hook and the problem
        if it raises."""
        try:
            return self.handle.registry.call(self.solver_id, hook, problem=problem,
                                             device=self.handle.device, workspace_limit=limit)
        except Exception as e:  # noqa: BLE001 - any exception is the solver's failure
            raise CheckFailure(f"{hook} raised {type(e).__name__}: {e} on {problem.key}"
                               ) from None

    def accepts(self, problem: ConvProblem) -> bool:
        """The solver says it applies and can be forced (the workspace fits the device)."""
        if not self.call("is_applicable", problem):
            return False
        try:
            self.handle.select(problem, solver=self.solver_id)
        except WticonvError:
            return False
        return True

    def accepted(self) -> list[ConvProblem]:
        """The corpus in every direction, the problems the solver accepts (at least one:
        CheckFailure otherwise, since nothing could be checked)."""
        if self._accepted is None:
            out = [p.with_direction(d) for p in self.corpus for d in DIRECTIONS]
            self._accepted = [p for p in out if self.accepts(p)]
        if not self._accepted:
            raise CheckFailure(f"{self.solver_id} accepts none of the {len(self.corpus)} corpus "
                               "problems in any direction, so nothing could be checked: fix "
                               "is_applicable / get_wti, or give the kit problems it accepts "
                               "(corpus=...)")
        return self._accepted

    def run(self, problem: ConvProblem, data: dict) -> np.ndarray:
        """The solver's result on host arrays ``data`` (x, w, y as the direction needs).

        The output is a sub-buffer with guard regions around it (see ``guards``), so a
        solver that writes past its output fails this check instead of corrupting the test
        process's memory."""
        with _device_tensors(self.handle.device, problem, data) as t:
            self.handle.run(problem, t.tensors, solver=self.solver_id)
            t.check_output_guards()
            return t.output()

    def tolerance(self, problem: ConvProblem) -> float:
        from .. import solver_tolerance

        return solver_tolerance(self.handle, self.solver_id, problem)

    def builds(self) -> int:
        return self.handle.device.programs.counters.builds


def random_data(problem: ConvProblem, seed: int = 0) -> dict:
    """Uniform [-1, 1) float32 x, w and y of ``problem``."""
    rng = np.random.default_rng(seed)
    return {name: rng.uniform(-1, 1, shape).astype(np.float32)
            for name, shape in (("x", problem.x_shape), ("w", problem.w_shape),
                                ("y", problem.y_shape))}


# ----------------------------------------------------------------------------- checks
def check_hooks(sut: SolverUnderTest) -> None:
    """The solver is registered with every required hook (the registry checked their
    signatures against the specs), ``is_dynamic`` answers a bool, and a tunable solver's
    ``perf_configs`` answers a list of distinct valid names for the problems it accepts."""
    from ..tune import offered_perf_configs

    entry = sut.entry
    missing = [h for h in HOOK_NAMES if not hasattr(entry.obj, h)]
    if missing:
        raise CheckFailure(f"{sut.solver_id} lacks the hook(s) {', '.join(missing)}")
    dyn = sut.handle.registry.call(sut.solver_id, "is_dynamic")
    if not isinstance(dyn, bool):
        raise CheckFailure(f"is_dynamic returned {dyn!r}, not True or False")
    if entry.tunable:
        for p in sut.accepted()[:5]:
            try:
                offered_perf_configs(sut.handle.registry, sut.solver_id, p,
                                     sut.handle.device, None)
            except ValueError as e:
                raise CheckFailure(f"perf_configs on {p.key}: {e}") from None


def check_queries_pure(sut: SolverUnderTest) -> None:
    """``is_applicable``, ``workspace_size`` and ``get_wti`` are deterministic (the same
    answer twice), build no kernels, and take under :data:`QUERY_BUDGET_S` per call on
    average."""
    problems = [p.with_direction(d) for p in sut.corpus for d in DIRECTIONS]
    builds, calls, t0 = sut.builds(), 0, time.perf_counter()
    for p in problems:
        first = sut.call("is_applicable", p)
        calls += 1
        if bool(sut.call("is_applicable", p)) != bool(first):
            raise CheckFailure(f"is_applicable answered differently twice on {p.key}")
        if not first:
            continue
        for hook in ("workspace_size", "get_wti"):
            a, b = sut.call(hook, p), sut.call(hook, p)
            calls += 2
            if a != b and not (isinstance(a, float) and isinstance(b, float)
                               and math.isnan(a) and math.isnan(b)):   # NaN: see "wti"
                raise CheckFailure(f"{hook} answered {a!r}, then {b!r} on {p.key}")
    elapsed = time.perf_counter() - t0
    if sut.builds() != builds:
        raise CheckFailure(f"the query hooks built {sut.builds() - builds} program(s); "
                           "build kernels in run only")
    if calls and elapsed / calls > QUERY_BUDGET_S:
        raise CheckFailure(f"the query hooks took {elapsed / calls * 1e3:.2f} ms per call on "
                           f"average (budget {QUERY_BUDGET_S * 1e3:.0f} ms)")


def check_wti(sut: SolverUnderTest) -> None:
    """``get_wti`` is finite and -2.0 (unknown) or between 0 and the solver's ``max_wti``
    (:data:`DEFAULT_MAX_WTI` unless it declares one); ``workspace_size`` is a
    non-negative int."""
    cap = float(getattr(sut.entry.obj, "max_wti", DEFAULT_MAX_WTI))
    for p in sut.accepted():
        wti = sut.call("get_wti", p)
        if (isinstance(wti, bool) or not isinstance(wti, (int, float))
                or not math.isfinite(wti) or not (wti == WTI_UNKNOWN or 0 <= wti <= cap)):
            raise CheckFailure(f"get_wti returned {wti!r} on {p.key}: it must be -2.0 or "
                               f"between 0 and {cap} (declare max_wti if more is right)")
        ws = sut.call("workspace_size", p)
        if isinstance(ws, bool) or not isinstance(ws, int) or ws < 0:
            raise CheckFailure(f"workspace_size returned {ws!r} on {p.key}")


def _check_reference(sut: SolverUnderTest, p: ConvProblem, seed: int) -> None:
    data = random_data(p, seed)
    got = sut.run(p, data)
    given = {k: v for k, v in data.items() if k != OUTPUT_TENSOR[p.direction]}
    want = reference(p, **given)
    err = float(rms_range(got, want))
    tol = sut.tolerance(p)
    if not err <= tol:
        raise CheckFailure(f"{p.key} ({p.describe()}): rms_range {err:.3g} against the "
                           f"float64 reference, over the solver's tolerance {tol:.3g}")


def check_reference(sut: SolverUnderTest) -> None:
    """Every corpus problem the solver accepts, in every direction, and ``examples``
    problems drawn by hypothesis (:func:`wticonv.testing.problems`, derandomized), match
    the float64 reference within the solver's tolerance (rms_range)."""
    from hypothesis import HealthCheck, given, settings

    from . import problems

    for i, p in enumerate(sut.accepted()):
        _check_reference(sut, p, i)

    @settings(max_examples=sut.examples, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(problems())
    def drawn(p):
        if sut.accepts(p):
            _check_reference(sut, p, 0)

    drawn()


def check_dynamic(sut: SolverUnderTest) -> None:
    """A solver that says it is dynamic builds nothing new for other batch and picture
    sizes once it has run a problem (N, H and W are kernel arguments)."""
    if not sut.handle.registry.call(sut.solver_id, "is_dynamic"):
        return
    for p in sut.accepted():
        sut.run(p, random_data(p))
        before = sut.builds()
        for q in (p.with_batch(p.n + 1), dataclasses.replace(p, h=p.h + 2, w=p.w + 3)):
            if sut.accepts(q):
                sut.run(q, random_data(q))
        if sut.builds() != before:
            raise CheckFailure(f"is_dynamic is True, but {sut.builds() - before} program(s) "
                               f"were built for other sizes of {p.key}: pass N, H, W as "
                               "kernel arguments, not in build options")


def check_runs_cleanly(sut: SolverUnderTest) -> None:
    """On every accepted corpus problem: the inputs are unchanged by the run, the output
    is fully overwritten (it starts as NaN), and two runs give identical results."""
    for i, p in enumerate(sut.accepted()):
        data = random_data(p, i)
        with _device_tensors(sut.handle.device, p, data, out_fill=np.nan) as t:
            results = []
            for _ in range(2):
                sut.handle.run(p, t.tensors, solver=sut.solver_id)
                t.check_output_guards()
                results.append(t.output())
            for k in t.inputs:
                if not np.array_equal(t.download(k), data[k]):
                    raise CheckFailure(f"{p.key}: the run modified its input {k}")
        if np.isnan(results[0]).any():
            raise CheckFailure(f"{p.key}: {int(np.isnan(results[0]).sum())} output elements "
                               "were never written (still NaN)")
        if not np.array_equal(results[0], results[1]):
            raise CheckFailure(f"{p.key}: two runs on the same inputs differ (largest "
                               f"difference {np.abs(results[0] - results[1]).max():.3g})")


def check_nan_inf(sut: SolverUnderTest) -> None:
    """NaN and Inf in the data input (x for fwd and wrw, dy for bwd) reach the output:
    every element the float64 reference makes NaN or infinite is NaN or infinite."""
    for i, p in enumerate(sut.accepted()):
        data = random_data(p, i)
        src = "y" if p.direction == "bwd" else "x"
        flat = data[src].reshape(-1)
        flat[flat.size // 2] = np.nan
        flat[flat.size // 3] = np.inf
        got = sut.run(p, data)
        with np.errstate(invalid="ignore", over="ignore"):
            out = OUTPUT_TENSOR[p.direction]
            want = reference(p, **{k: v for k, v in data.items() if k != out})
        lost = np.isfinite(got) & ~np.isfinite(want)
        if lost.any():
            raise CheckFailure(f"{p.key}: {int(lost.sum())} output elements are finite where "
                               "the reference is NaN or infinite")


def check_nan_inf_weights(sut: SolverUnderTest) -> None:
    """NaN and Inf in the weights (w for fwd and bwd; for wrw, which computes dw, in dy)
    reach every output they meet through a real input: an element is required to be NaN
    or infinite where the convolution of the non-finite entries' indicator with an input
    of ones is positive. Whether they also reach outputs through the zero padding (0 x NaN
    is NaN if the padding is multiplied, nothing if it is skipped) is left to the solver."""
    for i, p in enumerate(sut.accepted()):
        data = random_data(p, i)
        src = "y" if p.direction == "wrw" else "w"
        flat = data[src].reshape(-1)
        flat[flat.size // 2] = np.nan
        flat[(flat.size - 1) // 4] = np.inf
        got = sut.run(p, data)
        given = {k: np.ones_like(v) for k, v in data.items() if k != OUTPUT_TENSOR[p.direction]}
        given[src] = (~np.isfinite(data[src])).astype(np.float32)
        reached = reference(p, **given) > 0
        lost = np.isfinite(got) & reached
        if lost.any():
            raise CheckFailure(f"{p.key}: {int(lost.sum())} output elements are finite though "
                               "a NaN or Inf weight meets them through a real input")


#: Bytes of guard region on each side of the workspace and the output (rounded up to the
#: device's sub-buffer alignment).
GUARD_BYTES = 4096
_SENTINEL = 0x5A


def _guarded(dev, nbytes: int):
    """``(whole, region, guard)``: a buffer of ``nbytes`` + 2 guards filled with the
    sentinel byte, and its middle ``nbytes`` as a sub-buffer (None when ``nbytes`` is 0)."""
    import pyopencl as cl

    align = max(dev.cl_device.mem_base_addr_align // 8, 4)
    guard = -(-GUARD_BYTES // align) * align
    whole = cl.Buffer(dev.context, cl.mem_flags.READ_WRITE, nbytes + 2 * guard)
    cl.enqueue_copy(dev.queue, whole, np.full(nbytes + 2 * guard, _SENTINEL, np.uint8))
    region = whole.get_sub_region(guard, nbytes) if nbytes else None
    return whole, region, guard


def _guards_intact(dev, whole, nbytes: int, guard: int) -> bool:
    import pyopencl as cl

    host = np.empty(nbytes + 2 * guard, np.uint8)
    cl.enqueue_copy(dev.queue, host, whole)
    return bool((host[:guard] == _SENTINEL).all() and (host[guard + nbytes:] == _SENTINEL).all())


class _DeviceTensors:
    """A problem's tensors on the device: inputs uploaded, the output a guarded sub-buffer
    (see :func:`_guarded`)."""

    def __init__(self, dev, problem: ConvProblem, data: dict, out_fill=None) -> None:
        import pyopencl as cl

        from ..tensors import ConvTensors

        self.dev, self.problem, self.out = dev, problem, OUTPUT_TENSOR[problem.direction]
        self.shapes = {k: v.shape for k, v in data.items()}
        self.out_bytes = 4 * int(np.prod(self.shapes[self.out]))
        self.inputs = [k for k in data if k != self.out]
        self.bufs = {k: dev.upload(np.ascontiguousarray(data[k], np.float32))
                     for k in self.inputs}
        self.whole, self.bufs[self.out], self.guard = _guarded(dev, self.out_bytes)
        if out_fill is not None:
            cl.enqueue_copy(dev.queue, self.bufs[self.out],
                            np.full(self.shapes[self.out], out_fill, np.float32))
        self.tensors = ConvTensors(self.bufs["x"], self.bufs["w"], self.bufs["y"])

    def download(self, name: str) -> np.ndarray:
        return self.dev.download(self.bufs[name], self.shapes[name])

    def output(self) -> np.ndarray:
        return self.download(self.out)

    def check_output_guards(self) -> None:
        if not _guards_intact(self.dev, self.whole, self.out_bytes, self.guard):
            raise CheckFailure(f"{self.problem.key}: the run wrote outside its output tensor "
                               f"{self.out} ({self.out_bytes} bytes)")

    def release(self) -> None:
        for b in (*self.bufs.values(), self.whole):
            b.release()


@contextlib.contextmanager
def _device_tensors(dev, problem: ConvProblem, data: dict, out_fill=None):
    t = _DeviceTensors(dev, problem, data, out_fill)
    try:
        yield t
    finally:
        t.release()


def check_guards(sut: SolverUnderTest) -> None:
    """The solver writes nothing outside its output and its workspace: each is given as a
    sub-buffer with :data:`GUARD_BYTES` of sentinel bytes on both sides, and the guards
    are unchanged after the run (the output itself must be fully written: see
    ``runs_cleanly``)."""
    dev = sut.handle.device
    for i, p in enumerate(sut.accepted()):
        chosen = sut.handle.select(p, solver=sut.solver_id).chosen
        ws_bytes = chosen.workspace or 0
        ws_whole, ws_region, ws_guard = _guarded(dev, ws_bytes)
        try:
            with _device_tensors(dev, p, random_data(p, i)) as t:
                sut.handle.registry.call(sut.solver_id, "run", problem=p, device=dev,
                                         tensors=t.tensors, workspace=ws_region,
                                         perf_config=chosen.perf_config)
                dev.queue.finish()
                t.check_output_guards()
            if not _guards_intact(dev, ws_whole, ws_bytes, ws_guard):
                raise CheckFailure(f"{p.key}: the run wrote outside its workspace "
                                   f"({ws_bytes} bytes, as workspace_size said)")
        finally:
            for b in (ws_region, ws_whole):
                if b is not None:
                    b.release()


#: Check name -> function, in run order (test ids use the names).
CHECKS = {
    "hooks": check_hooks,
    "queries_pure": check_queries_pure,
    "wti": check_wti,
    "guards": check_guards,
    "reference": check_reference,
    "dynamic": check_dynamic,
    "runs_cleanly": check_runs_cleanly,
    "nan_inf": check_nan_inf,
    "nan_inf_weights": check_nan_inf_weights,
}
