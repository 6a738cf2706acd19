"""Plugin discovery through real entry points: quarantine, env-var control, tracing.

Each test writes a throw-away distribution (a ``*.dist-info`` folder with
``entry_points.txt``, plus its modules) into a temporary folder put on ``sys.path``, which
is exactly what ``pip install`` leaves behind.
"""

from __future__ import annotations

import io

import pytest

from wticonv import ConvProblem, PluginError, hookimpl
from wticonv.contract.registry import SolverRegistry

GOOD = '''
from wticonv import hookimpl
class S:
    solver_id = "{sid}"
    @hookimpl
    def is_applicable(self, problem, device): return True
    @hookimpl
    def is_dynamic(self): return True
    @hookimpl
    def get_wti(self, problem, device): return 0.5
    @hookimpl
    def workspace_size(self, problem, device): return 0
    @hookimpl
    def run(self, problem, device, tensors, workspace): pass
solver = S()
'''


def test_broken_plugins_are_quarantined_and_never_stop_the_others(fake_dist):
    fake_dist("fake-plugins", {
        "fake_good": GOOD.format(sid="fake.good"),
        "fake_raises": "raise ImportError('libfoo.so not found')\n",
        "fake_mismatch": GOOD.format(sid="fake.mismatch").replace(
            "def get_wti(self, problem, device)", "def get_wti(self, problem, device, extra)"),
        "fake_missing": GOOD.format(sid="fake.missing").replace(
            "    @hookimpl\n    def run(self, problem, device, tensors, workspace): pass\n", ""),
        "fake_unknown": GOOD.format(sid="fake.unknown") .replace(
            "solver = S()", "S.get_speed = hookimpl(lambda self: 1)\nsolver = S()"),
        "fake_badid": GOOD.format(sid="Not An Id"),
        "fake_notsolver": "solver = 42\n",
        "fake_many": GOOD.format(sid="fake.one") + "\nclass T(S):\n    solver_id = 'fake.two'\n"
                     "SOLVERS = [S(), T()]\n",
    }, {
        "good": "fake_good:solver", "raises": "fake_raises:solver",
        "mismatch": "fake_mismatch:solver", "missing": "fake_missing:solver",
        "unknown": "fake_unknown:solver", "badid": "fake_badid:solver",
        "notsolver": "fake_notsolver:solver", "many": "fake_many",
        "dupe": "fake_good:solver",
    })
    reg = SolverRegistry()
    assert {"fake.good", "fake.one", "fake.two", "direct.naive"} <= set(reg.ids())
    reasons = {q.entry_point.split(" = ")[0]: q.reason for q in reg.quarantined
               if q.distribution == "fake-plugins"}
    # the file and line where the import failed (issue 17)
    assert reasons["raises"].startswith("failed to import: ImportError: libfoo.so not found "
                                        "(file "), reasons["raises"]
    assert reasons["raises"].endswith("fake_raises.py, line 1)"), reasons["raises"]
    assert "does not match the hook specifications" in reasons["mismatch"]
    assert "extra" in reasons["mismatch"]
    assert "does not implement the hook(s) run" in reasons["missing"]
    assert "implements unknown hook(s) get_speed" in reasons["unknown"]
    assert "solver_id 'Not An Id' is invalid" in reasons["badid"]
    assert "neither a solver" in reasons["notsolver"]
    assert "already registered by fake-plugins" in reasons["dupe"]
    assert set(reasons) == {"raises", "mismatch", "missing", "unknown", "badid", "notsolver",
                            "dupe"}
    entry = reg.get("fake.good")
    assert (entry.distribution, entry.version) == ("fake-plugins", "1.0")


def test_load_plugins_env_selects_distributions(fake_dist, monkeypatch):
    fake_dist("fake-one", {"fake_a": GOOD.format(sid="fake.a")},
              {"a": "fake_a:solver"})
    monkeypatch.setenv("WTICONV_LOAD_PLUGINS", "fake_one")
    assert SolverRegistry().ids() == ["fake.a"]
    monkeypatch.setenv("WTICONV_LOAD_PLUGINS", "wticonv-direct, fake-one")
    ids = SolverRegistry().ids()  # wticonv-direct ships several direct.* solvers
    assert "direct.naive" in ids and "fake.a" in ids
    assert all(i == "fake.a" or i.startswith("direct.") for i in ids)
    monkeypatch.setenv("WTICONV_LOAD_PLUGINS", "")
    with pytest.warns(UserWarning, match="WTICONV_LOAD_PLUGINS is set but empty"):
        assert SolverRegistry().ids() == []


def test_disable_solvers_env(monkeypatch):
    monkeypatch.setenv("WTICONV_DISABLE_SOLVERS", "direct.naive,other.x")
    with pytest.warns(UserWarning, match="names 'other.x', which is not an installed solver"):
        reg = SolverRegistry()
    assert "direct.naive" in reg.ids() and reg.disabled == {"direct.naive", "other.x"}


