"""Problems whose tensors or workspaces pass 2^31 elements: planned, never allocated.

Every installed solver plans every direction of a set of large problems on stand-in
devices with 1 TiB (wticonv.testing.launches.RecordingDevice, a GPU and a CPU); each
launch its run would enqueue is checked against the kernel as compiled:

- argument C types and int32 ranges, global sizes against the width of the ids
  (wticonv.testing.launches.check_launch);
- INT32_PRODUCTS: the 32-bit quantities each kernel computes from its arguments (read off
  the kernels' sources), which must stay below 2^31;
- EXTENTS: the largest element each kernel reaches in a buffer, which must lie inside it.

A solver that cannot index a problem must decline it in is_applicable, with a reason.
"""

from __future__ import annotations

import dataclasses
import math
import re
import warnings

import numpy as np
import pytest

from wticonv import ConvProblem as P
from wticonv.errors import DeviceMemoryError, NoApplicableSolverError
from wticonv.contract.registry import SolverRegistry
from wticonv.selection.ranking import select
from wticonv.testing.launches import (INT32_MAX, PlannedBuffer, RecordedLaunch,
                                      RecordingDevice, check_launch, record_run)

#: name -> forward problem; each runs in every direction.
LARGE = {
    "3x3, x and y of 2^32": P(64, 256, 512, 512, 256, 3, 3, pad_h=1, pad_w=1),
    "1x1, x and y of 2^32": P(64, 256, 512, 512, 256, 1, 1),
    "1x1 stride 2": P(64, 256, 512, 512, 256, 1, 1, stride_h=2, stride_w=2),
    "depthwise 3x3": P(64, 256, 512, 512, 256, 3, 3, pad_h=1, pad_w=1, groups=256),
    "3x3 stride 2": P(64, 256, 512, 512, 256, 3, 3, pad_h=1, pad_w=1, stride_h=2,
                      stride_w=2),
    "5x5": P(32, 256, 512, 512, 128, 5, 5, pad_h=2, pad_w=2),
    "images of 2^31, odd planes": P(2, 8300, 511, 511, 16, 3, 3, pad_h=1, pad_w=1),
    "one plane of 2.5e9 pixels": P(1, 1, 50000, 50000, 1, 3, 3, pad_h=1, pad_w=1),
    "w of 2.4e9": P(1, 16384, 8, 8, 16384, 3, 3, pad_h=1, pad_w=1),
    "K x C past 2^31": P(1, 46341, 4, 4, 46341, 3, 3, pad_h=1, pad_w=1),
    "N*H*W of 2^32": P(16384, 1, 512, 512, 1, 3, 3, pad_h=1, pad_w=1),
    "groups 4": P(64, 512, 256, 256, 512, 3, 3, pad_h=1, pad_w=1, groups=4),
    "dilated 7x7": P(8, 512, 600, 600, 64, 7, 7, pad_h=6, pad_w=6, dilation_h=2,
                     dilation_w=2),
}
CASES = [(name, d) for name in LARGE for d in ("fwd", "bwd", "wrw")]

_TILED_LANES = ["P1 * P2", "Q1 * Q2", "P1 * abs(hp) + abs(h0) + Q1 * abs(hq)",
                "P2 * abs(wp) + abs(w0) + Q2 * abs(wq)"]
