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

__all__ = ["DEFER_MARK", "FIRST_SPECIFIC_SM", "defers", "deferred", "undefer"]

#: Prefix of a deferred PTX line (the kernels' ``WG_DEFER``): "//@" at the start of the
#: line, after any indentation.
DEFER_MARK = b"//@"

#: Oldest architecture with architecture-specific ("a") features: sm_90 (Hopper).
FIRST_SPECIFIC_SM = 90

_TARGET = re.compile(rb"^(\.target\s+sm_(\d+))([a-z]?)(?![a-z\d])", re.MULTILINE)
_DEFERRED_LINE = re.compile(rb"^([ \t]*)//@", re.MULTILINE)
#: In OpenCL C: a string literal, or a line within one (after "\n"), that starts with it.
_DEFERRING = re.compile(r'(?:"|\\n)//@')


def defers(source: str) -> bool:
    """Whether OpenCL C ``source`` defers PTX lines: a string literal, or a line inside one
    (after ``\\n``), starts with the mark, as inline asm and the kernels' ``WG_DEFER``
    write it. A ``//@`` elsewhere (in a plain comment, or inside a line) does not count."""
    return _DEFERRING.search(source) is not None


def deferred(binary: bytes) -> bool:
    """Whether ``binary`` is PTX text with deferred lines."""
    return b".target" in binary and _DEFERRED_LINE.search(binary) is not None


def undefer(binary: bytes) -> bytes:
    """``binary`` (PTX text) with its deferred lines made code (the mark removed where it
    starts a line) and its target made architecture-specific (``.target sm_90`` ->
    ``.target sm_90a``; a target that already is stays).

    Raises
    ------
    KernelBuildError
        If the PTX names no target of the form ``sm_NN``, or one older than sm_90, which
        has no architecture-specific instructions to defer.
    """
    text = binary.rstrip(b"\0")
    m = _TARGET.search(text)
    if m is None:
        raise KernelBuildError(
            "a kernel with deferred PTX lines (//@) was compiled to PTX without a "
            "'.target sm_NN' line; only NVIDIA's OpenCL driver builds such kernels")
    if int(m.group(2)) < FIRST_SPECIFIC_SM:
        raise KernelBuildError(
            f"a kernel with deferred PTX lines (//@) was compiled for sm_{int(m.group(2))}; "
            f"its deferred instructions need sm_{FIRST_SPECIFIC_SM}a or newer (compute "
            f"capability {FIRST_SPECIFIC_SM // 10}.0, wticonv.runtime.kit.wgmma)")
    if not m.group(3):
        text = text[:m.end(1)] + b"a" + text[m.end(1):]
    return _DEFERRED_LINE.sub(rb"\1", text)
