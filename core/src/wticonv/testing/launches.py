"""Plan a solver's launches for any problem size, without a device, and check them.

:func:`record_run` calls a solver's hooks with a :class:`RecordingDevice`, a stand-in that
looks like a device with as much memory as asked (1 TiB by default), builds nothing and
enqueues nothing: every launch the solver's ``run`` would enqueue is recorded instead
(kernel, build options, global and local sizes, arguments), and its tensors and workspace
are :class:`PlannedBuffer` objects that hold only a size. So problems whose tensors pass
2^31 elements (8 GiB and more) can be planned on any machine.

:func:`check_launch` then compares each launch with the kernel as compiled
(:mod:`wticonv.testing.clsource`): every argument has its parameter's C type (``int`` an
``numpy.int32`` within range, ``long`` an ``numpy.int64``, pointers a buffer), the global
size is a multiple of the local size, and no dimension has more work-items (or
work-groups) than the integer the kernel keeps their ids in can count.

While :func:`record_run` runs, ``pyopencl.Kernel`` and ``pyopencl.Buffer`` are replaced by
recording stand-ins (solvers create their kernels and small tables through them): do not
use OpenCL from other threads meanwhile.
"""

from __future__ import annotations

import contextlib
import math
import threading
from dataclasses import dataclass, field
from types import SimpleNamespace

import numpy as np

from wticonv.problem.conv import ConvProblem
from wticonv.problem.tensors import ConvTensors
from wticonv.runtime.device import DeviceInfo
from wticonv.testing.clsource import Kernel, kernel_signatures

__all__ = ["RecordingDevice", "PlannedBuffer", "RecordedLaunch", "Recording", "record_run",
           "check_launch", "INT32_MAX"]

INT32_MAX = 2**31 - 1
_TYPES = {"int": np.int32, "uint": np.uint32, "long": np.int64, "ulong": np.uint64,
          "float": np.float32, "double": np.float64, "short": np.int16, "char": np.int8}
_patch_lock = threading.Lock()


@dataclass(frozen=True)
class PlannedBuffer:
    """A device buffer that is never allocated: ``size`` in bytes, ``name`` for messages."""

    size: int
    name: str = "buffer"

    @property
    def elements(self) -> int:
        """Float32 elements it holds."""
        return self.size // 4


@dataclass(frozen=True)
class _Program:
    source: str
    options: str


@dataclass(frozen=True)
class _Kernel:
    program: _Program
    name: str


@dataclass(frozen=True)
class RecordedLaunch:
    """One launch a solver enqueued: kernel ``name``, its program's ``source`` and build
    ``options``, ``global_size`` and ``local_size`` (work-items), ``args`` as given."""

    name: str
    source: str
    options: str
    global_size: tuple[int, ...]
    local_size: tuple[int, ...] | None
    args: tuple

    @property
    def kernel(self) -> Kernel:
        """The kernel as compiled with ``options`` (KeyError if the source lacks it)."""
        return kernel_signatures(self.source, self.options)[self.name]

    def named_args(self) -> dict:
        """Arguments by parameter name."""
        return {p.name: a for p, a in zip(self.kernel.params, self.args, strict=False)}


