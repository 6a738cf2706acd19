"""Cold builds in the build helper (wticonv.runtime.build_helper): results, errors, crashes."""

from __future__ import annotations

import os
import textwrap

import numpy as np
import pyopencl as cl
import pytest
from wticonv import KernelBuildError
from wticonv.runtime.build_helper import BuildHelper, real_key
from wticonv.runtime.programs import ProgramCache, _check_kernels

SRC = "__kernel void thrice(__global float *a) { a[get_global_id(0)] *= 3.0f; }\n"

#: Makes the build helper hang or abort on sources that carry a marker.
SITE = textwrap.dedent('''
    import os, sys, time
    if os.environ.get("WTICONV_CHILD") == "build":
        import pyopencl as cl
        _build = cl.Program.build
        def build(self, *args, **kwargs):
            src = getattr(self, "_source", "") or ""
            if "HANG_HERE" in src:
                time.sleep(3600)
            if "ABORT_HERE" in src:
                sys.stderr.write("LLVM ERROR: Cannot select: made up\\n")
                sys.stderr.flush()
                os.abort()
            return _build(self, *args, **kwargs)
        cl.Program.build = build
''')


@pytest.fixture
def faulty_children(tmp_path, monkeypatch):
    (tmp_path / "sitecustomize.py").write_text(SITE)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path),
                                                      os.environ.get("PYTHONPATH", "")]))


def _helper(device) -> BuildHelper:
    i = device.info
    return BuildHelper(i.platform_index, i.device_index, real_key(device.cl_device))


def _run_thrice(device, prg) -> np.ndarray:
    a = np.arange(8, dtype=np.float32)
    buf = device.upload(a)
    device.enqueue_kernel(prg.thrice, (8,), None, buf)
    return device.download(buf, (8,))


def test_a_cold_build_runs_in_the_helper_and_its_binary_here(handle):
    dev = handle.device
    helper = _helper(dev)
    cache = ProgramCache(dev.context, dev.cl_device, dev.key, None, helper=helper)
    try:
        prg = cache.build(SRC, "-DUNUSED=1")
        assert cache.counters.isolated_builds == 1 and cache.counters.source_builds == 1
        assert helper.starts == 1
        assert list(_run_thrice(dev, prg)) == [3.0 * i for i in range(8)]
        cache.build(SRC + "\n", "")        # a second cold build reuses the helper
        assert cache.counters.isolated_builds == 2 and helper.starts == 1
    finally:
        helper.close()


def test_without_isolation_builds_stay_in_this_process(handle, monkeypatch):
    monkeypatch.setenv("WTICONV_ISOLATE", "0")
    dev = handle.device
    helper = _helper(dev)
    cache = ProgramCache(dev.context, dev.cl_device, dev.key, None, helper=helper)
    prg = cache.build(SRC, "-DUNUSED=2")
    assert cache.counters.source_builds == 1 and cache.counters.isolated_builds == 0
    assert helper.starts == 0
    assert _run_thrice(dev, prg)[5] == 15.0


def test_a_compile_error_carries_the_log(handle):
    helper = _helper(handle.device)
    try:
        with pytest.raises(KernelBuildError) as e:
            helper.build("__kernel void broken(__global float *a) { a[0] = b; }",
                         "", handle.device.info.name)
        assert "OpenCL program failed to build on" in str(e.value)
        assert "error" in str(e.value).lower() and "'b'" in str(e.value)
        # The helper survives a clean build error.
        assert helper.build(SRC, "", handle.device.info.name)
        assert helper.starts == 1
    finally:
        helper.close()


def test_a_compiler_abort_or_hang_ends_the_helper_not_this_process(handle, faulty_children):
    dev = handle.device
    helper = _helper(dev)
    try:
        with pytest.raises(KernelBuildError) as e:
            helper.build(SRC + "// ABORT_HERE\n", "", dev.info.name)
        assert ("error: the compiler aborted (SIGABRT) in its helper process: LLVM ERROR: "
                "Cannot select: made up") in str(e.value)
        with pytest.raises(KernelBuildError, match="the compiler hung: no answer within 3 s"):
            helper.build(SRC + "// HANG_HERE\n", "", dev.info.name, timeout=3)
        assert helper.build(SRC, "", dev.info.name)     # a new helper serves the next one
        assert helper.starts == 3
    finally:
        helper.close()


