"""The contract's rules where the registry and selection apply them (issue 17): declared
``tolerance`` and ``max_wti`` are checked when a solver loads, and answers of the wrong
kind (``None`` from ``is_applicable``, ``"yes"`` from ``is_dynamic``) are contract
violations, reported, never read as a decline or as dynamic."""

from __future__ import annotations

import json
import math

import pytest
from wticonv import ConvProblem, Handle, PluginError, SolverWarning, hookimpl
from wticonv.contract.answers import (
    DEFAULT_TOLERANCE,
    applicable_answer,
    declared_max_wti,
    declared_tolerance,
    dynamic_answer,
    workspace_answer,
    wti_answer,
)
from wticonv.errors import ContractError
from wticonv.contract.registry import SolverRegistry

P = ConvProblem(2, 8, 9, 7, 12, 3, 3, pad_h=1, pad_w=1)


class _S:
    solver_id = "fake.s"

    @hookimpl
    def is_applicable(self, problem, device):
        return True

    @hookimpl
    def is_dynamic(self):
        return True

    @hookimpl
    def get_wti(self, problem, device):
        return 0.5

    @hookimpl
    def workspace_size(self, problem, device):
        return 0

    @hookimpl
    def run(self, problem, device, tensors, workspace):
        pass


def _with(**attrs):
    return type("T", (_S,), attrs)()


@pytest.mark.parametrize("tol", ["tight", -1.0, 0, 1.0, 2.0, math.nan, math.inf, True])
def test_a_bad_tolerance_is_refused_at_load_time(tol):
    reg = SolverRegistry(load_entry_points=False)
    with pytest.raises(PluginError, match=r"declares tolerance = .*between 0 and 1"):
        reg.register(_with(tolerance=tol))
    assert reg.ids() == []


@pytest.mark.parametrize("cap", ["big", 0, -1.0, 17.0, math.nan, False])
def test_a_bad_max_wti_is_refused_at_load_time(cap):
    reg = SolverRegistry(load_entry_points=False)
    with pytest.raises(PluginError, match=r"declares max_wti = .*at most 16"):
        reg.register(_with(max_wti=cap))


def test_good_declarations_and_their_defaults():
    assert declared_tolerance("a.b", _with(tolerance=2e-5)) == 2e-5
    assert declared_tolerance("a.b", _S()) == DEFAULT_TOLERANCE
    assert declared_max_wti("a.b", _with(max_wti=4)) == 4.0
    assert declared_max_wti("a.b", _S()) == 1.0
    reg = SolverRegistry(load_entry_points=False)
    reg.register(_with(tolerance=1e-4, max_wti=2.25))
    assert reg.ids() == ["fake.s"]


def test_bad_declarations_are_quarantined_with_the_reason(fake_dist):
    fake_dist("wticonv-fake", {"fake_decl": (
        "from wticonv_direct.naive import NaiveSolver\n"
        "class A(NaiveSolver):\n    solver_id = 'fake.tight'\n    tolerance = 'tight'\n"
        "class B(NaiveSolver):\n    solver_id = 'fake.negative'\n    tolerance = -1.0\n"
        "SOLVERS = [A(), B()]\n")}, {"decl": "fake_decl"})
    reg = SolverRegistry()
    held = {q.solver_id: q.reason for q in reg.quarantined if q.distribution == "wticonv-fake"}
    assert set(held) == {"fake.tight", "fake.negative"}
    assert "tolerance = 'tight'" in held["fake.tight"]
    assert "tolerance = -1.0" in held["fake.negative"]


@pytest.mark.parametrize("value, ok", [(True, True), (False, False), (None, None), ("no", None),
                                       (0, None), (1, None)])
def test_applicable_answers(value, ok):
    if ok is None:
        with pytest.raises(ContractError, match="is_applicable returned"):
            applicable_answer(value)
    else:
        assert applicable_answer(value) is ok


def test_dynamic_workspace_and_wti_answers():
    assert dynamic_answer(False) is False
    for bad in ("yes", 1, None):
        with pytest.raises(ContractError, match="is_dynamic returned"):
            dynamic_answer(bad)
    assert workspace_answer(4096) == 4096
    for bad in (-4, 1.0, True, None, "0"):
        with pytest.raises(ContractError, match="workspace_size returned"):
            workspace_answer(bad)
    assert wti_answer(-2.0) == -2.0 and wti_answer(3, max_wti=4.0) == 3.0
    for bad in (math.nan, math.inf, -1.0, "fast", True, 1.5):
        with pytest.raises(ContractError, match="get_wti returned"):
            wti_answer(bad)


class _ApplicableNone(_S):
    solver_id = "fake.applicable_none"

    @hookimpl
    def is_applicable(self, problem, device):
        return None


class _DynamicYes(_S):
    solver_id = "fake.dynamic_yes"

    @hookimpl
    def is_dynamic(self):
        return "yes"


@pytest.mark.parametrize("fake, said", [
    (_ApplicableNone, "is_applicable returned None"),
    (_DynamicYes, "is_dynamic returned 'yes'"),
], ids=["applicable-None", "dynamic-yes"])
def test_selection_reports_answers_of_the_wrong_kind(fake, said, handle):
    reg = SolverRegistry(load_entry_points=False)
    reg.register(fake())
    h = Handle(handle.device, reg)
    from wticonv.errors import NoApplicableSolverError

    with pytest.warns(SolverWarning, match=said), \
            pytest.raises(NoApplicableSolverError) as e:
        h.select(P)
    assert said in str(e.value)
    assert "declined (no reason given)" not in str(e.value)


def test_the_solvers_listing_shows_a_bad_is_dynamic_as_an_error(fake_dist, capsys):
    from wticonv.cli import main

    fake_dist("wticonv-yes", {"fake_yes": (
        "from wticonv_direct.naive import NaiveSolver\n"
        "class S(NaiveSolver):\n    solver_id = 'yes.dyn'\n"
        "    def is_dynamic(self):\n        return 'yes'\n"
        "from wticonv import hookimpl\nS.is_dynamic = hookimpl(S.is_dynamic)\n"
        "solver = S()\n")}, {"dyn": "fake_yes:solver"})
    assert main(["solvers", "--json"]) == 0
    rows = {r["solver"]: r for r in json.loads(capsys.readouterr().out)["solvers"]}
    assert rows["yes.dyn"]["dynamic"] == "error: is_dynamic returned 'yes', not True or False"
    assert rows["direct.naive"]["dynamic"] is True


def test_a_solver_scope_comes_from_its_attribute_else_its_docstring():
    from wticonv.contract.answers import declared_scope

    class Documented:
        """Direct convolution for 5x5 filters.   Nothing else: see the module."""

    class Declared(Documented):
        scope = "5x5 only,\n   forward"

    class Bare:
        scope = 3                       # not a string: the docstring (none) decides

    assert declared_scope(Documented()) == "Direct convolution for 5x5 filters"
    assert declared_scope(Declared()) == "5x5 only, forward"
    assert declared_scope(Bare()) == ""
