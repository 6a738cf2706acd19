"""Compiling the programs of many problems ahead, several at once.

Calibration, find and evaluate time every candidate solver on many problems; on a cold
program cache most of their time went into compiling, one program after another (61
programs, 39 of a calibration's 53 s on the H200; benchmarks/calibrate_profile.py). Before
they time anything they now ask each solver that implements the optional ``programs``
hook (:meth:`wticonv.contract.hookspecs.SolverSpec.programs`) which programs it will run,
and compile the missing ones in parallel build helpers
(:meth:`wticonv.runtime.programs.ProgramCache.precompile`), as MIOpen's find mode compiles
the kernels of all its solutions before it times them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from wticonv.problem.conv import ConvProblem

__all__ = ["precompile", "precompile_problems", "programs_of_solvers"]


def programs_of_solvers(handle, problem: ConvProblem, solvers: Mapping[str, str | None],
                        workspace_limit: int | None = None) -> list[tuple[str, str]]:
    """The ``(source, options)`` pairs the ``programs`` hooks of ``solvers`` (``{solver
    id: perf config or None}``, as :func:`wticonv.measuring.timing.timed_together` takes
    them) name for ``problem`` within ``workspace_limit`` bytes, with the perf config and
    workspace a forced run of each would use.

    A solver without the hook, one that does not apply, or whose hook raises or answers
    something other than a list of ``(str, str)`` pairs adds nothing: it is compiled when
    it runs, and the conformance kit reports a wrong answer
    (:func:`wticonv.testing.checks.check_programs`).
    """
    reg, out = handle.registry, []
    for sid, config in solvers.items():
        entry = reg.solvers.get(sid)
        if entry is None or not entry.precompiles:
            continue
        try:
            verdict = handle.select(problem, workspace_limit, sid, config).candidates[0]
            answer = reg.call(sid, "programs", problem=problem, device=handle.device,
                              workspace_limit=workspace_limit, perf_config=verdict.perf_config)
        except Exception:  # noqa: BLE001 - the run reports what is wrong with the solver
            continue
        if isinstance(answer, list) and all(
                isinstance(a, tuple) and len(a) == 2 and all(isinstance(x, str) for x in a)
                for a in answer):
            out.extend(answer)
    return out


def precompile(handle, work: Iterable[tuple[ConvProblem, Mapping[str, str | None]]],
               workspace_limit: int | None = None,
               progress: Callable[[int, int], None] | None = None) -> int:
    """Compile, several at once, the programs the solvers of ``work`` (``(problem,
    {solver id: perf config or None})`` pairs) will run and that are not yet cached
    (:func:`programs_of_solvers`, then
    :meth:`wticonv.runtime.programs.ProgramCache.precompile`).

    ``progress`` is called with (programs done, programs to compile). Returns the number
    of programs compiled.
    """
    pairs: dict[tuple[str, str], None] = {}
    for problem, solvers in work:
        pairs.update(dict.fromkeys(programs_of_solvers(handle, problem, solvers,
                                                       workspace_limit)))
    return handle.device.programs.precompile(pairs, progress=progress)


def precompile_problems(handle, problems: Iterable[ConvProblem],
                        workspace_limit: int | None = None, search: bool = False,
                        progress: Callable[[int, int], None] | None = None) -> int:
    """:func:`precompile` for timing every enabled solver on each of ``problems``, as
    :func:`wticonv.measuring.find.find` does (each with the perf config immediate mode
    gives it; ``search``: every perf config a tunable solver offers too, for tuning).
    Returns the number of programs compiled."""
    from wticonv.selection.perfdb import offered_perf_configs

    reg = handle.registry
    enabled = [sid for sid in reg.ids() if sid not in reg.disabled]

    def work():
        for p in problems:
            yield p, dict.fromkeys(enabled)
            if not search:
                continue
            for sid in enabled:
                if not reg.solvers[sid].tunable:
                    continue
                try:
                    configs = offered_perf_configs(reg, sid, p, handle.device,
                                                   workspace_limit)
                except Exception:  # noqa: BLE001 - tuning reports it
                    continue
                for config in configs:
                    yield p, {sid: config}

    return precompile(handle, work(), workspace_limit, progress)
