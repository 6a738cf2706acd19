"""``wticonv new-solver NAME``: the skeleton of a third-party solver plugin.

The skeleton is a complete, installable distribution ``wticonv-<name>`` holding one solver,
``<name>.direct``: forward convolution (any filter, stride, padding, dilation and groups),
one work-item per output element, in its own OpenCL kernel file. It passes the
conformance kit unchanged (``tests/test_conformance.py`` in the skeleton runs it), so an
author starts from a plugin that honours the contract and changes one thing at a time.
"""

from __future__ import annotations

import re
from pathlib import Path

from wticonv.errors import ArgumentError

__all__ = ["new_solver", "collisions", "NAME_RE"]

#: Plugin names: a lowercase letter, then lowercase letters, digits or underscores.
NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,39}$")

_PYPROJECT = '''[build-system]
requires = ["hatchling>=1.18"]
build-backend = "hatchling.build"

[project]
name = "wticonv-{name}"
version = "0.1.0"
description = "A wticonv solver plugin: {name}.direct"
readme = "README.md"
requires-python = ">=3.10"
dependencies = ["wticonv>=0.1.0", "numpy>=1.24", "pyopencl>=2023.1"]

[project.optional-dependencies]
# the conformance kit's own dependencies (pytest, hypothesis)
test = ["wticonv[testing]>=0.1.0"]

# How wticonv finds the solver: group "wticonv.solvers", any name, value module:object.
[project.entry-points."wticonv.solvers"]
direct = "wticonv_{name}.solver:solver"

[tool.hatch.build.targets.wheel]
packages = ["src/wticonv_{name}"]
'''

_README = '''# wticonv-{name}

A solver plugin for [wticonv](https://pypi.org/project/wticonv/), made by `wticonv
new-solver {name}`: the solver `{name}.direct` computes forward convolutions, one
work-item per output element (`src/wticonv_{name}/kernels/{name}.cl`).

    pip install -e ".[test]"    # then: wticonv plugins, wticonv explain ...
    pytest tests                # the conformance kit: every check must pass
    wticonv check {name}.direct    # the same checks, as a report

Change one thing at a time, and run the tests after each. wticonv's plugin guide (in
its documentation) says what each hook must answer; `wticonv check --help` lists the
checks.
'''

_INIT = '''"""wticonv-{name}: the solver {name}.direct (see solver.py)."""
'''

