"""The conformance kit on every built-in solver, and on broken solvers it must catch."""

from __future__ import annotations

import itertools

import pytest

from wticonv import ConvProblem as P
from wticonv import Decline, Handle, hookimpl
from wticonv.contract.registry import SolverRegistry
from wticonv.testing import (CHECKS, EDGE_SHAPES, CheckFailure, check_solver,
                             parametrize_with_checks, problems)
from wticonv_direct.naive import solver as naive

BUILT_INS = ["direct.chanvec", "direct.depthwise", "direct.naive", "direct.tiled", "gemm.1x1",
             "gemm.im2col", "winograd.f2x3", "winograd.f4x3", "winograd.fused_f2x3",
             "winograd.rxs"]


@parametrize_with_checks(BUILT_INS)
def test_built_in_solvers_conform(solver_id, check, wticonv_handle):
    if solver_id == "direct.chanvec" and (wticonv_handle.device.kind != "cpu"
                                          or wticonv_handle.device.info.vector_width < 8):
        pytest.skip("direct.chanvec runs on CPUs with 8- or 16-float vectors (AVX2, AVX-512)")
    check(wticonv_handle)


#: Problems direct.chanvec accepts (K/G a multiple of 16; in backward data C/G, at stride
#: 1), at the edges the kit's default corpus covers for the other solvers: padding beyond
#: the filter, stride beyond it, 1x1 and 1xW pictures, positions across images, groups of
#: 32, the three register blocks.
CHANVEC_CORPUS = [
    P(2, 3, 4, 5, 64, 2, 2, pad_h=3, pad_w=4),
    P(3, 5, 11, 13, 32, 2, 3, stride_h=5, stride_w=4),
    P(7, 3, 1, 1, 64, 3, 3, pad_h=1, pad_w=1),
    P(2, 4, 1, 19, 96, 1, 5, pad_w=2),
    P(2, 64, 9, 7, 64, 3, 3, pad_h=1, pad_w=1, groups=2),
    P(1, 1, 23, 29, 32, 7, 7, pad_h=3, pad_w=3, stride_h=2, stride_w=2),
    P(3, 300, 3, 3, 128, 3, 3, pad_h=1, pad_w=1),
    P(2, 32, 6, 5, 48, 3, 3),
]


def test_chanvec_conforms_on_problems_it_accepts(wticonv_handle):
    """The default corpus has few problems with K/G a multiple of 16: the kit is run on
    direct.chanvec with its own corpus, every check covering every problem."""
    dev = wticonv_handle.device
    if dev.kind != "cpu" or dev.info.vector_width < 8:
        pytest.skip("direct.chanvec runs on CPUs with 8- or 16-float vectors (AVX2, AVX-512)")
    report = check_solver("direct.chanvec", wticonv_handle, corpus=CHANVEC_CORPUS,
                          examples=1)
    assert report.ok, str(report)
    reference = next(r for r in report.results if r.check == "reference")
    assert reference.covered >= len(CHANVEC_CORPUS)        # every problem, forward
    assert report.notes == []
    # a corpus it mostly declines (K/G = 8, 24; C = 3 in backward data): the report says
    # that passing means little
    thin = check_solver("direct.chanvec", wticonv_handle, checks=["reference"], examples=1,
                        corpus=[P(1, 3, 5, 5, 8, 3, 3), P(1, 8, 4, 4, 24, 1, 1),
                                P(2, 3, 4, 5, 64, 2, 2, pad_h=3, pad_w=4)])
    assert thin.ok and thin.results[0].covered < 5
    assert f"ran on {thin.results[0].covered} problem(s) only" in thin.notes[0]
    assert "note: the reference check ran on" in str(thin)


def test_the_kit_lists_its_checks_and_ids_name_solver_and_check():
    assert list(CHECKS) == ["hooks", "queries_pure", "wti", "guards", "reference", "dynamic",
                            "programs", "perf_configs", "runs_cleanly", "nan_inf",
                            "nan_inf_weights"]
    mark = parametrize_with_checks(["a.b"], expected_failed_checks={"wti": "known"})
    params = mark.args[1]
    assert [p.id for p in params] == [f"a.b-{name}" for name in CHECKS]
    assert [m.kwargs["reason"] for p in params for m in p.marks] == ["known"]


