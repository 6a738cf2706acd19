"""The solver under test: its hooks called by the kit itself, each answer validated.

The kit never learns what a solver accepts through :meth:`wticonv.Handle.select`, which
sets a badly answering solver aside quietly (with a warning) and would let the checks skip
exactly the problems where the solver misbehaves. :meth:`SolverUnderTest.query` calls
every query hook of the solver on one problem, checks each answer against the rules of
:mod:`wticonv.contract.answers`, and raises :class:`CheckFailure` naming the hook, the problem
and the value on the first broken one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from wticonv.contract.answers import (
    applicable_answer,
    declared_max_wti,
    declared_tolerance,
    dynamic_answer,
    workspace_answer,
    wti_answer,
)
from wticonv.contract.hookspecs import Decline
from wticonv.errors import ContractError
from wticonv.problem.conv import DIRECTIONS, ConvProblem
from wticonv.testing.buffers import device_tensors
from wticonv.testing.failure import CheckFailure

__all__ = ["Answers", "SolverUnderTest"]


@dataclass
class Answers:
    """What one solver answered about one problem (validated).

    Attributes
    ----------
    problem : ConvProblem
    applicable : bool
        ``is_applicable`` said yes.
    reason : str
        The :class:`~wticonv.Decline` reason ("" when applicable or no reason was given).
    dynamic : bool or None
    workspace : int or None
        Bytes.
    wti : float or None
        Fraction of the device's peak FP32 rate; -2.0: unknown.
    perf_configs : list of str or None
        A tunable solver's ``perf_configs`` answer (None for the others).
    """

    problem: ConvProblem
    applicable: bool
    reason: str = ""
    dynamic: bool | None = None
    workspace: int | None = None
    wti: float | None = None
    perf_configs: list | None = None


def _where(problem: ConvProblem) -> str:
    return f"{problem.key} ({problem.describe()})"


@dataclass
class SolverUnderTest:
    """One solver, its handle and the problems to check it on.

    Attributes
    ----------
    handle : Handle
        The handle whose registry holds the solver and whose device runs it.
    solver_id : str
    corpus : list[ConvProblem]
        Problems to check, each in every direction (problems the solver declines are
        skipped by the checks that run kernels; every hook is still asked about them).
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

    def problems(self) -> list[ConvProblem]:
        """The corpus in every direction."""
        return [p.with_direction(d) for p in self.corpus for d in DIRECTIONS]

    def call(self, hook: str, problem: ConvProblem | None = None, limit: int | None = None,
             **more):
        """The solver's raw answer to one hook; CheckFailure naming the hook and the
        problem if it raises."""
        kwargs = ({} if problem is None else
                  {"problem": problem, "device": self.handle.device, "workspace_limit": limit})
        try:
            return self.handle.registry.call(self.solver_id, hook, **kwargs, **more)
        except Exception as e:  # noqa: BLE001 - any exception is the solver's failure
            where = f" on {_where(problem)}" if problem is not None else ""
            raise CheckFailure(f"{hook} raised {type(e).__name__}: {e}{where}") from None

    def query(self, problem: ConvProblem, limit: int | None = None) -> Answers:
        """Ask every query hook about ``problem``, as selection would, and validate each
        answer (:mod:`wticonv.contract.answers`).

        Raises
        ------
        CheckFailure
            On the first hook that raises or answers a value the hook reference forbids,
            naming the hook, the value and the problem.
        """
        from wticonv.measuring.tune import offered_perf_configs

        hook = "is_applicable"
        try:
            ok = applicable_answer(self.call(hook, problem, limit))
            if not ok:
                return Answers(problem, False, ok.reason if isinstance(ok, Decline) else "")
            hook = "is_dynamic"
            dynamic = dynamic_answer(self.call(hook))
            configs = None
            if self.entry.tunable:
                hook = "perf_configs"
                try:
                    configs = offered_perf_configs(self.handle.registry, self.solver_id,
                                                   problem, self.handle.device, limit)
                except ValueError as e:
                    raise ContractError(str(e)) from None
                except Exception as e:  # noqa: BLE001 - the solver's own failure
                    raise ContractError(f"perf_configs raised {type(e).__name__}: {e}"
                                        ) from None
            hook = "workspace_size"
            ws = workspace_answer(self.call(hook, problem, limit))
            hook = "get_wti"
            wti = wti_answer(self.call(hook, problem, limit), self.max_wti)
        except ContractError as e:
            raise CheckFailure(f"{e} on {_where(problem)}") from None
        return Answers(problem, True, "", dynamic, ws, wti, configs)

    def accepts(self, problem: ConvProblem) -> bool:
        """The solver says it applies (every answer valid: CheckFailure otherwise) and can
        be run here (its workspace and tensors fit the device's largest buffer)."""
        a = self.query(problem)
        if not a.applicable:
            return False
        limit = self.handle.device.info.max_alloc_bytes
        sizes = [a.workspace] + [4 * _prod(s) for s in (problem.x_shape, problem.w_shape,
                                                         problem.y_shape)]
        return max(sizes) <= limit

    def accepted(self) -> list[ConvProblem]:
        """The corpus in every direction, the problems the solver accepts (at least one:
        CheckFailure otherwise, since nothing could be checked). Every hook is asked
        about every problem first, so a bad answer fails here, named."""
        if self._accepted is None:
            self._accepted = [p for p in self.problems() if self.accepts(p)]
        if not self._accepted:
            reasons = {self.query(p).reason for p in self.problems()}
            if len(reasons) == 1 and (reason := reasons.pop()):
                # one reason for everything: usually the device (tensor cores, a driver)
                raise CheckFailure(
                    f"{self.solver_id} declines all {len(self.corpus)} corpus problems in "
                    f"every direction on {self.handle.device.info.name.strip()}, each with "
                    f"the reason {reason!r}, so nothing could be checked here: run the "
                    "kit on a device it runs on, or fix is_applicable if it should run here")
            raise CheckFailure(f"{self.solver_id} declines all {len(self.corpus)} corpus "
                               "problems in every direction, so nothing could be checked: "
                               "fix is_applicable, or give the kit problems it accepts "
                               "(corpus=...)")
        return self._accepted

    @property
    def max_wti(self) -> float:
        return declared_max_wti(self.solver_id, self.entry.obj)

    @property
    def base_tolerance(self) -> float:
        """The solver's declared ``tolerance`` (or the default)."""
        return declared_tolerance(self.solver_id, self.entry.obj)

    def run(self, problem: ConvProblem, data: dict):
        """The solver's result on host arrays ``data`` (x, w, y as the direction needs).

        The output is a sub-buffer with guard regions around it (see ``guards``), so a
        solver that writes past its output fails this check instead of corrupting the test
        process's memory."""
        with device_tensors(self.handle.device, problem, data) as t:
            self.handle.run(problem, t.tensors, solver=self.solver_id, allow_tf32=True)
            t.check_output_guards()
            return t.output()

    def tolerance(self, problem: ConvProblem) -> float:
        """The rms_range tolerance on ``problem`` (:func:`wticonv.solver_tolerance`)."""
        from wticonv.contract.answers import tolerance_for

        return tolerance_for(self.handle.registry, self.solver_id, problem)

    def builds(self) -> int:
        return self.handle.device.programs.counters.builds


def _prod(shape) -> int:
    out = 1
    for v in shape:
        out *= v
    return out
