"""Running the conformance checks: :func:`check_solver` and :func:`parametrize_with_checks`.

In the style of scikit-learn's ``check_estimator`` / ``parametrize_with_checks``: a plugin
author checks a solver in one call, or turns every (solver, check) pair into its own pytest
test, with ids ``<solver>-<check>`` so that ``-k`` selects them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import EDGE_SHAPES
from .checks import CHECKS
from .failure import CheckFailure
from .sut import SolverUnderTest

__all__ = ["CheckResult", "SolverReport", "check_solver", "parametrize_with_checks",
           "default_corpus"]


def default_corpus() -> list:
    """The problems every check runs on unless given others: :data:`EDGE_SHAPES` and
    a few small layers shaped like ResNet-50's and MobileNetV2's (all forward; the checks
    take them in every direction)."""
    from ..problem import ConvProblem as P

    layers = [P(2, 16, 12, 12, 16, 3, 3, pad_h=1, pad_w=1),
              P(2, 32, 7, 7, 64, 1, 1),
              P(1, 24, 14, 14, 48, 1, 1, stride_h=2, stride_w=2),
              P(2, 8, 16, 16, 8, 3, 3, pad_h=1, pad_w=1, stride_h=2, stride_w=2),
              P(1, 16, 10, 10, 16, 3, 3, pad_h=1, pad_w=1, groups=16),
              P(1, 8, 9, 9, 8, 1, 7, pad_w=3)]
    return list(EDGE_SHAPES.values()) + layers


@dataclass
class CheckResult:
    """One check's outcome: ``passed``, or the failure message; ``expected`` is the reason
    given for an expected failure ("" when none was expected); ``covered``, for a passed
    check, how many problems (corpus problems in each direction, plus those hypothesis
    drew) it covered."""

    check: str
    passed: bool
    message: str = ""
    expected: str = ""
    covered: int | None = None


@dataclass
class SolverReport:
    """Every check's result for one solver."""

    solver_id: str
    results: list[CheckResult] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Every check passed, or failed as expected."""
        return all(r.passed or r.expected for r in self.results)

    def __str__(self) -> str:
        lines = [f"conformance of {self.solver_id}:"]
        for r in self.results:
            state = ("passed" if r.passed and not r.expected else
                     "PASSED, but was expected to fail" if r.passed else
                     f"failed as expected ({r.expected})" if r.expected else "FAILED")
            if r.passed and r.covered is not None:
                state += f" ({r.covered} problem{'s' if r.covered != 1 else ''})"
            lines.append(f"  {r.check:16} {state}" + (f": {r.message}" if r.message else ""))
        return "\n".join(lines)


def _sut(solver_id: str, handle=None, corpus=None, examples: int = 20) -> SolverUnderTest:
    from ..handle import get_handle

    from ..errors import SolverNotFoundError

    handle = handle if handle is not None else get_handle()
    try:
        handle.registry.get(solver_id)
    except SolverNotFoundError as e:        # say why, when the plugin was quarantined
        held = [f"{q.entry_point} ({q.distribution}): {q.reason}"
                for q in handle.registry.quarantined]
        if held:
            raise SolverNotFoundError(f"{e}; quarantined plugins (see `wticonv solvers`): "
                                      + "; ".join(held)) from None
        raise
    return SolverUnderTest(handle, solver_id,
                           list(corpus) if corpus is not None else default_corpus(), examples)


def check_solver(solver_id: str, handle=None, corpus=None, checks=None,
                 expected_failed_checks: dict | None = None, examples: int = 20,
                 raise_on_failure: bool = True) -> SolverReport:
    """Run the conformance checks on one installed solver.

    Parameters
    ----------
    solver_id : str
    handle : Handle, optional
        Whose registry holds the solver and whose device runs it (default:
        :func:`wticonv.get_handle`).
    corpus : iterable of ConvProblem, optional
        Problems to check on (default: :func:`default_corpus`).
    checks : iterable of str, optional
        Names from :data:`wticonv.testing.CHECKS` (default: all).
    expected_failed_checks : dict, optional
        Check name -> reason it is known to fail.
    examples : int
        Problems the ``reference`` check draws with hypothesis.
    raise_on_failure : bool
        Raise :class:`CheckFailure` with the report when a check fails unexpectedly (or an
        expected failure passes).

    Returns
    -------
    SolverReport
    """
    sut = _sut(solver_id, handle, corpus, examples)
    expected = dict(expected_failed_checks or {})
    names = list(checks) if checks is not None else list(CHECKS)
    unknown = [n for n in names + list(expected) if n not in CHECKS]
    if unknown:
        raise ValueError(f"unknown check(s) {', '.join(unknown)}; the checks are "
                         f"{', '.join(CHECKS)}")
    report = SolverReport(solver_id)
    for name in names:
        try:
            covered = CHECKS[name](sut)
        except CheckFailure as e:
            report.results.append(CheckResult(name, False, str(e), expected.get(name, "")))
        except Exception as e:  # noqa: BLE001 - a crash is a failure of that check
            report.results.append(CheckResult(name, False, f"{type(e).__name__}: {e}",
                                              expected.get(name, "")))
        else:
            report.results.append(CheckResult(name, True, "", expected.get(name, ""),
                                              covered if isinstance(covered, int) else None))
    if raise_on_failure and not all(r.passed != bool(r.expected) for r in report.results):
        raise CheckFailure(str(report))
    return report


def parametrize_with_checks(solvers, expected_failed_checks=None, corpus=None,
                            examples: int = 20):
    """A ``pytest.mark.parametrize`` over every (solver, check) pair, ids
    ``<solver>-<check>``; the test receives ``solver_id`` and ``check``, a callable that
    runs that check on the default handle (or on the handle it is given)::

        from wticonv.testing import parametrize_with_checks

        @parametrize_with_checks(["myplugin.fast"])
        def test_conformance(solver_id, check):
            check()

    ``expected_failed_checks``: a dict check -> reason, or a callable solver_id -> such a
    dict; those pairs are marked ``xfail(strict=True)`` with the reason.
    """
    import pytest

    params = []
    for sid in solvers:
        expected = (expected_failed_checks(sid) if callable(expected_failed_checks)
                    else expected_failed_checks) or {}
        unknown = [n for n in expected if n not in CHECKS]
        if unknown:
            raise ValueError(f"expected_failed_checks of {sid} names unknown check(s) "
                             f"{', '.join(unknown)}; the checks are {', '.join(CHECKS)}")
        for name in CHECKS:
            def run(handle=None, sid=sid, name=name):
                __tracebackhide__ = True    # pytest shows the report, not the kit's frames
                check_solver(sid, handle, corpus, [name], examples=examples)

            marks = ([pytest.mark.xfail(reason=expected[name], strict=True,
                                        raises=CheckFailure)] if name in expected else [])
            params.append(pytest.param(sid, run, id=f"{sid}-{name}", marks=marks))
    return pytest.mark.parametrize("solver_id, check", params)
