"""What selection says about one problem: one :class:`Verdict` per installed solver, and
the :class:`Selection` that holds them with the choice (see
:mod:`wticonv.selection.ranking`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from wticonv.problem.conv import ConvProblem

__all__ = ["Verdict", "Selection"]


@dataclass
class Verdict:
    """What one solver said about one problem.

    Attributes
    ----------
    solver_id, distribution : str
    applicable : bool
        ``is_applicable`` answered true (and no hook failed).
    reason : str
        Why the solver is not a candidate ("" for candidates).
    dynamic : bool or None
    wti : float or None
        The solver's Wall-Time Index (fraction of peak FP32; -2.0 = unknown).
    workspace : int or None
        Bytes.
    predicted_ms : float or None
        ``problem.flops / (device.peak_flops * wti)`` in ms, when WTI > 0.
    wti_source : str
        What ranks it: ``"model"`` (the solver's ``get_wti``), ``"calibrated"`` (that WTI
        times the device's calibration factor, :mod:`wticonv.measuring.calibrate`) or ``"find-db"``
        (a time measured by find mode, :mod:`wticonv.measuring.find`).
    source : str
        Which records ranked it: ``"model"`` (the solver's own WTI), ``"user
        calibration"`` or ``"system calibration"`` (a calibration of the user's store, or
        of a system database, :mod:`wticonv.db.system`), ``"user find-db"`` or ``"system
        find-db"`` (a measured time); "" for solvers that are not ranked.
    system_db : str
        The system database that ``source`` names (its distribution and file), else "".
    raw_wti : float or None
        The solver's own WTI before calibration (None when no factor applied).
    measured_ms : float or None
        The find-db's measured time, ms, when ``wti_source == "find-db"``.
    perf_config : str or None
        The perf config the solver is asked about and runs with (tunable solvers); None:
        the solver's default.
    perf_source : str
        Where ``perf_config`` came from: ``"perf-db"`` (the user's), ``"system perf-db"``
        (a system database's), ``"forced"``, or ``"default"``
        (tunable solvers only; "" for the others).
    note : str
        Remarks on the ranking (e.g. a stale find-db or perf-db record that was ignored).
    rank : int or None
        1-based position among the candidates.
    chosen : bool
    math : str
        The solver's numerical class (``"fp32"``, ``"3xtf32"`` or ``"tf32"``,
        :data:`wticonv.contract.answers.MATH_CLASSES`).
    declined : bool
        ``is_applicable`` declined the problem (``reason`` says why); False when it
        applies, or something else (a disabled solver, a failing hook) stops it.
    """

    solver_id: str
    distribution: str = ""
    applicable: bool = False
    reason: str = ""
    dynamic: bool | None = None
    wti: float | None = None
    workspace: int | None = None
    predicted_ms: float | None = None
    wti_source: str = ""
    source: str = ""
    system_db: str = ""
    measured_ms: float | None = None
    raw_wti: float | None = None
    perf_config: str | None = None
    perf_source: str = ""
    note: str = ""
    rank: int | None = None
    chosen: bool = False
    math: str = "fp32"
    #: ``is_applicable`` declined (not a dataclass field: JSON output leaves it out).
    declined = False

    @property
    def candidate(self) -> bool:
        """True when the solver may be chosen by the fallback."""
        return self.rank is not None


@dataclass
class Selection:
    """The outcome of ranking one problem: the choice and every solver's verdict.

    Attributes
    ----------
    problem : ConvProblem
    verdicts : list[Verdict]
        Candidates first, in rank order, then the other solvers by id.
    chosen : Verdict or None
    mode : str
        ``"immediate"`` (WTI fallback) or ``"forced"`` (``solver=`` / ``-S``).
    workspace_limit : int or None
        Bytes; None means no limit.
    allow_tf32 : bool
        Whether TF32-only solvers were ranked (else only FP32-accurate ones: math class
        ``fp32`` or ``3xtf32``).
    calibration_note : str
        What explain says of the device's calibration records that do not count here
        (other solver versions, solvers not installed); "" when all do, or none exists.
    """

    problem: ConvProblem
    verdicts: list[Verdict]
    chosen: Verdict | None
    mode: str = "immediate"
    workspace_limit: int | None = None
    candidates: list[Verdict] = field(default_factory=list)
    allow_tf32: bool = False
    calibration_note: str = ""

    @property
    def solver_id(self) -> str | None:
        """Id of the chosen solver."""
        return self.chosen.solver_id if self.chosen else None

    def to_dict(self) -> dict:
        """A JSON-ready description (``wticonv explain --json``): each solver's
        :class:`Verdict` fields, and ``candidate`` (:attr:`Verdict.candidate`: whether the
        fallback may choose it; a solver whose ``is_applicable`` said yes is not one when,
        for example, its workspace is over the limit: ``reason`` says why)."""
        return {
            "problem": self.problem.key,
            "direction": self.problem.direction,
            "flops": self.problem.flops,
            "mode": self.mode,
            "workspace_limit": self.workspace_limit,
            "allow_tf32": self.allow_tf32,
            "chosen": self.solver_id,
            "calibration_note": self.calibration_note,
            "solvers": [{**asdict(v), "candidate": v.candidate} for v in self.verdicts],
        }
