"""The handle: one device plus the installed solvers, and the run path.

Like a MIOpen or cuDNN handle, a :class:`Handle` is created once and used for many
convolutions; the NumPy API uses a default one (:func:`get_handle`).
"""

from __future__ import annotations

import threading
import warnings
from dataclasses import dataclass

import numpy as np
import pyopencl as cl

# Handle.compute's NumPy path and the registry of handles live in modules of their own;
# their names stay importable from here (the private ones re-exported as themselves).
from wticonv._handle_compute import _host_empty as _host_empty
from wticonv._handle_compute import compute_on_host
from wticonv._handle_registry import _by_uid as _by_uid
from wticonv._handle_registry import _uids as _uids
from wticonv._handle_registry import default_handle, handle_by_uid, register
from wticonv.contract.answers import math_allowed
from wticonv.contract.registry import SolverRegistry
from wticonv.errors import (
    ArgumentError,
    DeviceMemoryError,
    KernelBuildError,
    ProblemError,
    SolverRunError,
    SolverWarning,
)
from wticonv.problem.conv import ConvProblem, parse_key
from wticonv.problem.tensors import ConvTensors, as_float32, as_tensors, check_buffers
from wticonv.runtime.device import Device, check_not_forked, select_device
from wticonv.selection.ranking import (
    Selection,
    Verdict,
    allow_tf32_arg,
    select,
    workspace_limit_arg,
)

__all__ = ["Handle", "RunResult", "get_handle", "handle_by_uid"]


@dataclass
class RunResult:
    """What :meth:`Handle.run` did.

    Attributes
    ----------
    selection : Selection
    solver_id : str
        The solver that ran (the chosen one, or the next candidate if it failed).
    workspace : int
        Bytes of workspace given to the solver.
    kernel_ms : float
        Sum of the solver's kernel times (OpenCL profiling), ms; 0.0 if it enqueued no
        kernel through ``device.enqueue_kernel``.
    verdict : Verdict
        The verdict (WTI, workspace, prediction) of the solver that ran.
    """

    selection: Selection
    solver_id: str
    workspace: int
    kernel_ms: float
    verdict: Verdict | None = None

    def selection_used(self) -> Selection:
        """A selection whose only candidate is the solver that ran: reuse it to repeat the
        run without retrying solvers that failed."""
        if self.verdict is None or self.verdict is self.selection.chosen:
            return self.selection
        s = self.selection
        return Selection(s.problem, s.verdicts, self.verdict, s.mode, s.workspace_limit,
                         [self.verdict], s.allow_tf32)


#: Selections a handle remembers before it starts afresh.
SELECTION_CACHE_SIZE = 4096
#: OpenCL status codes that mean the device (or the host, for it) ran out of memory.
_OOM_CODES = ("MEM_OBJECT_ALLOCATION_FAILURE", "OUT_OF_RESOURCES", "OUT_OF_HOST_MEMORY")


