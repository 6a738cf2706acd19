"""Immediate-mode selection: rank the installed solvers without running anything.

Candidates are the solvers that are applicable, dynamic, report a WTI >= 0 and need no
more workspace than the caller allows. They are ordered by WTI (descending), then
workspace (ascending), then solver id, and the first one runs. This is MIOpen's
"Immediate Mode fallback" (MIOpen documentation, *Find and Immediate Mode*), with the
solver id as a final, deterministic tie-break. Where find mode has timed candidates on this
device (a valid find-db record for their version and workspace,
:mod:`wticonv.selection.finddb`), all candidates are ordered by time: the measured time
where there is one, else the predicted time (which orders as the WTI does), so a slow
solver that was measured never outranks a fast one whose record went stale. Tunable solvers
are asked about the perf config the perf-db holds for the problem
(:mod:`wticonv.selection.perfdb`), else about their default. Each of these records is
the user's own where the user's store holds one, else a system database's
(:mod:`wticonv.db.system`); each verdict's ``source`` says which ranked it.

Every selection explains itself: one :class:`Verdict` per installed solver.
"""

from __future__ import annotations

import math
import warnings
from typing import TYPE_CHECKING

import numpy as np

from wticonv.contract.answers import (
    applicable_answer,
    dynamic_answer,
    math_allowed,
    workspace_answer,
    wti_answer,
)
from wticonv.contract.hookspecs import Decline
from wticonv.errors import (
    ArgumentError,
    NoApplicableSolverError,
    SolverNotApplicableError,
    SolverWarning,
)
from wticonv.selection.calibration import apply_factors
from wticonv.selection.finddb import apply_records
from wticonv.selection.perfdb import DEFAULT_PERF_CONFIG, offered_perf_configs, stored_perf_config
from wticonv.selection.verdicts import Selection, Verdict

if TYPE_CHECKING:  # pragma: no cover
    from wticonv.contract.registry import SolverRegistry
    from wticonv.problem.conv import ConvProblem
    from wticonv.runtime.device import Device

# Verdict, Selection: defined in wticonv.selection.verdicts, kept here for callers of the
# old module
__all__ = ["Verdict", "Selection", "select", "workspace_limit_arg", "rank_key", "runnable"]


def _warn(sid: str, problem: ConvProblem, what: str) -> None:
    from wticonv.contract.registry import debug_enabled

    tb = ""
    if debug_enabled():
        import traceback

        tb = "\n" + traceback.format_exc()
    warnings.warn(f"wticonv: solver {sid!r} {what} for problem {problem.key}; it is set aside "
                  f"for this problem{tb}", SolverWarning, stacklevel=4)


class _NotOffered(ValueError):
    """A forced perf config the solver does not offer (the caller's mistake, no warning)."""


def _perf_config(registry: SolverRegistry, v: Verdict, problem: ConvProblem, device: Device,
                 workspace_limit: int | None, forced_config: str | None) -> None:
    """Set ``v.perf_config`` / ``perf_source`` of a tunable solver (forced, perf-db or
    default); a forced perf config the solver does not offer raises ValueError."""
    if forced_config == DEFAULT_PERF_CONFIG:       # the solver's own default, perf-db or not
        v.perf_config, v.perf_source = None, "forced"
        return
    if forced_config is not None:
        offered = offered_perf_configs(registry, v.solver_id, problem, device,
                                       workspace_limit)
        if forced_config not in offered:
            if workspace_limit is not None and forced_config in offered_perf_configs(
                    registry, v.solver_id, problem, device, None):
                raise _NotOffered(f"perf config {forced_config!r} needs more workspace than "
                                  f"the limit of {workspace_limit} bytes (offered within it: "
                                  f"{', '.join(offered) or 'none'})")
            raise _NotOffered(f"perf config {forced_config!r:.120} is not offered for this "
                              f"problem (offered: {', '.join(offered) or 'none'}; "
                              f"{DEFAULT_PERF_CONFIG!r} runs the solver's own default)")
        v.perf_config, v.perf_source = forced_config, "forced"
        return
    v.perf_config, note, source = stored_perf_config(registry, v.solver_id, problem, device,
                                                     workspace_limit)
    v.perf_source = source if v.perf_config is not None else "default"
    if note:
        v.note = note


