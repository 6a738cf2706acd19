"""Every kernel of every built-in solver under Oclgrind, the OpenCL device simulator (#8).

One run of ``tests/oclgrind_check.py`` (three worker processes in parallel, see its
``PASSES``: about 45 s on an idle 2-core machine) serves the tests of this module: no error
report from Oclgrind (out-of-bounds accesses, data races, API misuse, and on the CPU
kernels uninitialized reads), every result within the solver's tolerance of the float64
reference, and coverage: every kernel the plugins' ``.cl`` files declare was launched,
every built-in solver ran in every direction it accepts, as a CPU and as a GPU, and with
every perf config it offers. Skipped, saying why, when Oclgrind cannot be loaded.
"""

from __future__ import annotations

import importlib.util
import sys
from collections import defaultdict
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, HERE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


check = _load("oclgrind_check")
kernels = _load("oclgrind_kernels")


@pytest.fixture(scope="module")
def outcome(tmp_path_factory):
    """The workers' merged report and Oclgrind's error reports."""
    out = check.run(tmp_path_factory.mktemp("oclgrind"))
    if isinstance(out, str):
        pytest.skip(f"Oclgrind cannot be loaded: {out}")
    assert out.returncodes == [0] * len(check.PASSES), (
        f"a worker failed (exit status {out.returncodes}):\n"
        + "\n".join(s[-3000:] for s in out.stderr))
    return out


def _launched(report) -> set[tuple[str, str]]:
    return {(f, k) for run in report["runs"] for f, k, _ in run["kernels"]}


def test_oclgrind_reports_no_error(outcome):
    shown = "\n\n".join(outcome.errors[:20])
    assert len(outcome.errors) == 0, (
        f"Oclgrind reported {len(outcome.errors)} errors (first 20):\n\n{shown}")


def test_every_run_matches_the_reference(outcome):
    runs = outcome.report["runs"]
    wrong = [f"{r['variant']} {r['solver']} {r['key']} perf config {r['perf_config']}: "
             + (r.get("error") or f"rms_range {r['rms']:.2e} > {r['tolerance']:.0e}")
             for r in runs if not r["ok"]]
    assert len(runs) > 300 and not wrong, "\n".join(wrong)


def test_every_declared_kernel_was_launched(outcome):
    """Each kernel of each .cl file of plugins/ (its program built with every macro at
    its default: every file must build so) ran at least once."""
    declared = outcome.report["declared"]
    assert set(declared) == set(kernels.kernel_files())
    assert len(declared) >= 10
    failed = {f: k for f, k in declared.items() if any(n.startswith("<") for n in k)}
    assert not failed, f"kernel files that do not build with default macros: {failed}"
    built = {(b["file"], k) for b in outcome.report["builds"] for k in b["kernels"]}
    want = {(f, k) for f, names in declared.items() for k in names} | built
    missing = sorted(want - _launched(outcome.report))
    assert not missing, ("kernels never run under Oclgrind; add a problem to "
                         f"tests/oclgrind_kernels.py that reaches them: {missing}")


def test_every_builtin_solver_ran_every_direction_it_accepts_as_cpu_and_gpu(outcome):
    report = outcome.report
    assert set(report["builtin_solvers"]) >= {"direct.naive", "direct.tiled",
                                              "gemm.im2col", "winograd.f2x3"}
    ran = defaultdict(set)
    for r in report["runs"]:
        ran[(r["variant"], r["solver"])].add(r["direction"])
    assert set(report["variants"]) == set(kernels.VARIANTS)
    missing = []
    for variant, accepts in report["accepts"].items():
        if "cases" not in kernels.VARIANTS[variant]:   # not restricted to a few problems
            assert set(accepts) == set(report["builtin_solvers"])
        for sid, directions in accepts.items():
            assert directions or variant not in kernels.ONLY_ON.get(sid, (variant,)), \
                f"{sid} accepts no problem in any direction as {variant}"
            if set(directions) - ran[(variant, sid)]:
                missing.append(f"{variant} {sid}: {sorted(set(directions) - ran[(variant, sid)])}")
    assert not missing, "directions accepted but never run: " + "; ".join(missing)


