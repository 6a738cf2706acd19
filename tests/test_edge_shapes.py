"""Every built-in solver on edge shapes, in every direction, against the float64 reference.

For each shape below (the conformance kit's :data:`wticonv.testing.EDGE_SHAPES` plus the
shapes listed here: sizes just past the solvers' tile and vector widths, padding at least
the filter's size, strides past the filter, dilation with groups, ...) and each direction,
every installed solver that accepts the problem is forced to run it; its result must match
:func:`wticonv.problem.reference` within the solver's tolerance (rms_range, which is NaN, hence a
failure, when an element is NaN or Inf). The output is handed over with sentinel bytes in
and around it (the kit's guarded tensors), so an element a solver never writes reads as
about 1.5e16 and fails the comparison, and a write past the output fails the run.

Each accepting solver also runs with half its workspace and, if tunable, with each of its
perf configs; and every case runs twice, on the device as it is and on the same device
presented as a GPU (the GPU plans). Also: at least one solver accepts each shape, and each
solver accepts some edge shape. Kernels are compiled once per session (the shared handle
and its device): every solver here is dynamic. docs/reliability.md, "Edge shapes".
"""

from __future__ import annotations

import pytest

from wticonv import DIRECTIONS, WticonvError, reference, rms_range
from wticonv import ConvProblem as P
from wticonv.problem.tensors import OUTPUT_TENSOR
from wticonv.testing import EDGE_SHAPES
from wticonv.testing.checks import SolverUnderTest, _device_tensors, random_data

BUILT_INS = ["direct.chanvec", "direct.depthwise", "direct.naive", "direct.tiled", "gemm.1x1",
             "gemm.im2col", "winograd.f2x3", "winograd.f4x3", "winograd.fused_f2x3",
             "winograd.rxs"]
#: ... and on devices with tensor cores (wticonv.runtime.kit.tensor_cores), the GEMM
#: solvers' 3xTF32 and TF32 classes (each held to its own tolerance).
TENSOR_CORE = [f"{base}_{math}" for base in ("gemm.1x1", "gemm.im2col", "winograd.f2x3",
                                             "winograd.f4x3", "winograd.rxs")
               for math in ("3xtf32", "tf32") if f"{base}_{math}" != "winograd.f4x3_tf32"]