def _evaluate(registry: SolverRegistry, sid: str, problem: ConvProblem, device: Device,
              workspace_limit: int | None, forced: bool,
              forced_config: str | None = None, quiet: bool = False) -> Verdict:
    entry = registry.solvers[sid]
    v = Verdict(solver_id=sid, distribution=entry.distribution, math=entry.math)
    if sid in registry.disabled and not forced:
        v.reason = "disabled (WTICONV_DISABLE_SOLVERS)"
        return v
    hook = "is_applicable"
    try:
        # registry.call(sid, hook, ...) of each query hook, as positional calls
        is_applicable, is_dynamic, workspace_size, get_wti = registry.query_callers(sid)
        ok = applicable_answer(is_applicable(problem, device, workspace_limit, None))
        if not ok:
            v.reason = (ok.reason if isinstance(ok, Decline) else "declined (no reason given)")
            v.declined = True
            return v
        hook = "is_dynamic"
        v.dynamic = dynamic_answer(is_dynamic())
        if entry.tunable:
            hook = "perf_configs"
            _perf_config(registry, v, problem, device, workspace_limit, forced_config)
        hook = "workspace_size"
        v.workspace = workspace_answer(workspace_size(problem, device, workspace_limit,
                                                      v.perf_config))
        hook = "get_wti"
        v.wti = wti_answer(get_wti(problem, device, workspace_limit, v.perf_config),
                           entry.max_wti)
        v.wti_source = v.source = "model"
    except _NotOffered as e:
        v.reason = str(e)
        return v
    except Exception as e:  # noqa: BLE001 - a misbehaving solver never stops selection
        if not quiet:
            _warn(sid, problem, f"failed in {hook}: {type(e).__name__}: {e}")
        v.reason = f"{hook} failed: {type(e).__name__}: {e}"
        v.dynamic = v.workspace = v.wti = None
        return v
    v.applicable = True
    if v.wti > 0:
        v.predicted_ms = problem.flops / (device.peak_flops * v.wti) * 1e3
    if forced:
        return v
    if not v.dynamic:
        v.reason = "not dynamic: runs only when forced"
    elif v.wti < 0:
        v.reason = "WTI unknown (-2.0)"
    elif v.workspace > device.info.max_alloc_bytes:
        v.reason = (f"needs {v.workspace} bytes of workspace, more than the device's largest "
                    f"buffer ({device.info.max_alloc_bytes} bytes)")
    elif workspace_limit is not None and v.workspace > workspace_limit:
        v.reason = (f"needs {v.workspace} bytes of workspace, over the limit of "
                    f"{workspace_limit}")
    return v


def _tensor_too_big(problem: ConvProblem, device: Device) -> str:
    """Why a tensor of ``problem`` cannot be allocated on ``device`` ("" if all fit)."""
    limit = device.info.max_alloc_bytes
    for name, shape in (("x", problem.x_shape), ("w", problem.w_shape),
                        ("y", problem.y_shape)):
        nbytes = 4 * math.prod(shape)
        if nbytes > limit:
            return (f"tensor {name} {shape} needs {nbytes} bytes, more than the device's "
                    f"largest buffer ({limit} bytes)")
    return ""


def _least_workspace(registry: SolverRegistry, sid: str, problem: ConvProblem,
                     device: Device, limit: int) -> int | None:
    """The smallest workspace limit (bytes, above ``limit``) under which solver ``sid``
    becomes a candidate for ``problem``, found by bisection up to the device's largest
    buffer; None when it would not be one even there."""
    def fits(room: int) -> bool:
        try:
            if not registry.call(sid, "is_applicable", problem=problem, device=device,
                                 workspace_limit=room):
                return False
            ws = registry.call(sid, "workspace_size", problem=problem, device=device,
                               workspace_limit=room)
        except Exception:  # noqa: BLE001 - a failing hook simply finds no minimum
            return False
        return isinstance(ws, int) and not isinstance(ws, bool) and 0 <= ws <= room

    lo, hi = limit, device.info.max_alloc_bytes
    if hi <= lo or not fits(hi):
        return None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if fits(mid) else (mid, hi)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SolverWarning)
        v = _evaluate(registry, sid, problem, device, hi, False)
    return hi if v.applicable and not v.reason else None


def _least_workspace_hint(registry: SolverRegistry, problem: ConvProblem, device: Device,
                          workspace_limit: int) -> str:
    """A line naming the least workspace that would let some solver run ``problem``, or
    "" when no workspace would."""
    least = [(b, sid) for sid in registry.ids() if sid not in registry.disabled
             for b in [_least_workspace(registry, sid, problem, device, workspace_limit)]
             if b is not None]
    if not least:
        return ""
    need, sid = min(least)
    return (f"\nthe workspace limit of {workspace_limit} bytes is below every solver's "
            f"minimum: the least any needs is {need} bytes ({sid}); raise the limit to at "
            "least that, or pass None for no limit")


def allow_tf32_arg(allow_tf32, none_ok: bool = True) -> bool | None:
    """``allow_tf32`` checked to be True or False, a NumPy bool taken as one (or None, the
    caller's default, where ``none_ok``); ArgumentError otherwise (1 and "yes" included)."""
    if isinstance(allow_tf32, bool) or (none_ok and allow_tf32 is None):
        return allow_tf32
    if isinstance(allow_tf32, np.bool_):
        return bool(allow_tf32)
    raise ArgumentError(f"allow_tf32={allow_tf32!r:.60} must be True"
                        + (", False or None" if none_ok else " or False"))


