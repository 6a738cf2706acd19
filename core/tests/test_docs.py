"""The documentation stays true to the code: every hook is documented, as specified."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest
from wticonv.contract import hookspecs
DOCS = Path(__file__).resolve().parents[2] / "docs"
# The docs live in the repository, not in the core's sdist.
pytestmark = pytest.mark.skipif(not (DOCS / "hooks.md").is_file(),
                                reason="needs the wticonv repository's docs/")


def test_every_hook_is_documented_with_its_signature():
    text = (DOCS / "hooks.md").read_text()
    documented = re.findall(r"^## `(\w+)\((.*?)\)", text, flags=re.M)
    names = {name for name, _ in documented}
    assert names == set(hookspecs.HOOK_NAMES + hookspecs.OPTIONAL_HOOK_NAMES)
    for name, args in documented:
        spec = inspect.signature(getattr(hookspecs.SolverSpec, name))
        expected = [p for p in spec.parameters if p != "self"]
        assert [a.strip() for a in args.split(",") if a.strip()] == expected, name


def test_every_hookspec_docstring_says_when_returns_and_must_not():
    for name in hookspecs.HOOK_NAMES + hookspecs.OPTIONAL_HOOK_NAMES:
        doc = inspect.getdoc(getattr(hookspecs.SolverSpec, name))
        assert "**When called:**" in doc and "**Returns:**" in doc, name