def _failure_reason(e: BaseException) -> str:
    """One line (at most 400 characters) saying why a solver failed to run: a build
    failure, an out-of-memory, or the exception's type and first line."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    first = lines[0] if lines else ""
    if isinstance(e, KernelBuildError):
        error = next((ln for ln in lines[1:] if "error" in ln.lower()), lines[-1] if
                     len(lines) > 1 else "")
        what = f"its kernels do not build ({first.split(' (options')[0]}: {error})"
    elif isinstance(e, (DeviceMemoryError, MemoryError, cl.MemoryError)) or (
            isinstance(e, cl.Error) and any(c in str(e) for c in _OOM_CODES)):
        what = f"out of memory ({type(e).__name__}: {first})"
    else:
        what = f"{type(e).__name__}: {first}"
    return what if len(what) <= 400 else what[:397] + "..."


def _problem(problem) -> ConvProblem:
    """``problem`` as a :class:`ConvProblem`: one as it is, a find-db key parsed."""
    if isinstance(problem, ConvProblem):
        return problem
    if isinstance(problem, str):
        return parse_key(problem)
    raise ProblemError(
        f"problem must be a wticonv.ConvProblem (e.g. ConvProblem(n=16, c=64, h=56, w=56, "
        f"k=64, r=3, s=3, pad_h=1, pad_w=1)) or a find-db key string; got "
        f"{type(problem).__name__} {problem!r:.60}")


class Handle:
    """A device and its solvers.

    Parameters
    ----------
    device : Device or str, optional
        A :class:`Device`, a device spec (``"gpu"``, ``"cpu"``, ``"P:D"``), or None for
        ``WTICONV_DEVICE`` / the default device.
    registry : SolverRegistry, optional
        The solvers (a :class:`wticonv.contract.registry.SolverRegistry`); by default every
        installed plugin (entry points).
    allow_tf32 : bool
        Also rank solvers whose results are only TF32-accurate (``math = "tf32"``), like
        PyTorch's ``allow_tf32``; by default (False) only FP32-accurate ones (``fp32``,
        ``3xtf32``). The attribute of the same name may be changed later; a method's own
        ``allow_tf32`` argument overrides it for that call.
    zero_copy : bool
        :meth:`compute` on a device with :attr:`Device.host_unified_memory` (a CPU's PoCL)
        gives the kernels the caller's C-contiguous float32 arrays themselves and writes
        the result into a new array in place, instead of copying both ways
        (:meth:`Device.wrap`); elsewhere it has no effect. Off by default: the kernels
        then work in the caller's memory, so an array must not change while a call that
        reads it runs (``wticonv.torch`` turns it on). The attribute may be changed later.

    Attributes
    ----------
    uid : int
        Names the handle in this process (from 1, never reused) where only numbers pass
        (``wticonv.torch``'s ops); :func:`handle_by_uid` finds it while it lives.

    Raises
    ------
    DeviceError
        No device matches ``device``.
    ArgumentError
        ``registry`` is not a :class:`~wticonv.contract.registry.SolverRegistry`, or
        ``allow_tf32`` or ``zero_copy`` is not a bool.

    The methods take a problem as a :class:`ConvProblem` or as its find-db key string
    (:attr:`ConvProblem.key`).

    Notes
    -----
    Threads: a handle may be shared by any number of threads. Its selections are
    computed outside any lock (two threads asking about a new problem at once may both
    rank it; either answer is kept), and its runs are serialised by a lock held from the
    workspace's allocation to the end of the run (with ``wait=True``, until the device
    has finished), so the handle's one workspace is never used by two runs at once.
    Several handles may share one :class:`Device` (``Handle(h.device)``): their runs go
    to the device's one in-order queue, each with its own workspace, and a kernel's
    arguments are set and the kernel enqueued as one step (:meth:`Device.enqueue_kernel`).
    Handles on separate :class:`Device` objects of the same OpenCL device are
    independent. Processes may share one cache directory (:mod:`wticonv.db.store`).

    Processes: in a child made by ``fork()`` the methods raise :class:`DeviceError`
    (the driver's threads stay in the parent: the child would wait forever), saying to
    use the ``spawn`` method. Copies (:mod:`copy`) are the handle itself (a device
    resource); pickling it is a :class:`TypeError` saying what to do.

    Faults: a candidate that fails to run (its kernels do not build, its workspace or a
    buffer cannot be allocated, a hook raises) is set aside for the problem on this
    handle with a :class:`SolverWarning` naming the solver and the reason, and the next
    candidate runs; later runs of the problem skip it without trying again, until
    :meth:`forget_selections`. The failed attempt's queued kernels are finished first
    and the next solver writes the whole output. See docs/reliability.md.
    """

    def __init__(self, device: Device | str | None = None,
                 registry: SolverRegistry | None = None, allow_tf32: bool = False,
                 zero_copy: bool = False) -> None:
        if registry is not None and not isinstance(registry, SolverRegistry):
            raise ArgumentError(f"registry={registry!r:.60} is not a "
                                "wticonv.contract.registry.SolverRegistry; omit it for every "
                                "installed solver, or pass SolverRegistry(...)")
        self.allow_tf32 = allow_tf32_arg(allow_tf32, none_ok=False)
        if not isinstance(zero_copy, bool):
            raise ArgumentError(f"zero_copy={zero_copy!r:.40} must be True or False")
        self.zero_copy = zero_copy
        self.device = device if isinstance(device, Device) else select_device(device)
        self.registry = registry if registry is not None else SolverRegistry()
        self._lock = threading.Lock()
        self._selections: dict = {}
        self._set_aside: dict[tuple[ConvProblem, str], str] = {}
        self._workspace = None
        self._workspace_bytes = 0
        self.uid = register(self)

    def __repr__(self) -> str:
        return f"<Handle {self.device!r} solvers={self.registry.ids()}>"

    def __copy__(self) -> Handle:
        return self

    def __deepcopy__(self, memo) -> Handle:
        return self

    def __reduce_ex__(self, protocol):
        raise TypeError("a wticonv.Handle holds an OpenCL device (context, queue, compiled "
                        "programs) and cannot be pickled; make a new one where it is "
                        "needed (wticonv.Handle(device)), or pickle what holds it without "
                        "it (wticonv.torch's Conv2d leaves its handle out)")

    def select(self, problem: ConvProblem | str, workspace_limit: int | None = None,
               solver: str | None = None, perf_config: str | None = None,
               allow_tf32: bool | None = None) -> Selection:
        """Rank the solvers for ``problem`` (see :func:`wticonv.selection.ranking.select`; a
        ``perf_config`` may be forced together with ``solver``). ``problem`` is a
        :class:`ConvProblem` or a find-db key string. ``allow_tf32`` (None: the handle's
        :attr:`allow_tf32`) also ranks TF32-only solvers.

        Selections are remembered per handle (problem, workspace limit, forced solver, math
        mode), so
        a problem seen before costs a dictionary lookup; :meth:`forget_selections` drops
        them (find mode does, after recording new times). The returned object is shared:
        treat it as read-only.

        Raises
        ------
        ProblemError
            ``problem`` is neither a ConvProblem nor a valid find-db key.
        ArgumentError
            ``solver`` or ``perf_config`` is not a string, ``workspace_limit`` not a
            non-negative integer.
        DeviceError
            In a forked child (:func:`wticonv.runtime.forks.check_not_forked`).
        """
        check_not_forked(self.device)
        problem = _problem(problem)
        if workspace_limit is not None and type(workspace_limit) is not int:
            # before the lookup: True and 1.0 equal a remembered limit of 1
            workspace_limit = workspace_limit_arg(workspace_limit)
        allow_tf32 = allow_tf32_arg(allow_tf32)      # checked before the lookup: 1 == True
        if allow_tf32 is None:
            allow_tf32 = self.allow_tf32
        key = (problem, workspace_limit, solver, perf_config, allow_tf32)
        try:
            sel = self._selections.get(key)
        except TypeError:      # an unhashable argument: select() says which is wrong
            sel = None
        if sel is None:         # select() checks the arguments
            sel = select(self.registry, problem, self.device, workspace_limit, solver,
                         perf_config=perf_config, allow_tf32=allow_tf32)
            with self._lock:
                if len(self._selections) >= SELECTION_CACHE_SIZE:
                    self._selections.clear()
                self._selections[key] = sel
        return sel

    def forget_selections(self) -> None:
        """Drop the remembered selections (the next ones rank the solvers afresh) and the
        solvers set aside after failing to run (the next runs try them again)."""
        with self._lock:
            self._selections.clear()
            self._set_aside.clear()

    def _get_workspace(self, nbytes: int):
        """A buffer of exactly ``nbytes`` (a view of one grow-only allocation), or None."""
        if nbytes <= 0:
            return None
        if nbytes > self._workspace_bytes:
            if self._workspace is not None:
                self._workspace.release()
                self._workspace, self._workspace_bytes = None, 0
            self._workspace = self.device.alloc(nbytes, "the workspace")
            self._workspace_bytes = nbytes
        if nbytes == self._workspace_bytes:
            return self._workspace
        return self._workspace.get_sub_region(0, nbytes)

    def run(self, problem: ConvProblem | str, tensors: ConvTensors,
            selection: Selection | None = None, workspace_limit: int | None = None,
            solver: str | None = None, wait: bool = True,
            perf_config: str | None = None, allow_tf32: bool | None = None) -> RunResult:
        """Run ``problem`` on device buffers, with the chosen solver.

        ``problem`` is a :class:`ConvProblem` or a find-db key string. ``tensors`` holds
        one ``pyopencl.Buffer`` per tensor, packed NCHW float32: a :class:`ConvTensors`
        or a plain tuple ``(x, w, y)`` (for NumPy arrays use :meth:`compute`). The
        output (y in ``fwd``, x in ``bwd``, w in ``wrw``) must not alias an input: the
        same buffer, or a sub-buffer overlapping one, is refused; memory shared some other
        way (two buffers made with ``USE_HOST_PTR`` on one host array) is not detected
        and gives a wrong result. ``selection`` is a :class:`Selection` of ``problem``
        from :meth:`select` (None: select now); ``solver`` forces a solver id;
        ``allow_tf32`` (None: the handle's :attr:`allow_tf32`) admits TF32-only solvers.

        If the chosen solver fails (it raises, its kernels do not build, its workspace or
        a buffer it needs cannot be allocated), it is set aside for this problem with a
        :class:`SolverWarning` naming it and the reason, and the next candidate runs
        (unless the solver was forced); later runs of the problem on this handle skip it.

        Raises
        ------
        TensorError
            ``tensors`` is not three buffers; a buffer is missing, not a pyopencl buffer,
            or smaller than its tensor; the output aliases an input.
        ArgumentError
            ``selection`` is not a :class:`Selection` of ``problem``; it comes with
            ``solver``, ``workspace_limit`` or ``perf_config`` (it fixes them already); it
            has TF32 candidates and this run does not allow TF32.
        SolverRunError
            If the forced solver, or every candidate, failed to run.
        DeviceError
            In a forked child (:func:`wticonv.runtime.forks.check_not_forked`).
        """
        check_not_forked(self.device)
        problem = _problem(problem)
        allow_tf32 = allow_tf32_arg(allow_tf32)
        tensors = as_tensors(tensors)
        check_buffers(problem, tensors)
        selection = self._selection_for(problem, selection, workspace_limit, solver,
                                        perf_config, allow_tf32)
        failures = []
        forced = selection.mode == "forced"
        for v in selection.candidates:
            aside = None if forced else self._set_aside.get((problem, v.solver_id))
            if aside is not None:
                failures.append(f"{v.solver_id}: {aside} (set aside earlier)")
                continue
            result, reason = self._try(problem, tensors, selection, v, wait)
            if result is not None:
                return result
            failures.append(f"{v.solver_id}: {reason}")
            if forced:
                break
            if len(self._set_aside) >= SELECTION_CACHE_SIZE:
                self._set_aside.clear()
            self._set_aside[(problem, v.solver_id)] = reason
            warnings.warn(f"wticonv: solver {v.solver_id!r} failed to run problem "
                          f"{problem.key} ({reason}); it is set aside for this problem and "
                          "the next candidate runs", SolverWarning, stacklevel=2)
        raise SolverRunError(f"problem {problem.key} could not be run: " + "; ".join(failures))

    def _selection_for(self, problem: ConvProblem, selection, workspace_limit, solver,
                       perf_config, allow_tf32=None) -> Selection:
        """``selection`` checked to be a :class:`Selection` of ``problem`` (ArgumentError
        otherwise), or a new one when None."""
        if selection is None:
            return self.select(problem, workspace_limit, solver, perf_config, allow_tf32)
        if not isinstance(selection, Selection):
            hint = (f"; to force a solver, pass solver={selection!r}"
                    if isinstance(selection, str) else "")
            raise ArgumentError(f"selection={selection!r:.60} is not a wticonv.Selection "
                                f"(made by Handle.select){hint}")
        if selection.problem != problem:
            raise ArgumentError(f"selection is of problem {selection.problem.key}, not of "
                                f"{problem.key}: select this problem's with Handle.select")
        given = [f"{name}={value!r:.40}" for name, value in (
            ("solver", solver), ("workspace_limit", workspace_limit),
            ("perf_config", perf_config)) if value is not None]
        if given:
            raise ArgumentError(f"{', '.join(given)} with selection=: the selection already "
                                "fixes the solver, workspace and perf config; pass them to "
                                "Handle.select instead, or leave out selection=")
        allowed = self.allow_tf32 if allow_tf32 is None else allow_tf32
        tf32 = [v.solver_id for v in selection.candidates
                if not math_allowed(v.math, allowed)]
        if tf32:
            raise ArgumentError(f"selection has TF32 candidates ({', '.join(tf32)}), which "
                                "this run does not allow: run it with allow_tf32=True, or "
                                "select again without allow_tf32")
        return selection

    def _try(self, problem: ConvProblem, tensors: ConvTensors, selection: Selection,
             v: Verdict, wait: bool) -> tuple[RunResult | None, str]:
        """Run candidate ``v``: ``(its RunResult, "")``, or ``(None, why it failed)`` with
        the kernels it had queued finished."""
        with self._lock:
            try:
                workspace = self._get_workspace(v.workspace or 0)
                with self.device.profile() as prof:
                    self.registry.call(v.solver_id, "run", problem=problem,
                                       device=self.device, tensors=tensors,
                                       workspace=workspace, perf_config=v.perf_config)
                if wait:
                    self.device.queue.finish()
            except Exception as e:  # noqa: BLE001 - set the solver aside, try the next
                reason = _failure_reason(e)
                self._drain()
                return None, reason
            return RunResult(selection, v.solver_id, v.workspace or 0,
                             prof.kernel_ms if wait else 0.0, v), ""

    def _drain(self) -> None:
        """Finish what a failed attempt left queued, so that its errors (and writes) end
        before the next candidate starts."""
        try:
            self.device.queue.finish()
        except Exception:  # noqa: BLE001 - the attempt already failed; nothing to add
            pass

    def compute(self, problem: ConvProblem | str, x: np.ndarray | None = None,
                w: np.ndarray | None = None, y: np.ndarray | None = None,
                workspace_limit: int | None = None, solver: str | None = None,
                perf_config: str | None = None,
                allow_tf32: bool | None = None) -> np.ndarray:
        """Run ``problem`` (a :class:`ConvProblem` or a find-db key string) on host arrays
        and return the result as a new float32 array.

        ``solver`` forces a solver, ``perf_config`` one of its perf configs (tunable solvers,
        see :mod:`wticonv.measuring.tune`; ``"default"`` its own default); ``allow_tf32``
        (None: the handle's :attr:`allow_tf32`) admits TF32-only solvers.

        ``fwd`` needs x (N x C x H x W) and w (K x C/groups x R x S) and returns y;
        ``bwd`` needs y (dy, N x K x Ho x Wo) and w and returns dx; ``wrw`` needs x and y
        (dy) and returns dw. Arrays of any floating dtype and any layout (strided,
        reversed, transposed, Fortran order) are copied to C-contiguous float32 in index
        order (:func:`wticonv.problem.tensors.as_float32`). Empty tensors cannot be described by a
        :class:`ConvProblem` (every size is at least 1): :func:`wticonv.conv2d` and its
        siblings handle them.

        Raises
        ------
        ProblemError
            ``problem`` is neither a ConvProblem nor a valid find-db key.
        TensorError
            A needed array is missing, has the wrong shape, is not floating point, is a
            masked array, or holds finite values beyond float32's range.
        DeviceMemoryError
            A tensor does not fit the device (larger than its largest buffer, or the
            allocation fails).
        HostMemoryError
            The host cannot hold a float32 copy of an input or the result.
        DeviceError
            In a forked child (:func:`wticonv.runtime.forks.check_not_forked`).
        """
        check_not_forked(self.device)
        # as_float32 passed as this module names it, looked up at each call: replacing
        # wticonv.handle.as_float32 reaches the conversion (tests/test_kernel_faults.py)
        return compute_on_host(self, _problem(problem), {"x": x, "w": w, "y": y},
                               as_float32, workspace_limit, solver, perf_config, allow_tf32)


def get_handle(device: Device | str | None = None) -> Handle:
    """The default handle (created on first use), or a new one for another ``device``."""
    return default_handle(Handle, device)