def workspace_limit_arg(workspace_limit) -> int | None:
    """``workspace_limit`` as an int number of bytes (NumPy integers taken), or None.

    Raises ArgumentError if it is negative or not an integer (a bool included)."""
    if workspace_limit is None:
        return None
    if isinstance(workspace_limit, bool) or not hasattr(workspace_limit, "__index__") \
            or workspace_limit < 0:
        raise ArgumentError(f"workspace_limit={workspace_limit!r:.60} must be a "
                            "non-negative integer number of bytes, or None for no limit")
    return int(workspace_limit.__index__())


def select(registry: SolverRegistry, problem: ConvProblem, device: Device,
           workspace_limit: int | None = None, solver: str | None = None,
           measured: bool = True, calibrated: bool = True,
           perf_config: str | None = None, allow_tf32: bool = False) -> Selection:
    """Rank every installed solver for ``problem`` on ``device`` and choose one.

    Parameters
    ----------
    workspace_limit : int, optional
        Most workspace the caller can give, in bytes (None: no limit).
    solver : str, optional
        Force this solver id: it must be applicable and fit the limit, but need not be
        dynamic or have a known WTI.
    measured : bool
        Rank by find-db records where they exist (default); False ranks by the WTI models
        alone (used to evaluate them).
    calibrated : bool
        Apply the device's calibration factors to the WTIs (default; see
        :mod:`wticonv.measuring.calibrate`).
    perf_config : str, optional
        Force this perf config of the forced (tunable) ``solver``; ``"default"``
        (:data:`wticonv.selection.perfdb.DEFAULT_PERF_CONFIG`) forces the solver's own
        default even where the perf-db holds a record.
    allow_tf32 : bool
        Also rank solvers whose results are TF32-accurate only (``math = "tf32"``); by
        default only the FP32-accurate classes (``fp32``, ``3xtf32``) are ranked or may be
        forced (:data:`wticonv.contract.answers.MATH_CLASSES`).

    Raises
    ------
    ArgumentError
        ``solver`` or ``perf_config`` is not a string, ``workspace_limit`` not a
        non-negative integer (NumPy integers are taken).
    SolverNotFoundError
        If ``solver`` names no installed solver.
    SolverNotApplicableError
        If the forced solver declines, fails, needs more workspace than allowed, or
        computes in TF32 without ``allow_tf32``.
    NoApplicableSolverError
        If no solver is a candidate; the message lists every solver and its reason, and,
        when ``workspace_limit`` is what stops them, the least workspace that would let
        one run.
    """
    workspace_limit = _check_arguments(registry, workspace_limit, solver, perf_config)
    allow_tf32 = allow_tf32_arg(allow_tf32, none_ok=False)
    too_big = _tensor_too_big(problem, device)
    if too_big:
        verdicts = [Verdict(sid, registry.solvers[sid].distribution, reason=too_big)
                    for sid in registry.ids()]
    else:
        # A forced solver's warnings only: the others are evaluated for the explanation,
        # and their faults are not this run's business (their verdicts still say why).
        verdicts = [_evaluate(registry, sid, problem, device, workspace_limit, sid == solver,
                              perf_config if sid == solver else None,
                              quiet=solver is not None and sid != solver)
                    for sid in registry.ids()]
    for v in verdicts:
        if v.applicable and not v.reason and not math_allowed(v.math, allow_tf32):
            v.reason = TF32_REFUSED
    note = ""
    if solver is not None:
        sel = _forced(problem, device, verdicts, solver, workspace_limit)
    else:
        if calibrated:
            note = apply_factors(registry, device, verdicts, problem.direction, problem)
        if measured:
            apply_records(registry, device, problem, verdicts)
        sel = _ranked(registry, problem, device, verdicts, workspace_limit)
    sel.allow_tf32 = allow_tf32
    sel.calibration_note = note
    return sel


def runnable(registry: SolverRegistry, problem: ConvProblem, device: Device,
             workspace_limit: int | None = None, allow_tf32: bool = False) -> set[str]:
    """The solvers find mode times on ``problem`` (:func:`wticonv.measuring.find.find`):
    each one that a forced selection accepts (applicable, its workspace within the limit
    and the device's largest buffer, FP32-accurate unless ``allow_tf32``), less the
    disabled ones. Nothing runs and nothing warns; a fleet's resume asks it which solvers
    a problem's find-db records must hold (:mod:`wticonv.fleet.jobs`)."""
    workspace_limit = _check_arguments(registry, workspace_limit, None, None)
    if _tensor_too_big(problem, device):
        return set()
    out = set()
    for sid in registry.ids():
        if sid in registry.disabled:
            continue
        v = _evaluate(registry, sid, problem, device, workspace_limit, True, quiet=True)
        if v.applicable and math_allowed(v.math, allow_tf32) \
                and v.workspace <= device.info.max_alloc_bytes \
                and (workspace_limit is None or v.workspace <= workspace_limit):
            out.add(sid)
    return out