# Tile and vector sizes the shapes step just past (CPU builds; the GPU ones are larger):
# gemm sgemm_nn 12 rows x 32 columns, sgemm_nt 4 x 4 with 16-wide reductions;
# direct.tiled 16 channels x 16 lanes (8 lanes x 24 channels on narrow rows, 32 x 32 for
# backward weights); direct.depthwise 8-wide vectors, 7 rows, 8 channels per group;
# direct.chanvec (CPUs, forward, K/G a multiple of 32) 6 positions x 64 channels;
# Winograd tiles of 2 and 4 pixels, the fused kernel's 16 tiles x 16 channels, 8 input
# channels per step.
SHAPES = {
    **EDGE_SHAPES,
    "1x1 picture, even 2x2 filter, pad 1": P(2, 3, 1, 1, 4, 2, 2, pad_h=1, pad_w=1),
    "1x1 picture, 3x3 filter, pad 3 = filter": P(1, 2, 1, 1, 3, 3, 3, pad_h=3, pad_w=3),
    "1xW picture, 3x3 filter, pad 1": P(2, 4, 1, 9, 5, 3, 3, pad_h=1, pad_w=1),
    "Hx1 picture, 3x3 filter, pad 1": P(2, 4, 9, 1, 5, 3, 3, pad_h=1, pad_w=1),
    "3x3 filter, pad 3 = filter": P(1, 3, 5, 4, 4, 3, 3, pad_h=3, pad_w=3),
    "1x1 filter, pad 2": P(2, 3, 4, 4, 4, 1, 1, pad_h=2, pad_w=2),
    "2x2 filter, stride 3 not dividing": P(2, 3, 10, 11, 4, 2, 2, stride_h=3, stride_w=3),
    "1x1 filter, stride 2x3": P(2, 5, 9, 7, 6, 1, 1, stride_h=2, stride_w=3),
    "1x1 filter, stride 2, odd picture": P(2, 8, 7, 9, 6, 1, 1, stride_h=2, stride_w=2),
    "1x1 filter, stride 3 > filter, pad 1": P(1, 4, 8, 8, 3, 1, 1, pad_h=1, pad_w=1,
                                              stride_h=3, stride_w=3),
    "even 4x4 filter, stride 2, pad 1": P(2, 3, 9, 8, 5, 4, 4, pad_h=1, pad_w=1,
                                          stride_h=2, stride_w=2),
    "1x7 filter": P(1, 4, 9, 11, 5, 1, 7, pad_w=3),
    "7x1 filter": P(1, 4, 11, 9, 5, 7, 1, pad_h=3),
    "1x2 filter, odd output": P(2, 3, 5, 6, 4, 1, 2),
    "2x2 filter, stride 1": P(2, 3, 6, 7, 5, 2, 2),
    "dilation 2x3 with groups 3": P(2, 6, 11, 10, 9, 3, 2, pad_h=2, pad_w=1, dilation_h=2,
                                    dilation_w=3, groups=3),
    "depthwise, dilation 2": P(1, 8, 10, 10, 8, 3, 3, pad_h=2, pad_w=2, dilation_h=2,
                               dilation_w=2, groups=8),
    "depthwise, multiplier 3, 5x5": P(1, 4, 7, 7, 12, 5, 5, pad_h=2, pad_w=2, groups=4),
    "groups 4, one output channel per group": P(2, 8, 6, 6, 4, 3, 3, pad_h=1, pad_w=1,
                                                groups=4),
    "output 1 wide": P(2, 3, 6, 5, 4, 3, 5),
    "output 1x1 from stride 4": P(2, 3, 5, 5, 4, 3, 3, stride_h=4, stride_w=4),
    "filter = picture, 3x3 (output 1x1)": P(2, 4, 3, 3, 5, 3, 3),
    "3x3 on 3x4 (output 1x2)": P(2, 4, 3, 4, 5, 3, 3),
    "7x7 on 8x8 (output 2x2)": P(1, 3, 8, 8, 4, 7, 7),
    "pad 2 > stride 3 = filter": P(1, 2, 3, 3, 3, 3, 3, pad_h=2, pad_w=2, stride_h=3,
                                   stride_w=3),
    "K = 1, 3x3": P(2, 5, 8, 8, 1, 3, 3, pad_h=1, pad_w=1),
    "C = 1, 3x3": P(2, 1, 8, 8, 5, 3, 3, pad_h=1, pad_w=1),
    "C = K = 1, 3x3": P(1, 1, 6, 7, 1, 3, 3, pad_h=1, pad_w=1),
    "N = 1, C = 1, 1x1": P(1, 1, 5, 5, 3, 1, 1),
    "gemm tiles + 1 (K 13, C 17, 33 pixels)": P(1, 17, 3, 11, 13, 1, 1),
    "gemm tiles x 2 + 1 (K 25, 65 pixels)": P(1, 5, 5, 13, 25, 1, 1),
    "tiled channels + 1 (K 17), row of 17": P(1, 3, 4, 17, 17, 3, 3, pad_h=1, pad_w=1),
    "tiled gather channels + 1 (K 25), row of 11": P(1, 2, 5, 11, 25, 3, 3, pad_h=1,
                                                     pad_w=1),
    "tiled rows of 13 and of 25": P(2, 3, 13, 25, 5, 1, 3, pad_w=1),
    "tiled narrow rows of 7, K 25": P(1, 4, 7, 7, 25, 3, 3, pad_h=1, pad_w=1),
    "tiled narrow rows of 9": P(1, 4, 9, 9, 5, 3, 3, pad_h=1, pad_w=1),
    "tiled wrw blocks + 1 (K 33, C x R x S 33)": P(1, 11, 5, 5, 33, 1, 3, pad_w=1),
    "stride 2 past 16 lanes (output 18 wide)": P(1, 3, 5, 35, 4, 3, 3, pad_h=1, pad_w=1,
                                                 stride_h=2, stride_w=2),
    "depthwise past 8 lanes, 7 rows, 8 channels": P(2, 9, 8, 9, 9, 3, 3, pad_h=1, pad_w=1,
                                                    groups=9),
    "depthwise stride 2, output 8x9": P(1, 9, 15, 17, 9, 3, 3, pad_h=1, pad_w=1,
                                        stride_h=2, stride_w=2, groups=9),
    "depthwise 3x3 no pad, output 15 rows": P(1, 10, 17, 10, 10, 3, 3, groups=10),
    "winograd odd output (5x7)": P(1, 3, 5, 7, 4, 3, 3, pad_h=1, pad_w=1),
    "winograd 4-tiles + 1 (output 5x9)": P(2, 4, 7, 11, 6, 3, 3),
    "fused tiles + 1 (25 tiles), K 17, C 9": P(2, 9, 10, 9, 17, 3, 3, pad_h=1, pad_w=1),
    "fused 33 tiles, C 8, K 16": P(1, 8, 6, 22, 16, 3, 3, pad_h=1, pad_w=1),
    "rxs 5x5, odd output": P(1, 3, 9, 8, 4, 5, 5, pad_h=1, pad_w=2),
    "rxs 3x3 stride 2, odd picture": P(1, 5, 9, 11, 7, 3, 3, pad_h=1, pad_w=1, stride_h=2,
                                       stride_w=2),
    "rxs 3x3 stride 2, no pad, even picture": P(2, 3, 8, 10, 4, 3, 3, stride_h=2,
                                                stride_w=2),
    "rxs 2x5 pad 3": P(1, 2, 4, 6, 3, 2, 5, pad_h=3, pad_w=3),
    "GPU tiles + 1 (K 129, 257 positions)": P(1, 3, 1, 257, 129, 1, 1),
    "split reductions (K 65, C 257, 3x3 picture)": P(2, 257, 3, 3, 65, 1, 1),
    "N = 33, 3x3 picture": P(33, 4, 3, 3, 5, 3, 3, pad_h=1, pad_w=1),
    "fused GPU tiles + 1 (129 tiles, K 4)": P(1, 9, 2, 258, 4, 3, 3, pad_h=1, pad_w=1),
    "fused GPU 33 tiles, K 33": P(1, 9, 2, 66, 33, 3, 3, pad_h=1, pad_w=1),
    "depthwise row of 129, 5 rows": P(1, 3, 5, 129, 3, 3, 3, pad_h=1, pad_w=1, groups=3),
    "1x300 row, 1x3 filter": P(2, 3, 1, 300, 4, 1, 3, pad_w=1),
    "chanvec 6 positions + 1 across images, K 64": P(7, 3, 1, 1, 64, 3, 3, pad_h=1, pad_w=1),
    "chanvec 12 x 32 block, stride 3, pad 2 > filter": P(2, 5, 8, 7, 32, 2, 2, pad_h=2,
                                                         pad_w=2, stride_h=3, stride_w=3),
    "chanvec groups of 32, 1x1 picture, 3x3 pad 1": P(3, 4, 1, 1, 64, 3, 3, pad_h=1,
                                                      pad_w=1, groups=2),
}

