"""How good is the immediate-mode fallback? Its choice against the fastest solver measured.

For each problem, :func:`evaluate` times every applicable solver (find mode,
:func:`wticonv.measuring.find.find`, which also records the times in the find-db; tunable solvers
with the perf config immediate mode gives them, the perf-db's or their default, not
searched) and compares:

- the fallback's choice *by the WTI models alone* (find-db records ignored, as on a
  machine where find mode never ran);
- two simple baselines: "always GEMM" (``gemm.1x1`` where it applies, else
  ``gemm.im2col``) and "lowest workspace" (the candidate needing the least workspace,
  ties broken by the fallback's order);

each as a *slowdown*: its measured time / the fastest measured time (1.0 = it picked the
fastest). The summary gives, per choice rule, the share of cases within 10 % of the
best, the share that picked the best (top-1), and the mean and worst slowdown; MIOpen
reports its learned fallback this way (0.54 % mean slowdown, TunaNet v2). Every
measurement, with its predicted time, can be written as CSV (:func:`write_csv`) and
drawn as predicted against measured time per solver (:func:`write_plot`, matplotlib).
"""

from __future__ import annotations

import csv
import math
import statistics
import warnings
from dataclasses import dataclass, field

from wticonv.measuring.find import DEFAULT_ITERATIONS, DEFAULT_TIME_CAP_MS, find
from wticonv.selection.ranking import select

__all__ = ["Case", "evaluate", "summarize", "write_csv", "write_plot", "RULES"]

#: The choice rules compared, in report order.
RULES = ("fallback", "always GEMM", "lowest workspace")


@dataclass
class Case:
    """One problem: what each rule chose and every solver's predicted and measured time.

    Attributes
    ----------
    problem : ConvProblem
    best : str
        Fastest measured solver.
    chosen : dict
        Rule -> solver id (None when the rule has no candidate, e.g. no GEMM applies).
    slowdown : dict
        Rule -> measured time of its choice / best time (None when it chose nothing or
        its choice did not run).
    measured_ms, predicted_ms : dict
        Solver id -> time in ms (predicted: from the WTI, candidates with WTI > 0 only).
    """

    problem: object
    best: str
    chosen: dict = field(default_factory=dict)
    slowdown: dict = field(default_factory=dict)
    measured_ms: dict = field(default_factory=dict)
    predicted_ms: dict = field(default_factory=dict)


def _gemm(candidates) -> str | None:
    ids = [v.solver_id for v in candidates]
    for sid in ("gemm.1x1", "gemm.im2col"):
        if sid in ids:
            return sid
    return None


def evaluate(handle, problems, iterations: int = DEFAULT_ITERATIONS,
             time_cap_ms: float = DEFAULT_TIME_CAP_MS, workspace_limit: int | None = None,
             progress=None) -> list[Case]:
    """Measure every applicable solver on each problem and score the choice rules.

    ``progress``, when given, is called with (index, count, problem) before each problem.
    Problems that no solver could run are left out, each with a warning saying why.
    """
    cases = []
    problems = list(problems)
    for i, p in enumerate(problems):
        if progress is not None:
            progress(i, len(problems), p)
        results = find(handle, p, iterations, time_cap_ms, workspace_limit, search=False)
        measured = {r.solver_id: r.time_ms for r in results if r.time_ms is not None}
        if not measured:
            why = next((r.reason for r in results if r.reason), "no solver is installed")
            warnings.warn(f"wticonv: no solver could run {p.key} ({why}); it is left out of "
                          "the evaluation", stacklevel=2)
            continue
        model = select(handle.registry, p, handle.device, workspace_limit, measured=False)
        cands = model.candidates
        best = min(measured, key=measured.get)
        lowest = min(cands, key=lambda v: (v.workspace, v.rank)).solver_id if cands else None
        case = Case(p, best, measured_ms=measured,
                    predicted_ms={v.solver_id: v.predicted_ms for v in cands
                                  if v.predicted_ms is not None})
        case.chosen = {"fallback": model.solver_id, "always GEMM": _gemm(cands),
                       "lowest workspace": lowest}
        for rule, sid in case.chosen.items():
            t = measured.get(sid) if sid is not None else None
            case.slowdown[rule] = t / measured[best] if t is not None else None
        cases.append(case)
    return cases


def summarize(cases) -> dict:
    """Rule -> {cases, within_10pct, top1, mean_slowdown, worst_slowdown} (shares as
    fractions; slowdowns over the cases where the rule chose a solver that ran)."""
    out = {}
    for rule in RULES:
        xs = [c.slowdown[rule] for c in cases if c.slowdown.get(rule) is not None]
        out[rule] = {
            "cases": len(xs),
            "within_10pct": sum(x <= 1.1 for x in xs) / len(xs) if xs else math.nan,
            "top1": sum(x <= 1.0 for x in xs) / len(xs) if xs else math.nan,
            "mean_slowdown": statistics.fmean(xs) if xs else math.nan,
            "worst_slowdown": max(xs) if xs else math.nan,
        }
    return out


def write_csv(cases, path, device=None) -> None:
    """One row per (problem, solver) measured: key, direction, solver, predicted and
    measured ms, whether the fallback chose it and it was the fastest, and (when
    ``device`` is given) the device's name and kind."""
    dev = [device.info.name, device.kind] if device is not None else []
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["problem", "direction", "solver", "predicted_ms", "measured_ms",
                    "fallback_choice", "fastest"] + (["device", "kind"] if dev else []))
        for c in cases:
            for sid, t in sorted(c.measured_ms.items(), key=lambda kv: kv[1]):
                pred = c.predicted_ms.get(sid)
                w.writerow([c.problem.key, c.problem.direction, sid,
                            "" if pred is None else f"{pred:.6g}", f"{t:.6g}",
                            int(c.chosen.get("fallback") == sid), int(c.best == sid), *dev])


def write_plot(cases, path) -> None:
    """Predicted against measured time (log-log), one colour per solver, the diagonal as
    reference, to a PNG file. Needs matplotlib (``pip install 'wticonv[plot]'``).

    Raises
    ------
    ImportError
        If matplotlib is not installed (the message says how to install it).
    """
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError("the plot needs matplotlib: pip install 'wticonv[plot]'") from None
    fig, ax = plt.subplots(figsize=(7, 6))
    by_solver: dict[str, tuple[list, list]] = {}
    for c in cases:
        for sid, t in c.measured_ms.items():
            pred = c.predicted_ms.get(sid)
            if pred is not None:
                xs, ys = by_solver.setdefault(sid, ([], []))
                xs.append(t)
                ys.append(pred)
    lo, hi = math.inf, 0.0
    for sid, (xs, ys) in sorted(by_solver.items()):
        ax.scatter(xs, ys, s=12, label=sid)
        lo, hi = min(lo, *xs, *ys), max(hi, *xs, *ys)
    if hi > 0:
        ax.plot([lo, hi], [lo, hi], color="grey", linewidth=1)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("measured ms")
    ax.set_ylabel("predicted ms (WTI model)")
    ax.set_title("wticonv: predicted vs measured time per solver")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
