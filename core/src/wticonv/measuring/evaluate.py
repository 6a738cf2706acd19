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
reports its learned fallback this way (0.54 % mean slowdown, TunaNet v2).

Those figures weigh every case alike, a 7x7 stem as much as a 3x3 layer repeated twenty
times. What a user feels is the network's conv time: each case has a ``count`` (how many
layers of the network have that problem), and the *time-weighted slowdown* is

    sum over cases of count x measured time of the rule's choice
    / sum over cases of count x fastest measured time,

the network's conv time with the rule's choices over its time with the fastest solver in
every case (cases where the rule chose nothing, or its choice did not run, are left out
of both sums). Every
measurement, with its predicted time, can be written as CSV (:func:`write_csv`) and
drawn as predicted against measured time per solver (:func:`write_plot`, matplotlib).

A case a rule misses by more than :data:`CONFIRM_ABOVE` is timed once more before it is
scored (:func:`confirm`): every rule's choice and the fastest solver, interleaved, each
keeping its fastest run over both timings. Interference only ever adds time, so the
second timing can only bring either figure closer to what the kernel takes; a real miss
stays a miss, a slow spell that fell on one solver's runs does not count as one.
"""

from __future__ import annotations

import csv
import math
import statistics
import warnings
from dataclasses import dataclass, field

from wticonv.measuring.find import DEFAULT_ITERATIONS, DEFAULT_TIME_CAP_MS, find, record_results
from wticonv.measuring.precompile import precompile_problems
from wticonv.measuring.timing import timed_together
from wticonv.selection.ranking import select

__all__ = ["Case", "evaluate", "score", "confirm", "summarize", "write_csv", "write_plot",
           "RULES", "CONFIRM_ABOVE", "check_confirm_above"]

#: The choice rules compared, in report order.
RULES = ("fallback", "always GEMM", "lowest workspace")

#: A rule's slowdown above which its case is timed once more (:func:`confirm`): the
#: within-10 % line, so that every case counted as a miss has been timed twice (every
#: rule's choice and the fastest solver, whichever rule missed). On a
#: 2-core AMD EPYC (Zen 4) guest, PoCL 3.1, a slow spell of seconds fell on one solver's
#: interleaved runs: `evaluate` scored direct.tiled on squeezenet1_0's 128 -> 16 1x1
#: forward at 54x54, N=4, 2.17x off (1.7-2.4 ms against gemm.1x1's 0.8-0.9), where both
#: measured 0.52 and 0.49 ms timed together again on the quiet machine
#: (docs/find-and-tune.md, "the Zen 4 of the issue").
CONFIRM_ABOVE = 1.1


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
    count : int
        How many layers of the network have this problem (its weight in the
        time-weighted slowdown); 1 by default.
    retimed : tuple
        Solver ids timed a second time by :func:`confirm` (their times are the faster of
        the two); empty when the case was scored on its first timing.
    """

    problem: object
    best: str
    chosen: dict = field(default_factory=dict)
    slowdown: dict = field(default_factory=dict)
    measured_ms: dict = field(default_factory=dict)
    predicted_ms: dict = field(default_factory=dict)
    count: int = 1
    retimed: tuple = ()


def _gemm(candidates) -> str | None:
    ids = [v.solver_id for v in candidates]
    for sid in ("gemm.1x1", "gemm.im2col"):
        if sid in ids:
            return sid
    return None


def _counts(problems: list, counts) -> list:
    """Each problem's count: from ``counts`` (None: 1 each; a mapping problem -> count, 1
    for problems it lacks; or a sequence parallel to ``problems``), checked positive."""
    if counts is None:
        out = [1] * len(problems)
    elif hasattr(counts, "get"):
        out = [counts.get(p, 1) for p in problems]
    else:
        out = list(counts)
        if len(out) != len(problems):
            raise ValueError(f"counts has {len(out)} entries for {len(problems)} problems; "
                             "give one count per problem (or a mapping problem -> count)")
    for p, c in zip(problems, out, strict=True):
        if isinstance(c, bool) or not isinstance(c, (int, float)) or not 0 < c < math.inf:
            raise ValueError(f"the count of {p.key} is {c!r}; a count is a positive number "
                             "(how many layers of the network have that problem)")
    return out


