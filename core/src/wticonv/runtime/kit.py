"""The host kit for solver plugins: kernel files, launch descriptions, enqueueing.

Contract (what a plugin may rely on):

- :class:`KernelLibrary`: one per plugin package. It reads ``kernels/<file>.cl`` with
  ``#include "x.h"`` lines spliced in (a header of the same package, or
  ``"<package>/x.h"`` of another, e.g. the core's ``"wticonv/common.h"``), each piece
  preceded by a ``#line`` directive so that build errors name the plugin's own file and
  line (:mod:`wticonv.runtime.kernelfiles`). It keeps one ``pyopencl.Kernel`` per device, file,
  build options and kernel name, on top of ``device.build`` (the core's program cache,
  one build per source and options, persisted across processes).
- :class:`Launch`: one kernel launch, described without any buffer: file, kernel, build
  options, global and local sizes (work-items), arguments (NumPy scalars and buffer names
  bound when enqueued) and the cost fields the WTI models read.
- :func:`enqueue`: runs a list of launches in order on ``device.queue``;
  :func:`programs_of` names the programs they build (a solver's optional ``programs``
  hook).
- :func:`modelled_kind`: the one rule for the device kind a WTI model describes:
  ``"gpu"`` for GPUs, ``"cpu"`` for CPUs, None for every other device (accelerators,
  simulators), on which solvers answer ``WTI_UNKNOWN`` (-2.0) instead of modelling the
  device as something it is not. :func:`kernel_family` says which kernels run there.
- :func:`launch_overhead_s`: the device's measured launch overhead, in seconds.
- :func:`round_up`: grid sizes to work-group multiples; :func:`workspace_room`: how much
  workspace a solver that works in chunks may take.

Build options must never depend on a problem's sizes (N, C, H, W, K, R, S, strides...):
those are kernel arguments, which is what makes a solver dynamic (one build per device).

The counterpart of CLBlast's ``Routine`` class (source loading, program cache, launch),
written for this project's plugin contract.
"""

from __future__ import annotations

import importlib.resources
import re
import threading
import weakref
from collections.abc import Callable, Iterable, Mapping

import pyopencl as cl

from wticonv.contract.hookspecs import Decline
from wticonv.errors import WticonvError
from wticonv.runtime.kernelfiles import line_directive

__all__ = ["KernelLibrary", "Launch", "enqueue", "programs_of", "launches_seconds",
           "modelled_kind", "kernel_family",
           "tensor_cores", "tensor_cores_of", "tensor_core_decline", "tensor_core_scope",
           "TENSOR_CORE_SPEEDUP",
           "wgmma", "compute_capability", "launch_overhead_s", "resident_work_items",
           "round_up", "workspace_room",
           "FALLBACK_LAUNCH_OVERHEAD_S", "MODELLED_KINDS", "WORK_ITEMS_PER_UNIT",
           "WORKSPACE_CAP_BYTES", "WORKSPACE_CAP_SHARE"]

#: Seconds per kernel launch where the device's own figure is not measured, per device
#: kind: an empty kernel's queued-to-end time (median of 200 launches), 18 us through
#: PoCL 3.1 on the development machines' 2-core AMD EPYC CPU and 11 us through NVIDIA's
#: OpenCL driver on the H200 (measured for the WTI models of the built-in plugins).
FALLBACK_LAUNCH_OVERHEAD_S = {"cpu": 18e-6, "gpu": 11e-6}

#: The device kinds the built-in WTI models describe (see :func:`modelled_kind`).
MODELLED_KINDS = ("cpu", "gpu")

_INCLUDE = re.compile(r'^#include "([A-Za-z0-9_.]+/)?([A-Za-z0-9_.]+)"[ \t]*$', re.MULTILINE)