def test_register_by_hand_validates():
    reg = SolverRegistry(load_entry_points=False)

    class NoHooks:
        solver_id = "x.nohooks"

    with pytest.raises(PluginError, match="does not implement the hook"):
        reg.register(NoHooks())
    assert reg.ids() == []


def test_each_solver_answers_for_itself():
    reg = SolverRegistry(load_entry_points=False)
    ns: dict = {}
    exec(GOOD.format(sid="p.a"), ns)
    a = ns["solver"]
    exec(GOOD.format(sid="p.b").replace("return 0.5", "return 0.25"), ns)
    b = ns["solver"]
    reg.register(a)
    reg.register(b)
    p = ConvProblem(1, 3, 8, 8, 4, 3, 3)
    assert reg.call("p.a", "get_wti", problem=p, device=None, workspace_limit=None) == 0.5
    assert reg.call("p.b", "get_wti", problem=p, device=None, workspace_limit=None) == 0.25


def test_run_wrapper_plugin_sees_every_run():
    reg = SolverRegistry(load_entry_points=False)
    ns: dict = {}
    exec(GOOD.format(sid="p.a"), ns)
    reg.register(ns["solver"])
    seen = []

    class Tracer:
        @hookimpl(wrapper=True)
        def run(self, problem, device, tensors, workspace):
            seen.append(problem.key)
            return (yield)

    reg.register_wrapper(Tracer(), name="tracer")
    p = ConvProblem(1, 3, 8, 8, 4, 3, 3)
    reg.call("p.a", "run", problem=p, device=None, tensors=None, workspace=None)
    assert seen == [p.key]


def test_tracing_prints_hook_calls():
    out = io.StringIO()
    reg = SolverRegistry(load_entry_points=False, trace=False)
    ns: dict = {}
    exec(GOOD.format(sid="p.a"), ns)
    reg.register(ns["solver"])
    reg.enable_tracing(out)
    p = ConvProblem(1, 3, 8, 8, 4, 3, 3)
    reg.call("p.a", "get_wti", problem=p, device=None, workspace_limit=None)
    line = out.getvalue().strip()
    assert line.startswith(f"wticonv trace: p.a.get_wti(problem={p.key} workspace_limit=None "
                           "perf_config=None) -> 0.5 [")


def test_hook_api_versions_are_checked_and_mismatches_quarantined(fake_dist):
    from wticonv.contract import hookspecs
    api = 'solver = S()'
    fake_dist("fake-api", {
        "fake_old": GOOD.format(sid="fake.old").replace(api, "S.hook_api = (0,)\n" + api),
        "fake_new": GOOD.format(sid="fake.new").replace(api, "S.hook_api = (99,)\n" + api),
        "fake_bad": GOOD.format(sid="fake.bad").replace(api, "S.hook_api = 'two'\n" + api),
        "fake_empty": GOOD.format(sid="fake.empty").replace(api, "S.hook_api = ()\n" + api),
        "fake_v1": GOOD.format(sid="fake.v1").replace(api, "S.hook_api = (1,)\n" + api),
        "fake_none": GOOD.format(sid="fake.none"),
    }, {"old": "fake_old:solver", "new": "fake_new:solver", "bad": "fake_bad:solver",
        "empty": "fake_empty:solver",
        "v1": "fake_v1:solver", "none": "fake_none:solver"})
    reg = SolverRegistry()
    assert {"fake.v1", "fake.none"} <= set(reg.ids())       # v1 and unstated still load
    reasons = {q.entry_point.split(" = ")[0]: q.reason for q in reg.quarantined
               if q.distribution == "fake-api"}
    assert set(reasons) == {"old", "new", "bad", "empty"}
    assert "written for hook API 0" in reasons["old"] and "upgrade the plugin" in reasons["old"]
    assert (f"needs hook API 99; this wticonv has hook API {hookspecs.HOOK_API_VERSION}: "
            "upgrade wticonv") in reasons["new"]
    assert "must be a tuple of int versions" in reasons["bad"]
    assert "must be a tuple of int versions" in reasons["empty"]
    # every built-in solver states a version this core supports
    assert all(set(e.obj.hook_api) & set(hookspecs.COMPATIBLE_HOOK_APIS)
               for e in reg.solvers.values() if e.distribution.startswith("wticonv-"))


def test_an_unknown_solver_under_a_filter_names_the_filter(monkeypatch):
    from wticonv import SolverNotFoundError

    monkeypatch.setenv("WTICONV_LOAD_PLUGINS", "wticonv-gemm")
    reg = SolverRegistry()
    with pytest.raises(SolverNotFoundError) as e:
        reg.get("direct.naive")
    assert "a plugin filter is active, not loaded: wticonv-direct (WTICONV_LOAD_PLUGINS)" in \
        str(e.value)
