"""The tensor-core GEMM solvers off the GPU: what they declare, where they decline, and
their launch plans (the kernel itself runs in tests/test_gpu.py on an NVIDIA GPU)."""

from __future__ import annotations

import pytest
from wticonv import ConvProblem, Decline
from wticonv_gemm import plan, tensorcore
from wticonv_gemm.im2col import solver_3xtf32 as im2col_3xtf32
from wticonv_gemm.im2col import solver_tf32 as im2col_tf32
from wticonv_gemm.onebyone import OneByOneSolver
from wticonv_gemm.onebyone import solver_3xtf32 as onebyone_3xtf32
from wticonv_gemm.onebyone import solver_tf32 as onebyone_tf32
from wticonv_gemm.sgemm import ColMap, GemmOp, Operand, gemm_launch

P = ConvProblem
TC_IDS = {"gemm.1x1_3xtf32": "3xtf32", "gemm.1x1_tf32": "tf32",
          "gemm.im2col_3xtf32": "3xtf32", "gemm.im2col_tf32": "tf32"}


def test_tensor_core_solvers_are_installed_with_their_class(handle):
    for sid, math in TC_IDS.items():
        entry = handle.registry.get(sid)
        assert entry.math == math, sid
    assert handle.registry.get("gemm.1x1").math == "fp32"


def test_declared_tolerance_and_max_wti():
    # 3xTF32 is held to FP32's tolerance; TF32 takes its class default (declares none)
    assert onebyone_3xtf32.tolerance == im2col_3xtf32.tolerance == 1e-5
    assert onebyone_tf32.tolerance is None and im2col_tf32.tolerance is None
    assert onebyone_tf32.max_wti == pytest.approx(7.4)
    assert onebyone_3xtf32.max_wti == pytest.approx(7.4 / 3)


def test_an_unknown_class_is_refused():
    with pytest.raises(ValueError, match="no GEMM solver class 'fp16'"):
        OneByOneSolver("fp16")


def test_they_decline_without_tensor_cores(handle):
    """PoCL (every CI machine) has none: a Decline that says what is needed; a GPU with
    tensor cores runs them."""
    from wticonv.runtime.kit import tensor_cores

    p = P(2, 16, 8, 8, 16, 1, 1)
    if tensor_cores(handle.device):
        assert onebyone_3xtf32.is_applicable(p, handle.device) is True
        assert onebyone_tf32.is_applicable(p, handle.device) is True
        assert im2col_3xtf32.is_applicable(p, handle.device, None) is True
        return
    for solver in (onebyone_3xtf32, onebyone_tf32):
        no = solver.is_applicable(p, handle.device)
        assert isinstance(no, Decline) and "compute capability 8.0" in no.reason
    no = im2col_3xtf32.is_applicable(p, handle.device, None)
    assert isinstance(no, Decline) and "tensor cores" in no.reason


def test_a_tensor_core_class_on_a_cpu_is_an_error():
    op = GemmOp(8, 8, 8, a=Operand("a", ms=8, ks=1), b=Operand("b", ks=8),
                c=Operand("c", ms=8))
    with pytest.raises(ValueError, match="run on GPUs only"):
        gemm_launch(op, "cpu", 2, math="3xtf32")
    with pytest.raises(ValueError, match="'bf16'"):
        gemm_launch(op, "gpu", 132, math="bf16")


def _last_gemm(p, math):
    return plan.plan_1x1(p, "gpu", 132, 16, math)[-1]


def _macros(launch) -> dict[str, int]:
    return {k[len("-DTC_"):]: int(v) for k, v in
            (o.split("=") for o in launch.options.split())}


