"""Reading a plugin's OpenCL ``.cl`` files so that build errors name them.

OpenCL compiles source text, not files: a driver writes the text to a temporary file of
its own (PoCL: ``/tmp/pocl...``) and its build log points there. :func:`read_kernel`
puts a C ``#line`` directive first, so the compiler reports errors at the plugin's own
file and line (``.../wticonv_myconv/kernels/myconv.cl:12:5: error: ...``), and
:class:`~wticonv.KernelBuildError` and ``wticonv conv`` show that. A plugin that splices
header files into a source puts :func:`line_directive` before each piece and after it.
"""

from __future__ import annotations

import importlib.resources

__all__ = ["read_kernel", "line_directive", "kernel_path"]


def line_directive(path, line: int = 1) -> str:
    """``#line LINE "PATH"`` and a newline: the next line of source is line ``line`` of
    ``path`` for the compiler's messages (backslashes and quotes escaped)."""
    text = str(path).replace("\\", "\\\\").replace('"', '\\"')
    return f'#line {int(line)} "{text}"\n'


def kernel_path(package: str, *parts: str):
    """The ``importlib.resources`` traversable of ``parts`` (e.g. ``"kernels",
    "mine.cl"``) inside ``package``."""
    return importlib.resources.files(package).joinpath(*parts)


def read_kernel(package: str, *parts: str) -> str:
    """The text of the ``.cl`` file ``parts`` of ``package``, preceded by a ``#line``
    directive naming it (see the module docstring).

    Example: ``device.build(read_kernel("wticonv_myconv", "kernels", "myconv.cl"))``.

    Raises
    ------
    FileNotFoundError
        If the package has no such file (is it shipped in the wheel?).
    ModuleNotFoundError
        If ``package`` is not importable.
    """
    path = kernel_path(package, *parts)
    return line_directive(path) + path.read_text()
