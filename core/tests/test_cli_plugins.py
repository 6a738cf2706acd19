"""The plugin commands (issue 17): ``wticonv plugins``, ``check``, ``install`` and
``uninstall``, the ``--no-plugin`` and ``--debug`` switches, and the hint shown while
``WTICONV_LOAD_PLUGINS`` filters."""

from __future__ import annotations

import json
import os
import shutil
import sys

from wticonv.cli import main

GOOD = '''
from wticonv_direct.naive import NaiveSolver
class S(NaiveSolver):
    solver_id = "{sid}"
    tolerance = 2e-5
solver = S()
'''
IMPOSTOR = GOOD.format(sid="direct.naive")


def _json(capsys):
    return json.loads(capsys.readouterr().out)


def test_plugins_lists_distributions_solvers_hooks_and_quarantines(fake_dist, capsys):
    fake_dist("wticonv-acme", {"fake_acme": GOOD.format(sid="acme.conv"),
                               "fake_impostor": IMPOSTOR},
              {"conv": "fake_acme:solver", "naive": "fake_impostor:solver"})
    assert main(["plugins", "--json"]) == 0
    rows = {d["name"]: d for d in _json(capsys)}
    assert set(rows) == {"wticonv-acme"}                     # built-ins: with --all only
    acme = rows["wticonv-acme"]
    (s,) = acme["solvers"]
    assert s["solver_id"] == "acme.conv" and s["tolerance"] == 2e-5 and s["max_wti"] == 1.0
    assert s["hooks"] == ["get_wti", "is_applicable", "is_dynamic", "programs", "run",
                          "workspace_size"]
    assert s["hook_api"] == [1, 2] and s["tunable"] is False and s["dynamic"] is True
    (q,) = acme["quarantined"]
    assert q["solver_id"] == "direct.naive" and "belongs to the distribution" in q["reason"]
    assert main(["plugins", "--all", "--json"]) == 0
    rows = {d["name"]: d for d in _json(capsys)}
    assert rows["wticonv-direct"]["built_in"] and "wticonv-acme" in rows
    assert main(["plugins"]) == 0
    out = capsys.readouterr().out
    assert "acme.conv: dynamic; hook API 1, 2; tolerance 2e-05; max_wti 1; math fp32" in out
    assert "QUARANTINED naive = fake_impostor:solver (solver direct.naive)" in out


def test_an_empty_load_filter_prints_a_hint_and_plugins_all_shows_what_it_skips(monkeypatch,
                                                                                capsys):
    monkeypatch.setenv("WTICONV_LOAD_PLUGINS", "")
    assert main(["plugins", "--all", "--json"]) == 0
    captured = capsys.readouterr()
    assert "WTICONV_LOAD_PLUGINS is set but empty" in captured.err
    assert "a plugin filter is active; not loaded: wticonv-direct (WTICONV_LOAD_PLUGINS)" in \
        captured.err
    rows = {d["name"]: d for d in json.loads(captured.out)}
    assert rows["wticonv-direct"]["skipped"] == "WTICONV_LOAD_PLUGINS"
    assert rows["wticonv-direct"]["solvers"] == []


def test_no_plugin_skips_a_distribution_for_one_run(capsys):
    assert main(["--no-plugin", "wticonv-winograd", "solvers", "--json"]) == 0
    captured = capsys.readouterr()
    ids = {r["solver"] for r in json.loads(captured.out)["solvers"]}
    assert "direct.naive" in ids and not {i for i in ids if i.startswith("winograd.")}
    assert "not loaded: wticonv-winograd (--no-plugin" in captured.err
    assert "WTICONV_NO_PLUGINS" not in os.environ          # one run only
    assert main(["solvers", "--json"]) == 0
    assert "winograd.f2x3" in {r["solver"] for r in _json(capsys)["solvers"]}