def test_1x1_plans_name_the_tensor_core_kernel_and_its_class():
    p = P(32, 256, 56, 56, 64, 1, 1)
    three, one = _last_gemm(p, "3xtf32"), _last_gemm(p, "tf32")
    assert three.file == one.file == "nv/sgemm_tc.cl" and three.kernel == "sgemm_tc"
    assert _macros(three)["SPLIT"] == 1 and _macros(one)["SPLIT"] == 0
    assert _last_gemm(p, "fp32").file == "sgemm_gpu.cl"
    # the tensor cores outrun the FP32 units: TF32 predicted faster than 3xTF32 and FP32
    assert one.efficiency > three.efficiency > 0.3
    assert one.efficiency > _last_gemm(p, "fp32").efficiency


@pytest.mark.parametrize("p, direction, vec, a_kfast, b_kfast", [
    # 56x56 pictures (3136 pixels, a multiple of 4): 16-byte loads of x along pixels
    (P(32, 256, 56, 56, 64, 1, 1), "fwd", 1, 1, 0),
    # 7x7 pictures (49 pixels): a float4 would cross pictures, element loads
    (P(32, 512, 7, 7, 2048, 1, 1), "fwd", 0, 1, 0),
    # stride 2: strided pixels, element loads
    (P(32, 256, 56, 56, 512, 1, 1, stride_h=2, stride_w=2), "fwd", 0, 1, 0),
    # backward data reads w transposed (along m), backward weights x along k
    (P(32, 256, 56, 56, 64, 1, 1), "bwd", 0, 0, 0),
    (P(32, 256, 56, 56, 64, 1, 1), "wrw", 0, 1, 1),
])
def test_load_variants_follow_the_operands(p, direction, vec, a_kfast, b_kfast):
    m = _macros(_last_gemm(p.with_direction(direction), "3xtf32"))
    assert (m["VEC"], m["A_KFAST"], m["B_KFAST"]) == (vec, a_kfast, b_kfast)


