"""The host kit for solver plugins (wticonv.runtime.kit) on the real default device."""

from __future__ import annotations

import re
from types import SimpleNamespace

import numpy as np
import pytest
from wticonv.errors import WticonvError
from wticonv.runtime import kit
from wticonv.db.store import Store
from wticonv.testing.launches import RecordingDevice

KERNEL = """__kernel void axpb(__global float *y, __global const float *x, const float a,
                   const int n)
{
    const int i = get_global_id(0);
    if (i < n)
        y[i] = a * x[i] + WTICONV_CAT(KIT_B, f);   /* KIT_B expanded first: 0.5f */
}
"""


@pytest.fixture
def library(tmp_path, monkeypatch):
    """A plugin package ``kit_pkg`` with kernels/axpb.cl, which includes its own header
    and the core's common.h."""
    pkg = tmp_path / "kit_pkg"
    (pkg / "kernels").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "kernels" / "kit_b.h").write_text("#define KIT_B 0.5\n")
    (pkg / "kernels" / "axpb.cl").write_text(
        '#include "wticonv/common.h"\n#include "kit_b.h"\n' + KERNEL)
    (pkg / "kernels" / "loop_a.h").write_text('#include "loop_b.h"\n')
    (pkg / "kernels" / "loop_b.h").write_text('#include "loop_a.h"\n')
    (pkg / "kernels" / "loop.cl").write_text('#include "loop_a.h"\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    return kit.KernelLibrary("kit_pkg")


def test_round_up():
    assert kit.round_up(1, 64) == 64
    assert kit.round_up(64, 64) == 64
    assert kit.round_up(65, 64) == 128
    assert kit.round_up(2**40 + 1, 256) == 2**40 + 256     # Python ints: no wrap-around


def test_one_rule_for_the_device_kind():
    kinds = {k: SimpleNamespace(kind=k) for k in ("cpu", "gpu", "accelerator", "other")}
    assert {k: kit.modelled_kind(d) for k, d in kinds.items()} == {
        "cpu": "cpu", "gpu": "gpu", "accelerator": None, "other": None}
    assert {k: kit.kernel_family(d) for k, d in kinds.items()} == {
        "cpu": "cpu", "gpu": "gpu", "accelerator": "gpu", "other": "gpu"}


def test_the_recording_device_has_the_fallback_launch_overhead():
    assert kit.FALLBACK_LAUNCH_OVERHEAD_S == {"cpu": 18e-6, "gpu": 11e-6}
    assert kit.launch_overhead_s(RecordingDevice("cpu")) == 18e-6
    assert kit.launch_overhead_s(RecordingDevice("gpu")) == 11e-6


def test_the_launch_overhead_is_measured_and_stored(handle):
    dev = handle.device
    seconds = kit.launch_overhead_s(dev)
    # an empty kernel's launch: more than a microsecond, less than a millisecond on any
    # driver these tests run on (PoCL about 20 us, NVIDIA about 10 us)
    assert 1e-6 < seconds < 1e-3
    assert dev.store.get_launch_overhead(dev.key) == seconds
    assert dev.launch_overhead_s == seconds             # kept: not measured again


def test_measure_launch_overhead(handle):
    from wticonv.runtime.peak import measure_launch_overhead

    times = [measure_launch_overhead(handle.device, launches=20) for _ in range(2)]
    assert all(1e-6 < t < 1e-3 for t in times)


def test_the_first_stored_launch_overhead_wins(tmp_path):
    store = Store(tmp_path)
    assert store.get_launch_overhead("dev") is None
    assert store.put_launch_overhead("dev", 2e-5) == 2e-5
    assert store.put_launch_overhead("dev", 9e-5) == 2e-5
    assert store.get_launch_overhead("dev") == 2e-5
    assert store.summary()["launch_overhead"] == 1
    other = Store(tmp_path / "other")
    other.copy_device_records(store, ["dev"])
    assert other.get_launch_overhead("dev") == 2e-5


def test_workspace_room():
    dev = SimpleNamespace(info=SimpleNamespace(global_mem_bytes=2**34, max_alloc_bytes=2**32))
    assert kit.workspace_room(dev, None) == 2**30                   # the 1 GiB cap
    assert kit.workspace_room(dev, None, minimum=3 * 2**30) == 3 * 2**30
    assert kit.workspace_room(dev, None, minimum=2**33) == 2**32    # the largest buffer
    assert kit.workspace_room(dev, 1000) == 1000
    small = SimpleNamespace(info=SimpleNamespace(global_mem_bytes=2**30, max_alloc_bytes=2**28))
    assert kit.workspace_room(small, None) == 2**27                 # an eighth of memory


def test_sources_splice_headers_with_line_directives(library):
    src = library.source("axpb.cl")
    assert not re.search(r"^#include", src, re.MULTILINE)
    assert "#define WTICONV_CAT(a, b) WTICONV_CAT_(a, b)" in src
    assert "#define KIT_B 0.5" in src
    lines = src.splitlines()
    marks = [ln for ln in lines if ln.startswith("#line ")]
    assert marks[0].startswith("#line 1 ") and marks[0].endswith('kit_pkg/kernels/axpb.cl"')
    assert marks[1].endswith('wticonv/kernels/common.h"')
    assert marks[2] == marks[0].replace("#line 1 ", "#line 2 ")    # back after include 1
    assert marks[-1].startswith("#line 3 ") and marks[-1].endswith('axpb.cl"')
    assert lines[lines.index(marks[-1]) + 1] == KERNEL.splitlines()[0]
    assert library.source("axpb.cl") is src                          # read once


def test_missing_and_circular_includes_are_clear_errors(library):
    with pytest.raises(FileNotFoundError):
        library.source("no_such.cl")
    with pytest.raises(WticonvError, match="loop_a.h -> kit_pkg/loop_b.h -> kit_pkg/loop_a.h"):
        library.source("loop.cl")


def test_launches_run_and_kernels_are_built_once(handle, library):
    dev = handle.device
    n = 1000
    x = np.arange(n, dtype=np.float32)
    bufs = {"x": dev.upload(x), "y": dev.alloc(4 * n)}
    launch = library.launch("axpb.cl", "axpb", "", (kit.round_up(n, 64),), (64,),
                            lambda: ("y", "x", np.float32(2.0), np.int32(n)), bytes=8 * n)
    assert launch.source == "kit_pkg/axpb.cl"
    assert (launch.flops, launch.efficiency, launch.bytes, launch.fixed_s) == (0, 0.0, 8000, 0.0)
    kit.enqueue(dev, [launch], bufs)
    assert np.array_equal(dev.download(bufs["y"], (n,)), 2 * x + 0.5)
    first = library.kernel(dev, "axpb.cl", "axpb")
    assert library.kernel(dev, "axpb.cl", "axpb") is first
    with pytest.raises(WticonvError, match="names buffer 'x', which is not among"):
        kit.enqueue(dev, [launch], {"y": bufs["y"]})
    for b in bufs.values():
        b.release()


def test_launches_compare_by_value_and_replace_fields(library):
    def make(**changes):
        return library.launch("axpb.cl", "axpb", "-DX=1", (64,), (64,),
                              ("y", "x", np.float32(1.0), np.int32(3)), **changes)

    a, b = make(flops=10, efficiency=0.5), make(flops=10, efficiency=0.5)
    assert a == b and hash(a) == hash(b)
    assert a != make(flops=11, efficiency=0.5)
    c = a.replace(options="-DX=2")
    assert (c.options, c.kernel, c.flops, c.args) == ("-DX=2", "axpb", 10, a.args)
    assert a.options == "-DX=1"
    assert "kernel='axpb'" in repr(a)


def test_the_builtin_plugins_share_the_common_header():
    from wticonv_direct.programs import KERNELS as DIRECT
    from wticonv_gemm.sgemm import KERNELS as GEMM

    for library, file in ((DIRECT, "tiled_cpu.cl"), (DIRECT, "depthwise.cl"),
                          (GEMM, "sgemm_cpu.cl")):
        src = library.source(file)
        assert src.count("#define WTICONV_COMMON_H") == 1
        assert "#define CAT(" not in src