CASES = [(name, d) for name in SHAPES for d in DIRECTIONS]
#: Solvers that decline every GPU (their kernels are CPU designs; direct.chanvec also needs
#: 8- or 16-float vectors).
CPU_ONLY = {"direct.chanvec"}
#: "cpu": this machine's OpenCL device; "gpu": the same device presented as a GPU with an
#: H200's 132 compute units, so that the solvers plan as for a GPU (other builds, tiles,
#: work-group shapes and reduction splits): this checks the GPU plans' index arithmetic
#: on any machine (not their speed).
KINDS = ("cpu", "gpu")
KIND_IDS = ["cpu plans", "gpu plans"]    # not "gpu": the gpu marker's keyword


def _handle_as(handle, kind: str):
    import dataclasses

    from wticonv import Handle
    from wticonv.runtime.device import Device

    if kind == handle.device.kind:
        return handle
    real = handle.device
    info = dataclasses.replace(real.info, kind=kind, compute_units=132 if kind == "gpu"
                               else real.info.compute_units)
    return Handle(Device(real.cl_device, info, real.store), handle.registry)


@pytest.fixture(scope="module")
def suts(handle):
    missing = [sid for sid in BUILT_INS if sid not in handle.registry.ids()]
    assert not missing, f"built-in solvers not installed: {missing}"
    from wticonv.runtime.kit import tensor_cores

    handles = {kind: _handle_as(handle, kind) for kind in KINDS}
    return {kind: {sid: SolverUnderTest(h, sid)
                   for sid in BUILT_INS + (TENSOR_CORE if tensor_cores(h.device) else [])}
            for kind, h in handles.items()}


