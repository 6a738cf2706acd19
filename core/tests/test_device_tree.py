"""tools/device_tree.sh: benchmarks/results/ out of what the device tool sends, and back."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "tools" / "device_tree.sh"


def _git(repo, *args) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True,
                          text=True).stdout


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_off_leaves_results_out_and_on_puts_them_back(tmp_path):
    repo = tmp_path / "repo"
    (repo / "benchmarks" / "results").mkdir(parents=True)
    (repo / "benchmarks" / "results" / "run.csv").write_text("a,b\n1,2\n")
    (repo / "code.py").write_text("x = 1\n")
    _git(repo, "init", "-q")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "add", ".")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "c")

    def run(*args):
        return subprocess.run(["sh", str(SCRIPT), *args], cwd=repo, capture_output=True,
                              text=True)

    off = run("off")
    assert off.returncode == 0 and "left out" in off.stdout
    assert _git(repo, "ls-files").split() == ["code.py"]          # not sent, still on disk
    assert (repo / "benchmarks" / "results" / "run.csv").exists()
    # out of the index (a staged deletion) and ignored, so not sent as untracked either
    assert _git(repo, "status", "--short", "--untracked-files=all").splitlines() == \
        ["D  benchmarks/results/run.csv"]
    assert run("status").stdout.startswith("off") and run("off").stdout.strip() == "already off"
    on = run("on")
    assert on.returncode == 0
    assert sorted(_git(repo, "ls-files").split()) == ["benchmarks/results/run.csv", "code.py"]
    assert _git(repo, "status", "--short") == "" and run("status").stdout.startswith("on")
    # staged work is not mixed with the index surgery
    (repo / "code.py").write_text("x = 2\n")
    _git(repo, "add", "code.py")
    refused = run("off")
    assert refused.returncode == 2 and "staged changes" in refused.stderr
    assert run("nonsense").returncode == 2