def evaluate(handle, problems, iterations: int = DEFAULT_ITERATIONS,
             time_cap_ms: float = DEFAULT_TIME_CAP_MS, workspace_limit: int | None = None,
             progress=None, counts=None, confirm_above: float | None = CONFIRM_ABOVE
             ) -> list[Case]:
    """Measure every applicable solver on each problem and score the choice rules.

    A case some rule misses by more than ``confirm_above`` (a finite slowdown >= 1;
    None: never) is timed again as :func:`confirm` says before it is scored, and the
    find-db gets the fastest times of both timings.

    ``progress``, when given, is called with (index, count, problem) before each problem.
    ``counts`` weighs the problems for the time-weighted slowdown (:func:`summarize`): a
    mapping problem -> how many layers of the network have it (1 for problems it lacks),
    or a sequence parallel to ``problems``; None counts each problem once. Problems that
    no solver could run are left out, each with a warning saying why.

    Raises
    ------
    ValueError
        A count that is not a positive number, a sequence of counts of another length
        than ``problems``, or a ``confirm_above`` that is neither None nor a finite
        number >= 1 (checked before anything is timed).
    """
    check_confirm_above(confirm_above)
    cases = []
    problems = list(problems)
    weights = _counts(problems, counts)
    precompile_problems(handle, problems, workspace_limit)     # several at once
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
        case = score(handle, p, measured, workspace_limit, weights[i])
        if confirm_above is not None:
            case = confirm(handle, case, iterations, time_cap_ms, workspace_limit,
                           confirm_above, results)
        cases.append(case)
    return cases


def check_confirm_above(value) -> None:
    """ValueError unless ``value`` is None or a finite number of at least 1 (a slowdown:
    1.0 re-times every case whose rules did not all pick the fastest)."""
    if value is None:
        return
    if (isinstance(value, bool) or not isinstance(value, (int, float))
            or not 1.0 <= value < math.inf):
        raise ValueError(f"confirm_above={value!r} must be None (never time a case again) "
                         "or a finite slowdown of at least 1.0, such as "
                         f"{CONFIRM_ABOVE} (the default)")


def confirm(handle, case: Case, iterations: int, time_cap_ms: float,
            workspace_limit: int | None = None, above: float = CONFIRM_ABOVE,
            results=None) -> Case:
    """``case`` scored again after a second timing, where some rule's slowdown is above
    ``above`` (a finite number >= 1): the choices of *every* rule and the fastest solver
    are timed together (:func:`wticonv.measuring.timing.timed_together`, ``iterations``
    rounds, the perf config immediate mode gives them) and each keeps the faster of its
    two times, so that every rule's slowdown rests on two timings of both its choice and
    the fastest. The case is then scored afresh on ``handle`` (:func:`score`: the rules'
    choices are made again, not read from ``case.chosen``) with ``retimed`` set to the
    solvers timed twice. ``case`` itself is returned where no rule is above ``above``.

    ``results`` (the problem's :class:`~wticonv.measuring.find.FindResult` list), when
    given, get the new times (their ``runs`` counting both timings) and go back to the
    find-db. A solver that fails on the second timing keeps its first time, with a
    warning.

    Raises
    ------
    ValueError
        ``above`` is not a finite number >= 1.
    """
    check_confirm_above(above)
    doubtful = any(sid is not None and (case.slowdown.get(rule) or 0.0) > above
                   for rule, sid in case.chosen.items())
    if not doubtful:
        return case
    again_ids = sorted({sid for sid in case.chosen.values()
                        if sid is not None and sid in case.measured_ms} | {case.best})
    again = timed_together(handle, case.problem, iterations, time_cap_ms, workspace_limit,
                           dict.fromkeys(again_ids))
    measured = dict(case.measured_ms)
    runs = {}
    for sid, t in again.items():
        if isinstance(t, tuple):
            measured[sid] = min(measured[sid], t[0])
            runs[sid] = t[1]
        else:
            warnings.warn(f"wticonv: {sid} failed when {case.problem.key} was timed again "
                          f"({str(t).splitlines()[0]}); its first time is kept",
                          stacklevel=2)
    if results is not None:
        for r in results:
            if r.solver_id in runs:
                r.time_ms = measured[r.solver_id]
                r.runs += runs[r.solver_id]
        record_results(handle, case.problem, results)
    out = score(handle, case.problem, measured, workspace_limit, case.count)
    out.retimed = tuple(sorted(runs))
    return out


