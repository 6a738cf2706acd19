"""The kit in isolation, its in-process ``register`` path, and its declared dependencies
(issue 17: a plugin's kit tests saw every other installed plugin, and the kit needed
hypothesis without any extra declaring it)."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import pytest
import tomllib
from wticonv import hookimpl
from wticonv.contract.registry import BUILT_IN_DISTRIBUTIONS
from wticonv.testing import (
    EDGE_SHAPES,
    CheckFailure,
    check_solver,
    isolated_handle,
    parametrize_with_checks,
)
from wticonv_direct.naive import solver as naive

CORE = Path(__file__).resolve().parents[1]

NOISY = '''
from wticonv import hookimpl
from wticonv_direct.naive import NaiveSolver
class Noisy(NaiveSolver):
    solver_id = "noisy.raises"
    @hookimpl
    def get_wti(self, problem, device):
        raise RuntimeError("noisy plugin: get_wti is broken")
solver = Noisy()
'''


class _Mine:
    """A solver that is not installed: direct.naive's hooks under another id."""

    solver_id = "mine.naive"
    hook_api = (2,)

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


def test_an_isolated_handle_holds_the_solver_and_the_built_ins_only(fake_dist, handle):
    fake_dist("wticonv-noisy", {"fake_noisy": NOISY}, {"raises": "fake_noisy:solver"})
    h = isolated_handle("direct.tiled", device=handle)
    dists = {e.distribution for e in h.registry.solvers.values()}
    assert dists <= set(BUILT_IN_DISTRIBUTIONS) and "direct.tiled" in h.registry.ids()
    assert "noisy.raises" not in h.registry.ids()
    bare = isolated_handle(_Mine(), device=handle, built_ins=False)
    assert bare.registry.ids() == ["mine.naive"]


def test_isolated_checks_see_no_other_plugin_even_under_w_error(fake_dist, handle):
    # The noisy plugin's faults would warn in every selection that asks it.
    fake_dist("wticonv-noisy", {"fake_noisy": NOISY}, {"raises": "fake_noisy:solver"})
    one = [EDGE_SHAPES["groups 4"]]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        report = check_solver("direct.naive", handle, corpus=one, examples=2, isolated=True)
    assert report.ok and all(r.passed for r in report.results), str(report)


def test_a_solver_object_is_checked_in_process_without_installing_it(handle):
    report = check_solver(_Mine(), handle, corpus=[EDGE_SHAPES["groups 4"]], examples=2)
    assert report.solver_id == "mine.naive" and report.ok, str(report)
    covered = {r.check: r.covered for r in report.results}
    assert covered["wti"] == 3 and 3 <= covered["reference"] <= 3 + 2
    assert "passed (3 problems)" in str(report)


def test_parametrize_takes_solver_objects_and_the_isolated_flag(handle):
    mark = parametrize_with_checks([_Mine()], isolated=True,
                                   corpus=[EDGE_SHAPES["groups 4"]], examples=1)
    params = mark.args[1]
    assert params[0].id == "mine.naive-hooks"
    sid, check = params[2].values                  # the "wti" check
    assert sid == "mine.naive"
    check(handle)                                  # runs, and passes


def test_the_testing_extra_declares_hypothesis_and_pytest():
    meta = tomllib.loads((CORE / "pyproject.toml").read_text())
    testing = meta["project"]["optional-dependencies"]["testing"]
    names = {req.split(">")[0].split("=")[0].split("[")[0].strip() for req in testing}
    assert {"hypothesis", "pytest"} <= names


def test_without_hypothesis_the_kit_says_which_extra_to_install(handle, monkeypatch):
    monkeypatch.setitem(sys.modules, "hypothesis", None)      # import hypothesis fails
    with pytest.raises(CheckFailure, match=r'pip install "wticonv\[testing\]"'):
        check_solver("direct.naive", handle, checks=["reference"],
                     corpus=[EDGE_SHAPES["groups 4"]])
    from wticonv.testing import problems

    with pytest.raises(ModuleNotFoundError, match=r'wticonv\[testing\]'):
        problems()