def test_both_kernel_families_and_every_perf_config_ran(outcome):
    runs = outcome.report["runs"]
    files = defaultdict(set)
    for r in runs:
        files[r["variant"]] |= {f for f, _, _ in r["kernels"]}
    assert {"wticonv_direct/tiled_cpu.cl", "wticonv_gemm/sgemm_cpu.cl"} <= files["cpu"]
    assert {"wticonv_direct/tiled_gpu.cl", "wticonv_gemm/sgemm_gpu.cl"} <= files["gpu"]
    assert "wticonv_direct/tiled_gpu.cl" not in files["cpu"]
    configs = defaultdict(set)
    for r in runs:
        if r["perf_config"]:
            configs[(r["variant"], r["direction"])].add(r["perf_config"])
    # direct.tiled's perf configs (tiled_configs.perf_configs): GPU tile builds, split or
    # not, and "lanes"; CPU lane widths, packed or not, and backward-weights batch splits.
    assert {"64x64", "64x128", "64x128k8", "128x128", "16x256", "lanes"} <= configs[
        ("gpu", "fwd")]
    assert {"v16", "v8", "v16+pack", "v8+pack"} <= configs[("cpu", "fwd")]
    assert {"s1", "s2"} <= configs[("cpu", "wrw")]


def test_oclgrind_is_classified_other_and_never_the_default_device(outcome, handle):
    """Oclgrind reports the GPU, CPU and accelerator types at once; taken for a GPU it
    would become the default device (and every test would run on the simulator)."""
    assert outcome.report["device"]["platform"] == "Oclgrind"
    assert outcome.report["device"]["kind"] == "other"
    from wticonv import list_devices

    for info, _ in list_devices():
        if info.platform == "Oclgrind":
            assert info.kind == "other"
    assert handle.device.info.platform != "Oclgrind"


def test_broken_kernels_are_reported(tmp_path):
    """The whole path (environment, log, parsing) reports an out-of-bounds write, a data
    race and a read of uninitialized memory: the checks above can fail."""
    out = check.run(tmp_path, selftest=True)
    if isinstance(out, str):
        pytest.skip(f"Oclgrind cannot be loaded: {out}")
    heads = {e.splitlines()[0].split(" at ")[0] for e in out.errors}
    assert out.returncodes == [0]
    assert {"Invalid write of size 4", "Write-write data race"} <= heads
    assert any("Kernel: write_past_end" in e for e in out.errors)
    assert any(e.startswith("Uninitialized value") and "Kernel: read_uninitialized" in e
               for e in out.errors)


def test_uninitialized_reads_were_checked(outcome):
    """The pass with Oclgrind's uninitialized-value checks ran every built-in solver but
    direct.tiled (see oclgrind_check.PASSES) on the AVX-512 CPU variant."""
    i = next(i for i, ps in enumerate(check.PASSES) if ps.uninitialized)
    solvers = {r["solver"] for r in outcome.report["runs"] if r["pass"] == i}
    assert solvers == set(outcome.report["builtin_solvers"]) - set(check.PASSES[i].skip)


def test_report_parsing_keeps_errors_and_drops_pyopencl_probe():
    probe = ("\nOclgrind - OpenCL runtime error detected\n\tFunction: clGetDeviceInfo\n"
             "\tError:    CL_INVALID_VALUE\n\tFor argument 'param_name'\n\n")
    api = ("\nOclgrind - OpenCL runtime error detected\n\tFunction: clSetKernelArg\n"
           "\tError:    CL_INVALID_ARG_SIZE\n\tFor argument 'arg_size'\n\n")
    race = ("\nRead-write data race at local memory address 0x4\n\tKernel: k\n\t\n"
            "\tFirst entity:  Global(1,0,0)\n\t\n\tSecond entity: Global(0,0,0)\n\t\n\n"
            "Invalid read of size 4 at global memory address 0x40\n\tKernel: k\n\t\n\n")
    stderr = "cpu direct.naive fwd 1x1 : 0.1 s ok\n" + probe + api + probe
    reports = check.parse_reports(race, stderr)
    assert len(reports) == 3
    assert reports[0].startswith("Read-write data race") and "Second entity" in reports[0]
    assert reports[1].startswith("Invalid read of size 4")
    assert "clSetKernelArg" in reports[2]
    assert check.parse_reports("", probe * 3) == []
