"""The README's Python example runs as written and computes the right thing."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

import wticonv

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_example_runs():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert len(blocks) == 1
    ns: dict = {}
    exec(compile(blocks[0], "README.md", "exec"), ns)
    x, w, y, dx, dw = (ns[k] for k in ("x", "w", "y", "dx", "dw"))
    assert y.shape == (8, 128, 56, 56) and dx.shape == x.shape and dw.shape == w.shape
    p = wticonv.ConvProblem(8, 64, 56, 56, 128, 3, 3, pad_h=1, pad_w=1)
    sample = np.s_[:1]
    ref = wticonv.reference(p.with_batch(1), x=x[sample], w=w)
    assert wticonv.rms_range(y[sample], ref) < 1e-5


def test_readme_opens_with_the_two_commands():
    head = README.read_text().split("---")[0]
    assert "make demo" in head and "make test" in head
