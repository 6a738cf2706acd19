"""Build errors name the plugin's own ``.cl`` file and line (issue 17), not the OpenCL
driver's temporary copy of the source."""

from __future__ import annotations

import pytest
from wticonv import KernelBuildError
from wticonv.runtime.kernelfiles import line_directive, read_kernel

BROKEN = """/* a kernel with a typo on line 5 */
__kernel void k(__global float *a)
{
    const int i = get_global_id(0);
    a[i] = undefined_thing;
}
"""


def test_a_build_error_names_the_cl_file_and_line(tmp_path, monkeypatch, handle):
    pkg = tmp_path / "fake_kernels_pkg"
    (pkg / "kernels").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "kernels" / "broken.cl").write_text(BROKEN)
    monkeypatch.syspath_prepend(str(tmp_path))
    source = read_kernel("fake_kernels_pkg", "kernels", "broken.cl")
    with pytest.raises(KernelBuildError) as e:
        handle.device.build(source)
    assert f"{pkg / 'kernels' / 'broken.cl'}:5:" in str(e.value), str(e.value)


def test_the_built_in_plugins_name_their_files():
    from wticonv_direct.programs import KERNELS as DIRECT
    from wticonv_gemm.sgemm import KERNELS as GEMM

    direct_source, gemm_source = DIRECT.source, GEMM.source
    first = direct_source("naive.cl").splitlines()[0]
    assert first.startswith('#line 1 "') and first.endswith('wticonv_direct/kernels/naive.cl"')
    gemm = gemm_source("sgemm_cpu.cl")
    assert gemm.splitlines()[0].endswith('wticonv_gemm/kernels/sgemm_cpu.cl"')


def test_included_files_keep_their_own_line_numbers(tmp_path):
    from wticonv_winograd.plan import KERNELS

    src = KERNELS.source("winograd.cl")
    lines = src.splitlines()
    marks = [i for i, ln in enumerate(lines) if ln.startswith("#line ")]
    # the file, its header (which includes the core's common.h, then goes back to itself),
    # back to the file
    assert len(marks) >= 5
    assert lines[marks[2]].endswith('wticonv/kernels/common.h"')
    assert lines[marks[3]].endswith('wticonv_winograd/kernels/winograd_common.h"')
    back = lines[marks[4]]
    assert back.endswith('wticonv_winograd/kernels/winograd.cl"')
    # the line after the include, as the file numbers it
    n = int(back.split()[1])
    raw = (__import__("importlib.resources").resources.files("wticonv_winograd")
           / "kernels" / "winograd.cl").read_text().splitlines()
    assert raw[n - 2].startswith('#include "') and lines[marks[4] + 1] == raw[n - 1]


def test_line_directives_escape_the_path():
    assert line_directive('C:\\a "b".cl', 7) == '#line 7 "C:\\\\a \\"b\\".cl"\n'


def _cpu_kernel_files():
    """Every .cl and .h file of the built-in distributions that CPUs build: all but the
    GPU-only ones (``*_gpu.cl``, ``kernels/nv/``) and the probe's, which tests mad()."""
    import importlib.resources

    files = []
    for package in ("wticonv", "wticonv_direct", "wticonv_gemm", "wticonv_winograd",
                    "wticonv_fft"):
        root = importlib.resources.files(package) / "kernels"
        for path in root.iterdir():
            name = path.name
            if name.endswith((".cl", ".h")) and not name.endswith("_gpu.cl") \
                    and name != "probe.cl":
                files.append((package, name, path.read_text()))
    return files


def test_cpu_kernels_use_the_fused_multiply_add():
    # PoCL compiles mad() to a separate multiply and add on CPUs with FMA units: half the
    # arithmetic rate (kernels/common.h, WTICONV_MAD). Only the macros' own definitions
    # (common.h's WTICONV_MAD and peak.cl's PEAK_MAD) may call it.
    import re

    files = _cpu_kernel_files()
    assert {n for _, n, _ in files} >= {"common.h", "peak.cl", "naive.cl", "tiled_cpu.cl",
                                         "sgemm_cpu.cl", "fused.cl", "winograd_common.h"}
    for package, name, text in files:
        calls = [line.strip() for line in text.splitlines() if re.search(r"\bmad\(", line)
                 and not re.match(r"\s*#define (WTICONV|PEAK)_MAD\(a, b, c\) mad\(", line)
                 and not line.lstrip().startswith(("*", "/*"))]
        assert calls == [], f"{package}/kernels/{name} calls mad(): {calls}"