class _Like:
    """A runnable solver built on direct.naive's hooks; subclasses break one promise."""

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


class _Tunable(_Like):
    """Tunable: two perf configs, both computing what the default does."""

    solver_id = "fake.tunable"
    configs = ["one", "two"]

    @hookimpl
    def perf_configs(self, problem, device):
        return list(self.configs)

    @hookimpl
    def run(self, problem, device, tensors, workspace, perf_config):
        if perf_config != "skips":
            naive.run(problem, device, tensors, workspace)


class _BadPerfConfig(_Tunable):
    """Its perf config "skips" leaves the output unwritten (a fast wrong answer, which
    tuning would store)."""

    solver_id = "fake.bad_perf_config"
    configs = ["one", "skips"]


class _WrongOnGroups(_Tunable):
    """Its perf config "two" leaves the output unwritten on grouped problems only, which
    the first problems of the corpus (ungrouped edge shapes) never show."""

    solver_id = "fake.wrong_on_groups"

    @hookimpl
    def run(self, problem, device, tensors, workspace, perf_config):
        if perf_config != "two" or problem.groups == 1:
            naive.run(problem, device, tensors, workspace)


class _ModifiesInput(_Tunable):
    """Its perf config "two" computes the right output, then overwrites one of its
    inputs (an activation a caller still needs)."""

    solver_id = "fake.modifies_input"

    @hookimpl
    def run(self, problem, device, tensors, workspace, perf_config):
        import numpy as np
        import pyopencl as cl

        naive.run(problem, device, tensors, workspace)
        if perf_config == "two":
            given = tensors.y if problem.direction == "bwd" else tensors.x
            cl.enqueue_fill_buffer(device.queue, given, np.float32(0), 0, 4)


class _UnstableConfigs(_Tunable):
    """Lists "two" on every other call only: a tuned record of "two" would be deleted as
    not offered whenever the next call leaves it out."""

    solver_id = "fake.unstable_configs"
    calls = itertools.count()

    @hookimpl
    def perf_configs(self, problem, device):
        return ["one", "two"] if next(self.calls) % 2 else ["one"]


class _DeclinesAll(_Like):
    solver_id = "fake.declines_all"

    @hookimpl
    def is_applicable(self, problem, device):
        return Decline("nothing")


class _BadWti(_Like):
    solver_id = "fake.bad_wti"

    @hookimpl
    def get_wti(self, problem, device):
        return 3.5                          # above 1.0 with no max_wti declared


class _NoWrite(_Like):
    solver_id = "fake.no_write"

    @hookimpl
    def run(self, problem, device, tensors, workspace):
        return None                         # leaves the output as it was


class _BuildsInQueries(_Like):
    solver_id = "fake.builds_in_queries"
    calls = itertools.count()

    @hookimpl
    def is_applicable(self, problem, device):
        if problem.direction == "fwd":       # a new program on every forward query
            device.build("__kernel void k(__global float *a) { a[0] = N; }",
                         f"-DN={next(self.calls)}")
        return naive.is_applicable(problem, device)


class _NotReallyDynamic(_Like):
    solver_id = "fake.not_dynamic"

    @hookimpl
    def run(self, problem, device, tensors, workspace):
        device.build("__kernel void k(__global float *a) { a[0] = N; }",
                     f"-DN={problem.n * 100000 + problem.h * 100 + problem.w}")
        naive.run(problem, device, tensors, workspace)


class _NamesItsPrograms(_Like):
    solver_id = "fake.names_programs"

    @hookimpl
    def programs(self, problem, device):
        return naive.programs(problem, device)


class _NamesNone(_Like):
    solver_id = "fake.names_none"

    @hookimpl
    def programs(self, problem, device):
        return []                           # run builds one