class RecordingDevice:
    """A stand-in :class:`~wticonv.runtime.device.Device` of ``kind`` (``"gpu"`` or ``"cpu"``)
    with ``memory`` bytes, every one of them allocatable as one buffer; it records the
    launches enqueued on it (:attr:`launches`) and runs nothing.

    ``peak_flops`` (FLOP/s), ``bandwidth`` (bytes/s) and ``launch_overhead_s`` (s) feed
    the solvers' WTI models; the defaults are an H200's figures (GPU) or a 2-core AVX-512
    CPU's (the launch overhead: :data:`wticonv.runtime.kit.FALLBACK_LAUNCH_OVERHEAD_S`).
    ``compute_capability`` ``(major, minor)`` (minor may be None) makes a GPU stand-in an
    NVIDIA one that :func:`wticonv.runtime.kit.tensor_cores` reads as such (major 8 and
    newer), so the tensor-core solvers are offered on it; None (the default) has none.
    """

    def __init__(self, kind: str = "gpu", memory: int = 2**40, compute_units: int | None = None,
                 peak_flops: float | None = None, bandwidth: float | None = None,
                 launch_overhead_s: float | None = None,
                 vector_width: int | None = None,
                 compute_capability: tuple[int, int | None] | None = None) -> None:
        gpu = kind == "gpu"
        if compute_capability is not None and not gpu:
            raise ValueError("compute_capability is an NVIDIA GPU's: a CPU stand-in has none")
        self.info = DeviceInfo(
            platform_index=0, device_index=0,
            platform="NVIDIA CUDA (wticonv recording)" if compute_capability
            else "wticonv recording",
            name=f"recording {kind}", vendor="wticonv", driver_version="0",
            version="OpenCL 3.0", kind=kind,
            compute_units=compute_units or (132 if gpu else 2), clock_mhz=1000,
            local_mem_bytes=49152 if gpu else 1 << 20, global_mem_bytes=memory,
            max_alloc_bytes=memory, max_work_group_size=1024 if gpu else 4096,
            vector_width=vector_width or (1 if gpu else 16))
        self.peak_flops = peak_flops or (6.26e13 if gpu else 4.7e11)
        self.bandwidth = bandwidth or (4.1e12 if gpu else 4.0e10)
        self._launch_overhead_s = launch_overhead_s
        self.store = None
        self.context = None
        self.queue = None
        self.figures_known = True
        self.launches: list[RecordedLaunch] = []
        if compute_capability is not None:
            major, minor = compute_capability
            attrs = {"compute_capability_major_nv": major}
            if minor is not None:
                attrs["compute_capability_minor_nv"] = minor
            self.cl_device = SimpleNamespace(**attrs)

    def __repr__(self) -> str:
        return f"<RecordingDevice {self.info.kind} {self.info.global_mem_bytes} bytes>"

    @property
    def kind(self) -> str:
        """``"gpu"`` or ``"cpu"``."""
        return self.info.kind

    @property
    def launch_overhead_s(self) -> float:
        """Seconds per kernel launch: the figure given, else the constant of this kind
        measured on the development machines
        (:data:`wticonv.runtime.kit.FALLBACK_LAUNCH_OVERHEAD_S`)."""
        from wticonv.runtime.kit import FALLBACK_LAUNCH_OVERHEAD_S

        if self._launch_overhead_s is not None:
            return self._launch_overhead_s
        return FALLBACK_LAUNCH_OVERHEAD_S[self.info.kind]

    @property
    def key(self) -> str:
        """Database key of the stand-in (no store is used)."""
        return self.info.key

    def build(self, source: str, options: str = "") -> _Program:
        """A program that is never compiled (its source and options are kept)."""
        return _Program(source, options)

    def enqueue_kernel(self, kernel, global_size, local_size, *args) -> None:
        """Record the launch."""
        self.launches.append(RecordedLaunch(
            kernel.name, kernel.program.source, kernel.program.options,
            tuple(int(g) for g in global_size),
            None if local_size is None else tuple(int(v) for v in local_size), tuple(args)))

    @contextlib.contextmanager
    def profile(self):
        """A profile scope with no events (nothing runs)."""
        yield type("Profile", (), {"events": [], "kernel_ms": 0.0})()

    def check_alloc(self, nbytes: int, what: str = "a buffer") -> None:
        """Raise :class:`~wticonv.errors.DeviceMemoryError` beyond the stand-in's memory."""
        from wticonv.errors import DeviceMemoryError

        if nbytes > self.info.max_alloc_bytes:
            raise DeviceMemoryError(f"{what} needs {nbytes} bytes, more than {self!r} has")

    def alloc(self, nbytes: int, what: str = "a buffer") -> PlannedBuffer | None:
        """A :class:`PlannedBuffer` (None for 0 bytes)."""
        if nbytes <= 0:
            return None
        self.check_alloc(nbytes, what)
        return PlannedBuffer(int(nbytes), what)


def _buffer(context, flags, size: int = 0, hostbuf=None) -> PlannedBuffer:
    return PlannedBuffer(int(hostbuf.nbytes) if hostbuf is not None else int(size), "table")


@contextlib.contextmanager
def _recording_opencl():
    import pyopencl as cl

    with _patch_lock:
        saved = cl.Kernel, cl.Buffer
        cl.Kernel, cl.Buffer = _Kernel, _buffer
        try:
            yield
        finally:
            cl.Kernel, cl.Buffer = saved


