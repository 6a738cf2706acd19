"""The kit calls every hook itself on every corpus problem and names each bad answer.

Each solver below passed all nine checks before the kit validated answers itself (issue
17): it learnt which problems a solver accepts through ``handle.select``, which quietly
set a badly answering solver aside, and averaged the query budget over quick declines.
"""

from __future__ import annotations

import time

import pytest
from wticonv import Decline, Handle, hookimpl
from wticonv.contract.registry import SolverRegistry
from wticonv.testing import EDGE_SHAPES, CheckFailure, check_solver, default_corpus
from wticonv_direct.naive import solver as naive


class _Like:
    """A correct solver built on direct.naive's hooks; subclasses break one promise."""

    solver_id = "fake.like"
    tolerance = 1e-5

    @hookimpl
    def is_applicable(self, problem, device):
        return naive.is_applicable(problem, device)

    @hookimpl
    def is_dynamic(self):
        return True

    @hookimpl
    def get_wti(self, problem, device):
        return naive.get_wti(problem, device)

    @hookimpl
    def workspace_size(self, problem, device):
        return 0

    @hookimpl
    def run(self, problem, device, tensors, workspace):
        naive.run(problem, device, tensors, workspace)


class _NanOnStride2(_Like):
    solver_id = "fake.nan_stride2"

    @hookimpl
    def get_wti(self, problem, device):
        return float("nan") if problem.stride_h == 2 else 0.01


class _NegativeWorkspaceN1(_Like):
    solver_id = "fake.negative_ws_n1"

    @hookimpl
    def workspace_size(self, problem, device):
        return -4 if problem.n == 1 else 0


class _StringWtiC32(_Like):
    solver_id = "fake.string_wti_c32"

    @hookimpl
    def get_wti(self, problem, device):
        return "fast" if problem.c == 32 else 0.01


class _NegativeWorkspaceAlways(_Like):
    solver_id = "fake.negative_ws"

    @hookimpl
    def workspace_size(self, problem, device):
        return -4


class _ApplicableNone(_Like):
    solver_id = "fake.applicable_none"

    @hookimpl
    def is_applicable(self, problem, device):
        return None if problem.direction == "bwd" else True


class _DynamicYes(_Like):
    solver_id = "fake.dynamic_yes"

    @hookimpl
    def is_dynamic(self):
        return "yes"


def _handle(base, *solvers) -> Handle:
    reg = SolverRegistry(load_entry_points=False)
    for s in solvers:
        reg.register(s)
    return Handle(base.device, reg)


@pytest.mark.parametrize("fake, hook, value, where", [
    (_NanOnStride2, "get_wti", "nan", lambda p: p.stride_h == 2),
    (_NegativeWorkspaceN1, "workspace_size", "-4", lambda p: p.n == 1),
    (_StringWtiC32, "get_wti", "'fast'", lambda p: p.c == 32),
    (_NegativeWorkspaceAlways, "workspace_size", "-4", lambda p: True),
    (_ApplicableNone, "is_applicable", "None", lambda p: p.direction == "bwd"),
], ids=lambda v: getattr(v, "solver_id", None))
@pytest.mark.filterwarnings("ignore::wticonv.SolverWarning")
def test_the_wti_check_names_the_hook_the_problem_and_the_value(fake, hook, value, where,
                                                                  wticonv_handle):
    h = _handle(wticonv_handle, fake())
    with pytest.raises(CheckFailure) as e:
        check_solver(fake.solver_id, h, checks=["wti"])
    msg = str(e.value)
    assert f"{hook} returned {value}" in msg, msg
    key = msg.split(" on ")[1].split()[0]
    bad = [p for p in default_corpus() for d in ("fwd", "bwd", "wrw")
           if where(p.with_direction(d)) and p.with_direction(d).key == key]
    assert bad, f"the problem named, {key}, is not one the fault shows on"
    assert "accepts none" not in msg