def score(handle, problem, measured: dict, workspace_limit: int | None = None,
          count=1) -> Case:
    """The :class:`Case` of ``problem`` from its ``measured`` times (solver id -> ms, at
    least one): what each rule chooses on ``handle``'s device (the fallback by the WTI
    models alone, find-db records ignored) and its slowdown. :func:`evaluate` scores each
    problem with it, and so does a fleet (:mod:`wticonv.fleet`) on its workers, so that
    the same measurements give the same case."""
    model = select(handle.registry, problem, handle.device, workspace_limit, measured=False,
                   allow_tf32=handle.allow_tf32)
    cands = model.candidates
    best = min(measured, key=measured.get)
    lowest = min(cands, key=lambda v: (v.workspace, v.rank)).solver_id if cands else None
    case = Case(problem, best, measured_ms=dict(measured),
                predicted_ms={v.solver_id: v.predicted_ms for v in cands
                              if v.predicted_ms is not None}, count=count)
    case.chosen = {"fallback": model.solver_id, "always GEMM": _gemm(cands),
                   "lowest workspace": lowest}
    for rule, sid in case.chosen.items():
        t = measured.get(sid) if sid is not None else None
        case.slowdown[rule] = t / measured[best] if t is not None else None
    return case


def summarize(cases) -> dict:
    """Rule -> {cases, within_10pct, top1, mean_slowdown, worst_slowdown, time_weighted}.

    Shares are fractions; the figures are over the cases where the rule chose a solver
    that ran. ``time_weighted`` is what a user feels, the network's conv time with the
    rule's choices over its time with the fastest solver in every case: sum of
    ``count x measured time of the choice`` over sum of ``count x fastest time``
    (NaN when the rule has no such case).
    """
    out = {}
    for rule in RULES:
        scored = [c for c in cases if c.slowdown.get(rule) is not None]
        xs = [c.slowdown[rule] for c in scored]
        chosen = sum(c.count * c.measured_ms[c.chosen[rule]] for c in scored)
        fastest = sum(c.count * c.measured_ms[c.best] for c in scored)
        out[rule] = {
            "cases": len(xs),
            "within_10pct": sum(x <= 1.1 for x in xs) / len(xs) if xs else math.nan,
            "top1": sum(x <= 1.0 for x in xs) / len(xs) if xs else math.nan,
            "mean_slowdown": statistics.fmean(xs) if xs else math.nan,
            "worst_slowdown": max(xs) if xs else math.nan,
            "time_weighted": chosen / fastest if fastest > 0 else math.nan,
        }
    return out


def write_csv(cases, path, device=None, append: bool = False) -> None:
    """One row per (problem, solver) measured: key, direction, solver, predicted and
    measured ms, whether the fallback chose it and it was the fastest, the problem's count
    (its weight in the time-weighted slowdown) and (when ``device`` is given) the device's
    name and kind. ``append`` adds the rows to the file without a header (a fleet writes
    one file for several devices)."""
    dev = [device.info.name, device.kind] if device is not None else []
    with open(path, "a" if append else "w", newline="") as f:
        w = csv.writer(f)
        if not append:
            w.writerow(["problem", "direction", "solver", "predicted_ms", "measured_ms",
                        "fallback_choice", "fastest", "count"]
                       + (["device", "kind"] if dev else []))
        for c in cases:
            for sid, t in sorted(c.measured_ms.items(), key=lambda kv: kv[1]):
                pred = c.predicted_ms.get(sid)
                w.writerow([c.problem.key, c.problem.direction, sid,
                            "" if pred is None else repr(float(pred)), repr(float(t)),
                            int(c.chosen.get("fallback") == sid), int(c.best == sid),
                            c.count, *dev])


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
