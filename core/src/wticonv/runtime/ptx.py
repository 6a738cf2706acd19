"""Deferred PTX: instructions that NVIDIA's OpenCL compiler cannot target, built in a
second step.

NVIDIA's OpenCL compiler emits PTX for the device's plain architecture (``sm_90`` on an
H200), whose ptxas refuses the architecture-specific instructions of ``sm_90a``: the
warpgroup ``wgmma`` family (PTX ISA 8.0, "Asynchronous Warpgroup Level Matrix Multiply").
A kernel that uses them writes each such inline-asm line behind :data:`DEFER_MARK`, which
makes it a PTX comment; inline asm still substitutes its operands' registers there. The
program cache (:mod:`wticonv.runtime.programs`) finds the mark in the PTX that the driver
returns as the program's binary, hands it to :func:`undefer`, and builds the result as a
binary. Seen working on the H200 with NVIDIA's OpenCL 3.0 (CUDA 13.0, PTX ISA 9.0):
benchmarks/results/wgmma-probe-h200.txt.
"""

from __future__ import annotations

import re

from wticonv.errors import KernelBuildError

__all__ = ["DEFER_MARK", "defers", "deferred", "undefer"]

#: Prefix of a deferred PTX line (the kernels' ``WG_DEFER``): "//@".
DEFER_MARK = b"//@"

_TARGET = re.compile(rb"^(\.target\s+sm_\d+)([a-z]?)(?![a-z\d])", re.MULTILINE)


def defers(source: str) -> bool:
    """Whether OpenCL C ``source`` defers PTX lines: it holds the mark at the start of a
    string literal (``"//@``), as inline asm and the kernels' ``WG_DEFER`` write it; a
    ``//@`` in a plain comment does not count."""
    return '"' + DEFER_MARK.decode() in source


def deferred(binary: bytes) -> bool:
    """Whether ``binary`` is PTX text with deferred lines."""
    return DEFER_MARK in binary and b".target" in binary


def undefer(binary: bytes) -> bytes:
    """``binary`` (PTX text) with its deferred lines made code and its target made
    architecture-specific (``.target sm_90`` -> ``.target sm_90a``; a target that already
    is stays).

    Raises
    ------
    KernelBuildError
        If the PTX names no target of the form ``sm_NN``.
    """
    text = binary.rstrip(b"\0")
    text, n = _TARGET.subn(lambda m: m.group(1) + (m.group(2) or b"a"), text, count=1)
    if n == 0:
        raise KernelBuildError(
            "a kernel with deferred PTX lines (//@) was compiled to PTX without a "
            "'.target sm_NN' line; only NVIDIA's OpenCL driver builds such kernels")
    return text.replace(DEFER_MARK, b"")