@dataclass
class Recording:
    """What :func:`record_run` saw: ``declined`` (the reason, "" when the solver took the
    problem), ``workspace`` (bytes), ``wti`` and the ``launches``."""

    solver_id: str
    problem: ConvProblem
    declined: str = ""
    workspace: int = 0
    wti: float | None = None
    launches: list[RecordedLaunch] = field(default_factory=list)
    tensors: dict[str, PlannedBuffer] = field(default_factory=dict)


def record_run(registry, solver_id: str, problem: ConvProblem,
               device: RecordingDevice | None = None, workspace_limit: int | None = None,
               perf_config: str | None = None) -> Recording:
    """Ask solver ``solver_id`` of ``registry`` about ``problem`` on ``device`` (a new
    :class:`RecordingDevice` when None) and record the launches of its ``run``.

    Returns a :class:`Recording`; ``declined`` holds the reason when ``is_applicable``
    declines (nothing is run then). Exceptions from the hooks propagate.
    """
    device = device if device is not None else RecordingDevice()
    rec = Recording(solver_id, problem)
    ok = registry.call(solver_id, "is_applicable", problem=problem, device=device,
                       workspace_limit=workspace_limit)
    if not ok:
        rec.declined = getattr(ok, "reason", "") or "declined (no reason given)"
        return rec
    kw = dict(problem=problem, device=device, workspace_limit=workspace_limit,
              perf_config=perf_config)
    rec.workspace = int(registry.call(solver_id, "workspace_size", **kw))
    rec.wti = float(registry.call(solver_id, "get_wti", **kw))
    rec.tensors = {name: PlannedBuffer(4 * math.prod(shape), name) for name, shape in
                   (("x", problem.x_shape), ("w", problem.w_shape), ("y", problem.y_shape))}
    if rec.workspace:
        rec.tensors["ws"] = PlannedBuffer(rec.workspace, "ws")
    tensors = ConvTensors(rec.tensors["x"], rec.tensors["w"], rec.tensors["y"])
    start = len(device.launches)
    with _recording_opencl():
        registry.call(solver_id, "run", problem=problem, device=device, tensors=tensors,
                      workspace=rec.tensors.get("ws"), perf_config=perf_config)
    rec.launches = device.launches[start:]
    return rec


def check_launch(launch: RecordedLaunch) -> list[str]:
    """What is wrong with ``launch`` (an empty list when nothing is): arguments that do not
    match their parameters' C types or ranges, global sizes that are not multiples of the
    local size, dimensions with more work-items or work-groups than the kernel's ids fit.
    """
    where = f"{launch.name} ({launch.options or 'no options'})"
    try:
        kernel = launch.kernel
    except KeyError:
        return [f"{where}: no such kernel in its source"]
    issues = []
    if len(kernel.params) != len(launch.args):
        issues.append(f"{where}: {len(launch.args)} arguments for {len(kernel.params)} "
                      "parameters")
    for p, a in zip(kernel.params, launch.args, strict=False):
        if p.pointer:
            if not isinstance(a, PlannedBuffer):
                issues.append(f"{where}: buffer parameter {p.name} got {a!r}")
            continue
        want = _TYPES.get(p.ctype)
        if want is None or not isinstance(a, np.generic) or a.dtype != np.dtype(want):
            got = a.dtype if isinstance(a, np.generic) else type(a).__name__
            issues.append(f"{where}: {p.ctype} parameter {p.name} got {got} {a!r}")
        elif p.ctype == "int" and not -2**31 <= int(a) <= INT32_MAX:
            issues.append(f"{where}: int parameter {p.name} = {int(a)} overflows")
    local = launch.local_size or (1,) * len(launch.global_size)
    for d, (g, lsz) in enumerate(zip(launch.global_size, local, strict=False)):
        if g < 1 or g % lsz:
            issues.append(f"{where}: global size {g} in dimension {d} is not a positive "
                          f"multiple of the local size {lsz}")
            continue
        gid, grp = kernel.global_ids[d], kernel.group_ids[d]
        if g > gid.limit():
            issues.append(f"{where}: {g} work-items in dimension {d}, but the kernel keeps "
                          f"get_global_id({d}) (x {gid.factor}) in {gid.bits} bits")
        if g // lsz > grp.limit():
            issues.append(f"{where}: {g // lsz} work-groups in dimension {d}, but the kernel "
                          f"keeps get_group_id({d}) (x {grp.factor}) in {grp.bits} bits")
    return issues