def test_a_program_without_its_kernels_is_a_build_error(handle):
    dev = handle.device
    empty = cl.Program(dev.context, "void helper_only(void) {}").build()
    with pytest.raises(KernelBuildError, match="built none of the program's kernels"):
        _check_kernels(empty, SRC, dev.cl_device, "")
    _check_kernels(empty, "void helper_only(void) {}", dev.cl_device, "")  # none declared


def test_a_stand_in_device_info_builds_on_the_real_device(handle, tmp_path):
    # Test doubles (Oclgrind's variants, recording devices) present a real device under
    # another name: the helper finds the device by what the driver says it is.
    import dataclasses

    from wticonv import Device
    from wticonv.db.store import Store

    dev = handle.device
    info = dataclasses.replace(dev.info, name=dev.info.name + " as a 132-CU GPU",
                               platform_index=dev.info.platform_index + 7)
    stand_in = Device(dev.cl_device, info, Store(tmp_path))   # a cold cache
    prg = stand_in.programs.build(SRC + "// stand-in\n", "-DSTAND_IN=1")
    assert stand_in.programs.counters.isolated_builds == 1
    assert list(_run_thrice(stand_in, prg))[:3] == [0.0, 3.0, 6.0]


def test_precompile_builds_several_at_once_and_build_then_finds_them(handle, faulty_children):
    dev = handle.device
    helper = _helper(dev)
    cache = ProgramCache(dev.context, dev.cl_device, dev.key, None, helper=helper)
    good = [(SRC, f"-DPRE={i}") for i in range(4)]
    bad = (SRC + "// ABORT_HERE\n", "")
    seen = []
    try:
        built = cache.precompile(good + [good[0], bad], jobs=3,
                                 progress=lambda done, total: seen.append((done, total)))
        assert built == 4                   # the aborting one is left to build()
        assert seen == [(i, 5) for i in range(1, 6)]
        assert cache.counters.source_builds == 4 and cache.counters.isolated_builds == 4
        assert helper.starts >= 1           # the cache's own helper took part, kept
        prg = cache.build(*good[2])
        assert cache.counters.memory_hits == 1 and cache.counters.source_builds == 4
        assert list(_run_thrice(dev, prg)) == [3.0 * i for i in range(8)]
        assert cache.precompile(good) == 0  # all there: nothing to do
        with pytest.raises(KernelBuildError, match="aborted"):
            cache.build(*bad)               # reported where a solver asks for it
    finally:
        helper.close()


def test_precompile_does_nothing_without_isolation(handle, monkeypatch):
    monkeypatch.setenv("WTICONV_ISOLATE", "0")
    dev = handle.device
    helper = _helper(dev)
    cache = ProgramCache(dev.context, dev.cl_device, dev.key, None, helper=helper)
    assert cache.precompile([(SRC, "-DPRE=9")], jobs=2) == 0
    assert cache.counters.source_builds == 0 and helper.starts == 0


def test_build_jobs_reads_the_environment(monkeypatch):
    from wticonv import DeviceError
    from wticonv.runtime.build_helper import BUILD_JOBS, build_jobs

    monkeypatch.delenv("WTICONV_BUILD_JOBS", raising=False)
    assert 1 <= build_jobs() <= BUILD_JOBS
    monkeypatch.setenv("WTICONV_BUILD_JOBS", "3")
    assert build_jobs() == 3
    for bad in ("0", "x", "65", "-1"):
        monkeypatch.setenv("WTICONV_BUILD_JOBS", bad)
        with pytest.raises(DeviceError, match="WTICONV_BUILD_JOBS"):
            build_jobs()
