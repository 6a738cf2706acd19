"""The probe (wticonv.runtime.probe) and the helpers it shares with the build helper."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from wticonv import DeviceError
from wticonv.runtime import probe
from wticonv.runtime.isolation import describe_exit, error_tail, timeout_from_env


def _run_probe_kernel(device):
    import importlib.resources

    import pyopencl as cl

    local = min(64, device.info.max_work_group_size)
    src = importlib.resources.files("wticonv").joinpath("kernels/probe.cl").read_text()
    prg = device.build(src, f"-DWTICONV_PROBE_LOCAL={local}")
    n = local * 4
    x = probe._probe_input(n)
    xbuf = device.upload(x)
    ybuf = device.alloc(n * 48 * 4)
    device.enqueue_kernel(prg.probe_builtins, (n,), (local,), xbuf, ybuf)
    got = device.download(ybuf, (n, 48))
    cl.enqueue_barrier(device.queue).wait()
    return x, local, got


def test_the_probe_kernel_matches_its_float64_model(handle):
    x, local, got = _run_probe_kernel(handle.device)
    want = probe.expected_outputs(x, local)
    assert got.shape == want.shape == (local * 4, 48)
    rel = np.abs(got - want) / np.maximum(np.abs(want), 1e-3)
    assert rel.max() <= probe.PROBE_RTOL
    # Every output carries information: none is the same for all work-items but the last.
    assert (np.ptp(want[:, :47], axis=0) > 0).all() and (want[:, 47] == 1).all()


def test_the_model_tells_a_one_element_error():
    x = probe._probe_input(64)
    want = probe.expected_outputs(x, 64)
    wrong = want.copy()
    wrong[5, 17] += 1e-3
    rel = np.abs(wrong - want) / np.maximum(np.abs(want), 1e-3)
    assert rel.max() > probe.PROBE_RTOL and (rel > probe.PROBE_RTOL).sum() == 1


def _info(handle, **changes):
    return dataclasses.replace(handle.device.info, **changes)


def test_figures_of_real_devices_are_plausible_and_garbage_is_not(handle):
    h200 = _info(handle, kind="gpu", compute_units=132, clock_mhz=1980)
    assert probe.implausible_figures(h200, 62.6e12, 4.0e12) is None
    zen = _info(handle, kind="cpu", compute_units=2, clock_mhz=2000)
    assert probe.implausible_figures(zen, 50e9, 12e9) is None
    assert "peak of 7e+21 FLOP/s" in probe.implausible_figures(zen, 7e21, 12e9)
    assert "peak of nan" in probe.implausible_figures(zen, float("nan"), 12e9)
    assert "peak of 1e+06" in probe.implausible_figures(zen, 1e6, 12e9)
    assert "bandwidth of 1e+15" in probe.implausible_figures(zen, 50e9, 1e15)
    assert "bandwidth of inf" in probe.implausible_figures(zen, 50e9, float("inf"))
    no_clock = _info(handle, clock_mhz=0)
    assert probe.implausible_figures(no_clock, 9e15, 1e12) is None
    assert probe.implausible_figures(no_clock, 2e16, 1e12) is not None


def test_a_cpu_verdict_belongs_to_the_host_cpu_and_a_gpu_verdict_does_not(handle, monkeypatch):
    cpu, gpu = _info(handle, kind="cpu"), _info(handle, kind="gpu")
    before = probe.verdict_key(cpu), probe.verdict_key(gpu)
    assert before[0].startswith(cpu.key + "#probe-") and "-cpu-" in before[0]
    other = probe.host_cpu() + " (another CPU)"    # never this host's, whatever it is
    monkeypatch.setattr(probe, "host_cpu", lambda: other)
    assert probe.verdict_key(cpu) != before[0]
    assert probe.verdict_key(gpu) == before[1] and "-cpu-" not in before[1]
    assert probe.verdict_key(_info(handle, kind="cpu", driver_version="9.9")) != \
        probe.verdict_key(cpu)


def test_host_cpu_names_family_and_model_on_linux():
    ident = probe.host_cpu()
    assert ident and ident != "unknown CPU"
    try:
        text = open("/proc/cpuinfo").read()
    except OSError:
        pytest.skip("no /proc/cpuinfo")
    family = next(ln.split(":")[1].strip() for ln in text.splitlines()
                  if ln.startswith("cpu family"))
    assert f" {family} " in f" {ident} "


def test_the_fix_hint_depends_on_the_driver(handle):
    pypi = _info(handle, kind="cpu", platform="Portable Computing Language",
                 driver_version="3.0-rc2")
    system = _info(handle, kind="cpu", platform="Portable Computing Language",
                   driver_version="3.1+debian")
    gpu = _info(handle, kind="gpu", platform="NVIDIA CUDA", driver_version="580.1")
    assert "sudo apt-get install pocl-opencl-icd" in probe.fix_hint(pypi)
    assert "system's PoCL: update it" in probe.fix_hint(system)
    assert "update the device's OpenCL driver" in probe.fix_hint(gpu)


@pytest.mark.parametrize("code, words", [(-6, "aborted (SIGABRT)"),
                                          (-11, "was killed by SIGSEGV"),
                                          (-9, "was killed by SIGKILL"),
                                          (3, "exited with status 3")])
def test_how_a_child_ended_is_said_in_words(code, words):
    assert describe_exit(code) == words


def test_the_error_line_of_a_compiler_crash_is_kept():
    log = ("1 warning generated.\nLLVM ERROR: Cannot select: 0x55: i64 = fadd 0x1, 0x2\n"
           "In function: _Z7_cl_madDv16_fS_S_\n")
    assert error_tail(log) == "LLVM ERROR: Cannot select: 0x55: i64 = fadd 0x1, 0x2"
    assert error_tail("just this\n") == "just this"
    assert error_tail("") == ""
    assert len(error_tail("error " * 200, limit=50)) == 50


def test_time_limits_from_the_environment(monkeypatch):
    monkeypatch.delenv("WTICONV_PROBE_TIMEOUT", raising=False)
    assert timeout_from_env("WTICONV_PROBE_TIMEOUT", 180.0) == 180.0
    monkeypatch.setenv("WTICONV_PROBE_TIMEOUT", "7.5")
    assert timeout_from_env("WTICONV_PROBE_TIMEOUT", 180.0) == 7.5
    for bad in ("soon", "0", "-3", "inf", "nan", "1e9"):
        monkeypatch.setenv("WTICONV_PROBE_TIMEOUT", bad)
        with pytest.raises(DeviceError, match=f"WTICONV_PROBE_TIMEOUT='{bad}' is not a number "
                                              "of seconds between 0 and 86400"):
            timeout_from_env("WTICONV_PROBE_TIMEOUT", 180.0)


@pytest.mark.parametrize("name", ["WTICONV_PROBE_TIMEOUT", "WTICONV_BUILD_TIMEOUT"])
def test_a_bad_time_limit_is_one_error_before_any_device_work(name, monkeypatch, capsys):
    from wticonv.cli import main

    monkeypatch.setenv(name, "abc")
    rc = main(["conv", "-n", "1", "-c", "4", "-H", "6", "-W", "6", "-k", "4", "-y", "3",
               "-x", "3", "-F", "1"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1
    assert err[0] == (f"wticonv: error: {name}='abc' is not a number of seconds between 0 "
                      f"and 86400; unset it or set e.g. {name}="
                      f"{180 if 'PROBE' in name else 300}")
