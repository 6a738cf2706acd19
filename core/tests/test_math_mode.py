"""Math mode (issue 19): each solver declares the numerical class of its results
(``math``: fp32, 3xtf32 or tf32); the fallback ranks only FP32-accurate classes unless
the caller allows TF32 (``allow_tf32`` in the API, ``--math tf32`` on the CLI)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import wticonv
from wticonv import ArgumentError, ConvTensors, Handle, PluginError, SolverNotApplicableError
from wticonv.contract.answers import CLASS_DEFAULT_TOLERANCE, declared_math, declared_tolerance
from wticonv.contract.registry import SolverRegistry
from wticonv.problem.conv import ConvProblem
from wticonv.problem.reference import reference
from wticonv_direct.naive import NaiveSolver

P = ConvProblem(2, 3, 8, 8, 4, 3, 3, pad_h=1, pad_w=1)


class _Fast(NaiveSolver):
    """The naive kernels, claiming to beat every solver (WTI 5), in a declared class."""

    max_wti = 5.0
    tolerance = None                # the class's default

    def __init__(self, sid: str, math_class: str | None) -> None:
        self.solver_id = sid
        if math_class is not None:
            self.math = math_class
        self.runs = 0

    @wticonv.hookimpl
    def get_wti(self, problem, device):
        return 5.0

    @wticonv.hookimpl
    def run(self, problem, device, tensors, workspace):
        self.runs += 1
        super().run(problem, device, tensors, workspace)


def _registry(*solvers) -> SolverRegistry:
    reg = SolverRegistry()
    for s in solvers:
        reg.register(s)
    return reg


def test_a_solver_declares_its_class_and_a_bad_one_is_refused_at_load_time():
    reg = _registry(_Fast("fake.plain", None), _Fast("fake.tf", "tf32"),
                    _Fast("fake.split", "3xtf32"))
    assert [reg.solvers[s].math for s in ("fake.plain", "fake.tf", "fake.split")] == \
        ["fp32", "tf32", "3xtf32"]
    assert reg.solvers["direct.naive"].math == "fp32"          # every built-in is FP32
    # a class without a declared tolerance gets its class's default
    assert declared_tolerance("fake.tf", reg.solvers["fake.tf"].obj) == \
        CLASS_DEFAULT_TOLERANCE["tf32"] == 4e-3
    assert declared_tolerance("fake.split", reg.solvers["fake.split"].obj) == 1e-5
    for bad in ("fp16", "TF32", 32):
        with pytest.raises(PluginError, match=r"declares math = .*must be one of 'fp32', "
                                              r"'3xtf32', 'tf32'"):
            declared_math("fake.bad", type("S", (), {"math": bad})())
        with pytest.raises(PluginError, match="declares math"):
            SolverRegistry().register(_Fast("fake.bad", bad))


def test_the_fallback_ranks_tf32_only_when_allowed(handle):
    tf, split = _Fast("fake.tf", "tf32"), _Fast("fake.split", "3xtf32")
    h = Handle(handle.device, _registry(tf, split))
    by_id = {v.solver_id: v for v in h.select(P).verdicts}
    # FP32-accurate by default: 3xtf32 is ranked (and wins with its WTI of 5), tf32 is not
    assert h.select(P).chosen.solver_id == "fake.split"
    assert not by_id["fake.tf"].candidate and "allow_tf32=True" in by_id["fake.tf"].reason
    assert by_id["fake.tf"].math == "tf32" and by_id["fake.split"].math == "3xtf32"
    # allowed: tf32 is a candidate, tied on WTI with fake.split (ties go by workspace, id)
    allowed = h.select(P, allow_tf32=True)
    assert {v.solver_id for v in allowed.candidates} >= {"fake.tf", "fake.split"}
    # a forced tf32 solver needs the permission too
    with pytest.raises(SolverNotApplicableError, match="computes in TF32"):
        h.select(P, solver="fake.tf")
    assert h.select(P, solver="fake.tf", allow_tf32=True).chosen.solver_id == "fake.tf"
    for bad in ("yes", 1):          # 1 == True: refused even where True is remembered
        with pytest.raises(ArgumentError, match=f"allow_tf32={bad!r} must be True, False "
                                                "or None"):
            h.select(P, allow_tf32=bad)
    with pytest.raises(ArgumentError, match="allow_tf32='yes' must be True, False or None"):
        h.run(P, (None, None, None), allow_tf32="yes")


def test_the_handle_keeps_a_math_mode_and_a_call_overrides_it(handle):
    tf = _Fast("fake.tf", "tf32")
    h = Handle(handle.device, _registry(tf), allow_tf32=True)
    assert h.select(P).chosen.solver_id == "fake.tf"
    assert h.select(P, allow_tf32=False).chosen.solver_id != "fake.tf"   # not the memo
    h.allow_tf32 = False
    assert h.select(P).chosen.solver_id != "fake.tf"
    with pytest.raises(ArgumentError, match="allow_tf32=1 must be True or False"):
        Handle(handle.device, _registry(), allow_tf32=1)


def test_conv2d_runs_a_tf32_solver_only_with_allow_tf32(handle):
    tf = _Fast("fake.tf", "tf32")
    h = Handle(handle.device, _registry(tf))
    rng = np.random.default_rng(5)
    x = rng.standard_normal(P.x_shape).astype(np.float32)
    w = rng.standard_normal(P.w_shape).astype(np.float32)
    want = reference(P, x=x, w=w)
    y = wticonv.conv2d(x, w, padding=1, handle=h)
    assert tf.runs == 0 and np.allclose(y, want, atol=1e-4)
    y = wticonv.conv2d(x, w, padding=1, handle=h, allow_tf32=True)
    assert tf.runs == 1 and np.allclose(y, want, atol=1e-4)
    dy = rng.standard_normal(P.y_shape).astype(np.float32)
    wticonv.conv2d_input(P.x_shape, w, dy, padding=1, handle=h, allow_tf32=True)
    wticonv.conv2d_weight(x, P.w_shape, dy, padding=1, handle=h, allow_tf32=True)
    assert tf.runs == 3
    with pytest.raises(ArgumentError, match="allow_tf32='no' must be True, False or None"):
        wticonv.conv2d(x, w, padding=1, handle=h, allow_tf32="no")


TF32_PLUGIN = '''
import wticonv
from wticonv_direct.naive import NaiveSolver
class S(NaiveSolver):
    solver_id = "acme.tf32"
    math = "tf32"
    max_wti = 5.0
    @wticonv.hookimpl
    def get_wti(self, problem, device):
        return 5.0
solver = S()
'''


def test_cli_math_option_and_listings_show_the_class(fake_dist, capsys):
    from wticonv.cli import main

    fake_dist("wticonv-acme", {"fake_acme_tf32": TF32_PLUGIN}, {"tf32": "fake_acme_tf32:solver"})
    assert main(["explain", P.key, "--json"]) == 0
    (sel,) = json.loads(capsys.readouterr().out)["selections"]
    verdicts = {v["solver_id"]: v for v in sel["solvers"]}
    assert verdicts["acme.tf32"]["math"] == "tf32" and verdicts["acme.tf32"]["rank"] is None
    assert "computes in TF32" in verdicts["acme.tf32"]["reason"]
    assert main(["explain", P.key, "--json", "--math", "tf32"]) == 0
    (sel,) = json.loads(capsys.readouterr().out)["selections"]
    assert sel["chosen"] == "acme.tf32"
    assert main(["explain", P.key, "--math", "tf32"]) == 0
    out = capsys.readouterr().out
    assert "acme.tf32" in out and "tf32" in out.split("acme.tf32", 1)[1].split("\n", 1)[0]
    assert main(["solvers", "--json"]) == 0
    rows = {r["solver"]: r for r in json.loads(capsys.readouterr().out)["solvers"]}
    assert rows["acme.tf32"]["math"] == "tf32" and rows["direct.naive"]["math"] == "fp32"
    assert main(["explain", P.key, "--math", "fp16"]) == 2
    assert "'fp16' is not one of 'fp32', 'tf32'" in capsys.readouterr().err


def test_tensor_cores_are_detected_from_the_driver(handle):
    from types import SimpleNamespace

    from wticonv.runtime.kit import tensor_cores

    def dev(kind="gpu", platform="NVIDIA CUDA", cc=None):
        cl_device = SimpleNamespace() if cc is None else \
            SimpleNamespace(compute_capability_major_nv=cc)
        return SimpleNamespace(kind=kind, info=SimpleNamespace(kind=kind, platform=platform),
                               cl_device=cl_device)

    assert tensor_cores(dev(cc=9)) and tensor_cores(dev(cc=8))
    assert not tensor_cores(dev(cc=7))                        # Volta/Turing: no .tf32 mma
    assert not tensor_cores(dev())                            # the query is not answered
    assert not tensor_cores(dev(platform="AMD Accelerated Parallel Processing", cc=9))
    assert not tensor_cores(dev(kind="cpu", cc=9))
    if handle.device.kind == "cpu":
        assert not tensor_cores(handle.device)
        # the built-in tensor-core solvers decline here, saying what they need
        from wticonv.runtime.kit import tensor_core_decline

        no = tensor_core_decline("3xtf32", handle.device)
        assert "compute capability 8.0" in no.reason and "wticonv devices" in no.reason
        assert tensor_core_decline("fp32", handle.device) is None


def test_explain_prints_a_reason_several_solvers_share_once(handle, capsys):
    """On a device without tensor cores, the nine tensor-core solvers' decline is one note
    under the table, not nine wrapped rows."""
    from wticonv.cli import render

    sel = Handle(handle.device).select(P)
    tc = [v for v in sel.verdicts if v.math != "fp32"]
    if handle.device.kind != "cpu" or len(tc) < 2:
        pytest.skip("needs the built-in tensor-core solvers on a CPU")
    render.selection(sel, handle.device)
    out = capsys.readouterr().out
    assert out.count("compute capability 8.0") == 1
    assert out.count("see note 1") == len(tc)


def test_a_selection_records_its_math_mode_and_a_run_holds_to_it(handle, capsys):
    """explain shows the mode; a selection made with allow_tf32 runs only with it."""
    from wticonv.cli import render

    tf = _Fast("fake.tf", "tf32")
    h = Handle(handle.device, _registry(tf))
    strict, allowed = h.select(P), h.select(P, allow_tf32=True)
    assert (strict.allow_tf32, allowed.allow_tf32) == (False, True)
    assert allowed.chosen.solver_id == "fake.tf" and allowed.to_dict()["allow_tf32"] is True
    assert wticonv.explain(P, handle=h, allow_tf32=True).chosen.solver_id == "fake.tf"
    assert wticonv.explain(P, handle=h).chosen.solver_id != "fake.tf"
    # a NumPy bool is a bool; a device spec is not a handle
    assert h.select(P, allow_tf32=np.True_).allow_tf32 is True
    with pytest.raises(ArgumentError, match=r"handle='cpu' is not a wticonv.Handle"):
        wticonv.explain(P, handle="cpu")
    render.selection(allowed, h.device)
    render.selection(strict, h.device)
    out = capsys.readouterr().out
    assert "math tf32 allowed" in out and "math FP32-accurate (fp32, 3xtf32)" in out
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, P.x_shape).astype(np.float32)
    w = rng.uniform(-1, 1, P.w_shape).astype(np.float32)
    dev = h.device
    t = ConvTensors(dev.upload(x), dev.upload(w), dev.alloc(4 * int(np.prod(P.y_shape))))
    with pytest.raises(ArgumentError, match=r"TF32 candidates \(fake.tf\).*allow_tf32"):
        h.run(P, t, selection=allowed)
    assert tf.runs == 0
    h.run(P, t, selection=allowed, allow_tf32=True)
    assert tf.runs == 1
    # a selection fixes the solver and the workspace: they are not taken beside it
    with pytest.raises(ArgumentError, match=r"solver='direct.naive' with selection=.*"
                                            r"Handle.select"):
        h.run(P, t, selection=strict, solver="direct.naive")
    with pytest.raises(ArgumentError, match="workspace_limit=0 with selection="):
        h.run(P, t, selection=strict, workspace_limit=0)
    assert np.allclose(dev.download(t.y, P.y_shape), reference(P, x=x, w=w), atol=1e-4)


def test_an_unknown_solver_id_gets_the_close_ones_suggested(handle):
    """winograd.f4x3 has no TF32 class: asking for it names the ids that exist."""
    from wticonv import SolverNotFoundError

    with pytest.raises(SolverNotFoundError,
                       match=r"no solver 'winograd.f4x3_tf32' is installed \(did you mean "
                             r"winograd.f4x3_3xtf32, .*\?\); installed solvers: "):
        handle.registry.get("winograd.f4x3_tf32")
    with pytest.raises(SolverNotFoundError, match=r"'nonsense.xyz' is installed; installed"):
        handle.registry.get("nonsense.xyz")
