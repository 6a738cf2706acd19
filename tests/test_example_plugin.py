"""The third-party path, end to end: docs/examples/wticonv-example installed with pip into a
throw-away virtual environment next to the core, listed, ranked, used by bench, and
passing its own conformance test; a broken copy of it is quarantined with its reason.

The virtual environment sees this environment's packages (the core, the built-in plugins,
numpy, pyopencl) through a .pth file, so only the example plugins are installed into it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from wticonv.testing import CHECKS

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "docs" / "examples" / "wticonv-example"


def test_the_example_is_what_new_solver_writes():
    from wticonv.scaffold import files

    written = {p.relative_to(EXAMPLE).as_posix(): p.read_text()
               for p in EXAMPLE.rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    assert written == files("example")


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    root = tmp_path_factory.mktemp("example-venv")
    env_dir = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(env_dir)], check=True)
    py = env_dir / "bin" / "python"
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()"
                           "['purelib'])"], check=True, capture_output=True,
                          text=True).stdout.strip()
    # addsitedir (not a bare path) so that the parent's own .pth files, such as its
    # editable installs of the core and the built-in plugins, take effect too
    parent = sysconfig.get_paths()["purelib"]
    Path(site, "parent-env.pth").write_text(f"import site; site.addsitedir({parent!r})\n")
    broken = root / "wticonv-example-broken"
    shutil.copytree(EXAMPLE, broken, ignore=shutil.ignore_patterns("__pycache__"))
    toml = broken / "pyproject.toml"
    toml.write_text(toml.read_text().replace('name = "wticonv-example"',
                                             'name = "wticonv-example-broken"')
                    .replace("wticonv_example", "wticonv_example_broken"))
    (broken / "src" / "wticonv_example").rename(broken / "src" / "wticonv_example_broken")
    solver = broken / "src" / "wticonv_example_broken" / "solver.py"
    solver.write_text(solver.read_text()
                      + "raise ImportError('libexample.so: cannot open shared object file')\n")
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1")
    for dist in (EXAMPLE, broken):
        subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", str(dist)],
                       check=True, env=env, timeout=600)
    return py


def _wticonv(py, *args):
    return subprocess.run([str(py), "-m", "wticonv", *args], capture_output=True, text=True,
                          timeout=600)


def test_installed_example_is_listed_ranked_benched_and_conformant(venv, tmp_path):
    out = _wticonv(venv, "solvers", "--json")
    assert out.returncode == 0, out.stderr
    info = json.loads(out.stdout)
    text = json.dumps(info)
    assert "example.direct" in text and "wticonv-example" in text
    broken = [q for q in info["quarantined"] if q["distribution"] == "wticonv-example-broken"]
    assert len(broken) == 1
    assert "failed to import: ImportError: libexample.so" in broken[0]["reason"]

    flags = ["-n", "2", "-c", "8", "-H", "9", "-W", "9", "-k", "8", "-y", "3", "-x", "3",
             "-p", "1", "-q", "1", "-F", "1"]
    out = _wticonv(venv, "explain", *flags, "--json")
    assert out.returncode == 0, out.stderr
    verdicts = json.loads(out.stdout)["selections"][0]["solvers"]
    example = next(v for v in verdicts if v["solver_id"] == "example.direct")
    assert example["applicable"] and example["rank"] is not None

    net = tmp_path / "tiny.txt"
    net.write_text("conv -n 2 -c 8 -H 9 -W 9 -k 8 -y 3 -x 3 -p 1 -q 1 -F 1\n"
                   "conv -n 1 -c 6 -H 7 -W 5 -k 4 -y 1 -x 3 -q 1 -u 2 -v 2 -F 1\n")
    out = _wticonv(venv, "bench", str(net), "-S", "example.direct", "--directions", "fwd",
                   "-i", "1", "--json")
    assert out.returncode == 0, out.stderr + out.stdout
    rows = json.loads(out.stdout)["rows"]
    assert len(rows) == 2 and all(r["solver"] == "example.direct" and r["ok"] for r in rows)
    assert all(r["error"] is not None and r["error"] < 1e-5 for r in rows)

    test = subprocess.run([str(venv), "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           str(EXAMPLE / "tests")], capture_output=True, text=True,
                          timeout=600, cwd=tmp_path)
    assert test.returncode == 0, test.stdout[-2000:]
    assert f"{len(CHECKS)} passed" in test.stdout


FAULTS = '''
"""A plugin author's deliberate faults (issue 17), each in its own solver."""
import time

from wticonv import hookimpl
from wticonv_example.solver import DirectSolver