def test_check_runs_the_kit_and_says_what_each_check_covered(capsys):
    assert main(["check", "direct.naive", "--check", "hooks", "--check", "wti",
                 "--check", "queries_pure"]) == 0
    out = capsys.readouterr().out
    from wticonv.testing.kit import default_corpus

    n = 3 * len(default_corpus())                # the corpus, in every direction
    assert n == 3 * 28
    assert f"wti              passed ({n} problems)" in out, out
    assert f"queries_pure     passed ({n} problems)" in out
    assert "1 of 1 solver(s) conform" in out and "isolated" in out


def test_check_a_distribution_with_a_quarantined_entry_fails(fake_dist, capsys):
    fake_dist("wticonv-broken", {"fake_impostor": IMPOSTOR}, {"naive": "fake_impostor:solver"})
    assert main(["check", "wticonv-broken", "--check", "hooks"]) == 1
    out = capsys.readouterr().out
    assert "QUARANTINED naive = fake_impostor:solver (wticonv-broken, solver direct.naive)" in out
    assert main(["check", "no-such-thing"]) == 2
    assert "neither an installed solver nor a distribution" in capsys.readouterr().err
    assert main(["check", "direct.naive", "--check", "nope"]) == 2


def test_install_and_uninstall_wrap_pip_and_report_solvers(fake_dist, monkeypatch, capsys):
    from wticonv.cli import plugins

    site = fake_dist("wticonv-acme", {"fake_acme": GOOD.format(sid="acme.conv")}, {})
    info = site / "wticonv_acme-1.0.dist-info"
    shutil.rmtree(info)                               # not installed yet
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), *sys.path]))
    calls = []

    def pip(args):
        calls.append(plugins.pip_command(args))
        if args[0] == "install":
            fake_dist("wticonv-acme", {}, {"conv": "fake_acme:solver"})
        else:
            shutil.rmtree(info)
        return 0

    monkeypatch.setattr(plugins, "_pip", pip)
    assert main(["install", "wticonv-acme", "--upgrade"]) == 0
    assert "solver added: acme.conv (wticonv-acme 1.0)" in capsys.readouterr().out
    assert main(["uninstall", "wticonv-acme"]) == 0
    assert "solver removed: acme.conv (wticonv-acme 1.0)" in capsys.readouterr().out
    assert calls == [[sys.executable, "-m", "pip", "install", "wticonv-acme", "--upgrade"],
                     [sys.executable, "-m", "pip", "uninstall", "-y", "wticonv-acme"]]


def test_debug_shows_tracebacks(fake_dist, capsys, monkeypatch):
    assert main(["explain", "not-a-key"]) == 2
    assert "Traceback" not in capsys.readouterr().err
    assert main(["--debug", "explain", "not-a-key"]) == 2
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "wticonv: error:" in err
    fake_dist("wticonv-oops", {"fake_oops": "def helper():\n    raise ImportError('oops')\n"
                               "helper()\n"}, {"oops": "fake_oops:solver"})
    monkeypatch.setenv("WTICONV_DEBUG", "1")
    assert main(["plugins", "--json"]) == 0
    (q,) = {d["name"]: d for d in _json(capsys)}["wticonv-oops"]["quarantined"]
    assert q["reason"].endswith("fake_oops.py, line 2)")
    assert "Traceback (most recent call last)" in q["traceback"] and "helper()" in q["traceback"]


def test_commands_that_run_solvers_say_a_plugin_is_quarantined(fake_dist, capsys):
    fake_dist("wticonv-acme", {"fake_impostor": IMPOSTOR}, {"naive": "fake_impostor:solver"})
    assert main(["explain", "-n", "1", "-c", "4", "-H", "6", "-W", "6", "-k", "4", "-y", "3",
                 "-x", "3", "-F", "1"]) == 0
    err = capsys.readouterr().err
    assert ("wticonv: note: 1 plugin entry point(s) quarantined, not used: wticonv-acme "
            "(`wticonv solvers` says why)") in err
