"""The direct plugin's kernel files: one :class:`wticonv.runtime.kit.KernelLibrary`.

``KERNELS.source(file)`` is the OpenCL C source of ``kernels/<file>`` (with the core's
``wticonv/common.h`` spliced in where a file includes it); ``KERNELS.kernel(device, file,
name, options)`` the kernel built once per device on top of the core's program cache.
Build options must never depend on a problem's sizes: those are kernel arguments, which
is what makes the solvers dynamic.
"""

from __future__ import annotations

from wticonv.runtime.kit import KernelLibrary

__all__ = ["KERNELS"]

#: kernels/*.cl of wticonv_direct.
KERNELS = KernelLibrary("wticonv_direct")