_SOLVER = '''"""The ``{name}.direct`` solver: forward convolution, one work-item per output element.

Applies to every forward problem (any filter, stride, padding, dilation and groups) whose
output has fewer than 2^31 elements; declines backward data and backward weights. Dynamic:
every size is a kernel argument, so one build serves every shape. No workspace.

Host code uses wticonv's host kit (:mod:`wticonv.runtime.kit`): :data:`KERNELS` reads
``kernels/*.cl`` (build errors name the file and line) and keeps the built kernels per
device; :func:`plan` describes the launch; ``enqueue`` runs it with the tensors bound, and
``programs_of`` names its program so that the core can compile it ahead.

WTI: the kernel modelled at :data:`EFFICIENCY` of the device's peak FP32 rate, plus the
device's measured launch overhead, on CPUs and GPUs; -2.0 (unknown) on other devices. A
first guess: replace it with a model of the kernel's time (see wticonv's
docs/wti-models.md).
"""

from __future__ import annotations

import numpy as np

from wticonv import WTI_UNKNOWN, Decline, hookimpl
from wticonv.runtime.kit import (KernelLibrary, Launch, enqueue, launch_overhead_s,
                                 modelled_kind, programs_of, round_up)

#: The plugin's kernel files (src/wticonv_{name}/kernels/).
KERNELS = KernelLibrary("wticonv_{name}")
#: Work-items per work-group.
LOCAL = 64
#: Predicted fraction of the device's peak FP32 rate the kernel reaches (a guess: one
#: multiply-add per load).
EFFICIENCY = 0.005


def plan(problem) -> Launch:
    """The launch of ``{name}.cl``'s ``conv_fwd`` that computes ``problem``: one work-item
    per output element, the sizes as ``int`` arguments after the tensors x, w and y."""
    p = problem
    sizes = tuple(np.int32(v) for v in (p.n, p.c, p.h, p.w, p.k, p.r, p.s, p.ho, p.wo,
                                        p.pad_h, p.pad_w, p.stride_h, p.stride_w,
                                        p.dilation_h, p.dilation_w, p.groups))
    total = p.n * p.k * p.ho * p.wo
    return KERNELS.launch("{name}.cl", "conv_fwd", "", (round_up(total, LOCAL),), (LOCAL,),
                          ("x", "w", "y") + sizes, flops=p.flops, efficiency=EFFICIENCY)


class DirectSolver:
    """Forward convolution, one output element per work-item."""

    solver_id = "{name}.direct"
    hook_api = (1, 2)              # the wticonv hook API versions it was written for
    tolerance = 1e-5               # rms_range against wticonv's float64 reference
    math = "fp32"                  # numerical class: fp32, 3xtf32 or tf32 (tensor cores)

    @hookimpl
    def is_applicable(self, problem, device):
        if problem.direction != "fwd":
            return Decline("forward only")
        if problem.n * problem.k * problem.ho * problem.wo >= 2**31:
            return Decline("the output has 2^31 elements or more")
        return True

    @hookimpl
    def is_dynamic(self):
        return True

    @hookimpl
    def get_wti(self, problem, device):
        if modelled_kind(device) is None:      # neither a CPU nor a GPU: not modelled
            return WTI_UNKNOWN
        seconds = launch_overhead_s(device) + problem.flops / (device.peak_flops * EFFICIENCY)
        return problem.flops / (device.peak_flops * seconds)

    @hookimpl
    def workspace_size(self, problem, device):
        return 0

    @hookimpl
    def programs(self, problem, device):       # optional: lets the core compile ahead
        return programs_of([plan(problem)])

    @hookimpl
    def run(self, problem, device, tensors, workspace):
        enqueue(device, [plan(problem)], {"x": tensors.x, "w": tensors.w, "y": tensors.y})


solver = DirectSolver()
'''

_KERNEL = '''/* {name}.direct: forward convolution, NCHW float32, one work-item per output element.
 *
 * y[n][k][ho][wo] = sum over c, r, s of x[n][g*C/groups + c][hi][wi] * w[k][c][r][s],
 * hi = ho*stride_h - pad_h + r*dil_h, wi likewise; taps in the padding are skipped.
 * Every size is an argument: one build serves every problem.
 */
__kernel void conv_fwd(__global const float *x, __global const float *w, __global float *y,
                       int N, int C, int H, int W, int K, int R, int S, int Ho, int Wo,
                       int pad_h, int pad_w, int stride_h, int stride_w, int dil_h,
                       int dil_w, int groups)
{{
    const long i = get_global_id(0);
    if (i >= (long)N * K * Ho * Wo)
        return;
    const int wo = (int)(i % Wo);
    const int ho = (int)((i / Wo) % Ho);
    const int k = (int)((i / ((long)Wo * Ho)) % K);
    const int n = (int)(i / ((long)Wo * Ho * K));
    const int cg = C / groups, g = k / (K / groups);
    float acc = 0.0f;
    for (int c = 0; c < cg; ++c) {{
        for (int r = 0; r < R; ++r) {{
            const int hi = ho * stride_h - pad_h + r * dil_h;
            if (hi < 0 || hi >= H)
                continue;
            for (int s = 0; s < S; ++s) {{
                const int wi = wo * stride_w - pad_w + s * dil_w;
                if (wi < 0 || wi >= W)
                    continue;
                acc += x[(((long)n * C + g * cg + c) * H + hi) * W + wi]
                     * w[(((long)k * cg + c) * R + r) * S + s];
            }}
        }}
    }}
    y[i] = acc;
}}
'''

