"""The GEMM solvers' perf configs: the blockings (CPU kernels) and tiles (GPU kernels) that
``wticonv tune`` times, each computing the same result as the default."""

from __future__ import annotations

import numpy as np
import pytest
from wticonv import ConvProblem, reference, rms_range
from wticonv.runtime import kit
from wticonv.runtime.kit import kernel_family
from wticonv_gemm import params, plan
from wticonv_gemm.im2col import solver as im2col_solver
from wticonv_gemm.onebyone import solver as onebyone_solver
from wticonv_gemm.sgemm import ColMap, GemmOp, Operand, gemm_configs, gemm_launch

P = ConvProblem
OUT = {"fwd": "y", "bwd": "x", "wrw": "w"}


def _matmul(M, N, K, lda):
    return GemmOp(M, N, K, a=Operand("a", ms=lda, ks=1), b=Operand("b", ks=N, cols=ColMap()),
                  c=Operand("c", ms=N, cols=ColMap()))


def test_cpu_names_are_the_distinct_blockings_default_first():
    op = _matmul(1024, 1024, 1024, 1024)
    names = gemm_configs(op, "cpu", 2)
    rb, cb = params.cpu_nn_blocks(1024, 1024, 1, 2)
    assert names[0] == f"r{rb}c{cb}" == "r15c8"
    assert len(set(names)) == len(names) >= 4
    for name in names:
        launch = gemm_launch(op, "cpu", 2, config=name)
        r, c = (int(v) for v in name[1:].split("c"))
        assert launch.global_size == (-(-1024 // (12 * r)), -(-1024 // (32 * c)), 1)
    # a tiny GEMM has one blocking only: nothing to tune
    assert gemm_configs(_matmul(12, 32, 8, 8), "cpu", 2) == ["r1c1"]


def test_gpu_names_are_the_tiles():
    op = _matmul(512, 512, 512, 512)
    names = gemm_configs(op, "gpu", 132)
    default = gemm_launch(op, "gpu", 132)
    assert sorted(names) == sorted(f"t{c.mwg}x{c.nwg}x{c.kwg}" for c in params.GPU_CONFIGS)
    for name in names:
        mwg, nwg, kwg = name[1:].split("x")
        launch = gemm_launch(op, "gpu", 132, config=name)
        assert f"-DGEMM_MWG={mwg} -DGEMM_NWG={nwg} -DGEMM_KWG={kwg}" in launch.options
        assert (launch.options == default.options) == (name == names[0])   # default first
    tc = gemm_configs(op, "gpu", 132, math="3xtf32")
    wg = gemm_configs(op, "gpu", 132, math="3xtf32", wgmma=True)
    assert len(tc) == 3 and wg[:3] == tc and wg[3].startswith("wg")
    assert gemm_launch(op, "gpu", 132, math="3xtf32").options == gemm_launch(
        op, "gpu", 132, math="3xtf32", config=tc[0]).options
    launch = gemm_launch(op, "gpu", 132, math="3xtf32", config=wg[3])
    assert launch.kernel == "sgemm_wg" and "-DTC_SPLIT=1" in launch.options


@pytest.mark.parametrize("kind, math, name, match", [
    ("cpu", "fp32", "t64x64x8", "r<RB>c<CB>"),
    ("cpu", "fp32", "r0c4", "r<RB>c<CB>"),
    ("cpu", "fp32", "r8", "r<RB>c<CB>"),
    ("cpu", "fp32", "r\u0663c4", "r<RB>c<CB>"),     # an Arabic-Indic 3: not an ASCII digit
    ("cpu", "fp32", "r4c4 ", "r<RB>c<CB>"),
    ("gpu", "fp32", "r8c8", "t128x128x8"),
    ("gpu", "3xtf32", "t64x64x8", "128x128x64x64x16x8x3"),
])
def test_unknown_names_are_refused_with_the_accepted_forms(kind, math, name, match):
    with pytest.raises(ValueError, match=match):
        gemm_launch(_matmul(64, 64, 64, 64), kind, 2, math=math, config=name)


def test_sgemm_nt_blocks_stay_within_its_private_arrays():
    op = GemmOp(40, 40, 300, a=Operand("a", ms=300, ks=1),
                b=Operand("b", ks=1, cols=ColMap.strided(300)),
                c=Operand("c", ms=40, cols=ColMap()))
    most = params.CPU_NT_MAX_BLOCKS[0] * params.CPU_NT_MAX_BLOCKS[1]
    for name in gemm_configs(op, "cpu", 2):
        r, c = (int(v) for v in name[1:].split("c"))
        assert r * c <= most
    with pytest.raises(ValueError, match=f"at most {most}"):
        gemm_launch(op, "cpu", 2, config="r8c8")


@pytest.mark.parametrize("M, N, K, lda, nb, config", [
    (100, 300, 600, 1024, 1, None),      # rows of A 4 KiB apart: copied (9 x 12 rows)
    (100, 300, 600, 1024, 2, "r1c4"),    # one row block a work-item, batches in a chunk
    (250, 300, 300, 2048, 1, "r21c1"),   # 21 x 12 rows > GEMM_APACK_ROWS: read in place
    (100, 300, 600, 600, 1, None),       # rows 2400 bytes apart: read in place
    (100, 300, 600, 600, 3, "r2c4"),     # (GEMM_APACK_STRIDE), across batches
])
def test_cpu_sgemm_nn_copied_and_in_place_rows_of_a(handle, M, N, K, lda, nb, config):
    dev = handle.device
    if dev.kind != "cpu":
        pytest.skip("the CPU kernel's vector code runs on CPU devices")
    rng = np.random.default_rng(7)
    A = rng.uniform(-1, 1, (nb, M, lda)).astype(np.float32)
    B = rng.uniform(-1, 1, (nb, K, N)).astype(np.float32)
    op = GemmOp(M, N, K, a=Operand("a", ms=lda, ks=1, bs=M * lda),
                b=Operand("b", ks=N, bs=K * N, cols=ColMap()),
                c=Operand("c", ms=N, cols=ColMap()), nb=nb)
    launch = gemm_launch(op, "cpu", 2, config=config)
    rows = int(launch.options.split("-DGEMM_APACK_ROWS=")[1].split()[0])
    rb = launch.args[-2]
    assert (rb * 12 <= rows) == (config != "r21c1")
    bufs = {"a": dev.upload(A), "b": dev.upload(B),
            "c": dev.upload(np.full((M, N), np.nan, np.float32))}
    kit.enqueue(dev, [launch], bufs)
    C = dev.download(bufs["c"], (M, N))
    ref = sum(A[b, :, :K].astype(np.float64) @ B[b].astype(np.float64) for b in range(nb))
    assert rms_range(C, ref) < 1e-6


CASES = [
    P(3, 40, 9, 11, 70, 1, 1),                                   # gemm.1x1 and im2col
    P(2, 24, 15, 13, 40, 1, 1, stride_h=2, stride_w=2),
    P(3, 13, 11, 9, 37, 3, 3, pad_h=1, pad_w=1),
    P(8, 16, 7, 7, 24, 3, 3, pad_h=1, pad_w=1, groups=2),        # wrw: GPU split-K
]


@pytest.mark.parametrize("kind", ["cpu", "gpu"], ids=["cpu_kernels", "gpu_kernels"])
@pytest.mark.parametrize("direction", ["fwd", "bwd", "wrw"])
@pytest.mark.parametrize("p", CASES, ids=lambda p: p.key)
def test_every_perf_config_matches_the_reference(handle, p, direction, kind):
    """Each perf config of both solvers (their plans for CPU kernels and for GPU kernels,
    which run on any device) computes what the default does."""
    q = p.with_direction(direction)
    dev = handle.device
    if kind == "cpu" and dev.kind != "cpu":
        pytest.skip("the CPU kernels' vector code runs on CPU devices")
    cu = 2 if kind == "cpu" else 132
    rng = np.random.default_rng(11)
    data = {k: rng.uniform(-1, 1, s).astype(np.float32)
            for k, s in (("x", q.x_shape), ("w", q.w_shape), ("y", q.y_shape))}
    out = OUT[direction]
    ref = reference(q, **{k: v for k, v in data.items() if k != out})
    ws = plan.im2col_layout(q, kind, cu, 2**30)[2]
    plans = {"im2col": lambda **kw: plan.plan_im2col(q, kind, cu, ws, **kw)}
    if q.r == 1 and q.pad_h == 0:
        plans["1x1"] = lambda **kw: plan.plan_1x1(q, kind, cu, **kw)
    tried = 0
    for make in plans.values():
        ops: list = []
        make(ops=ops)
        names = plan.perf_configs(ops, kind, cu)
        assert len(set(names)) == len(names) and all(0 < len(n) <= 100 for n in names)
        # small problems have one blocking on CPUs (no perf config): any blocking is valid
        for name in names + (["r1c1", "r3c2"] if kind == "cpu" else []):
            bufs = {k: dev.upload(v) for k, v in data.items()}
            bufs[out].release()
            bufs[out] = dev.upload(np.full_like(data[out], np.nan))
            bufs["ws"] = dev.alloc(max(ws, 4))
            kit.enqueue(dev, make(config=name), bufs)
            got = dev.download(bufs[out], ref.shape)
            for b in bufs.values():
                b.release()
            assert rms_range(got, ref) < 1e-5, name
            tried += 1
    assert tried >= 2 * len(plans)


def test_solvers_list_and_use_their_perf_configs(handle):
    """Through the hooks: perf_configs answers the plan's names; get_wti, programs and run
    take each, an unknown one is refused, and workspace does not change with them."""
    dev = handle.device
    p = P(8, 64, 28, 28, 256, 1, 1)
    for solver in (onebyone_solver, im2col_solver):
        names = solver.perf_configs(problem=p, device=dev, workspace_limit=None) \
            if solver is im2col_solver else solver.perf_configs(problem=p, device=dev)
        assert len(names) >= 2
        # the heuristics' own choice is the default, never listed
        ops: list = []
        if solver is onebyone_solver:
            plan.plan_1x1(p, kernel_family(dev), dev.info.compute_units,
                          dev.info.vector_width, solver.math, ops=ops)
            main = max(ops, key=lambda op: op.flops)
            assert gemm_configs(main, kernel_family(dev), dev.info.compute_units,
                                dev.info.vector_width)[0] not in names
        wtis = set()
        for name in names:
            kw = {"workspace_limit": None} if solver is im2col_solver else {}
            w = solver.get_wti(problem=p, device=dev, perf_config=name, **kw)
            assert 0 < w <= 1.0
            wtis.add(round(w, 9))
            assert solver.programs(problem=p, device=dev, perf_config=name, **kw)
        with pytest.raises(ValueError, match="no GEMM config|no fp32 GPU GEMM tile"):
            kw = {"workspace_limit": None} if solver is im2col_solver else {}
            solver.get_wti(problem=p, device=dev, perf_config="nonsense", **kw)
        result = handle.compute(p, solver=solver.solver_id,
                                x=np.ones(p.x_shape, np.float32),
                                w=np.ones(p.w_shape, np.float32))
        assert np.allclose(result, 64.0)


def test_im2col_names_do_not_depend_on_the_workspace_limit(handle):
    """Under a limit the column buffer holds fewer images, so the GEMM is narrower; the
    names stay those of the unlimited plan (a record tuned under the limit stays offered
    without it), and each still runs, in the smaller chunks, to the right result."""
    dev = handle.device
    p = P(8, 64, 28, 28, 64, 3, 3, pad_h=1, pad_w=1).with_direction("bwd")
    full = im2col_solver.perf_configs(problem=p, device=dev, workspace_limit=None)
    limit = 2 * plan.col_bytes_per_image(p)
    assert len(full) >= 2
    assert im2col_solver.perf_configs(problem=p, device=dev, workspace_limit=limit) == full
    assert im2col_solver.workspace_size(problem=p, device=dev, workspace_limit=limit) <= limit
    rng = np.random.default_rng(4)
    w = rng.uniform(-1, 1, p.w_shape).astype(np.float32)
    dy = rng.uniform(-1, 1, p.y_shape).astype(np.float32)
    got = handle.compute(p, w=w, y=dy, solver="gemm.im2col", perf_config=full[-1],
                         workspace_limit=limit)
    assert rms_range(got, reference(p, w=w, y=dy)) < 1e-5