def test_grid_covers_every_output_with_remainders():
    """M = 65 rows, N = 7 x 7 x 3 = 147 columns: ceil-divided tiles of the chosen
    configuration, THREADS work-items per tile along dimension 0."""
    p = P(3, 32, 7, 7, 65, 1, 1)
    launch = _last_gemm(p, "3xtf32")
    m = _macros(launch)
    threads = 32 * (m["BM"] // m["WM"]) * (m["BN"] // m["WN"])
    assert launch.local_size == (threads, 1, 1)
    assert launch.global_size == (-(-147 // m["BN"]) * threads, -(-65 // m["BM"]), 1)


def test_efficiency_model_charges_waves_remainders_and_loads():
    cfg = tensorcore.TcConfig(128, 128, 64, 32, 16, 16, 3, efficiency=0.75)
    full = tensorcore.tc_efficiency(cfg, 4096, 4096, 4096, 1, 132)
    kfill = 4096 / (4096 + tensorcore.TC_FILL_TILES * 16)
    # 1024 tiles on 132 compute units: 7.76 waves -> 1024 / 1056 of the full rate
    assert full == pytest.approx(cfg.efficiency * 1024 / 1056 * kfill)
    # one more tile row: 1056 tiles fill 8 waves exactly; 4097 rows use 4097 / 4224 of it
    exact = tensorcore.tc_efficiency(cfg, 4224, 4096, 4096, 1, 132)
    assert exact == pytest.approx(cfg.efficiency * kfill) and exact > full
    assert tensorcore.tc_efficiency(cfg, 4097, 4096, 4096, 1, 132) == pytest.approx(
        cfg.efficiency * 4097 / 4224 * kfill)
    assert tensorcore.tc_efficiency(cfg, 4096, 4096, 4096, 1, 132, vec=False) == (
        pytest.approx(full * tensorcore.ELEMENT_LOADS_FACTOR))
    assert tensorcore.tc_efficiency(cfg, 4096, 4096, 4096, 1, 132, b_kfast=True) == (
        pytest.approx(full * tensorcore.B_KFAST_FACTOR))
    # a grid of 4 tiles fills 4 of 132 compute units
    small = tensorcore.tc_efficiency(cfg, 256, 256, 4096, 1, 132)
    assert small == pytest.approx(full * 1056 / 1024 * 4 / 132)
    # a sum of 512 batch terms of 8 values of k each: every term fills half a k tile
    terms = tensorcore.tc_efficiency(cfg, 4096, 4096, 4096, 1, 132, k_term=8)
    assert terms == pytest.approx(full / 2)
    # a short reduction (backward weights at N=1 on a 7x7 picture: 48 values of k) pays
    # the pipeline's fill and drain of a quarter k tile, not a whole one
    short = tensorcore.tc_efficiency(cfg, 4224, 4096, 48, 1, 132)
    assert tensorcore.TC_FILL_TILES == 0.25
    assert short == pytest.approx(cfg.efficiency * 48 / (48 + 4))


def test_measured_rate_comes_back_at_4096():
    """The configurations' efficiencies are normalised so that the model returns the
    rate measured at 4096^3 (module docstring of tensorcore.py)."""
    measured = {"3xtf32": (51.4, 45.5, 39.3), "tf32": (138.3, 100.5, 98.5, 79.4)}
    for math, rates in measured.items():
        for cfg, tflops in zip(tensorcore.TC_CONFIGS[math], rates, strict=True):
            eff = tensorcore.tc_efficiency(cfg, 4096, 4096, 4096, 1, 132)
            assert eff * 62.574 == pytest.approx(tflops, rel=0.01), (math, cfg)


def test_config_heuristic_prefers_small_tiles_on_small_grids():
    big, *_, small = tensorcore.TC_CONFIGS["3xtf32"]
    assert tensorcore.tc_config("3xtf32", 4096, 4096, 4096, 1, 132, True) == big
    assert tensorcore.tc_config("3xtf32", 128, 1024, 512, 1, 132, True) == small
    # 64 rows: a 128-row tile would compute half zeros
    assert tensorcore.tc_config("tf32", 64, 100352, 256, 1, 132, True).bm == 64


def test_plain_matrix_op_reaches_16_byte_loads():
    op = GemmOp(256, 384, 272, a=Operand("a", ms=272, ks=1),
                b=Operand("b", ks=384, cols=ColMap()), c=Operand("c", ms=384, cols=ColMap()))
    assert _macros(gemm_launch(op, "gpu", 132, math="tf32"))["VEC"] == 1
    odd = GemmOp(256, 384, 271, a=Operand("a", ms=271, ks=1),
                 b=Operand("b", ks=384, cols=ColMap()), c=Operand("c", ms=384, cols=ColMap()))
    assert _macros(gemm_launch(odd, "gpu", 132, math="tf32"))["VEC"] == 0


def test_warpgroup_tiles_plan_the_wgmma_kernel():
    # kernels/nv/sgemm_wg.cl: one warpgroup (128 threads) per 64 columns, wgmma's N = bm
    op = GemmOp(4096, 4096, 4096, a=Operand("a", ms=4096, ks=1),
                b=Operand("b", ks=4096, cols=ColMap()), c=Operand("c", ms=4096, cols=ColMap()))
    for math, (cfg,) in tensorcore.WG_CONFIGS.items():
        assert cfg.engine == "wgmma" and cfg.threads == 128 * cfg.bn // 64
        launch = gemm_launch(op, "gpu", 132, math=math, tc=cfg)
        assert (launch.file, launch.kernel) == ("nv/sgemm_wg.cl", "sgemm_wg")
        assert launch.local_size == (cfg.threads, 1, 1)
        assert launch.global_size == (4096 // cfg.bn * cfg.threads, 4096 // cfg.bm, 1)
        assert f"-DWG_BM={cfg.bm} -DWG_NWG={cfg.bn // 64}" in launch.options
        assert f"-DTC_SPLIT={int(math == '3xtf32')} -DTC_VEC=1" in launch.options
        assert cfg.label == f"wg{cfg.bm}x{cfg.bn}x{cfg.bk}x{cfg.stages}"
    # the default plan stays on the mma.sync kernel
    assert gemm_launch(op, "gpu", 132, math="3xtf32").file == "nv/sgemm_tc.cl"