@pytest.mark.filterwarnings("ignore::wticonv.SolverWarning")
def test_a_bad_answer_fails_every_check_that_runs_problems_with_its_name(wticonv_handle):
    # Nothing is skipped quietly: checks that run the accepted problems report the answer
    # that stops them, not "accepts none ... fix is_applicable / get_wti".
    h = _handle(wticonv_handle, _NegativeWorkspaceAlways())
    report = check_solver(_NegativeWorkspaceAlways.solver_id, h, raise_on_failure=False,
                          corpus=[EDGE_SHAPES["groups 4"]], examples=2)
    failed = {r.check: r.message for r in report.results if not r.passed}
    assert set(failed) >= {"wti", "guards", "reference", "runs_cleanly"}
    assert all("workspace_size returned -4" in m for m in failed.values()), failed


@pytest.mark.filterwarnings("ignore::wticonv.SolverWarning")
def test_is_dynamic_must_answer_a_bool(wticonv_handle):
    h = _handle(wticonv_handle, _DynamicYes())
    with pytest.raises(CheckFailure, match="is_dynamic returned 'yes', not True or False"):
        check_solver(_DynamicYes.solver_id, h, checks=["hooks"])


class _SlowWtiFewAccepted(_Like):
    """Accepts three problems of the corpus, and spends 10 ms in get_wti on each."""

    solver_id = "fake.slow_wti"

    @hookimpl
    def is_applicable(self, problem, device):
        if problem.direction != "fwd" or problem.groups != 1 or problem.r != 3:
            return Decline("forward 3x3 only")
        return True

    @hookimpl
    def get_wti(self, problem, device):
        time.sleep(0.010)
        return 0.01


def test_queries_pure_budgets_each_hook_per_call_on_accepted_problems(wticonv_handle):
    h = _handle(wticonv_handle, _SlowWtiFewAccepted())
    with pytest.raises(CheckFailure, match=r"get_wti took 1\d\.\d+ ms per call on "):
        check_solver(_SlowWtiFewAccepted.solver_id, h, checks=["queries_pure"])


class _Loose(_Like):
    solver_id = "fake.loose"
    tolerance = 0.5                 # loads (below 1), but is far looser than the kit takes


class _LooseQuarter(_Loose):
    solver_id = "fake.loose_quarter"

    @hookimpl
    def run(self, problem, device, tensors, workspace):
        import numpy as np
        import pyopencl as cl

        out = {"fwd": tensors.y, "bwd": tensors.x, "wrw": tensors.w}[problem.direction]
        cl.enqueue_fill_buffer(device.queue, out, np.float32(0.25), 0, out.size)


@pytest.mark.parametrize("fake", [_Loose, _LooseQuarter], ids=lambda f: f.solver_id)
def test_the_reference_check_flags_a_tolerance_looser_than_the_kit_accepts(fake,
                                                                           wticonv_handle):
    from wticonv.contract.answers import KIT_TOLERANCE_LIMIT

    h = _handle(wticonv_handle, fake())
    with pytest.raises(CheckFailure, match=rf"tolerance 0.5 is looser than the kit accepts "
                                           rf"for math class 'fp32' "
                                           rf"\({KIT_TOLERANCE_LIMIT:g}\)"):
        check_solver(fake.solver_id, h, checks=["reference"], examples=2)


class _Tf32(_Like):
    """Declares the tf32 class with a tolerance looser than FP32's limit, within tf32's
    (its results are the naive kernel's, so they meet it)."""

    solver_id = "fake.tf32"
    math = "tf32"
    tolerance = 5e-3


class _Tf32TooLoose(_Tf32):
    solver_id = "fake.tf32_too_loose"
    tolerance = 0.05


def test_the_reference_check_holds_each_math_class_to_its_own_limit(wticonv_handle):
    from wticonv.contract.answers import CLASS_KIT_TOLERANCE_LIMIT

    assert CLASS_KIT_TOLERANCE_LIMIT["fp32"] < _Tf32.tolerance < CLASS_KIT_TOLERANCE_LIMIT["tf32"]
    h = _handle(wticonv_handle, _Tf32(), _Tf32TooLoose())
    report = check_solver(_Tf32.solver_id, h, checks=["reference"], examples=2)
    assert report.ok and [(r.check, r.passed) for r in report.results] == [("reference", True)]
    with pytest.raises(CheckFailure, match=r"tolerance 0.05 is looser than the kit accepts "
                                           r"for math class 'tf32' \(0.01\)"):
        check_solver(_Tf32TooLoose.solver_id, h, checks=["reference"], examples=2)