class _NamesOneTooMany(_NamesItsPrograms):
    solver_id = "fake.names_too_many"

    @hookimpl
    def programs(self, problem, device):
        return naive.programs(problem, device) + [("__kernel void k() {}", "-DUNUSED=1")]


class _NamesBadly(_Like):
    solver_id = "fake.names_badly"

    @hookimpl
    def programs(self, problem, device):
        return [src for src, _ in naive.programs(problem, device)]     # sources only


@pytest.mark.parametrize("fake, failing", [
    (_Like, []),
    (_NamesItsPrograms, []),
    (_NamesNone, ["programs"]),
    (_NamesOneTooMany, ["programs"]),
    (_NamesBadly, ["programs"]),
    (_Tunable, []),
    (_BadPerfConfig, ["perf_configs"]),
    (_WrongOnGroups, ["perf_configs"]),
    (_ModifiesInput, ["perf_configs"]),
    (_BadWti, ["wti", "guards", "reference", "dynamic", "runs_cleanly", "nan_inf",
               "nan_inf_weights"]),     # set aside in selection: it can be run by none
    (_DeclinesAll, ["wti", "guards", "reference", "dynamic", "runs_cleanly",
                    "nan_inf", "nan_inf_weights"]),
    (_NoWrite, ["reference", "runs_cleanly", "nan_inf", "nan_inf_weights"]),
    (_NotReallyDynamic, ["dynamic"]),
], ids=lambda v: v if isinstance(v, list) and v else getattr(v, "solver_id", "none"))
@pytest.mark.filterwarnings("ignore::wticonv.SolverWarning")    # the set-aside ones
def test_the_kit_catches_broken_solvers(fake, failing, wticonv_handle):
    reg = SolverRegistry(load_entry_points=False)
    reg.register(fake())
    h = Handle(wticonv_handle.device, reg)
    report = check_solver(fake.solver_id, h, raise_on_failure=False, examples=5)
    failed = [r.check for r in report.results if not r.passed]
    assert failed == failing, str(report)
    for r in report.results:
        assert bool(r.message) == (not r.passed)
    if failing:
        with pytest.raises(CheckFailure, match=failing[0]):
            check_solver(fake.solver_id, h, checks=[failing[0]], examples=5)
        # an expected failure with its reason makes the report ok
        ok = check_solver(fake.solver_id, h, checks=failing, examples=5,
                          expected_failed_checks={c: "known" for c in failing})
        assert ok.ok and "failed as expected (known)" in str(ok)


def test_a_solver_declining_everything_for_one_reason_is_told_why(wticonv_handle):
    # e.g. a tensor-core solver on a CPU: still a failure (nothing was checked), with the
    # reason and where to run the kit, not the advice to fix is_applicable alone
    reg = SolverRegistry(load_entry_points=False)
    reg.register(_DeclinesAll())
    h = Handle(wticonv_handle.device, reg)
    report = check_solver(_DeclinesAll.solver_id, h, checks=["wti"], raise_on_failure=False)
    (result,) = report.results
    assert not result.passed
    assert "each with the reason 'nothing'" in result.message
    assert "run the kit on a device it runs on" in result.message


def test_the_kit_catches_builds_in_query_hooks(wticonv_handle):
    reg = SolverRegistry(load_entry_points=False)
    reg.register(_BuildsInQueries())
    h = Handle(wticonv_handle.device, reg)
    one = [EDGE_SHAPES["groups 4"]]          # 2 builds: one per forward query
    with pytest.raises(CheckFailure, match="the query hooks built 2 program"):
        check_solver(_BuildsInQueries.solver_id, h, corpus=one, checks=["queries_pure"])