class NanStride2(DirectSolver):
    solver_id = "faults.nan_stride2"

    @hookimpl
    def get_wti(self, problem, device):
        return float("nan") if problem.stride_h == 2 else 0.005


class NegativeWorkspace(DirectSolver):
    solver_id = "faults.negative_ws"

    @hookimpl
    def workspace_size(self, problem, device):
        return -4 if problem.n == 1 else 0


class StringWti(DirectSolver):
    solver_id = "faults.string_wti"

    @hookimpl
    def get_wti(self, problem, device):
        return "fast" if problem.c == 32 else 0.005


class SlowWti(DirectSolver):
    solver_id = "faults.slow_wti"

    @hookimpl
    def get_wti(self, problem, device):
        time.sleep(0.010)
        return 0.005


class ApplicableNone(DirectSolver):
    solver_id = "faults.applicable_none"

    @hookimpl
    def is_applicable(self, problem, device):
        return None if problem.direction != "fwd" else True


class DynamicYes(DirectSolver):
    solver_id = "faults.dynamic_yes"

    @hookimpl
    def is_dynamic(self):
        return "yes"


class Loose(DirectSolver):
    solver_id = "faults.loose"
    tolerance = 0.5


class Tight(DirectSolver):
    solver_id = "faults.tight"
    tolerance = "tight"


class Impostor(DirectSolver):
    solver_id = "direct.naive"


SOLVERS = [NanStride2(), NegativeWorkspace(), StringWti(), SlowWti(), ApplicableNone(),
           DynamicYes(), Loose(), Tight(), Impostor()]
'''


def test_a_fresh_users_faults_are_each_caught_and_named(venv, tmp_path):
    """The trial of issue 17: a plugin written from the guide, installed with pip next to
    the wheels' core, whose author deliberately writes each fault: the kit catches every
    fault and names the hook, and the registry never runs the impostor."""
    dist = tmp_path / "wticonv-faults"
    (dist / "src" / "wticonv_faults").mkdir(parents=True)
    (dist / "src" / "wticonv_faults" / "__init__.py").write_text(FAULTS)
    (dist / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["hatchling>=1.18"]\nbuild-backend = "hatchling.build"\n'
        '[project]\nname = "wticonv-faults"\nversion = "0.1.0"\n'
        '[project.entry-points."wticonv.solvers"]\nall = "wticonv_faults"\n'
        '[tool.hatch.build.targets.wheel]\npackages = ["src/wticonv_faults"]\n')
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1")
    subprocess.run([str(venv), "-m", "pip", "install", "-q", "--no-deps",
                    "--no-build-isolation", str(dist)], check=True, env=env, timeout=600)
    try:
        out = _wticonv(venv, "check", "wticonv-faults", "--check", "hooks", "--check",
                       "queries_pure", "--check", "wti", "--check", "reference",
                       "--examples", "1", "--json")
        assert out.returncode == 1, out.stderr
        report = json.loads(out.stdout)
        failed = {s["solver_id"]: {r["check"]: r["message"] for r in s["results"]
                                   if not r["passed"]} for s in report["solvers"]}
        expected = {"faults.nan_stride2": ("wti", "get_wti returned nan"),
                    "faults.negative_ws": ("wti", "workspace_size returned -4"),
                    "faults.string_wti": ("wti", "get_wti returned 'fast'"),
                    "faults.slow_wti": ("queries_pure", "get_wti took "),
                    "faults.applicable_none": ("wti", "is_applicable returned None"),
                    "faults.dynamic_yes": ("hooks", "is_dynamic returned 'yes'"),
                    "faults.loose": ("reference", "looser than the kit accepts")}
        assert set(failed) == set(expected), failed
        for sid, (check, said) in expected.items():
            assert said in failed[sid].get(check, ""), (sid, failed[sid])
        held = {q["solver_id"]: q["reason"] for q in report["quarantined"]}
        assert "declares tolerance = 'tight'" in held["faults.tight"]
        assert "belongs to the distribution wticonv-direct" in held["direct.naive"]
        out = _wticonv(venv, "conv", "-n", "1", "-c", "4", "-H", "8", "-W", "8", "-k", "4",
                       "-y", "3", "-x", "3", "-F", "1", "-i", "1", "-S", "direct.naive",
                       "--json")
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["results"][0]["solver"] == "direct.naive"
        listed = json.loads(_wticonv(venv, "solvers", "--json").stdout)["solvers"]
        assert [r["distribution"] for r in listed if r["solver"] == "direct.naive"] == [
            "wticonv-direct"]
    finally:
        subprocess.run([str(venv), "-m", "pip", "uninstall", "-q", "-y", "wticonv-faults"],
                       env=env, timeout=600)