#: Why a tf32 solver is not ranked by default.
TF32_REFUSED = ("computes in TF32 (10-bit mantissa), not FP32-accurate: allow_tf32=True "
                "(--math tf32) admits it")


def _check_arguments(registry: SolverRegistry, workspace_limit, solver, perf_config):
    """:func:`select`'s argument checks (ArgumentError, SolverNotFoundError); returns the
    workspace limit as an int or None."""
    for name, value, example in (("solver", solver, "a solver id such as 'direct.naive'"),
                                 ("perf_config", perf_config,
                                  "a name the solver's perf_configs lists, or 'default'")):
        if value is not None and not isinstance(value, str):
            raise ArgumentError(f"{name}={value!r:.60} must be a string ({example}), or None")
    workspace_limit = workspace_limit_arg(workspace_limit)
    if solver is not None:
        entry = registry.get(solver)
        if perf_config is not None and not entry.tunable:
            raise ArgumentError(f"solver {solver!r} is not tunable: it takes no perf config")
    elif perf_config is not None:
        raise ArgumentError("a perf config can only be forced together with its solver")
    return workspace_limit


def _forced(problem: ConvProblem, device: Device, verdicts: list[Verdict], solver: str,
            workspace_limit: int | None) -> Selection:
    """The selection of a forced solver (SolverNotApplicableError if it declined or needs
    more workspace than the device's largest buffer or the limit)."""
    v = next(v for v in verdicts if v.solver_id == solver)
    if v.reason == TF32_REFUSED:
        raise SolverNotApplicableError(f"solver {solver!r} cannot run problem {problem.key}: "
                                       f"{v.reason}")
    if not v.applicable:
        raise SolverNotApplicableError(
            f"solver {solver!r} cannot run problem {problem.key}: {v.reason}",
            declined=v.reason if v.declined else None)
    if v.workspace > device.info.max_alloc_bytes:
        raise SolverNotApplicableError(
            f"solver {solver!r} needs {v.workspace} bytes of workspace for problem "
            f"{problem.key}, more than the device's largest buffer "
            f"({device.info.max_alloc_bytes} bytes)")
    if workspace_limit is not None and v.workspace > workspace_limit:
        raise SolverNotApplicableError(
            f"solver {solver!r} needs {v.workspace} bytes of workspace for problem "
            f"{problem.key}, over the limit of {workspace_limit}; raise the limit")
    v.chosen = True
    v.rank = 1
    others = [o for o in verdicts if o is not v]
    for o in others:                 # the table's verdict and JSON's reason say why
        if o.applicable and not o.reason:
            o.reason = f"not ranked: {solver} is forced (solver= or -S)"
    return Selection(problem, [v] + others, v, "forced", workspace_limit, [v])


def rank_key(v: Verdict) -> tuple:
    """Immediate mode's order of candidates: the measured (find-db) time where known, else
    the predicted; then WTI (descending), workspace and solver id."""
    return (v.measured_ms if v.measured_ms is not None else v.predicted_ms, -v.wti,
            v.workspace, v.solver_id)


def _ranked(registry: SolverRegistry, problem: ConvProblem, device: Device,
            verdicts: list[Verdict], workspace_limit: int | None) -> Selection:
    """Immediate mode's order of the candidates (NoApplicableSolverError if none): by time,
    the measured (find-db) where known, else the predicted (the WTI's order); then WTI,
    workspace and solver id."""
    candidates = [v for v in verdicts if v.applicable and not v.reason]
    candidates.sort(key=rank_key)
    for i, v in enumerate(candidates, 1):
        v.rank = i
    if not candidates:
        lines = "\n".join(f"  {v.solver_id}: {v.reason}" for v in verdicts) or \
            "  (no solver is installed: install wticonv-direct, or check WTICONV_LOAD_PLUGINS)"
        if workspace_limit is not None:
            lines += _least_workspace_hint(registry, problem, device, workspace_limit)
        raise NoApplicableSolverError(
            f"no solver can run problem {problem.key} ({problem.describe()}):\n{lines}")
    candidates[0].chosen = True
    rest = sorted((v for v in verdicts if not v.candidate), key=lambda v: v.solver_id)
    return Selection(problem, candidates + rest, candidates[0], "immediate", workspace_limit,
                     candidates)
