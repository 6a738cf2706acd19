"""The conformance checks: what every solver plugin must honour (see docs/hooks.md).

Each check is a function ``check_<name>(sut)`` of a :class:`SolverUnderTest`; it returns
nothing when the solver passes and raises :class:`CheckFailure` saying what is wrong
otherwise. :data:`CHECKS` lists them in the order :func:`wticonv.testing.check_solver`
runs them. They run real kernels on the handle's device, on small problems (a second or
two per check on a CPU through PoCL, kernel builds aside).
"""

from __future__ import annotations

import dataclasses
import math
import time

import numpy as np

from wticonv.contract.answers import CLASS_KIT_TOLERANCE_LIMIT, DEFAULT_MAX_WTI
from wticonv.contract.hookspecs import HOOK_NAMES
from wticonv.problem.conv import ConvProblem
from wticonv.problem.reference import reference, rms_range
from wticonv.problem.tensors import OUTPUT_TENSOR
from wticonv.testing.buffers import GUARD_BYTES, device_tensors, guarded, guards_intact, random_data
from wticonv.testing.failure import CheckFailure
from wticonv.testing.sut import SolverUnderTest

# The names of earlier versions, kept for code that imported them from here.
_device_tensors, _guarded, _guards_intact = device_tensors, guarded, guards_intact

__all__ = ["CheckFailure", "SolverUnderTest", "CHECKS", "QUERY_BUDGET_S", "DEFAULT_MAX_WTI",
           "GUARD_BYTES", "random_data"]

#: Time one query hook may take on one call, seconds (the faster of two calls on the same
#: problem, so that one pause of a loaded machine does not count): generous against the
#: microseconds the hook reference asks for, so that a busy CI machine does not fail it.
QUERY_BUDGET_S = 2e-3


# ----------------------------------------------------------------------------- checks
def check_hooks(sut: SolverUnderTest) -> int | None:
    """The solver is registered with every required hook (the registry checked their
    signatures against the specs, and its ``tolerance`` and ``max_wti``), ``is_dynamic``
    answers ``True`` or ``False``, and a tunable solver's ``perf_configs`` answers a list
    of distinct valid names for the problems it accepts (the first five)."""
    from wticonv.contract.answers import dynamic_answer
    from wticonv.errors import ContractError

    entry = sut.entry
    missing = [h for h in HOOK_NAMES if not hasattr(entry.obj, h)]
    if missing:
        raise CheckFailure(f"{sut.solver_id} lacks the hook(s) {', '.join(missing)}")
    try:
        dynamic_answer(sut.call("is_dynamic"))
    except ContractError as e:
        raise CheckFailure(str(e)) from None
    if entry.tunable:
        return len(sut.accepted()[:5])       # query() validated perf_configs on each
    return None                              # nothing per problem to check


def check_queries_pure(sut: SolverUnderTest) -> int:
    """On every corpus problem, in every direction: ``is_applicable``, and on the problems
    it accepts ``workspace_size``, ``get_wti`` and (tunable solvers) ``perf_configs``, give
    the same answer twice, build no kernels, and each call takes under
    :data:`QUERY_BUDGET_S` (the faster of the two calls, per hook and problem: a slow hook
    is not hidden by quick declines). A perf config listed once and not the next time
    would have its tuned perf-db record deleted as "not offered"."""
    builds = sut.builds()

    def twice(hook: str, p: ConvProblem):
        answers, best, before = [], math.inf, sut.builds()
        for _ in range(2):
            t0 = time.perf_counter()
            answers.append(sut.call(hook, p))
            best = min(best, time.perf_counter() - t0)
        if sut.builds() != before:          # before the time: a build is what took it
            raise CheckFailure(f"the query hooks built {sut.builds() - before} program(s) "
                               f"({hook} on {p.key}); build kernels in run only")
        if best > QUERY_BUDGET_S:
            raise CheckFailure(f"{hook} took {best * 1e3:.2f} ms per call on {p.key} "
                               f"({p.describe()}); the budget is {QUERY_BUDGET_S * 1e3:.0f} "
                               "ms per call (the hook reference asks for microseconds)")
        return answers

    accepted = 0
    for p in sut.problems():
        first, second = twice("is_applicable", p)
        if bool(second) != bool(first):
            raise CheckFailure(f"is_applicable answered {first!r}, then {second!r} on {p.key}")
        if not first:
            continue
        accepted += 1
        hooks = ("workspace_size", "get_wti") + (
            ("perf_configs",) if sut.entry.tunable else ())
        for hook in hooks:
            a, b = twice(hook, p)
            if a != b and not (isinstance(a, float) and isinstance(b, float)
                               and math.isnan(a) and math.isnan(b)):   # NaN: see "wti"
                raise CheckFailure(f"{hook} answered {a!r}, then {b!r} on {p.key}")
    if sut.builds() != builds:
        raise CheckFailure(f"the query hooks built {sut.builds() - builds} program(s); "
                           "build kernels in run only")
    return len(sut.problems())