_DW_PLANE = ["Hout * sh + R * dh + ph + Hin", "Wout * sw + S * dw + pw + Win + 16 * sw"]
_DW_WRW = ["R * S", "S * dw", "Ho * sh + R * dh + ph", "Wo * sw + S * dw + pw + 16 * sw"]
_WINO_T = ["Nc * th * tw", "th * WINO_MH + WINO_MH", "tw * WINO_MW + WINO_MW"]
#: kernel -> the 32-bit ints it forms from its arguments (names as in the .cl files;
#: global0-2 / local0-2 are the launch's sizes, upper-case names its build options).
INT32_PRODUCTS = {
    "tiled_conv": _TILED_LANES + ["(global2 // G) * QS + QS", "P + 16",
                                  "a_len * TILED_IDX32", "s_len * TILED_IDX32"],
    "tiled_dot": _TILED_LANES + ["Q1 * abs(hq) * SW + Q2 * abs(wq)", "Q1 * Q2 + 16"],
    "tiled_pack_a": ["nblk * TILED_MR", "Q1 * Q2"],
    "dw_fwd_any": _DW_PLANE, "dw_fwd_3x3s1": _DW_PLANE, "dw_fwd_3x3s2": _DW_PLANE,
    "dw_bwd_any": _DW_PLANE, "dw_bwd_3x3s2": _DW_PLANE,
    "dw_wrw": _DW_WRW, "dw_wrw_3x3s1": _DW_WRW, "dw_wrw_3x3s2": _DW_WRW,
    "im2col": ["Ho * Wo", "Ho * stride_h + R * dil_h", "Wo * stride_w + S * dil_w"],
    "im2col_cpu": ["Ho * Wo", "C * R * S", "Ho * stride_h + R * dil_h",
                   "Wo * stride_w + S * dil_w"],
    "col2im": ["H * W", "Ho * Wo", "H + pad_h", "W + pad_w"],
    "col2im_cpu": ["H * W", "Ho * Wo", "C * R * S"],
    "sgemm": ["min(NB, NBS) * ((K + GEMM_KWG - 1) // GEMM_KWG)", "NB + NBS",
              "K + GEMM_KWG"],
    "filter_transform": ["O * I", "P * I"],
    "filter_transform_vec": ["O * ((I + WINO_VW - 1) // WINO_VW)", "I + WINO_VW"],
    "filter_grad_transform": ["O * I", "P * I"],
    "input_transform": _WINO_T + ["P * I", "sh * (th * WINO_MH + WINO_MH + WINO_RH) + H"],
    "output_transform": _WINO_T, "grad_transform": _WINO_T,
    "fused_forward": ["N * th * tw", "th * WINO_MH + WINO_MH + abs(offh)",
                      "tw * WINO_MW + WINO_MW + abs(offw)", "O * I"],
}


def _col(n, P, Wo, ns, hs, ws):
    """Largest offset of columns 0..n-1 of a column map (non-negative strides)."""
    if n <= 0:
        return 0
    return (n - 1) // P * ns + (min(P, n) - 1) // Wo * hs + (min(Wo, n) - 1) * ws


def _sgemm(a):
    """Largest element of A, B and C an sgemm kernel reaches."""
    g = a["G"] if "G" in a else a["global2"]
    splits = a["global2"] // a["local2"] // g if "G" in a else 1
    b1, b2 = (a["NB"] - 1) // a["NB2"], min(a["NB"], a["NB2"]) - 1
    return {
        "A": a["a_off"] + (g - 1) * a["a_gs"] + b1 * a["a_bs"] + b2 * a["a_bs2"]
        + (a["M"] - 1) * a["a_ms"] + (a["K"] - 1) * a.get("a_ks", 1),
        "B": a["b_off"] + (g - 1) * a["b_gs"] + b1 * a["b_bs"] + b2 * a["b_bs2"]
        + (a["K"] - 1) * a.get("b_ks", 1)
        + _col(a["N"], a["bP"], a["bWo"], a["bns"], a["bhs"], a["bws"]),
        "C": a["c_off"] + (g - 1) * a["c_gs"] + (splits - 1) * a.get("c_ss", 0)
        + (a["M"] - 1) * a["c_ms"] + _col(a["N"], a["cP"], a["cWo"], a["cns"], a["chs"],
                                          a["cws"]),
    }


