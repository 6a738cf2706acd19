"""gemm.im2col and gemm.1x1 against the float64 reference: network layers, edge shapes,
the chunked path, and 64-bit planning of problems too large to allocate."""

from __future__ import annotations

import dataclasses

from types import SimpleNamespace

import numpy as np
import pytest
from wticonv import ConvProblem, reference, rms_range
from wticonv.workloads.networks import load_network
from wticonv_gemm import plan
from wticonv_gemm.im2col import chunk_for
from wticonv_gemm.im2col import solver as im2col_solver
from wticonv_gemm.onebyone import solver as onebyone_solver

P = ConvProblem
OUT = {"fwd": "y", "bwd": "x", "wrw": "w"}


def check(handle, p: ConvProblem, solver: str, seed: int = 0, **kw) -> float:
    rng = np.random.default_rng(seed)
    given = {k: rng.uniform(-1, 1, s).astype(np.float32)
             for k, s in (("x", p.x_shape), ("w", p.w_shape), ("y", p.y_shape))
             if k != OUT[p.direction]}
    result = handle.compute(p, solver=solver, **given, **kw)
    err = rms_range(result, reference(p, **given))
    assert err < 1e-5, f"{solver} {p.key}: rms_range {err:.3g}"
    return err


def _layers(name):
    return [pytest.param(layer.problem, id=f"{name}-{layer.problem.key}")
            for layer in load_network(name, 1).layers]


@pytest.mark.parametrize("direction", ["fwd", "bwd", "wrw"])
@pytest.mark.parametrize("p", _layers("resnet50") + _layers("inception3"))
def test_network_layers(handle, p, direction):
    q = p.with_direction(direction)
    check(handle, q, "gemm.im2col")
    if onebyone_solver.is_applicable(q, handle.device) is True:
        check(handle, q, "gemm.1x1")


EDGE = {
    "tile remainders everywhere": P(3, 13, 11, 9, 37, 3, 3, pad_h=1, pad_w=1),
    "prime sizes, stride 2": P(2, 17, 23, 19, 29, 5, 3, pad_h=2, pad_w=1, stride_h=2,
                               stride_w=2),
    "1x1 stride 2": P(2, 24, 15, 13, 40, 1, 1, stride_h=2, stride_w=2),
    # the CPU column buffer's 8-wide stride-2 copy, its row ends and scalar tails
    "stride 2 on wide odd rows": P(2, 3, 9, 41, 5, 3, 3, pad_h=1, pad_w=1, stride_h=2,
                                   stride_w=2),
    "7x7 stride 2, pad 3, wide rows": P(1, 2, 11, 50, 4, 7, 7, pad_h=3, pad_w=3,
                                        stride_h=2, stride_w=2),
    "1x1 stride 2x1": P(2, 8, 9, 11, 16, 1, 1, stride_h=2),
    "1x1 on a 5x5 picture (columns cross images)": P(5, 48, 5, 5, 40, 1, 1),
    "1x1 on a 2x3 picture": P(7, 16, 2, 3, 24, 1, 1),
    "dilation 2": P(2, 16, 17, 15, 16, 3, 3, pad_h=2, pad_w=2, dilation_h=2, dilation_w=2),
    "dilation 3 with groups": P(1, 12, 19, 19, 18, 3, 3, pad_h=3, pad_w=3, dilation_h=3,
                                dilation_w=3, groups=3),
    "groups 4": P(2, 32, 9, 9, 64, 3, 3, pad_h=1, pad_w=1, groups=4),
    "depthwise": P(2, 16, 12, 12, 16, 3, 3, pad_h=1, pad_w=1, groups=16),
    "1x1 with groups": P(3, 32, 7, 7, 48, 1, 1, groups=4),
    "K = 1": P(2, 8, 10, 10, 1, 3, 3, pad_h=1, pad_w=1),
    "C = 1": P(2, 1, 10, 10, 8, 3, 3, pad_h=1, pad_w=1),
    "C = K = 1, 1x1": P(3, 1, 6, 6, 1, 1, 1),
    "large C, small picture": P(1, 2048, 3, 3, 16, 3, 3, pad_h=1, pad_w=1),
    "large C 1x1": P(2, 1536, 4, 4, 24, 1, 1),
    "1x1 picture, padding 1": P(2, 8, 1, 1, 8, 3, 3, pad_h=1, pad_w=1),
    "filter larger than stride": P(1, 4, 12, 12, 8, 2, 2, stride_h=3, stride_w=3),
    "pad larger than filter": P(1, 3, 4, 4, 5, 2, 2, pad_h=3, pad_w=3),
    "non-square filter 1x7": P(2, 8, 9, 17, 8, 1, 7, pad_w=3),
    "non-square filter 7x1": P(2, 8, 17, 9, 8, 7, 1, pad_h=3),
}


