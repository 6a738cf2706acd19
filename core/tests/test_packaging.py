"""What the package index and a user of the sdist get (issue 17): a license file,
classifiers, project links and ``py.typed`` in each wheel, a core description longer than
five lines, READMEs without links that only work inside the repository, and tests that
run from each sdist on its own (they failed with ``fixture 'handle' not found``)."""

from __future__ import annotations

import email
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

hatchling = pytest.importorskip("hatchling")

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(not (REPO / "plugins").is_dir(),
                                reason="needs the wticonv repository (every distribution)")
DISTS = {
    # distribution folder: (package, tests to run from the sdist, a -k filter)
    "core": ("wticonv", ["tests/test_contract.py", "tests/test_find.py"],
             "test_a_bad_tolerance or test_bad_declarations or disabled"),
    "plugins/direct": ("wticonv_direct", ["tests/test_naive.py"], "hooks_report_the_contract"),
    "plugins/gemm": ("wticonv_gemm", ["tests/test_gemm_solvers.py"], "declines_below_one"),
    "plugins/winograd": ("wticonv_winograd", ["tests/test_winograd.py"],
                         "kernel_files_share or transform_identity"),
}


def _build(folder: str, target: str, out: Path) -> Path:
    from hatchling.builders.sdist import SdistBuilder
    from hatchling.builders.wheel import WheelBuilder

    builder = {"wheel": WheelBuilder, "sdist": SdistBuilder}[target](str(REPO / folder))
    return Path(next(iter(builder.build(directory=str(out), versions=["standard"]))))


@pytest.mark.parametrize("folder", DISTS)
def test_each_wheel_carries_license_classifiers_links_and_py_typed(folder, tmp_path):
    package = DISTS[folder][0]
    wheel = _build(folder, "wheel", tmp_path)
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        meta_name = next(n for n in names if n.endswith(".dist-info/METADATA"))
        meta = email.message_from_string(z.read(meta_name).decode())
    assert f"{package}/py.typed" in names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert meta["License-Expression"] == "MIT"
    classifiers = meta.get_all("Classifier")
    assert "Typing :: Typed" in classifiers and len(classifiers) >= 8
    assert meta.get_all("Project-URL")
    description = meta.get_payload()
    assert "../../docs" not in description and "example.invalid" not in description
    if folder == "core":
        assert len(description.strip().splitlines()) >= 30
    else:
        assert any(n.endswith(".cl") for n in names)


def test_the_repository_has_an_mit_license():
    text = (REPO / "LICENSE").read_text()
    assert text.startswith("MIT License")
    for folder in DISTS:
        assert (REPO / folder / "LICENSE").read_text() == text


@pytest.mark.parametrize("folder", DISTS)
def test_each_sdists_tests_run_on_their_own(folder, tmp_path):
    package, tests, keyword = DISTS[folder]
    sdist = _build(folder, "sdist", tmp_path)
    with tarfile.open(sdist) as t:
        t.extractall(tmp_path / "x", filter="data")
    (root,) = (tmp_path / "x").iterdir()
    assert (root / "tests" / "conftest.py").is_file() and (root / "LICENSE").is_file()
    # --confcutdir and -c: nothing of the repository (its conftest.py files, its pytest
    # settings) is seen, only what the sdist holds; the installed packages are imported.
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "--confcutdir", str(root), "-c", str(root / "pyproject.toml"),
                          "--rootdir", str(root), "-k", keyword, *tests],
                         cwd=root, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert " passed" in out.stdout and "error" not in out.stdout.lower().split("passed")[-1]
    # and every test of the sdist finds its fixtures (resolved, not run: --setup-plan)
    plan = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "--setup-plan", "--confcutdir", str(root), "-c",
                           str(root / "pyproject.toml"), "--rootdir", str(root), "tests"],
                          cwd=root, capture_output=True, text=True, timeout=600)
    assert plan.returncode == 0, plan.stdout[-3000:] + plan.stderr[-2000:]
    assert "fixture '" not in plan.stdout and " error" not in plan.stdout.splitlines()[-1]