def round_up(n: int, m: int) -> int:
    """``n`` rounded up to a multiple of ``m`` (both positive ints; exact at any size)."""
    return -(-n // m) * m


def modelled_kind(device) -> str | None:
    """``"gpu"`` for a GPU, ``"cpu"`` for a CPU, None for any other device.

    The one rule every built-in solver follows: its WTI model's constants were measured
    on CPUs and GPUs only, so on an accelerator or a simulator (kind ``"accelerator"`` or
    ``"other"``) ``get_wti`` answers ``wticonv.WTI_UNKNOWN`` (-2.0), and the fallback does
    not pick the solver unless forced.
    """
    kind = device.kind
    return kind if kind in MODELLED_KINDS else None


def kernel_family(device) -> str:
    """Which kernels run on ``device``: ``"cpu"`` (vector kernels, one work-item per
    register block) on CPUs, ``"gpu"`` (work-groups sharing local memory) on every other
    device, GPUs, accelerators and simulators alike (an OpenCL device that is not a CPU is
    built around work-groups). Only where the kernels are chosen; WTIs follow
    :func:`modelled_kind`."""
    return "cpu" if device.kind == "cpu" else "gpu"


def tensor_cores(device) -> bool:
    """Whether ``device`` runs the tensor-core kernels (``kernels/nv/``: inline PTX
    ``mma.sync`` with TF32 operands): NVIDIA's OpenCL driver on a GPU of compute
    capability 8.0 (Ampere) or newer, read at run time through the driver's
    ``cl_nv_device_attribute_query`` extension. False on every other device, and on one
    that does not answer the query (or, like a recording stand-in, has no OpenCL
    device)."""
    return tensor_cores_of(device.info, getattr(device, "cl_device", None))


def tensor_cores_of(info, cl_device) -> bool:
    """:func:`tensor_cores` of an OpenCL device not opened as a
    :class:`~wticonv.runtime.device.Device`: its ``DeviceInfo`` and ``pyopencl.Device``
    (``wticonv devices`` lists them)."""
    if info.kind != "gpu" or "nvidia" not in info.platform.lower():
        return False
    cc = compute_capability(cl_device)
    return cc is not None and cc[0] >= 8


def compute_capability(cl_device) -> tuple[int, int | None] | None:
    """(major, minor) compute capability of an NVIDIA ``pyopencl.Device``, read through the
    driver's ``cl_nv_device_attribute_query`` extension: None for any other device, or one
    that does not answer; minor None when only the major is given (a stand-in)."""
    try:
        major = int(cl_device.compute_capability_major_nv)
    except Exception:  # noqa: BLE001 - no such attribute or extension
        return None
    try:
        return major, int(cl_device.compute_capability_minor_nv)
    except Exception:  # noqa: BLE001 - the major only
        return major, None


def wgmma(device) -> bool:
    """Whether ``device`` runs the warpgroup tensor-core kernels (``kernels/nv/`` files
    that use ``wgmma``, built through :mod:`wticonv.runtime.ptx`): NVIDIA's OpenCL on a
    GPU of compute capability 9.0 exactly (Hopper: H100, H200). ``sm_90a``'s instructions
    run on no other architecture, newer ones included (PTX ISA, "architecture-specific
    features")."""
    info, cl_device = device.info, getattr(device, "cl_device", None)
    return tensor_cores_of(info, cl_device) and compute_capability(cl_device) == (9, 0)


#: Speed of each numerical class's arithmetic over the FP32 units', for a tensor-core
#: solver's declared ``max_wti`` (its WTI stays a fraction of the FP32 peak): the dense
#: TF32 rate over the FP32 rate, 494.7 / 66.9 TFLOP/s = 7.4 on the H100 SXM, whose
#: arithmetic the H200 shares (NVIDIA H100 Tensor Core GPU datasheet, 2023), and a third
#: of it for 3xTF32 (three products per multiply-add).
TENSOR_CORE_SPEEDUP = {"fp32": 1.0, "3xtf32": 7.4 / 3, "tf32": 7.4}


def tensor_core_decline(math: str, device):
    """A :class:`wticonv.Decline` for a solver of class ``math`` (``"3xtf32"`` or
    ``"tf32"``) on a ``device`` without :func:`tensor_cores`, saying what it needs; None
    for ``"fp32"`` or a device that has them."""
    if math == "fp32" or tensor_cores(device):
        return None
    return Decline("computes on tensor cores: needs NVIDIA's OpenCL on a GPU of compute "
                   f"capability 8.0 or newer ({device.info.name} is not one; `wticonv "
                   "devices` shows each device's tensor cores); the same solver id without its "
                   "_3xtf32 or _tf32 ending computes in FP32 on any device")


def tensor_core_scope(scope: str, math: str) -> str:
    """``scope`` (what a solver covers, ``wticonv solvers``) for its class ``math``: a
    tensor-core class (``"3xtf32"``, ``"tf32"``) adds where it runs."""
    if math == "fp32":
        return scope
    return f"{scope}; on tensor cores (NVIDIA GPUs of compute capability 8.0 or newer)"


#: Workspace cap of chunking solvers without a caller's limit: 1 GiB and an eighth of the
#: device's memory (see :func:`workspace_room`).
WORKSPACE_CAP_BYTES = 2**30
WORKSPACE_CAP_SHARE = 8


def workspace_room(device, workspace_limit: int | None, minimum: int = 0) -> int:
    """Bytes of workspace a solver that works in chunks may use on ``device``.

    The caller's ``workspace_limit`` when given; without one, at most
    :data:`WORKSPACE_CAP_BYTES` and 1 / :data:`WORKSPACE_CAP_SHARE` of the device's memory,
    but at least ``minimum`` (the solver's smallest piece): a larger chunk barely helps
    (a 110 MiB im2col buffer for 16 images ran no faster than a 7 MiB one on the
    development machines) and costs memory the caller may need. Never more than the
    device's largest buffer.
    """
    if workspace_limit is None:
        cap = min(WORKSPACE_CAP_BYTES, device.info.global_mem_bytes // WORKSPACE_CAP_SHARE)
        return min(max(cap, minimum), device.info.max_alloc_bytes)
    return min(workspace_limit, device.info.max_alloc_bytes)


#: Work-items a compute unit holds at once, per device kind: an NVIDIA SM holds 2048
#: resident threads (CUDA C Programming Guide, *Compute Capabilities*, compute
#: capability 9.0); a CPU core runs one work-group at a time, taken here as 16 SIMD lanes
#: x 4 work-items in flight.
WORK_ITEMS_PER_UNIT = {"gpu": 2048, "cpu": 64}


def resident_work_items(device) -> int:
    """Work-items ``device`` holds at once (compute units x :data:`WORK_ITEMS_PER_UNIT`,
    64 per unit for other kinds)."""
    return device.info.compute_units * WORK_ITEMS_PER_UNIT.get(device.kind, 64)


def launch_overhead_s(device) -> float:
    """Seconds one kernel launch costs on ``device`` beyond its work: the device's
    ``launch_overhead_s`` figure (measured by :mod:`wticonv.runtime.peak`, else
    :data:`FALLBACK_LAUNCH_OVERHEAD_S` for its kind)."""
    return device.launch_overhead_s


class KernelLibrary:
    """The OpenCL sources of one package's ``kernels/`` folder and their built kernels.

    Parameters
    ----------
    package : str
        The importable package that ships the ``.cl`` files, e.g. ``"wticonv_myconv"``.
    folder : str
        The folder inside it (default ``"kernels"``).

    Examples
    --------
    >>> KERNELS = KernelLibrary("wticonv_myconv")              # doctest: +SKIP
    >>> k = KERNELS.kernel(device, "myconv.cl", "myconv_fwd")  # doctest: +SKIP
    """

    def __init__(self, package: str, folder: str = "kernels") -> None:
        self.package, self.folder = package, folder
        self._sources: dict[str, str] = {}
        self._kernels: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"KernelLibrary({self.package!r})"

    def path(self, file: str, package: str | None = None):
        """The ``importlib.resources`` traversable of ``file`` in the kernels folder of
        ``package`` (this library's by default)."""
        return importlib.resources.files(package or self.package).joinpath(self.folder, file)

    def source(self, file: str) -> str:
        """The OpenCL C source of ``kernels/<file>``, headers spliced in, ``#line``
        directives before and after each piece (see the module docstring).

        Raises
        ------
        FileNotFoundError
            If ``file`` or a header it includes is not in the package's kernels folder
            (is it shipped in the wheel?).
        WticonvError
            If a header includes itself, directly or through others.
        """
        with self._lock:
            text = self._sources.get(file)
            if text is None:
                path = self.path(file)
                text = self._sources[file] = line_directive(path) + self._splice(
                    path, path.read_text(), ((self.package, file),))
            return text

    def _splice(self, outer, text: str, seen: tuple[tuple[str, str], ...]) -> str:
        def one(match: re.Match) -> str:
            package = match.group(1)[:-1] if match.group(1) else seen[-1][0]
            name = (package, match.group(2))
            if name in seen:
                chain = " -> ".join(f"{p}/{f}" for p, f in seen + (name,))
                raise WticonvError(f"{chain}: a kernel header includes itself; remove the "
                                   "#include that closes the circle")
            path = self.path(name[1], package)
            body = self._splice(path, path.read_text(), seen + (name,))
            after = text.count("\n", 0, match.start()) + 2     # the line after the include
            return (line_directive(path) + body.rstrip("\n") + "\n"
                    + line_directive(outer, after).rstrip("\n"))
        return _INCLUDE.sub(one, text)

    def kernel(self, device, file: str, name: str, options: str = "") -> cl.Kernel:
        """Kernel ``name`` of ``kernels/<file>`` built with ``options`` on ``device``;
        created once per device and kept while the device lives.

        Raises
        ------
        wticonv.KernelBuildError
            If the driver does not compile the source (its log names the file and line).
        """
        source = self.source(file)
        with self._lock:
            per_device = self._kernels.get(device)
            if per_device is None:
                per_device = self._kernels[device] = {}
            key = (file, options, name)
            k = per_device.get(key)
            if k is None:
                k = per_device[key] = cl.Kernel(device.build(source, options), name)
            elif (programs := getattr(device, "programs", None)) is not None:
                programs.note_use(source, options)      # for the kit's programs check
            return k

    def launch(self, file: str, kernel: str, options: str, global_size: tuple[int, ...],
               local_size: tuple[int, ...] | None, args: tuple | Callable[[], tuple] = (),
               flops: int = 0, efficiency: float = 0.0, bytes: int = 0,
               fixed_s: float = 0.0) -> Launch:
        """A :class:`Launch` of ``kernel`` in this library's ``file`` (the parameters are
        those of :class:`Launch`)."""
        return Launch(self, file, kernel, options, global_size, local_size, args, flops,
                      efficiency, bytes, fixed_s)


class Launch:
    """One kernel launch: where its program comes from, sizes, arguments and cost.

    Parameters
    ----------
    library : KernelLibrary
        The package whose ``kernels/`` holds ``file``.
    file, kernel, options : str
        The ``.cl`` file, the kernel's name, the build options (``-D`` macros that do not
        depend on the problem's sizes).
    global_size, local_size : tuple of int
        Work-items in each dimension; ``global_size`` a multiple of ``local_size``
        (:func:`round_up`). ``local_size`` None lets the driver choose.
    args : tuple, or a function of no arguments that returns one
        The kernel's arguments: NumPy scalars of the parameters' C types, and buffer
        names (``str``, e.g. ``"x"``, ``"w"``, ``"y"``, ``"ws"``) bound by :func:`enqueue`.
        A function is called on the first read of :attr:`args` (ranking a problem reads
        only the costs, so arguments are built only when the plan runs).
    flops : int
        FLOPs (multiply-adds x 2) the WTI model charges at ``efficiency`` x peak.
    efficiency : float
        Fraction of the device's measured peak FP32 rate those FLOPs run at (0 to 1).
    bytes : int
        Bytes of memory traffic charged at the device's measured bandwidth.
    fixed_s : float
        Seconds of fixed cost beyond FLOPs, bytes and the launch overhead (e.g. a CPU
        kernel's per-work-item set-up).
    """

    __slots__ = ("library", "file", "kernel", "options", "global_size", "local_size",
                 "_args", "flops", "efficiency", "bytes", "fixed_s")

    def __init__(self, library: KernelLibrary, file: str, kernel: str, options: str,
                 global_size: tuple[int, ...], local_size: tuple[int, ...] | None,
                 args: tuple | Callable[[], tuple] = (), flops: int = 0,
                 efficiency: float = 0.0, bytes: int = 0, fixed_s: float = 0.0) -> None:
        self.library, self.file, self.kernel, self.options = library, file, kernel, options
        self.global_size, self.local_size, self._args = global_size, local_size, args
        self.flops, self.efficiency, self.bytes, self.fixed_s = flops, efficiency, bytes, fixed_s

    @property
    def args(self) -> tuple:
        """The kernel's arguments (built on first read when given as a function)."""
        args = self._args
        if callable(args):
            args = self._args = args()
        return args

    @property
    def source(self) -> str:
        """``"<package>/<file>"``: where the launch's program comes from (for messages)."""
        return f"{self.library.package}/{self.file}"

    def replace(self, **changes) -> Launch:
        """A copy with the fields named in ``changes`` replaced (e.g. ``options=...`` to
        time another build of the same launch)."""
        fields = {n: getattr(self, n) for n in ("library", "file", "kernel", "options",
                                                "global_size", "local_size", "flops",
                                                "efficiency", "bytes", "fixed_s")}
        fields["args"] = self._args
        fields.update(changes)
        return Launch(**fields)

    def _fields(self) -> tuple:
        return (self.library.package, self.file, self.kernel, self.options, self.global_size,
                self.local_size, self.args, self.flops, self.efficiency, self.bytes,
                self.fixed_s)

    def __eq__(self, other) -> bool:
        return type(other) is Launch and self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        names = ("library", "file", "kernel", "options", "global_size", "local_size", "args",
                 "flops", "efficiency", "bytes", "fixed_s")
        pairs = zip(names, self._fields(), strict=False)
        return "Launch(" + ", ".join(f"{n}={v!r}" for n, v in pairs) + ")"


def enqueue(device, launches: Iterable[Launch], buffers: Mapping[str, object]) -> None:
    """Enqueue ``launches`` in order on ``device.queue``, each argument that is a ``str``
    replaced by ``buffers[name]`` (a ``pyopencl.Buffer``, or None for an absent one).

    Raises
    ------
    WticonvError
        If a launch names a buffer that ``buffers`` lacks.
    """
    for launch in launches:
        kernel = launch.library.kernel(device, launch.file, launch.kernel, launch.options)
        try:
            args = [buffers[a] if isinstance(a, str) else a for a in launch.args]
        except KeyError as e:
            raise WticonvError(f"{launch.source} {launch.kernel}: the launch names buffer "
                               f"{e.args[0]!r}, which is not among {sorted(buffers)}; pass it "
                               "to enqueue") from None
        device.enqueue_kernel(kernel, launch.global_size, launch.local_size, *args)


def launches_seconds(launches: Iterable[Launch], device) -> float:
    """Predicted time in seconds of ``launches`` on ``device`` from their cost fields: per
    launch the device's overhead (:func:`launch_overhead_s`), ``flops`` at ``efficiency``
    x ``device.peak_flops``, ``bytes`` at ``device.bandwidth`` and ``fixed_s`` (the
    WTI models of the GEMM solvers and of direct.chanvec; docs/wti-models.md)."""
    overhead = launch_overhead_s(device)
    t = 0.0
    for launch in launches:
        t += overhead
        if launch.flops:
            t += launch.flops / (device.peak_flops * max(launch.efficiency, 1e-6))
        if launch.bytes:
            t += launch.bytes / device.bandwidth
        t += launch.fixed_s
    return t


def programs_of(launches: Iterable[Launch]) -> list[tuple[str, str]]:
    """The distinct ``(source, options)`` pairs :func:`enqueue` builds for ``launches``,
    in launch order: what a kit-based solver's ``programs`` hook returns
    (:meth:`wticonv.contract.hookspecs.SolverSpec.programs`).

    Raises what :meth:`KernelLibrary.source` raises (a kernel file missing or including
    itself), as enqueueing would.
    """
    return list(dict.fromkeys((launch.library.source(launch.file), launch.options)
                              for launch in launches))
