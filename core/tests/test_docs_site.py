"""The documentation site builds from docs/ with the API reference generated from the
docstrings, strictly: a warning or a broken link fails it (issue 17). Skipped where the
site's tools (docs/requirements.txt, installed by `make docs`) are missing."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(not (REPO / "mkdocs.yml").is_file(),
                                reason="needs the wticonv repository (mkdocs.yml, docs/)")


def test_the_site_is_strict_about_warnings_and_links():
    config = (REPO / "mkdocs.yml").read_text()
    assert re.search(r"^strict: true$", config, re.M)
    assert re.search(r"^  links:\n    not_found: warn$", config, re.M)
    assert "- mkdocstrings:" in config
    makefile = (REPO / "Makefile").read_text()
    assert "mkdocs build --strict" in makefile


def test_the_site_builds_with_the_api_reference(tmp_path):
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings_handlers.python")
    out = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q",
                          "-f", str(REPO / "mkdocs.yml"), "-d", str(tmp_path / "site")],
                         capture_output=True, text=True, timeout=600, cwd=REPO)
    assert out.returncode == 0, out.stderr[-3000:]
    api = (tmp_path / "site" / "api" / "testing" / "index.html").read_text()
    assert "isolated_handle" in api and "parametrize_with_checks" in api
    assert (tmp_path / "site" / "plugin-guide" / "index.html").is_file()
