"""Hook specifications: the contract between the wticonv core and its solver plugins.

A *solver* is an object with a ``solver_id`` attribute (``"<plugin>.<variant>"``, lowercase)
and the five hooks below, each marked with :data:`hookimpl`. The core registers every
solver as its own pluggy plugin, named by its solver id, and always calls a hook for one
solver at a time, so every answer is tied to the solver that gave it. All five hooks are
``firstresult`` hooks: the call returns the solver's value, not a list.

Order of calls for one problem (immediate mode)::

    is_applicable -> (if applicable) is_dynamic, workspace_size, get_wti -> rank -> run

A solver may also implement the optional ``programs`` hook, naming the programs ``run``
builds, so that calibration, find and evaluate compile them ahead, several at once.
A solver with kernel parameters worth searching (tile sizes, splits) may also implement
the optional ``perf_configs`` hook: it is then *tunable*. ``wticonv tune`` times each perf
config it lists and stores the fastest in the perf-db; the core passes the stored one (or
None, meaning the solver's own heuristic default) as ``perf_config`` to ``get_wti``,
``workspace_size`` and ``run``. Solvers that are not tunable leave ``perf_config`` out of
their signatures and never see it.

``is_applicable``, ``is_dynamic``, ``get_wti`` and ``workspace_size`` are *queries*: they
are called for every installed solver whenever a new problem is ranked, so they must be
fast (microseconds), deterministic and free of side effects: no kernel builds, no device
allocations, no kernel launches. Only ``run`` touches the device.

A solver also declares ``hook_api`` (the versions below it was written for), ``tolerance``
(the rms_range its results meet against the float64 reference: a number in (0, 1),
default 1e-5), if its algorithm saves multiplications, ``max_wti`` (a number in
(0, 16], default 1.0) and, if it computes on tensor cores, ``math`` (its numerical
class: ``"fp32"`` by default, ``"3xtf32"`` or ``"tf32"``, which the fallback ranks only
when the caller allows TF32); the registry refuses, at load time, values out of range
(:mod:`wticonv.contract.answers`). The prefix of ``solver_id`` belongs to one distribution
(:mod:`wticonv.contract.ownership`). Answers of the wrong kind (``None`` from ``is_applicable``,
``"yes"`` from ``is_dynamic``, a NaN WTI) are contract violations, reported as such.

Non-solver plugins (tracing, verification) may register ``hookwrapper`` implementations of
``run``; they are called around every solver's ``run``.

Units: sizes in bytes, WTI as a fraction of the device's peak FP32 rate (see
:func:`get_wti`), times in milliseconds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

from wticonv.contract.protocols import DeviceLike

if TYPE_CHECKING:  # pragma: no cover
    from wticonv.problem.conv import ConvProblem
    from wticonv.problem.tensors import ConvTensors

__all__ = ["hookspec", "hookimpl", "Decline", "SolverSpec", "HOOK_NAMES", "OPTIONAL_HOOK_NAMES",
           "PERF_CONFIG_HOOKS", "WTI_UNKNOWN", "HOOK_API_VERSION", "COMPATIBLE_HOOK_APIS"]

#: The pluggy project name of wticonv's hooks.
PROJECT_NAME = "wticonv"

#: Marks a hook specification (used by the core only).
hookspec = pluggy.HookspecMarker(PROJECT_NAME)

#: Marks a solver's hook implementation: ``@hookimpl def get_wti(self, problem, device): ...``
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)

#: The version of this hook API. A solver states the versions it was written for in a
#: ``hook_api`` attribute (a tuple of ints); one that does not list this version is
#: quarantined with a message saying what to upgrade. Version 2 added the optional
#: ``perf_configs`` hook and the ``perf_config`` argument (version 1: the five hooks).
HOOK_API_VERSION = 2
#: Versions whose solvers still work with this core: version 1 solvers know nothing of perf
#: configs, which are optional.
COMPATIBLE_HOOK_APIS = (1, 2)

#: The WTI a solver returns when it cannot predict its efficiency (MIOpen's convention).
WTI_UNKNOWN = -2.0

#: Every hook a solver must implement.
HOOK_NAMES = ("is_applicable", "is_dynamic", "get_wti", "workspace_size", "run")
#: Hooks a solver may implement: ``perf_configs`` makes it *tunable* (``wticonv tune``);
#: ``programs`` lets the core compile its programs ahead, several at once.
OPTIONAL_HOOK_NAMES = ("perf_configs", "programs")
#: Hooks that receive the perf config the solver is to use (None: its own default).
PERF_CONFIG_HOOKS = ("get_wti", "workspace_size", "run", "programs")


class Decline:
    """A falsy answer of ``is_applicable`` that carries the reason.

    Return ``Decline("only 3x3 filters")`` instead of ``False`` so that ``wticonv explain``
    and the "no solver applies" error can say why the solver declined.

    Parameters
    ----------
    reason : str
        One short sentence, lowercase, no final period, e.g. ``"stride 2 is not supported"``.
    """

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = str(reason)

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"Decline({self.reason!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Decline) and other.reason == self.reason

    def __hash__(self) -> int:
        return hash(("Decline", self.reason))


class SolverSpec:
    """The hook specifications. Plugin authors implement these; they never call them."""

    @hookspec(firstresult=True)
    def is_applicable(self, problem: ConvProblem, device: DeviceLike,
                      workspace_limit: int | None) -> bool | Decline:
        """Can this solver compute ``problem`` on ``device``?

        **When called:** first, for every installed solver, whenever a problem is ranked
        (immediate mode), forced (``solver=``) or explained.

        **Arguments:** ``problem`` is a valid :class:`~wticonv.ConvProblem` (its fields are
        already checked); ``device`` is the :class:`~wticonv.Device` it would run on (read
        ``device.info`` for limits such as local memory); ``workspace_limit`` is the most
        workspace the caller gives, in bytes, or None for no limit. Like every argument,
        it may be left out of the implementation's signature if the solver ignores it.

        **Returns:** ``True`` when the solver computes this problem correctly, else a
        :class:`Decline` with the reason (plain ``False`` is accepted but reports "no reason
        given"). Anything else (``None``, 0, a string) is a contract violation, reported
        as such, never read as a decline.

        **Must not:** build kernels, allocate or touch device memory, or take more than a
        few microseconds. It must not raise for a valid problem; a solver that raises is set
        aside for that problem with a warning.
        """

    @hookspec(firstresult=True)
    def is_dynamic(self) -> bool:
        """Does this solver's compiled code serve every batch and picture size?

        **When called:** once per ranking, for applicable solvers.

        **Returns:** ``True`` when N, H, W and the output size are run-time kernel arguments,
        so that one compiled program serves every batch size and picture size (a *dynamic*
        solver, eligible for the immediate-mode fallback); ``False`` when kernels are
        compiled per shape (such solvers run only when forced, or in find mode). Exactly
        a bool: ``"yes"`` or 1 is a contract violation.

        **Must not:** depend on anything but the solver itself.
        """

    @hookspec(firstresult=True)
    def get_wti(self, problem: ConvProblem, device: DeviceLike,
                workspace_limit: int | None, perf_config: str | None) -> float:
        """Predicted Wall-Time Index of this solver on ``problem``.

        **When called:** during ranking, only if ``is_applicable`` returned true, with the
        same ``workspace_limit`` (a solver that works in chunks may predict the chunks).
        ``perf_config`` is the perf config the solver would run with (tunable solvers
        only, see :meth:`perf_configs`; None: the solver's default).

        **Returns:** the predicted fraction of ``device.peak_flops`` (FP32 FLOP/s) that the
        solver reaches, counted as if the direct algorithm ran (``problem.flops``): the
        predicted time in seconds is ``problem.flops / (device.peak_flops * wti)``. 1.0 means
        100 % utilisation; algorithms that do fewer multiplications than the direct one
        (Winograd, FFT) may return more than 1.0. Return ``-2.0`` (:data:`WTI_UNKNOWN`)
        when the solver cannot tell; such solvers are not chosen by the fallback.

        **Must not:** return NaN, infinity or a negative value other than -2.0; run or
        build anything. Document the model and the source of its constants.
        """

    @hookspec(firstresult=True)
    def workspace_size(self, problem: ConvProblem, device: DeviceLike,
                       workspace_limit: int | None, perf_config: str | None) -> int:
        """Scratch device memory this solver will use for ``problem``, in bytes.

        **When called:** during ranking, after ``is_applicable`` said yes, with the same
        ``workspace_limit`` and ``perf_config`` (as for :meth:`get_wti`); the answer is the
        size of the workspace ``run`` receives.

        **Returns:** an exact, non-negative integer number of bytes; 0 when no workspace is
        needed. A solver that can work in pieces (e.g. a batch in chunks) returns what it
        will use within ``workspace_limit``; one that cannot fit declines in
        ``is_applicable`` instead. A value over the limit makes the solver no candidate.
        """

    @hookspec(firstresult=True)
    def run(self, problem: ConvProblem, device: DeviceLike, tensors: ConvTensors,
            workspace: Any, perf_config: str | None) -> None:
        """Compute ``problem`` on ``device``.

        **When called:** after the solver was chosen (or forced), with device buffers
        allocated by the core.

        **Arguments:** ``tensors`` is a :class:`~wticonv.ConvTensors` of ``pyopencl.Buffer``
        objects named as MIOpen names them: ``x`` (N x C x H x W), ``w`` (K x C/groups x R
        x S) and ``y`` (N x K x Ho x Wo), all packed NCHW float32. For ``fwd`` the solver
        reads x and w and writes y; for ``bwd`` it reads y (dy) and w and writes x (dx);
        for ``wrw`` it reads x and y (dy) and writes w (dw). The output holds arbitrary
        values on entry and must be fully overwritten. ``workspace`` is a
        ``pyopencl.Buffer`` of at least ``workspace_size`` bytes, or ``None`` when that is 0.
        ``perf_config`` is the one ``workspace_size`` was asked about (None: the default).

        **Returns:** ``None``. Kernels are enqueued on ``device.queue`` (through
        ``device.enqueue_kernel`` so that their time is measured); the call may return
        before they finish.

        **Must not:** write outside the output tensor and the workspace, modify the inputs,
        build programs per problem size (use ``device.build`` with size-independent
        sources and options, and pass sizes as kernel arguments), or block on the queue
        unless it must.
        """

    @hookspec(firstresult=True)
    def perf_configs(self, problem: ConvProblem, device: DeviceLike,
                     workspace_limit: int | None) -> list[str]:
        """The perf configs this solver can run ``problem`` with (optional hook).

        Implement it only if the solver is *tunable*: it has kernel parameters (tile sizes,
        work-group shapes, reduction splits) whose best values the heuristic behind its
        default may miss. ``wticonv tune`` and ``wticonv find`` time every perf config
        listed and store the fastest in the perf-db; immediate mode then passes it as
        ``perf_config`` to :meth:`get_wti`, :meth:`workspace_size` and :meth:`run`.

        **When called:** by ``wticonv tune`` / ``find`` for applicable problems, and when
        immediate mode checks a perf-db record before using it.

        **Arguments:** as for :meth:`is_applicable`; list only the perf configs whose
        workspace fits ``workspace_limit`` (bytes, None: no limit).

        **Returns:** a list of distinct, non-empty strings of at most 100 printable
        characters (e.g. ``"64x128/s4"``; ``"default"`` is reserved), each a name the
        solver's other hooks accept as ``perf_config``; an empty list when there is nothing
        to tune for this problem. A perf-db record naming a config that is not listed is
        reported, ignored and deleted: the solver's default runs instead.

        **Must not:** build or run anything; it may take up to a millisecond. The perf
        configs must not change what the solver computes, only how fast, and must keep
        it dynamic (one build per perf config serves every N, H and W).
        """

    @hookspec(firstresult=True)
    def programs(self, problem: ConvProblem, device: DeviceLike,
                 workspace_limit: int | None, perf_config: str | None
                 ) -> list[tuple[str, str]]:
        """The OpenCL programs ``run`` builds for ``problem`` (optional hook).

        Implement it so that the core can compile a solver's programs before it times them:
        ``wticonv calibrate``, ``find`` and ``evaluate`` collect the programs of every
        problem they will run and compile the ones not yet cached several at once, in
        build-helper processes (:meth:`wticonv.runtime.programs.ProgramCache.precompile`;
        MIOpen's find mode compiles its solutions' kernels in parallel the same way). A
        solver without it is compiled when it first runs, as before.

        **When called:** before ``run``, after ``is_applicable`` said yes, with the
        ``workspace_limit`` and ``perf_config`` ``run``'s workspace was sized for.

        **Returns:** a list of ``(source, options)`` pairs of str, exactly as ``run`` passes
        them to ``device.build``; :func:`wticonv.runtime.kit.programs_of` makes it from the
        :class:`~wticonv.runtime.kit.Launch` list a kit-based solver plans. Pairs ``run``
        does not build only waste compile time; programs ``run`` builds that are missing
        are compiled when it runs. The conformance kit checks that ``run`` builds nothing
        unlisted.

        **Must not:** build or run anything; it may take up to a millisecond.
        """
