"""Enqueue a plan (a list of :class:`~wticonv_gemm.gemm.Launch`) on a device.

Programs come from the device's program cache (one build per source file and option set);
kernel objects are kept per device so that they are not created again for every launch.
"""

from __future__ import annotations

import importlib.resources
import re
import threading
import weakref

import pyopencl as cl
from wticonv.runtime.kernelfiles import line_directive

__all__ = ["enqueue", "kernel_source"]

_kernels: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_sources: dict[str, str] = {}
_lock = threading.Lock()


_INCLUDE = re.compile(r'^#include "([A-Za-z0-9_.]+)"[ \t]*$', re.MULTILINE)


def kernel_source(name: str) -> str:
    """The OpenCL C source ``kernels/<file>`` named by ``name``: ``"file.cl"`` in this
    package, or ``"package:file.cl"`` in another (plugins that reuse this runner).

    A line ``#include "other.h"`` is replaced by the text of ``kernels/other.h`` of the same
    package (recursively), so that kernels can share a header without the OpenCL compiler
    needing an include path (PoCL and NVIDIA resolve relative includes differently).

    Raises:
        FileNotFoundError: ``name`` or an included file is not in the package's kernels/.
    """
    if name not in _sources:
        package, _, file = name.rpartition(":")
        kernels = importlib.resources.files(package or "wticonv_gemm").joinpath("kernels")

        # #line directives around each piece: build errors name the file and line
        def splice(text: str, seen: tuple[str, ...]) -> str:
            outer = kernels.joinpath(seen[-1])

            def one(match: re.Match) -> str:
                inc = match.group(1)
                if inc in seen:
                    raise ValueError(f"kernels/{inc} includes itself (via {' -> '.join(seen)})")
                body = splice(kernels.joinpath(inc).read_text(), seen + (inc,))
                after = text.count("\n", 0, match.start()) + 2   # the line after the include
                return (line_directive(kernels.joinpath(inc)) + body.rstrip("\n") + "\n"
                        + line_directive(outer, after).rstrip("\n"))
            return _INCLUDE.sub(one, text)

        _sources[name] = line_directive(kernels.joinpath(file)) + splice(
            kernels.joinpath(file).read_text(), (file,))
    return _sources[name]


def _kernel(device, source: str, options: str, name: str) -> cl.Kernel:
    with _lock:
        per_device = _kernels.setdefault(device, {})
        key = (source, options, name)
        k = per_device.get(key)
        if k is None:
            prg = device.build(kernel_source(source), options)
            k = per_device[key] = cl.Kernel(prg, name)
        return k


def enqueue(device, launches, buffers: dict) -> None:
    """Enqueue ``launches`` in order, binding buffer names (``"x"``, ``"w"``, ``"y"``,
    ``"ws"``) to ``buffers``."""
    for launch in launches:
        kernel = _kernel(device, launch.source, launch.options, launch.kernel)
        args = [buffers[a] if isinstance(a, str) else a for a in launch.args]
        device.enqueue_kernel(kernel, launch.global_size, launch.local_size, *args)