_TEST = '''"""The wticonv conformance kit on {name}.direct: every check must pass."""

from wticonv.testing import parametrize_with_checks


# isolated=True: only this solver and wticonv's built-in solvers are loaded, so other
# installed plugins never show up here (see wticonv's plugin guide, "Testing in isolation").
@parametrize_with_checks(["{name}.direct"], isolated=True)
def test_conformance(solver_id, check, wticonv_handle):
    check(wticonv_handle)
'''


def files(name: str) -> dict[str, str]:
    """Relative path -> text of the skeleton of plugin ``name`` (see :func:`new_solver`)."""
    if not NAME_RE.match(name or ""):
        raise ArgumentError(f"plugin name {name!r} is invalid: use a lowercase letter, then "
                            "lowercase letters, digits or underscores (at most 40), e.g. "
                            "'myconv'")
    pkg = f"src/wticonv_{name}"
    return {
        "pyproject.toml": _PYPROJECT.format(name=name),
        "README.md": _README.format(name=name),
        f"{pkg}/__init__.py": _INIT.format(name=name),
        f"{pkg}/solver.py": _SOLVER.replace("{name}", name),
        f"{pkg}/kernels/{name}.cl": _KERNEL.format(name=name),
        "tests/test_conformance.py": _TEST.format(name=name),
    }


def collisions(name: str) -> list[str]:
    """What plugin ``name`` would collide with here, one phrase each ([] when nothing):
    an installed distribution ``wticonv-<name>`` (installing the new one would replace
    it), an importable package ``wticonv_<name>`` (one would shadow the other), or a
    solver-id prefix ``<name>`` that installed solvers use (the new solvers would be
    quarantined, :mod:`wticonv.contract.ownership`). The built-in plugins' names are refused even
    where they are not installed."""
    import importlib.util

    import importlib_metadata

    from wticonv.contract.ownership import norm_dist
    from wticonv.contract.registry import BUILT_IN_DISTRIBUTIONS, SolverRegistry

    dist = f"wticonv-{name}".replace("_", "-")
    out = []
    installed = {norm_dist(d.metadata["Name"] or "") for d in importlib_metadata.distributions()}
    if norm_dist(dist) in installed:
        out.append(f"the distribution {dist} is installed")
    elif dist in BUILT_IN_DISTRIBUTIONS:
        out.append(f"the distribution {dist} is a built-in plugin of wticonv")
    try:
        spec = importlib.util.find_spec(f"wticonv_{name}")
    except (ImportError, ValueError):
        spec = None
    if spec is not None:
        where = spec.origin or ", ".join(spec.submodule_search_locations or [])
        out.append(f"the package wticonv_{name} is importable (from {where})")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reg = SolverRegistry(disabled=())
    owners = sorted({e.distribution or "a solver registered by hand"
                     for sid, e in reg.solvers.items() if sid.split(".")[0] == name} |
                    {q.distribution for q in reg.quarantined
                     if q.solver_id.split(".")[0] == name})
    if owners:
        out.append(f"the solver-id prefix {name!r} is taken (by {', '.join(owners)})")
    return out


def new_solver(name: str, parent: str | Path = ".") -> Path:
    """Write the skeleton of plugin ``name`` into ``parent/wticonv-<name>`` and return that
    folder.

    Raises
    ------
    ArgumentError
        If ``name`` is not a valid plugin name, collides with an installed distribution,
        package or solver-id prefix (:func:`collisions`), or the folder already exists.
    """
    content = files(name)
    root = Path(parent) / f"wticonv-{name}"
    if root.exists():
        raise ArgumentError(f"{root} already exists; choose another name or folder")
    clash = collisions(name)
    if clash:
        raise ArgumentError(f"plugin name {name!r} collides with what is installed: "
                            f"{'; '.join(clash)}; choose another name (e.g. 'my{name}')")
    for rel, text in content.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root
