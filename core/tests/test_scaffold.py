"""``wticonv new-solver`` refuses names that would collide with what is installed (issue 17):
``new-solver direct`` used to write ``wticonv-direct`` / ``wticonv_direct``, whose
installation replaces the built-in plugin, with no warning."""

from __future__ import annotations

import pytest
from wticonv.errors import ArgumentError
from wticonv.scaffold import collisions, new_solver

SOLVER = '''
from wticonv_direct.naive import NaiveSolver
class S(NaiveSolver):
    solver_id = "acme.conv"
solver = S()
'''


@pytest.mark.parametrize("name", ["direct", "gemm", "winograd"])
def test_built_in_plugin_names_are_refused(name, tmp_path):
    with pytest.raises(ArgumentError) as e:
        new_solver(name, tmp_path)
    msg = str(e.value)
    assert f"the distribution wticonv-{name} is installed" in msg
    assert f"the package wticonv_{name} is importable" in msg
    assert f"the solver-id prefix {name!r} is taken" in msg
    assert "choose another name" in msg
    assert not (tmp_path / f"wticonv-{name}").exists()


def test_a_taken_solver_id_prefix_is_refused(fake_dist, tmp_path):
    fake_dist("acme-fast", {"fake_acme_conv": SOLVER}, {"conv": "fake_acme_conv:solver"})
    assert collisions("acme") == ["the solver-id prefix 'acme' is taken (by acme-fast)"]
    with pytest.raises(ArgumentError, match="prefix 'acme' is taken"):
        new_solver("acme", tmp_path)


def test_an_importable_package_is_refused(tmp_path, monkeypatch):
    (tmp_path / "wticonv_zzpkg.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert collisions("zzpkg") == ["the package wticonv_zzpkg is importable (from "
                                   f"{tmp_path / 'wticonv_zzpkg.py'})"]


def test_a_free_name_is_written(tmp_path):
    assert collisions("myconv") == []
    root = new_solver("myconv", tmp_path)
    assert (root / "src" / "wticonv_myconv" / "solver.py").is_file()


def test_the_command_refuses_a_built_in_name(tmp_path, capsys):
    from wticonv.cli import main

    assert main(["new-solver", "direct", "--dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "wticonv-direct is installed" in err and "choose another name" in err