def check_wti(sut: SolverUnderTest) -> int:
    """On every corpus problem, in every direction, the kit calls each query hook itself
    and validates each answer (:mod:`wticonv.contract.answers`): ``is_applicable`` answers
    ``True``, ``False`` or a ``Decline``; then ``is_dynamic`` a bool, ``workspace_size``
    a non-negative int, and ``get_wti`` a finite number, -2.0 (unknown) or between 0 and
    the solver's ``max_wti`` (:data:`DEFAULT_MAX_WTI` unless it declares one). The first
    bad answer fails, naming the hook, the problem and the value."""
    problems = sut.problems()
    accepted = [p for p in problems if sut.query(p).applicable]
    if not accepted:
        sut.accepted()                      # the "declines everything" failure
    return len(problems)


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


def check_reference(sut: SolverUnderTest) -> int:
    """Every corpus problem the solver accepts, in every direction, and ``examples``
    problems drawn by hypothesis (:func:`wticonv.testing.problems`, derandomized), match
    the float64 reference within the solver's tolerance (rms_range). A declared tolerance
    looser than its math class accepts
    (:data:`~wticonv.contract.answers.CLASS_KIT_TOLERANCE_LIMIT`: 1e-3 for ``fp32`` and
    ``3xtf32``, 1e-2 for ``tf32``) fails before anything runs.
    Needs hypothesis (the ``testing`` extra: ``pip install "wticonv[testing]"``)."""
    base, math_class = sut.base_tolerance, sut.entry.math
    limit = CLASS_KIT_TOLERANCE_LIMIT[math_class]
    if base > limit:
        raise CheckFailure(f"{sut.solver_id} declares tolerance {base:g}: tolerance {base:g} "
                           f"is looser than the kit accepts for math class {math_class!r} "
                           f"({limit:g}), and "
                           "would let wrong results pass; fix the kernel's accuracy, or "
                           "declare this check an expected failure with the reason")
    try:
        from hypothesis import HealthCheck, given, settings
    except ImportError:
        raise CheckFailure("the reference check draws problems with hypothesis, which is not "
                           "installed: pip install \"wticonv[testing]\" (the testing extra "
                           "declares it)") from None

    from wticonv.testing.corpus import problems

    accepted = sut.accepted()
    for i, p in enumerate(accepted):
        _check_reference(sut, p, i)
    drawn_count = [0]

    @settings(max_examples=sut.examples, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(problems())
    def drawn(p):
        if sut.accepts(p):
            drawn_count[0] += 1
            _check_reference(sut, p, 0)

    drawn()
    return len(accepted) + drawn_count[0]


def check_dynamic(sut: SolverUnderTest) -> int:
    """A solver that says it is dynamic builds nothing new for other batch and picture
    sizes once it has run a problem (N, H and W are kernel arguments)."""
    if sut.call("is_dynamic") is not True:
        return 0
    accepted = sut.accepted()
    for p in accepted:
        sut.run(p, random_data(p))
        before = sut.builds()
        for q in (p.with_batch(p.n + 1), dataclasses.replace(p, h=p.h + 2, w=p.w + 3)):
            if sut.accepts(q):
                sut.run(q, random_data(q))
        if sut.builds() != before:
            raise CheckFailure(f"is_dynamic is True, but {sut.builds() - before} program(s) "
                               f"were built for other sizes of {p.key}: pass N, H, W as "
                               "kernel arguments, not in build options")
    return len(accepted)


def check_runs_cleanly(sut: SolverUnderTest) -> int:
    """On every accepted corpus problem: the inputs are unchanged by the run, the output
    is fully overwritten (it starts as NaN), and two runs give identical results."""
    for i, p in enumerate(sut.accepted()):
        data = random_data(p, i)
        with device_tensors(sut.handle.device, p, data, out_fill=np.nan) as t:
            results = []
            for _ in range(2):
                sut.handle.run(p, t.tensors, solver=sut.solver_id, allow_tf32=True)
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
    return len(sut.accepted())


def check_nan_inf(sut: SolverUnderTest) -> int:
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
    return len(sut.accepted())


def check_nan_inf_weights(sut: SolverUnderTest) -> int:
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
    return len(sut.accepted())


def check_guards(sut: SolverUnderTest) -> int:
    """The solver writes nothing outside its output and its workspace: each is given as a
    sub-buffer with :data:`GUARD_BYTES` of sentinel bytes on both sides, and the guards
    are unchanged after the run (the output itself must be fully written: see
    ``runs_cleanly``)."""
    dev = sut.handle.device
    for i, p in enumerate(sut.accepted()):
        chosen = sut.handle.select(p, solver=sut.solver_id, allow_tf32=True).chosen
        ws_bytes = chosen.workspace or 0
        ws_whole, ws_region, ws_guard = guarded(dev, ws_bytes)
        try:
            with device_tensors(dev, p, random_data(p, i)) as t:
                sut.handle.registry.call(sut.solver_id, "run", problem=p, device=dev,
                                         tensors=t.tensors, workspace=ws_region,
                                         perf_config=chosen.perf_config)
                dev.queue.finish()
                t.check_output_guards()
            if not guards_intact(dev, ws_whole, ws_bytes, ws_guard):
                raise CheckFailure(f"{p.key}: the run wrote outside its workspace "
                                   f"({ws_bytes} bytes, as workspace_size said)")
        finally:
            for b in (ws_region, ws_whole):
                if b is not None:
                    b.release()
    return len(sut.accepted())


def check_programs(sut: SolverUnderTest) -> int | None:
    """A solver with the optional ``programs`` hook names exactly the programs its run
    builds: on each accepted corpus problem (the first :data:`PROGRAMS_PROBLEMS`) the hook
    answers a list of ``(source, options)`` pairs of str, and ``run`` asks
    ``device.build`` for those programs and no others (an unnamed one is compiled
    late, one at a time; a named one it never builds wastes a compilation). Solvers
    without the hook pass."""
    if not sut.entry.precompiles:
        return None
    from wticonv.runtime.programs import ProgramCache

    cache = sut.handle.device.programs
    accepted = sut.accepted()[:PROGRAMS_PROBLEMS]
    for i, p in enumerate(accepted):
        chosen = sut.handle.select(p, solver=sut.solver_id, allow_tf32=True).chosen
        answer = sut.call("programs", p, None, perf_config=chosen.perf_config)
        if not (isinstance(answer, list) and all(
                isinstance(a, tuple) and len(a) == 2 and all(isinstance(x, str) for x in a)
                for a in answer)):
            raise CheckFailure(f"programs answered {answer!r:.120} on {p.key}, not a list of "
                               "(source, options) pairs of str (kit.programs_of makes one)")
        named = {ProgramCache.digest(src, opts): opts for src, opts in answer}
        with cache.recording() as built:
            sut.run(p, random_data(p, i))
        extra, unused = built - set(named), set(named) - built
        if extra:
            raise CheckFailure(f"{p.key}: run built {len(extra)} program(s) its programs hook "
                               f"did not name (it named {len(named)}); return the pairs run "
                               "passes to device.build")
        if unused:
            raise CheckFailure(f"{p.key}: programs named {len(unused)} program(s) run never "
                               "built (options " + ", ".join(
                                   repr(named[k]) for k in sorted(unused))[:200] + ")")
    return len(accepted)


#: Accepted problems the ``programs`` check compares (each one run).
PROGRAMS_PROBLEMS = 6


def check_perf_configs(sut: SolverUnderTest) -> int | None:
    """A tunable solver computes the same result with every perf config it lists, as
    cleanly as with its default: on up to :data:`PERF_CONFIG_PROBLEMS` accepted problems
    that list perf configs (every one when there are no more; else spread evenly over
    them, each direction's largest among them), each perf config matches the float64
    reference within the solver's tolerance, writes its whole output (which starts as
    NaN) and leaves its inputs unchanged. ``wticonv tune`` stores the fastest perf config
    without looking at its results, and immediate mode then runs it on every call.
    Solvers that are not tunable pass; a tunable one whose perf configs none of the
    problems list passes on none (the report notes it). Returns the problems covered."""
    if not sut.entry.tunable:
        return None
    listed = {p: configs for p in sut.accepted() if (configs := sut.query(p).perf_configs)}
    chosen = _spread(list(listed), PERF_CONFIG_PROBLEMS)
    for i, p in enumerate(chosen):
        data = random_data(p, i)
        given = {k: v for k, v in data.items() if k != OUTPUT_TENSOR[p.direction]}
        want = reference(p, **given)
        tol = sut.tolerance(p)
        for config in listed[p]:
            where = f"{p.key} ({p.describe()}) with perf config {config!r}"
            with device_tensors(sut.handle.device, p, data, out_fill=np.nan) as t:
                sut.handle.run(p, t.tensors, solver=sut.solver_id, allow_tf32=True,
                               perf_config=config)
                t.check_output_guards()
                got = t.output()
                for k in t.inputs:
                    if not np.array_equal(t.download(k), data[k]):
                        raise CheckFailure(f"{where}: the run modified its input {k}")
            if np.isnan(got).any() and not np.isnan(want).any():
                raise CheckFailure(f"{where}: {int(np.isnan(got).sum())} output elements "
                                   "were never written (still NaN)")
            err = float(rms_range(got, want))
            if not err <= tol:
                raise CheckFailure(f"{where}: rms_range {err:.3g} against the float64 "
                                   f"reference, over the solver's tolerance {tol:.3g}")
    return len(chosen)


def _spread(problems: list, most: int) -> list:
    """Up to ``most`` of ``problems``: all when there are no more; else each direction's
    largest (by direct FLOPs: the perf configs' blockings and splits differ most there)
    and the rest evenly spaced over the list."""
    if len(problems) <= most:
        return list(problems)
    largest = {}
    for p in problems:
        if p.direction not in largest or p.flops > largest[p.direction].flops:
            largest[p.direction] = p
    picked = list(largest.values())
    rest = [p for p in problems if p not in picked]
    want = most - len(picked)
    picked += [rest[round(j * (len(rest) - 1) / max(want - 1, 1))] for j in range(want)]
    return list(dict.fromkeys(picked))


#: Most accepted problems (of those that list perf configs) the ``perf_configs`` check
#: runs every perf config of: the default corpus in every direction (20 shapes x 3),
#: whole; a larger corpus spread over.
PERF_CONFIG_PROBLEMS = 60

#: Check name -> function, in run order (test ids use the names).
CHECKS = {
    "hooks": check_hooks,
    "queries_pure": check_queries_pure,
    "wti": check_wti,
    "guards": check_guards,
    "reference": check_reference,
    "dynamic": check_dynamic,
    "programs": check_programs,
    "perf_configs": check_perf_configs,
    "runs_cleanly": check_runs_cleanly,
    "nan_inf": check_nan_inf,
    "nan_inf_weights": check_nan_inf_weights,
}