def _variants(sut: SolverUnderTest, p) -> list:
    """``(workspace limit, perf config)`` pairs to run: the default; half the workspace
    the solver takes (fewer images per chunk, fewer splits) where it still accepts that;
    and every perf config of a tunable solver (what ``wticonv tune`` times and may store)."""
    from wticonv.measuring.tune import offered_perf_configs

    h, sid = sut.handle, sut.solver_id
    out = [(None, None)]
    ws = h.select(p, solver=sid, allow_tf32=True).chosen.workspace or 0
    if ws > 1:
        try:
            h.select(p, solver=sid, workspace_limit=ws // 2, allow_tf32=True)
            out.append((ws // 2, None))
        except WticonvError:
            pass
    if h.registry.get(sid).tunable:
        out += [(None, c) for c in offered_perf_configs(h.registry, sid, p, h.device, None)]
    return out


@pytest.mark.parametrize("kind", KINDS, ids=KIND_IDS)
@pytest.mark.parametrize("name, direction", CASES, ids=[f"{n}-{d}" for n, d in CASES])
def test_every_accepting_solver_matches_the_reference(suts, kind, name, direction):
    p = SHAPES[name].with_direction(direction)
    data = random_data(p, seed=len(name))
    want = reference(p, **{k: v for k, v in data.items() if k != OUTPUT_TENSOR[direction]})
    ran, wrong = [], []
    for sid, sut in suts[kind].items():
        if not sut.accepts(p):
            continue
        for limit, config in _variants(sut, p):
            with _device_tensors(sut.handle.device, p, data) as t:
                sut.handle.run(p, t.tensors, solver=sid, workspace_limit=limit,
                               perf_config=config, allow_tf32=True)
                t.check_output_guards()
                got = t.output()
            err, tol = float(rms_range(got, want)), sut.tolerance(p)
            ran.append(sid)
            if not err <= tol:
                wrong.append(f"{sid} (workspace limit {limit}, perf config {config}): "
                             f"rms_range {err:.3g} > {tol:.3g}")
    assert ran, f"no solver accepts {p.key} ({p.describe()})"
    assert not wrong, f"{p.key} ({p.describe()}) on a {kind}: " + "; ".join(wrong)


@pytest.mark.parametrize("kind", KINDS, ids=KIND_IDS)
def test_each_solver_accepts_some_edge_shapes(suts, kind):
    accepted = {sid: sum(sut.accepts(SHAPES[n].with_direction(d)) for n, d in CASES)
                for sid, sut in suts[kind].items()
                if not (sid in CPU_ONLY and (kind != "cpu"
                                             or sut.handle.device.info.vector_width < 8))}
    assert all(count > 0 for count in accepted.values()), accepted
    # direct.naive and gemm.im2col run everything; the rest take their own share
    assert accepted["direct.naive"] == accepted["gemm.im2col"] == len(CASES)
    assert accepted["direct.tiled"] > len(CASES) * 0.8, accepted
