"""Running the conformance checks: :func:`check_solver` and :func:`parametrize_with_checks`.

In the style of scikit-learn's ``check_estimator`` / ``parametrize_with_checks``: a plugin
author checks a solver in one call, or turns every (solver, check) pair into its own pytest
test, with ids ``<solver>-<check>`` so that ``-k`` selects them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from wticonv.testing.checks import CHECKS
from wticonv.testing.corpus import EDGE_SHAPES
from wticonv.testing.failure import CheckFailure
from wticonv.testing.sut import SolverUnderTest

__all__ = ["CheckResult", "SolverReport", "check_solver", "parametrize_with_checks",
           "default_corpus"]


def default_corpus() -> list:
    """The problems every check runs on unless given others: :data:`EDGE_SHAPES` and
    a few small layers shaped like ResNet-50's, ResNeXt-50's and MobileNetV2's (all
    forward; the checks take them in every direction). Five of the layers have output
    channels in multiples of 16 (three of them input channels too), for solvers that fill
    vectors with channels (``direct.chanvec`` accepts 13 of the corpus's problems and
    directions)."""
    from wticonv.problem.conv import ConvProblem as P

    layers = [P(2, 16, 12, 12, 16, 3, 3, pad_h=1, pad_w=1),
              P(2, 32, 7, 7, 64, 1, 1),
              P(1, 24, 14, 14, 48, 1, 1, stride_h=2, stride_w=2),
              P(2, 8, 16, 16, 8, 3, 3, pad_h=1, pad_w=1, stride_h=2, stride_w=2),
              P(1, 16, 10, 10, 16, 3, 3, pad_h=1, pad_w=1, groups=16),
              P(1, 8, 9, 9, 8, 1, 7, pad_w=3),
              P(1, 64, 9, 7, 64, 3, 3, pad_h=1, pad_w=1, groups=2),
              P(2, 3, 23, 21, 32, 7, 7, pad_h=3, pad_w=3, stride_h=2, stride_w=2)]
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


#: A solver whose reference check (or, tunable, perf_configs check) ran on fewer problems
#: than this gets a note in its report: it passed, but on too little to say much (it
#: declines most of the corpus, or lists perf configs on few of its problems).
THIN_COVERAGE = 5


#: Per check whose coverage may be thin, why, and what to do (the note's tail).
_THIN_NOTES = {
    "reference": "declines the rest of the corpus and of the drawn problems, so passing "
                 "says little; give the kit problems it accepts",
    "perf_configs": "lists perf configs on no other problem it accepts here, so few of its "
                    "perf configs were checked; give the kit problems where it lists them",
}


@dataclass
class SolverReport:
    """Every check's result for one solver; ``notes``: what the reader should know beyond
    pass or fail (a reference or perf_configs check that covered fewer than
    :data:`THIN_COVERAGE` problems)."""

    solver_id: str
    results: list[CheckResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

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
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


def _sut(solver_id: str, handle=None, corpus=None, examples: int = 20) -> SolverUnderTest:
    from wticonv.handle import get_handle
    from wticonv.testing.isolation import _installed

    handle = handle if handle is not None else get_handle()
    _installed(solver_id, handle.registry)      # says why, when it was quarantined
    # the device's figures are measured on first use (a kernel built and timed for the
    # launch overhead): measured here, so that the queries_pure check does not blame the
    # first get_wti that asks for them on a fresh cache
    dev = handle.device
    _figures = (dev.peak_flops, dev.bandwidth, dev.launch_overhead_s)
    return SolverUnderTest(handle, solver_id,
                           list(corpus) if corpus is not None else default_corpus(), examples)


_ISOLATED: dict = {}


def _isolated(solver, handle):
    """The isolated handle for ``solver`` on ``handle``'s device (or the default device),
    made once per solver and device."""
    from wticonv.testing.isolation import isolated_handle, solver_key

    device = handle.device if handle is not None else None
    key = (solver_key(solver), id(solver) if not isinstance(solver, str) else 0, id(device))
    if key not in _ISOLATED:
        _ISOLATED[key] = isolated_handle(solver, device=device)
    return _ISOLATED[key]


def check_solver(solver_id, handle=None, corpus=None, checks=None,
                 expected_failed_checks: dict | None = None, examples: int = 20,
                 raise_on_failure: bool = True, isolated: bool = False) -> SolverReport:
    """Run the conformance checks on one solver.

    Parameters
    ----------
    solver_id : str or solver object
        The id of an installed solver, or a solver object (not installed: it is registered
        in-process, in an isolated registry, see ``isolated``).
    handle : Handle, optional
        Whose registry holds the solver and whose device runs it (default:
        :func:`wticonv.get_handle`). With ``isolated``, only its device is used.
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
    isolated : bool
        Check the solver in a registry of its own plus the built-in solvers
        (:mod:`wticonv.testing.isolation`): other installed plugins are not loaded, so
        their faults never show up here. Implied by a solver object.

    Returns
    -------
    SolverReport

    Raises
    ------
    SolverNotFoundError
        If no such solver is installed (with the quarantine reason, when it was refused
        at load time).
    PluginError
        If a solver object does not honour the contract at registration.
    CheckFailure
        With ``raise_on_failure``, when a check fails unexpectedly.
    """
    if isolated or not isinstance(solver_id, str):
        from wticonv.testing.isolation import solver_key

        handle = _isolated(solver_id, handle)
        solver_id = solver_key(solver_id)
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
    for check, why in _THIN_NOTES.items():
        r = next((r for r in report.results if r.check == check and r.passed
                  and r.covered is not None), None)
        if r is not None and r.covered < THIN_COVERAGE:
            report.notes.append(f"the {check} check ran on {r.covered} problem(s) only: "
                                f"{solver_id} {why} (check_solver(..., corpus=[...]))")
    if raise_on_failure and not all(r.passed != bool(r.expected) for r in report.results):
        raise CheckFailure(str(report))
    return report


def parametrize_with_checks(solvers, expected_failed_checks=None, corpus=None,
                            examples: int = 20, isolated: bool = False):
    """A ``pytest.mark.parametrize`` over every (solver, check) pair, ids
    ``<solver>-<check>``; the test receives ``solver_id`` and ``check``, a callable that
    runs that check on the default handle (or on the handle it is given)::

        from wticonv.testing import parametrize_with_checks

        @parametrize_with_checks(["myplugin.fast"], isolated=True)
        def test_conformance(solver_id, check):
            check()

    ``solvers``: solver ids of installed solvers, or solver objects (registered
    in-process, isolated). ``expected_failed_checks``: a dict check -> reason, or a
    callable solver_id -> such a dict; those pairs are marked ``xfail(strict=True)`` with
    the reason. ``isolated``: check each solver with only the built-in solvers beside it
    (see :func:`check_solver`); the handle given to ``check`` then lends its device only.
    """
    import pytest

    from wticonv.testing.isolation import solver_key

    params = []
    for solver in solvers:
        sid = solver_key(solver)
        expected = (expected_failed_checks(sid) if callable(expected_failed_checks)
                    else expected_failed_checks) or {}
        unknown = [n for n in expected if n not in CHECKS]
        if unknown:
            raise ValueError(f"expected_failed_checks of {sid} names unknown check(s) "
                             f"{', '.join(unknown)}; the checks are {', '.join(CHECKS)}")
        for name in CHECKS:
            def run(handle=None, solver=solver, name=name):
                __tracebackhide__ = True    # pytest shows the report, not the kit's frames
                check_solver(solver, handle, corpus, [name], examples=examples,
                             isolated=isolated)

            marks = ([pytest.mark.xfail(reason=expected[name], strict=True,
                                        raises=CheckFailure)] if name in expected else [])
            params.append(pytest.param(sid, run, id=f"{sid}-{name}", marks=marks))
    return pytest.mark.parametrize("solver_id, check", params)