def _tiled(a):
    """Largest element of A, S and O a tiled_conv / tiled_dot kernel reaches."""
    g, pa, qa = a["G"], a["P"] // (a["P1"] * a["P2"]), a["Q"] // (a["Q1"] * a["Q2"])
    splits = max(1, a["global2"] // g) if a["o_split"] else 1
    # A packed by tiled_pack_a: blocks of MR channels, channel m0 + i at m0 * a_ms + i
    mr = a["TILED_MR"] if a.get("TILED_A_PACKED") else 1
    m_last = (-(-a["M"] // mr) - 1) * mr
    reads = {} if a["Q"] == 0 else {
        "A": (g - 1) * a["a_g"] + a["a_0"] + m_last * a["a_ms"] + (mr - 1)
        + (qa - 1) * a["a_qa"] + (a["Q1"] - 1) * a["a_qb"] + (a["Q2"] - 1) * a["a_qc"],
        "S": (g - 1) * a["s_g"] + (pa - 1) * a["s_pa"] + (qa - 1) * a["s_qa"]
        + a["SH"] * a["SW"] - 1}
    return {
        **reads,
        "O": (g - 1) * a["o_g"] + (splits - 1) * a["o_split"] + (a["M"] - 1) * a["o_ms"]
        + (pa - 1) * a["o_pa"] + (a["P1"] - 1) * a["o_pb"] + (a["P2"] - 1) * a["o_pc"]
        + a["o_0"],
        "a_len": a["a_len"] - 1, "s_len": a["s_len"] - 1,
    }


#: kernel -> its largest element reached, per buffer parameter (or per length argument,
#: which must not pass its buffer either).
EXTENTS = {
    "sgemm_nn": _sgemm, "sgemm_nt": _sgemm, "sgemm": _sgemm,
    "tiled_conv": _tiled, "tiled_dot": _tiled,
    "im2col": lambda a: {"col": a["C"] * a["R"] * a["S"] * a["Nc"] * a["Ho"] * a["Wo"] - 1,
                         "x": (a["n0"] + a["Nc"]) * a["C"] * a["H"] * a["W"] - 1},
    "col2im": lambda a: {"col": a["C"] * a["R"] * a["S"] * a["Nc"] * a["Ho"] * a["Wo"] - 1,
                         "dx": (a["n0"] + a["Nc"]) * a["C"] * a["H"] * a["W"] - 1},
    "output_transform": lambda a: {"y": (a["n0"] + a["Nc"]) * a["G"] * a["O"] * a["Ho"]
                                   * a["Wo"] - 1},
    "zero_fill": lambda a: {"buf": a["count"] - 1},
    "tiled_reduce": lambda a: {"dw": a["count"] - 1,
                               "part": (a["splits"] - 1) * a["stride"] + a["count"] - 1},
    "splitk_reduce": lambda a: {"C": a["c_off"] + a["count"] - 1,
                                "part": a["part_off"] + a["S"] * a["count"] - 1},
}
EXTENTS["im2col_cpu"], EXTENTS["col2im_cpu"] = EXTENTS["im2col"], EXTENTS["col2im"]


def _values(launch: RecordedLaunch) -> dict:
    vals = {k: (int(v) if isinstance(v, np.integer) else v)
            for k, v in launch.named_args().items()}
    for d, g in enumerate(launch.global_size):
        vals[f"global{d}"] = g
        vals[f"local{d}"] = (launch.local_size or (1,) * 3)[d]
    for d in range(len(launch.global_size), 3):
        vals[f"global{d}"] = vals[f"local{d}"] = 1
    for opt in launch.options.split():
        name, _, value = opt[2:].partition("=")
        if opt.startswith("-D") and re.fullmatch(r"-?\d+", value or "1"):
            vals[name] = int(value or "1")
    vals.setdefault("TILED_IDX32", 0)
    return vals


def launch_issues(launch: RecordedLaunch) -> list[str]:
    """Everything wrong with one launch: check_launch, INT32_PRODUCTS and EXTENTS."""
    issues = check_launch(launch)
    if issues:
        return issues
    vals = _values(launch)
    env = {"abs": abs, "min": min, "max": max, "__builtins__": {}}
    for expr in INT32_PRODUCTS.get(launch.name, []):
        value = eval(expr, env, vals)  # noqa: S307 - the table above
        if value > INT32_MAX:
            issues.append(f"{launch.name}: {expr} = {value} passes 2^31 (a 32-bit int)")
    extents = EXTENTS.get(launch.name)
    if extents is not None:
        for name, last in extents(vals).items():
            arg = vals.get(name) if not name.endswith("_len") else None
            size = arg.elements if isinstance(arg, PlannedBuffer) else None
            if name.endswith("_len"):
                buf = vals["A" if name == "a_len" else "S"]
                size = buf.elements
            if size is not None and not 0 <= last < size:
                issues.append(f"{launch.name}: reaches element {last} of {name}, which holds "
                              f"{size}")
    return issues


@pytest.fixture(scope="module")
def registry():
    return SolverRegistry()


@pytest.mark.parametrize("kind", ["gpu", "cpu"], ids=["planned-on-a-gpu", "planned-on-a-cpu"])
def test_every_launch_of_every_large_problem_fits_its_kernel(registry, kind):
    issues, big_runs, declined = [], 0, {}
    for name, direction in CASES:
        p = dataclasses.replace(LARGE[name], direction=direction)
        for sid in registry.ids():
            with warnings.catch_warnings():
                warnings.simplefilter("error")         # no hook may warn or raise
                rec = record_run(registry, sid, p, RecordingDevice(kind))
            if rec.declined:
                declined.setdefault(sid, []).append(rec.declined)
                continue
            assert rec.launches, f"{sid} ran nothing for {name} {direction}"
            for launch in rec.launches:
                issues += [f"{sid} {name} {direction}: {i}" for i in launch_issues(launch)]
            if max(b.elements for b in rec.tensors.values()) > INT32_MAX:
                big_runs += 1
    assert not issues, "\n".join(issues[:40])
    assert big_runs >= 150, big_runs           # the problems really were past 2^31
    assert all(r for rs in declined.values() for r in rs)   # every decline says why


def test_solvers_that_cannot_index_a_problem_decline_it_saying_why(registry):
    dev = RecordingDevice("gpu")
    plane = LARGE["one plane of 2.5e9 pixels"]
    assert "2^31" in record_run(registry, "direct.tiled", plane, dev).declined
    assert "2^31" in record_run(registry, "gemm.im2col", plane, dev).declined
    batch = P(16384, 8, 512, 512, 8, 1, 1)                       # N*H*W = 2^32
    assert "2^31" in record_run(registry, "gemm.1x1", batch, dev).declined
    assert "2^31" in record_run(registry, "direct.tiled", batch, dev).declined


@pytest.mark.parametrize("name", list(LARGE))
def test_selection_on_a_device_with_the_memory_picks_a_checked_solver(registry, name):
    for direction in ("fwd", "bwd", "wrw"):
        p = dataclasses.replace(LARGE[name], direction=direction)
        dev = RecordingDevice("gpu")
        sel = select(registry, p, dev)
        assert sel.candidates and sel.chosen is sel.candidates[0]
        for v in sel.candidates:     # the fallback may run any of them
            rec = record_run(registry, v.solver_id, p, RecordingDevice("gpu"))
            assert not rec.declined and rec.workspace == v.workspace
            issues = [i for ln in rec.launches for i in launch_issues(ln)]
            assert not issues, f"{v.solver_id} on {p.key}: {issues[:5]}"


def test_the_checks_catch_what_they_look_for():
    src = ("__kernel void k(__global float *a, const int n, const long m) {\n"
           "    const int i = get_global_id(0) * 4;\n"
           "    const long j = get_global_id(1);\n    a[i + j] = n + m;\n}\n")
    buf = PlannedBuffer(64, "a")
    good = RecordedLaunch("k", src, "", (8, 2**40), (1, 1), (buf, np.int32(3), np.int64(1)))
    assert check_launch(good) == []
    bad = RecordedLaunch("k", src, "", (2**30, 3), (1, 2),
                         (np.int32(0), np.int64(3), np.int32(1)))
    issues = " | ".join(check_launch(bad))
    assert "buffer parameter a" in issues and "int parameter n got int64" in issues
    assert "long parameter m got int32" in issues
    assert "get_global_id(0) (x 4) in 32 bits" in issues and "multiple of the local" in issues
    tiled = dict(vals := {"P1": 70000, "P2": 70000})
    assert eval(INT32_PRODUCTS["tiled_conv"][0], {}, tiled) > INT32_MAX and vals


def test_tiled_cpu_lane_offsets_are_64_bit():
    """Regression: tiled_cpu.cl's lanes that cross images were 32-bit offsets apart, wrong
    once an image passes 2^31 elements (e.g. 2 x 8300 x 511 x 511, planned on a CPU)."""
    from wticonv.testing.clsource import preprocess
    from wticonv_direct.programs import KERNELS

    text = preprocess(KERNELS.source("tiled_cpu.cl"), "-DTILED_VW=16")
    assert re.search(r"\blong\s+loff\s*\[", text) and not re.search(r"\bint\s+loff\s*\[",
                                                                     text.split("tiled_dot")[0])


def test_tensors_that_do_not_fit_the_device_are_a_clear_error(handle):
    p = LARGE["3x3, x and y of 2^32"]
    if 4 * math.prod(p.x_shape) <= handle.device.info.max_alloc_bytes:
        pytest.skip("this device can hold a 16 GiB buffer")
    with pytest.raises(NoApplicableSolverError, match="largest buffer"):
        handle.select(p)
    x = np.broadcast_to(np.float32(1), p.x_shape)          # 16 GiB, no host memory used
    w = np.ones(p.w_shape, np.float32)
    with pytest.raises(DeviceMemoryError, match="more than the largest buffer"):
        handle.compute(p, x=x, w=w)
