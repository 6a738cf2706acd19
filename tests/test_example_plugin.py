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
    assert "9 passed" in test.stdout