class _WritesPastItsOutput(_Like):
    """Computes the right answer, then writes one float past the end of its output."""

    solver_id = "fake.writes_past"

    @hookimpl
    def run(self, problem, device, tensors, workspace):
        import numpy as np

        naive.run(problem, device, tensors, workspace)
        out = {"fwd": tensors.y, "bwd": tensors.x, "wrw": tensors.w}[problem.direction]
        import pyopencl as cl

        prog = device.build("__kernel void past(__global float *a, long n) { a[n] = 1.0f; }")
        device.enqueue_kernel(cl.Kernel(prog, "past"), (1,), None, out,
                              np.int64(out.size // 4))


def test_the_kit_catches_writes_outside_the_output(wticonv_handle):
    # Every check hands the solver outputs with guards around them: each fails cleanly,
    # none corrupts the process.
    reg = SolverRegistry(load_entry_points=False)
    reg.register(_WritesPastItsOutput())
    h = Handle(wticonv_handle.device, reg)
    report = check_solver(_WritesPastItsOutput.solver_id, h, raise_on_failure=False,
                          corpus=[EDGE_SHAPES["groups 4"]], examples=3)
    failed = {r.check: r.message for r in report.results if not r.passed}
    assert set(failed) == set(CHECKS) - {"hooks", "queries_pure", "wti", "programs",
                                         "perf_configs"}
    assert all("wrote outside its output tensor" in m for m in failed.values())


def test_unknown_checks_and_solvers_are_refused(wticonv_handle):
    from wticonv import SolverNotFoundError

    with pytest.raises(ValueError, match="unknown check"):
        check_solver("direct.naive", wticonv_handle, checks=["nope"])
    with pytest.raises(ValueError, match="unknown check"):
        parametrize_with_checks(["a.b"], expected_failed_checks={"wtii": "typo"})
    with pytest.raises(SolverNotFoundError, match="direct.naive"):
        check_solver("no.such", wticonv_handle)


def test_the_kit_says_why_a_solver_was_quarantined(fake_dist, wticonv_handle):
    from wticonv import SolverNotFoundError

    fake_dist("fake-old-api", {"fake_old_api": "from wticonv_direct.naive import NaiveSolver\n"
                               "class S(NaiveSolver):\n    solver_id = 'fake.old_api'\n"
                               "    hook_api = (0,)\nsolver = S()\n"},
              {"old": "fake_old_api:solver"})
    h = Handle(wticonv_handle.device, SolverRegistry())
    with pytest.raises(SolverNotFoundError, match="written for hook API 0"):
        check_solver("fake.old_api", h)


def test_the_problem_strategy_draws_valid_problems_in_every_direction():
    from hypothesis import given, settings

    seen = set()

    @settings(max_examples=200, derandomize=True, database=None, deadline=None)
    @given(problems())
    def draw(p):
        assert p.ho >= 1 and p.wo >= 1 and p.c % p.groups == 0 and p.k % p.groups == 0
        seen.add((p.direction, p.groups == p.c and p.groups > 1, p.r))

    draw()
    assert {d for d, _, _ in seen} == {"fwd", "bwd", "wrw"}
    assert any(dw for _, dw, _ in seen) and {1, 3, 7} <= {r for _, _, r in seen}


def test_new_solver_skeleton_passes_the_kit_unchanged(tmp_path, fake_dist, monkeypatch,
                                                        capsys, wticonv_handle):
    """`wticonv new-solver` writes a plugin that, once installed (its entry point declared
    as pip would), is listed, ranked and passes every conformance check."""
    import re
    import sys

    from wticonv.cli import main

    assert main(["new-solver", "skel", "--dir", str(tmp_path)]) == 0
    root = tmp_path / "wticonv-skel"
    assert f"created {root}" in capsys.readouterr().out
    assert {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()} == {
        "pyproject.toml", "README.md", "src/wticonv_skel/__init__.py",
        "src/wticonv_skel/solver.py", "src/wticonv_skel/kernels/skel.cl",
        "tests/test_conformance.py"}
    pyproject = (root / "pyproject.toml").read_text()
    group = re.search(r'\[project\.entry-points\."wticonv\.solvers"\]\n(\w+) = "(.+)"', pyproject)
    assert group and group.groups() == ("direct", "wticonv_skel.solver:solver")
    target = group.group(2)
    monkeypatch.syspath_prepend(str(root / "src"))
    fake_dist("wticonv-skel", {}, {"direct": target})
    h = Handle(wticonv_handle.device, SolverRegistry())
    assert "skel.direct" in h.registry.ids() and not [
        q for q in h.registry.quarantined if q.distribution == "wticonv-skel"]
    p = EDGE_SHAPES["groups 4"]
    assert any(v.solver_id == "skel.direct" and v.rank for v in h.select(p).verdicts)
    report = check_solver("skel.direct", h)
    assert report.ok and all(r.passed for r in report.results), str(report)
    assert main(["new-solver", "skel", "--dir", str(tmp_path)]) == 2       # exists
    assert "already exists" in capsys.readouterr().err
    assert main(["new-solver", "Bad-Name", "--dir", str(tmp_path)]) == 2
    assert "invalid" in capsys.readouterr().err
    sys.modules.pop("wticonv_skel.solver", None)
    sys.modules.pop("wticonv_skel", None)



def test_a_fresh_cache_does_not_fail_queries_pure(tmp_path, wticonv_handle):
    """On a cache with no device figures, the first get_wti would measure the launch
    overhead (a kernel built); the kit measures the figures before its checks, so that
    queries_pure does not blame the solver for it."""
    from wticonv.db.store import Store
    from wticonv.runtime.device import select_device

    fresh = Store(tmp_path / "cache")
    assert fresh.get_launch_overhead(wticonv_handle.device.key) is None
    handle = Handle(select_device(wticonv_handle.device.info.index, fresh))
    report = check_solver("direct.naive", handle, checks=["queries_pure"], examples=1)
    assert report.ok and report.results[0].covered > 0
    assert fresh.get_launch_overhead(wticonv_handle.device.key) is not None


@pytest.mark.filterwarnings("ignore::wticonv.SolverWarning")
def test_the_kit_catches_perf_configs_that_change_between_calls(wticonv_handle):
    reg = SolverRegistry(load_entry_points=False)
    reg.register(_UnstableConfigs())
    h = Handle(wticonv_handle.device, reg)
    report = check_solver(_UnstableConfigs.solver_id, h, raise_on_failure=False,
                          checks=["queries_pure"], examples=1)
    assert not report.ok
    assert "perf_configs answered ['one'" in report.results[0].message or \
        "perf_configs answered ['one', 'two']" in report.results[0].message


def test_a_tunable_solver_listing_few_perf_configs_gets_a_note(wticonv_handle):
    """gemm.1x1 lists perf configs (several GEMM blockings) only on problems large enough
    for them: on the default corpus, one or two; on its own corpus of larger 1x1 layers,
    every problem, in every direction."""
    thin = check_solver("gemm.1x1", wticonv_handle, checks=["perf_configs"], examples=1)
    assert thin.ok
    if thin.results[0].covered < 5:
        assert "the perf_configs check ran on" in str(thin)
    wide = check_solver("gemm.1x1", wticonv_handle, checks=["perf_configs"], examples=1,
                        corpus=[P(8, 128, 28, 28, 128, 1, 1), P(4, 256, 14, 14, 384, 1, 1),
                                P(8, 96, 30, 20, 160, 1, 1, stride_h=2, stride_w=2)])
    if wticonv_handle.device.kind == "cpu":
        assert wide.ok and wide.results[0].covered >= 5 and wide.notes == [], str(wide)


def test_perf_configs_check_spreads_a_large_corpus():
    """Over PERF_CONFIG_PROBLEMS problems: each direction's largest, the rest spread, no
    problem twice; at most that many: all of them, in order."""
    from wticonv.testing import checks

    many = [P(n, 4, 6, 6, 4, 3, 3).with_direction(d)
            for n in range(1, 31) for d in ("fwd", "bwd", "wrw")]
    picked = checks._spread(many, 20)
    assert len(picked) == len(set(picked)) == 20
    for d in ("fwd", "bwd", "wrw"):
        assert P(30, 4, 6, 6, 4, 3, 3).with_direction(d) in picked
    assert picked[3:] == sorted(picked[3:], key=many.index)     # evenly over the list
    assert checks._spread(many[:7], 20) == many[:7]
