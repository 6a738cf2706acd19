"""Immediate-mode ranking: order, tie-breaks, limits, explanations, misbehaving solvers.

The solvers here are small Python objects with real hook implementations registered in a
registry without entry points; ranking needs no device, only its peak figure.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from wticonv import (ConvProblem, Decline, NoApplicableSolverError, SolverNotApplicableError,
                     SolverNotFoundError, SolverWarning, hookimpl)
from wticonv.contract.registry import SolverRegistry
from wticonv.selection.ranking import select

DEVICE = SimpleNamespace(peak_flops=1e12, kind="cpu", store=None,
                         info=SimpleNamespace(max_alloc_bytes=2**34))
PROBLEM = ConvProblem(n=2, c=16, h=14, w=14, k=32, r=3, s=3, pad_h=1, pad_w=1)


class Fake:
    def __init__(self, sid, wti=0.5, workspace=0, dynamic=True, applicable=True):
        self.solver_id = sid
        self._wti, self._ws, self._dyn, self._app = wti, workspace, dynamic, applicable

    @hookimpl
    def is_applicable(self, problem, device):
        return self._app() if callable(self._app) else self._app

    @hookimpl
    def is_dynamic(self):
        return self._dyn

    @hookimpl
    def get_wti(self, problem, device):
        return self._wti() if callable(self._wti) else self._wti

    @hookimpl
    def workspace_size(self, problem, device):
        return self._ws

    @hookimpl
    def run(self, problem, device, tensors, workspace):
        return None


def registry(*solvers, disabled=()):
    reg = SolverRegistry(load_entry_points=False, disabled=disabled, trace=False)
    for s in solvers:
        reg.register(s)
    return reg


def order(sel):
    return [v.solver_id for v in sel.candidates]


def test_largest_wti_wins():
    sel = select(registry(Fake("a.slow", 0.1), Fake("b.fast", 0.9), Fake("c.mid", 0.5)),
                 PROBLEM, DEVICE)
    assert sel.solver_id == "b.fast"
    assert order(sel) == ["b.fast", "c.mid", "a.slow"]
    assert [v.rank for v in sel.candidates] == [1, 2, 3]


def test_equal_wti_then_smallest_workspace_then_id():
    sel = select(registry(Fake("z.big", 0.5, workspace=4096), Fake("y.none", 0.5, 0),
                          Fake("x.none", 0.5, 0), Fake("w.small", 0.5, 16)), PROBLEM, DEVICE)
    assert order(sel) == ["x.none", "y.none", "w.small", "z.big"]


def test_winograd_like_wti_above_one_is_allowed_and_wins():
    wino = Fake("w.wino", 1.7)
    wino.max_wti = 2.25                      # declared: its transform saves multiplications
    sel = select(registry(Fake("g.gemm", 0.8), wino), PROBLEM, DEVICE)
    assert sel.solver_id == "w.wino"


def test_wti_above_an_undeclared_cap_sets_the_solver_aside():
    with pytest.warns(SolverWarning, match="above the solver's max_wti 1.0"):
        sel = select(registry(Fake("g.gemm", 0.8), Fake("w.boast", 1.7)), PROBLEM, DEVICE)
    assert sel.solver_id == "g.gemm"


def test_workspace_limit_excludes_and_explains():
    sel = select(registry(Fake("a.big", 0.9, workspace=1 << 20), Fake("b.small", 0.2, 64)),
                 PROBLEM, DEVICE, workspace_limit=1024)
    assert sel.solver_id == "b.small"
    big = next(v for v in sel.verdicts if v.solver_id == "a.big")
    assert big.applicable and big.rank is None
    assert big.reason == "needs 1048576 bytes of workspace, over the limit of 1024"
    # explain --json says in one field which solvers the fallback may choose
    rows = {r["solver_id"]: r for r in sel.to_dict()["solvers"]}
    assert rows["a.big"]["applicable"] is True and rows["a.big"]["candidate"] is False
    assert rows["b.small"]["candidate"] is True


def test_non_dynamic_and_unknown_wti_are_not_candidates():
    sel = select(registry(Fake("a.static", 0.9, dynamic=False), Fake("b.unknown", -2.0),
                          Fake("c.ok", 0.01)), PROBLEM, DEVICE)
    assert order(sel) == ["c.ok"]
    reasons = {v.solver_id: v.reason for v in sel.verdicts}
    assert reasons["a.static"] == "not dynamic: runs only when forced"
    assert reasons["b.unknown"] == "WTI unknown (-2.0)"


def test_predicted_time_from_wti_and_peak():
    sel = select(registry(Fake("a.x", 0.25)), PROBLEM, DEVICE)
    v = sel.chosen
    assert v.predicted_ms == pytest.approx(PROBLEM.flops / (1e12 * 0.25) * 1e3)
    assert v.wti_source == "model"


def test_decline_reason_and_no_candidate_error_lists_every_solver():
    reg = registry(Fake("a.only3x3", applicable=Decline("only 3x3 filters")),
                   Fake("b.plain", applicable=False), Fake("c.static", dynamic=False))
    with pytest.raises(NoApplicableSolverError) as e:
        select(reg, PROBLEM, DEVICE)
    msg = str(e.value)
    assert PROBLEM.key in msg
    assert "a.only3x3: only 3x3 filters" in msg
    assert "b.plain: declined (no reason given)" in msg
    assert "c.static: not dynamic" in msg


def test_forced_solver_beats_ranking_and_may_be_static():
    reg = registry(Fake("a.fast", 0.9), Fake("b.static", 0.1, dynamic=False))
    sel = select(reg, PROBLEM, DEVICE, solver="b.static")
    assert sel.mode == "forced" and sel.solver_id == "b.static"
    assert sel.verdicts[0].solver_id == "b.static"


def test_forced_solver_errors():
    reg = registry(Fake("a.no", applicable=Decline("needs stride 1")),
                   Fake("b.big", workspace=100))
    with pytest.raises(SolverNotFoundError, match="installed solvers: a.no, b.big"):
        select(reg, PROBLEM, DEVICE, solver="zz.missing")
    with pytest.raises(SolverNotApplicableError, match="needs stride 1"):
        select(reg, PROBLEM, DEVICE, solver="a.no")
    with pytest.raises(SolverNotApplicableError, match="100 bytes of workspace"):
        select(reg, PROBLEM, DEVICE, solver="b.big", workspace_limit=10)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -0.5, "fast", None])
def test_bad_wti_sets_solver_aside_with_warning(bad):
    reg = registry(Fake("a.bad", wti=bad), Fake("b.ok", 0.1))
    with pytest.warns(SolverWarning, match="a.bad"):
        sel = select(reg, PROBLEM, DEVICE)
    assert sel.solver_id == "b.ok"
    v = next(v for v in sel.verdicts if v.solver_id == "a.bad")
    assert not v.applicable and v.reason.startswith("get_wti failed")


def test_raising_hook_sets_solver_aside_with_warning():
    def boom():
        raise RuntimeError("kaput")

    reg = registry(Fake("a.raises", applicable=boom), Fake("b.ok", 0.1))
    with pytest.warns(SolverWarning, match="kaput"):
        sel = select(reg, PROBLEM, DEVICE)
    assert sel.solver_id == "b.ok"
    assert "is_applicable failed: RuntimeError: kaput" in sel.verdicts[-1].reason


def test_disabled_solver_is_explained_not_chosen():
    reg = registry(Fake("a.fast", 0.9), Fake("b.slow", 0.1), disabled=["a.fast"])
    sel = select(reg, PROBLEM, DEVICE)
    assert sel.solver_id == "b.slow"
    assert next(v for v in sel.verdicts if v.solver_id == "a.fast").reason.startswith(
        "disabled")


def test_bad_workspace_limit_is_rejected():
    with pytest.raises(ValueError, match="workspace_limit"):
        select(registry(Fake("a.x")), PROBLEM, DEVICE, workspace_limit=-1)


def test_selection_to_dict_is_complete():
    d = select(registry(Fake("a.x", 0.3, 8)), PROBLEM, DEVICE).to_dict()
    assert d["problem"] == PROBLEM.key and d["chosen"] == "a.x"
    assert d["solvers"][0]["wti"] == 0.3 and d["solvers"][0]["workspace"] == 8


def test_forcing_a_solver_warns_about_it_alone():
    # issue 17: `conv -S one.solver` printed every other broken solver's warnings.
    import warnings

    def boom():
        raise RuntimeError("kaput")

    reg = registry(Fake("a.broken", applicable=boom), Fake("b.ok", 0.1))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        sel = select(reg, PROBLEM, DEVICE, solver="b.ok")
    assert sel.solver_id == "b.ok" and not seen
    broken = next(v for v in sel.verdicts if v.solver_id == "a.broken")
    assert "is_applicable failed: RuntimeError: kaput" in broken.reason   # still explained
    with pytest.warns(SolverWarning, match="kaput"):
        select(reg, PROBLEM, DEVICE)                  # not forced: it warns


def test_debug_adds_the_traceback_to_a_set_aside_solvers_warning(monkeypatch):
    def boom():
        raise RuntimeError("kaput")

    reg = registry(Fake("a.raises", applicable=boom), Fake("b.ok", 0.1))
    with pytest.warns(SolverWarning) as seen:
        select(reg, PROBLEM, DEVICE)
    assert "Traceback" not in str(seen[0].message)
    monkeypatch.setenv("WTICONV_DEBUG", "1")
    with pytest.warns(SolverWarning) as seen:
        select(reg, PROBLEM, DEVICE)
    text = str(seen[0].message)
    assert "Traceback (most recent call last)" in text and "RuntimeError: kaput" in text