@pytest.mark.parametrize("direction", ["fwd", "bwd", "wrw"])
@pytest.mark.parametrize("name", list(EDGE))
def test_edge_shapes(handle, name, direction):
    q = EDGE[name].with_direction(direction)
    check(handle, q, "gemm.im2col", seed=len(name))
    if onebyone_solver.is_applicable(q, handle.device) is True:
        check(handle, q, "gemm.1x1", seed=len(name))


@pytest.mark.parametrize("direction", ["fwd", "bwd", "wrw"])
def test_chunked_under_a_small_workspace_limit(handle, direction):
    p = P(5, 6, 9, 8, 10, 3, 3, pad_h=1, pad_w=1, direction=direction)
    per_image = plan.col_bytes_per_image(p)
    assert per_image == 6 * 9 * 9 * 8 * 4
    limit = int(2.5 * per_image)
    kind = "cpu" if handle.device.kind == "cpu" else "gpu"
    cu = handle.device.info.compute_units
    nc, splits, ws = plan.im2col_layout(p, kind, cu, limit)
    sel = handle.select(p, workspace_limit=limit, solver="gemm.im2col")
    assert sel.chosen.workspace == ws <= limit
    if splits == 1:  # 2 images per chunk: 3 chunks for N=5
        assert (nc, ws) == (2, plan.col_bytes(p, kind, 2)) and ws >= 2 * per_image
    if kind == "cpu" and direction == "wrw":  # the row buffer: 72 rows of C R S = 54
        assert plan.row_ld(p) == 54 and plan.col_bytes(p, kind, 2) == 2 * per_image
    assert 1 <= nc < 5
    launches = plan.plan_im2col(p, kind, cu, ws)
    assert sum(la.kernel.startswith("sgemm") for la in launches) == -(-5 // nc)
    check(handle, p, "gemm.im2col", workspace_limit=limit)
    whole = handle.select(p, solver="gemm.im2col").chosen.workspace
    assert whole == plan.im2col_layout(p, kind, cu, 2**40)[2] >= 5 * per_image


def test_declines_below_one_image(handle):
    p = P(4, 16, 10, 10, 8, 3, 3, pad_h=1, pad_w=1)
    kind = "cpu" if handle.device.kind == "cpu" else "gpu"
    need = plan.col_bytes(p, kind, 1)
    # 100 columns a row: under 256, not padded
    assert need == 16 * 9 * 100 * 4
    verdict = im2col_solver.is_applicable(p, handle.device, need - 1)
    assert not verdict
    assert verdict.reason == (f"needs at least {need} bytes of workspace (one image's column "
                              f"buffer); the limit is {need - 1}")
    assert im2col_solver.is_applicable(p, handle.device, need) is True


@pytest.mark.parametrize("p, reason", [
    (P(1, 4, 8, 8, 4, 3, 3), "only 1x1 filters (this one is 3x3)"),
    (P(1, 4, 8, 8, 4, 1, 1, pad_h=1), "only unpadded 1x1 convolutions"),
    (P(1, 4, 8, 8, 4, 1, 1, stride_h=3), "only strides 1 and 2 (stride 3x1)"),
])
def test_1x1_declines_with_reason(handle, p, reason):
    verdict = onebyone_solver.is_applicable(p, handle.device)
    assert not verdict and verdict.reason == reason


def test_1x1_has_no_workspace_and_a_real_wti(handle):
    p = P(8, 256, 28, 28, 512, 1, 1)
    sel = handle.select(p)
    by_id = {v.solver_id: v for v in sel.verdicts}
    assert by_id["gemm.1x1"].workspace == 0 < by_id["gemm.im2col"].workspace
    assert min(by_id["gemm.1x1"].wti, by_id["gemm.im2col"].wti) > 10 * by_id["direct.naive"].wti
    # a GEMM is chosen, in FP32 or on tensor cores in 3xTF32 where the GPU has them (or,
    # on CPUs with 16-float vectors, direct.chanvec: output channels in the lanes, as
    # fast on such layers)
    assert sel.solver_id.removesuffix("_3xtf32") in ("gemm.1x1", "gemm.im2col",
                                                       "direct.chanvec")
    # the model charges the im2col pass: on a 1x1 problem it is pure overhead
    im2col_steps = plan.plan_im2col(p, "cpu", 2, plan.im2col_layout(p, "cpu", 2, 2**40)[2])
    assert [la.kernel for la in im2col_steps] == ["im2col_cpu", "sgemm_nn"]
    assert im2col_steps[0].bytes > 0


HUGE_GPU = SimpleNamespace(kind="gpu", info=SimpleNamespace(
    compute_units=132, max_alloc_bytes=2**40, max_work_group_size=1024,
    global_mem_bytes=2**44))


@pytest.mark.parametrize("direction", ["fwd", "bwd", "wrw"])
def test_planning_past_2_31_is_64_bit(direction):
    # 4608 x 802816 = 3.7e9 column elements: planned, never allocated.
    p = P(n=256, c=512, h=56, w=56, k=512, r=3, s=3, pad_h=1, pad_w=1, direction=direction)
    nc = chunk_for(p, HUGE_GPU, 2**40)
    assert nc == 256
    ws = nc * plan.col_bytes_per_image(p)
    assert ws // 4 == 4608 * 256 * 3136 > 2**31
    launches = plan.plan_im2col(p, "gpu", 132, ws)
    gemm = next(launch for launch in launches if launch.kernel == "sgemm")
    for launch in launches:
        for arg in launch.args:
            if isinstance(arg, np.integer):
                assert arg.dtype in (np.int32, np.int64)
                if abs(int(arg)) >= 2**31:
                    assert arg.dtype == np.int64
    # the column buffer's group/row stride (J = 802816 columns x 4608 rows) and the
    # offsets of y/dy reach past 2^31 and travel as 64-bit arguments
    big = [int(a) for a in gemm.args if isinstance(a, np.int64) and int(a) >= 2**31]
    sizes = {"fwd": 2**31, "bwd": 2**31, "wrw": 0}[direction]
    if sizes:
        assert big, "no 64-bit argument past 2^31 in the GEMM launch"
    src = open(plan.__file__.replace("plan.py", "kernels/im2col.cl")).read()
    assert "__global float *out = col + (long)c * R * S * J + (long)n * P + p;" in src


def test_chunks_keep_the_gemm_width_32_bit():
    p = P(n=65536, c=4, h=224, w=224, k=4, r=1, s=1)
    nc = chunk_for(p, HUGE_GPU, 2**40)
    assert nc * 224 * 224 < 2**31 and (nc + 1) * 224 * 224 >= 2**31


GPU_PLAN_CASES = [
    P(3, 13, 11, 9, 37, 3, 3, pad_h=1, pad_w=1),
    P(8, 16, 7, 7, 24, 3, 3, pad_h=1, pad_w=1),          # wrw: split-K over 8 images
    P(2, 8, 9, 11, 16, 1, 1, stride_h=2, stride_w=2),
    P(2, 6, 8, 8, 6, 3, 3, pad_h=1, pad_w=1, groups=3),
    P(3, 8, 16, 16, 16, 1, 1),                            # 1x1: float4 loads of whole pictures
    P(3, 8, 8, 8, 16, 1, 1),                              # 1x1: small pictures, scalar loads
]


@pytest.mark.parametrize("direction", ["fwd", "bwd", "wrw"])
@pytest.mark.parametrize("p", GPU_PLAN_CASES, ids=lambda p: p.key)
def test_gpu_plans_run_correctly_on_any_device(handle, p, direction, monkeypatch):
    """The GPU kernels and plans (local-memory SGEMM, split-K, element-wise im2col) run on
    the CPU device too, so CI checks their results without a GPU. These grids are small,
    where the plans would take the scalar loads (params.VEC_LATENCY); with that charge off,
    they take float4 loads wherever those apply, so both variants run."""
    from wticonv.runtime import kit
    from wticonv_gemm import params

    monkeypatch.setattr(params, "VEC_LATENCY", 0.0)

    q = p.with_direction(direction)
    dev = handle.device
    rng = np.random.default_rng(5)
    data = {k: rng.uniform(-1, 1, s).astype(np.float32)
            for k, s in (("x", q.x_shape), ("w", q.w_shape), ("y", q.y_shape))}
    layout = plan.im2col_layout(q, "gpu", 132, 2**40)
    launches = plan.plan_im2col(q, "gpu", 132, layout[2])
    if direction == "wrw" and q.n == 8:
        assert layout[1] > 1 and any(la.kernel == "splitk_reduce" for la in launches)
    out = OUT[direction]
    bufs = {k: dev.upload(v) for k, v in data.items()}
    bufs["ws"] = dev.alloc(layout[2])
    kit.enqueue(dev, launches, bufs)
    result = dev.download(bufs[out], {"x": q.x_shape, "w": q.w_shape, "y": q.y_shape}[out])
    given = {k: v for k, v in data.items() if k != out}
    assert rms_range(result, reference(q, **given)) < 1e-5
    if q.r == q.s == 1 and q.pad_h == 0:
        one = plan.plan_1x1(q, "gpu", 132)
        if q.stride_h == 1 and direction == "fwd" and q.c == 8:
            # float4 picture loads only from gemm.VEC_MIN_PICTURE pixels per picture
            assert ("-DGEMM_VEC=1" in one[-1].options) == (q.h * q.w >= 256)
        bufs[out].release()
        bufs[out] = dev.upload(np.full_like(data[out], np.nan))
        kit.enqueue(dev, one, bufs)
        result = dev.download(bufs[out], result.shape)
        assert rms_range(result, reference(q, **given)) < 1e-5
    for b in bufs.values():
        b.release()


@pytest.mark.parametrize("M, N, K, vec", [(37, 53, 29, False), (64, 100, 36, True),
                                          (128, 130, 68, True), (20, 8, 4, True),
                                          (64, 100, 36, False)])
def test_gpu_sgemm_kernel_plain_matrices(handle, M, N, K, vec):
    """The GPU SGEMM (scalar and float4-load variants, tile remainders in M, N and K) on
    plain row-major matrices, run on whatever device is present."""
    from wticonv.runtime import kit
    from wticonv_gemm.sgemm import ColMap, GemmOp, Operand, gemm_launch

    dev = handle.device
    rng = np.random.default_rng(1)
    ldb = -(-N // 4) * 4  # a padded leading dimension keeps B's rows 16-byte aligned
    A = rng.uniform(-1, 1, (M, K)).astype(np.float32)
    B = rng.uniform(-1, 1, (K, ldb)).astype(np.float32)
    op = GemmOp(M, N, K, a=Operand("a", ms=K, ks=1), b=Operand("b", ks=ldb, cols=ColMap()),
                c=Operand("c", ms=N, cols=ColMap()))
    launch = gemm_launch(op, "gpu", 132, vec=vec)
    assert ("-DGEMM_VEC=1" in launch.options) == (vec and M != 37)  # 37: rows unaligned
    bufs = {"a": dev.upload(A), "b": dev.upload(B), "c": dev.alloc(4 * M * N)}
    kit.enqueue(dev, [launch], bufs)
    C = dev.download(bufs["c"], (M, N))
    ref = A.astype(np.float64) @ B[:, :N].astype(np.float64)
    assert rms_range(C, ref) < 1e-6


@pytest.mark.parametrize("vector_width", [4, 8, 16])
@pytest.mark.parametrize("direction", ["fwd", "bwd", "wrw"])
@pytest.mark.parametrize("p", [P(3, 13, 11, 9, 37, 3, 3, pad_h=1, pad_w=1),
                               P(5, 48, 5, 5, 40, 1, 1),
                               P(2, 24, 15, 13, 40, 1, 1, stride_h=2, stride_w=2)],
                         ids=lambda p: p.key)
def test_cpu_kernels_at_every_vector_width(handle, p, direction, vector_width):
    """The CPU SGEMM kernels for AVX-512 (16), AVX2 (8) and SSE/NEON (4) vector widths,
    run on whatever device is present."""
    from wticonv.runtime import kit

    q = p.with_direction(direction)
    dev = handle.device
    rng = np.random.default_rng(2)
    data = {k: rng.uniform(-1, 1, s).astype(np.float32)
            for k, s in (("x", q.x_shape), ("w", q.w_shape), ("y", q.y_shape))}
    out = OUT[direction]
    given = {k: v for k, v in data.items() if k != out}
    ref = reference(q, **given)
    plans = [plan.plan_im2col(q, "cpu", 2, 2**30, vector_width)]
    if q.r == 1:
        plans.append(plan.plan_1x1(q, "cpu", 2, vector_width))
    for launches in plans:
        assert all(f"-DGEMM_VW={vector_width}" in la.options for la in launches
                   if la.kernel.startswith("sgemm"))
        bufs = {k: dev.upload(v) for k, v in data.items()}
        bufs["ws"] = dev.alloc(2**20)
        bufs[out].release()
        bufs[out] = dev.upload(np.full_like(data[out], np.nan))
        kit.enqueue(dev, launches, bufs)
        assert rms_range(dev.download(bufs[out], ref.shape), ref) < 1e-5
        for b in bufs.values():
            b.release()


def test_default_workspace_is_capped_without_a_limit():
    p = P(n=64, c=256, h=224, w=224, k=256, r=3, s=3, pad_h=1, pad_w=1)
    per_image = plan.col_bytes_per_image(p)
    nc = chunk_for(p, HUGE_GPU, None)
    assert nc * per_image <= 2**30 < (nc + 1) * per_image
    huge = P(n=2, c=4096, h=128, w=128, k=8, r=3, s=3, pad_h=1, pad_w=1)
    assert plan.col_bytes_per_image(huge) > 2**30
    assert chunk_for(huge, HUGE_GPU, None) == 1  # at least one image, cap or not


def test_gpu_sgemm_float4_only_where_the_grid_hides_its_latency():
    """The GPU plan takes the float4-load variant for a large GEMM and the scalar one for a
    grid of a few work-groups (params.VEC_LATENCY), and the model charges float4 on small
    grids: 1 / (1 + VEC_LATENCY x (1 - groups / (VEC_FULL_GROUPS_PER_CU x CUs)))."""
    from wticonv_gemm import params
    from wticonv_gemm.sgemm import ColMap, GemmOp, Operand, gemm_launch

    def op(M, N, K):
        return GemmOp(M, N, K, a=Operand("a", ms=K, ks=1), b=Operand("b", ks=N, cols=ColMap()),
                      c=Operand("c", ms=N, cols=ColMap()))

    assert "-DGEMM_VEC=1" in gemm_launch(op(4096, 4096, 4096), "gpu", 132).options
    small = gemm_launch(op(64, 128, 512), "gpu", 132)
    assert "-DGEMM_VEC=1" not in small.options
    assert "-DGEMM_VEC=1" in gemm_launch(op(64, 128, 512), "gpu", 132, vec=True).options
    cfg = params.GPU_CONFIGS[1]                        # 64 x 64: 2 work-groups here
    plain = params.efficiency(cfg, 64, 128, 512, 1, 132, vec=True)
    short = 1 - 2 / (params.VEC_FULL_GROUPS_PER_CU * 132)
    unpenalized = (cfg.efficiency * (2 / 264) * 512 / (512 + 2 * cfg.kwg))
    assert plain == pytest.approx(unpenalized / (1 + params.VEC_LATENCY * short))


def test_gpu_col2im_charges_its_tap_loop():
    """The GPU col2im tests all R x S taps of every dx element (most skipped at stride
    2), and its launch charges 2 FLOPs a tap at plan.COL2IM_TAP_EFFICIENCY; the CPU's
    plane-ordered col2im skips nothing and is charged its traffic alone."""
    p = P(32, 3, 224, 224, 64, 7, 7, pad_h=3, pad_w=3, stride_h=2, stride_w=2,
          direction="bwd")
    gpu = [la for la in plan.plan_im2col(p, "gpu", 132, 2**40) if la.kernel == "col2im"]
    assert gpu and sum(la.flops for la in gpu) == 2 * 32 * 3 * 224 * 224 * 49
    assert all(la.efficiency == plan.COL2IM_TAP_EFFICIENCY for la in gpu)
    cpu = [la for la in plan.plan_im2col(p, "cpu", 2, 2**40) if la.kernel == "col2im_cpu"]
    assert cpu and all(la.flops == 0 for la in cpu)


@pytest.mark.parametrize("p", [
    P(1, 128, 7, 7, 64, 3, 3, pad_h=1, pad_w=1),                   # 1152 steps, 49 pixels
    P(2, 256, 9, 6, 32, 3, 3, pad_h=1, pad_w=1, stride_h=2, stride_w=2, groups=2),
    P(3, 1024, 5, 5, 20, 1, 1),                                     # 1x1, rows of 1024
    P(1, 130, 6, 7, 17, 3, 3, pad_h=2, pad_w=2, dilation_h=2, dilation_w=2),
], ids=["3x3", "groups-stride", "1x1", "dilated"])
def test_cpu_forward_through_the_row_buffer(handle, p):
    """CPU forward with a long reduction and few pixels (plan.FWD_ROWS_*): im2row, then
    sgemm_nt reading the filters and each pixel's row along the reduction; against the
    float64 reference. Its neighbours across either bound keep the column buffer."""
    assert plan._rows(p, "cpu") and not plan._rows(p, "gpu")
    kernels = [la.kernel for la in plan.plan_im2col(p, "cpu", 2, 2**40)]
    assert kernels == ["im2row_cpu", "sgemm_nt"]
    # one channel a group fewer than the reduction needs
    short = dataclasses.replace(p, c=p.groups * (-(-plan.FWD_ROWS_MIN_REDUCTION
                                                   // (p.r * p.s)) - 1))
    assert not plan._rows(short, "cpu")
    wide = dataclasses.replace(p, n=plan.FWD_ROWS_MAX_COLUMNS // (p.ho * p.wo) + 1)
    assert not plan._rows(wide, "cpu")
    assert [la.kernel for la in plan.plan_im2col(wide, "cpu", 2, 2**40)] == [
        "im2col_cpu", "sgemm_nn"]
    if handle.device.kind == "cpu":
        check(handle, p, "gemm.im2col")


@pytest.mark.parametrize("n, ho, expected", [
    (8, 112, 100368),   # 100352 = 8 x 112 x 112 floats, 98 x 4 KiB: one more 64-byte line
    (1, 33, 1104),      # 1089 -> 1104 (69 x 16, odd)
    (2, 64, 8208),      # 8192 -> 8208 (513 x 16)
])
def test_cpu_column_rows_avoid_cache_set_aliasing(n, ho, expected):
    # the column buffer's rows an odd multiple of 64 bytes apart (here backward weights on
    # pictures of over ROWS_MAX_PICTURE pixels, read along its rows by sgemm_nt)
    p = P(n, 3, ho, ho, 4, 1, 1, direction="wrw")
    assert ho * ho > plan.ROWS_MAX_PICTURE
    ld = plan.col_ld(p, "cpu", n)
    assert ld == expected and ld % 16 == 0 and (ld // 16) % 2 == 1
    assert plan.col_ld(p, "gpu", n) == n * ho * ho
    assert plan.col_bytes(p, "gpu", n) == n * plan.col_bytes_per_image(p)


@pytest.mark.parametrize("M, N, K, lda, nb, beta", [
    (40, 1000, 600, 1024, 1, 0),   # rows of A 4 KiB apart
    (25, 1000, 300, 2048, 3, 1),   # with batches (the chunks cross them) and beta
    (40, 1000, 600, 601, 2, 0),
])
def test_cpu_sgemm_blocks_and_chunks(handle, M, N, K, lda, nb, beta):
    """sgemm_nn's blocks of tiles (all row blocks x 2 here) and its reduction chunks across batches
    (K * nb steps, GEMM_KC a chunk: C written by the first, added to by the others), on
    plain matrices, on the CPU."""
    from wticonv.runtime import kit
    from wticonv_gemm import params
    from wticonv_gemm.sgemm import ColMap, GemmOp, Operand, gemm_launch

    dev = handle.device
    rng = np.random.default_rng(3)
    A = rng.uniform(-1, 1, (nb, M, lda)).astype(np.float32)
    B = rng.uniform(-1, 1, (nb, K, N)).astype(np.float32)
    C0 = rng.uniform(-1, 1, (M, N)).astype(np.float32)
    op = GemmOp(M, N, K, a=Operand("a", ms=lda, ks=1, bs=M * lda),
                b=Operand("b", ks=N, bs=K * N, cols=ColMap()),
                c=Operand("c", ms=N, cols=ColMap()), nb=nb, beta=beta)
    launch = gemm_launch(op, "cpu", 1)          # one compute unit
    rb, cb = params.cpu_nn_blocks(M, N, 1, 1)
    # 8 work-items for one compute unit: every row block, 4 of the 32 column blocks each
    assert params.CPU_NN_ITEMS_PER_CU == 8
    assert launch.kernel == "sgemm_nn" and (rb, cb) == (-(-M // 12), 4)
    assert launch.global_size == (1, 8, 1)
    bufs = {"a": dev.upload(A), "b": dev.upload(B), "c": dev.upload(C0)}
    if dev.kind != "cpu":
        pytest.skip("the CPU kernel's vector code runs on CPU devices")
    kit.enqueue(dev, [launch], bufs)
    C = dev.download(bufs["c"], (M, N))
    ref = sum(A[b, :, :K].astype(np.float64) @ B[b].astype(np.float64) for b in range(nb))
    if beta:
        ref = ref + C0
    assert rms_range(C, ref) < 1e-6


def test_cpu_blocks_are_even():
    """The blocks of tiles of one CPU work-item split each axis into blocks of equal size
    but for the last (none of one tile beside blocks of eight), keeping the number of
    work-items the halving chose (params._even)."""
    from wticonv_gemm import params

    # ResNet-50's 256 -> 256 3x3 stride-2 layer at N=8, as its GEMM: 22 x 49 tiles; the
    # halving picks blocks of 8 x 8 (3 x 7 work-items, the last column block 1 tile wide)
    rb, cb = params.cpu_nn_blocks(256, 1568, 1, 2)
    assert (rb, cb) == (8, 7)
    assert (-(-22 // rb), -(-49 // cb)) == (3, 7)
    for tiles in range(1, 200):
        for block in range(1, 17):
            even = params._even(tiles, block)
            assert even <= block and -(-tiles // even) == -(-tiles // block)
            last = tiles - (-(-tiles // even) - 1) * even
            assert even - last < -(-tiles // even)     # the last block at most 1 per block short


@pytest.mark.parametrize("M, N, K, nb, beta, blocks", [
    # 10 x 19 tiles in blocks of 4 x 7 (8 evened out to 7: three blocks of 7, 7 and 5):
    # the last block of each axis partial, the last tile too; chunks of 256 steps and a
    # tail of 600 % 16
    (37, 74, 600, 1, 0, (4, 7)),
    (16, 128, 300, 3, 1, (4, 4)),   # 8 work-items kept; batches, each with its tail; beta
    (13, 9, 7, 2, 0, (1, 1)),       # a reduction shorter than a vector: the tail only
])
def test_cpu_sgemm_nt_blocks_chunks_and_tails(handle, M, N, K, nb, beta, blocks):
    """sgemm_nt's blocks of 4 x 4 tiles (the last block of each axis partial), its
    reduction chunks (params.CPU_NT_KC steps) and the scalar tail of each batch, on
    matrices whose rows lie along k (as backward weights reads them), on the CPU."""
    from wticonv.runtime import kit
    from wticonv_gemm import params
    from wticonv_gemm.sgemm import ColMap, GemmOp, Operand, gemm_launch

    dev = handle.device
    rng = np.random.default_rng(5)
    lda, ldb = K + 3, K + 5
    A = rng.uniform(-1, 1, (nb, M, lda)).astype(np.float32)
    B = rng.uniform(-1, 1, (nb, N, ldb)).astype(np.float32)
    C0 = rng.uniform(-1, 1, (M, N)).astype(np.float32)
    op = GemmOp(M, N, K, a=Operand("a", ms=lda, ks=1, bs=M * lda),
                b=Operand("b", ks=1, bs=N * ldb, cols=ColMap.strided(ldb)),
                c=Operand("c", ms=N, cols=ColMap()), nb=nb, beta=beta)
    launch = gemm_launch(op, "cpu", 1)          # one compute unit
    rb, cb = params.cpu_nt_blocks(M, N, 1, 1)
    assert launch.kernel == "sgemm_nt"
    assert params.CPU_NT_MAX_BLOCKS == (4, 8) and (rb, cb) == blocks
    assert launch.global_size == (-(-M // (4 * rb)), -(-N // (4 * cb)), 1)
    if dev.kind != "cpu":
        pytest.skip("the CPU kernel's vector code runs on CPU devices")
    bufs = {"a": dev.upload(A), "b": dev.upload(B), "c": dev.upload(C0)}
    kit.enqueue(dev, [launch], bufs)
    C = dev.download(bufs["c"], (M, N))
    ref = sum(A[b, :, :K].astype(np.float64) @ B[b, :, :K].astype(np.float64).T
              for b in range(nb))
    if beta:
        ref = ref + C0
    assert rms_range(C, ref) < 1e-6


def test_cpu_sgemm_nt_model_charges_short_pictures():
    """sgemm_nt's predicted rate falls with the picture's reduction length (each picture
    starts its tiles anew, the steps past the last vector run scalar), as measured on
    ResNet-50's 1x1 backward-weights layers (params.CPU_NT_PICTURE_STEPS)."""
    from wticonv_gemm import params

    rate = {k: params.cpu_nt_efficiency(256, 512, k, 1, 2) for k in (3136, 784, 196, 49)}
    assert rate[3136] > rate[784] > rate[196] > rate[49]
    assert 0.85 < rate[784] / params.CPU_NT.efficiency < 1.0
    assert 0.3 < rate[49] / rate[784] < 0.5                # measured 0.38
