"""Per-device corrections to the solvers' WTI models, fitted to a few measured problems.

Each solver's WTI model predicts a time from the device's measured peak and bandwidth and
constants measured on the development machines; on another machine, or another driver,
a solver may run uniformly faster or slower than its model says. :func:`calibrate`
measures every applicable solver on the probe problems (:data:`PROBES`: eleven kinds of
layer found in ResNet-50, MobileNetV2 and Inception-v3 — 3x3 on large and small pictures,
strided 3x3, the 7x7 stem, depthwise 3x3, 1x7, and 1x1 on large, medium and small
pictures, with short and long reductions and at stride 2 — in three directions) and
stores, per solver and direction, the median of predicted time / measured time as a
factor:

    calibrated WTI = raw WTI x factor(solver, direction)

(the WTI is inversely proportional to the predicted time, so a solver measured twice as
slow as predicted gets factor 0.5). Selection multiplies every WTI by its solver's factor
when the database holds one for this device and the solver's installed version
(:func:`wticonv.selection.calibration.apply_factors`); ``wticonv explain`` shows the raw
and the calibrated WTI. A
solver with no probe in a direction gets its all-directions factor there (the median over
every probe it ran); a direction's own factor is shrunk towards it (:func:`calibrate`).
Factors are stored under ``<solver>@<direction>`` and ``<solver>``. A factor fitted to
another solver version is ignored. ``wticonv cache --clear`` deletes them with everything
else.
"""

from __future__ import annotations

import math
import statistics
import warnings

from wticonv.errors import WticonvError
from wticonv.problem.conv import ConvProblem

__all__ = ["PROBES", "SHRINK_PROBES", "calibrate", "fit_factors"]


def _probes(n: int) -> list[ConvProblem]:
    shapes = [
        ConvProblem(n, 64, 56, 56, 64, 3, 3, pad_h=1, pad_w=1),
        ConvProblem(n, 256, 28, 28, 128, 1, 1),
        ConvProblem(n, 512, 7, 7, 512, 3, 3, pad_h=1, pad_w=1),
        ConvProblem(n, 128, 28, 28, 256, 3, 3, pad_h=1, pad_w=1, stride_h=2, stride_w=2),
        ConvProblem(n, 3, 112, 112, 32, 7, 7, pad_h=3, pad_w=3, stride_h=2, stride_w=2),
        ConvProblem(n, 144, 28, 28, 144, 3, 3, pad_h=1, pad_w=1, groups=144),
        ConvProblem(n, 160, 17, 17, 160, 1, 7, pad_h=0, pad_w=3),
        ConvProblem(n, 2048, 8, 8, 448, 1, 1),
        ConvProblem(n, 64, 56, 56, 256, 1, 1),
        ConvProblem(n, 768, 17, 17, 192, 1, 1),
        ConvProblem(n, 512, 28, 28, 1024, 1, 1, stride_h=2, stride_w=2),
    ]
    return [p.with_direction(d) for p in shapes for d in ("fwd", "bwd", "wrw")]


#: The probe problems at N=4 (``calibrate(..., n=...)`` chooses another batch size).
PROBES = _probes(4)


#: Per-direction factors are shrunk towards the solver's all-directions factor as if it
#: were this many more probes: with two or three probes in a direction, one disturbed
#: measurement would otherwise move the factor by 30 % or more (seen on the development
#: machines' shared 2-core CPU).
SHRINK_PROBES = 2


def calibrate(handle, n: int = 4, iterations: int = 5, time_cap_ms: float = 200.0,
              progress=None, measurements: list | None = None) -> dict[str, tuple[float, int]]:
    """Measure every applicable solver on the probe problems at batch size ``n`` and store
    each solver's factors (predicted / measured time) for ``handle``'s device.

    Each solver's time on a probe is the median of ``iterations`` timed runs (after a
    warm-up; fewer once ``time_cap_ms`` of kernel time is spent; the solvers' runs
    interleaved, :func:`wticonv.measuring.timing.timed_together`), the statistic find mode
    and :mod:`wticonv.measuring.evaluate` judge by. A solver's all-directions factor is the median
    over every probe it ran; its factor for a direction is the median over that
    direction's probes, shrunk towards the all-directions one (:data:`SHRINK_PROBES`):
    geometric mean weighted by probe counts.

    Returns ``{key: (factor, probes measured)}``, keys ``"<solver>@<direction>"`` and
    ``"<solver>"`` (all directions). Solvers that ran on no probe get no factor.
    ``progress`` is called with (index, count, problem) before each probe. When
    ``measurements`` is a list, one ``(problem, solver_id, raw predicted ms, measured ms)``
    tuple per probe run is appended to it (``wticonv calibrate --csv`` writes them, so
    that a model change can be replayed offline against what the device measured).

    Calibrations sharing a cache directory run one at a time (a lock file): two at once
    would slow each other's probes and store factors of a contended machine.
    """
    def waiting():
        warnings.warn("wticonv: another calibration is running in this cache directory; "
                      "waiting for it to end", stacklevel=3)

    with handle.device.store.exclusive("calibrate", waiting):
        runs = _measure_probes(handle, _probes(n), iterations, time_cap_ms, progress)
        factors = fit_factors(runs)
        handle.device.store.put_calibration(
            handle.device.key,
            [(key, handle.registry.solvers[key.split("@")[0]].version, f, k)
             for key, (f, k) in factors.items()])
    if measurements is not None:
        measurements.extend(runs)
    handle.forget_selections()
    return factors


def _measure_probes(handle, probes, iterations, time_cap_ms, progress) -> list:
    """``(problem, solver_id, raw predicted ms, measured ms)`` of every applicable solver
    on every probe."""
    from wticonv.measuring.timing import timed_together
    from wticonv.selection.ranking import select

    runs: list = []
    for i, p in enumerate(probes):
        if progress is not None:
            progress(i, len(probes), p)
        try:
            model = select(handle.registry, p, handle.device, measured=False,
                           calibrated=False)
            predicted = {v.solver_id: v.predicted_ms for v in model.verdicts
                         if v.applicable and v.predicted_ms}
            timings = timed_together(handle, p, iterations, time_cap_ms, None,
                                     dict.fromkeys(predicted))
            runs.extend((p, sid, predicted[sid], t[0]) for sid, t in timings.items()
                        if not isinstance(t, WticonvError))
        except WticonvError:
            continue
    return runs


def fit_factors(runs) -> dict[str, tuple[float, int]]:
    """The factors of probe ``runs`` (``(problem, solver_id, predicted, measured)`` tuples,
    either time unit): ``{key: (factor, probes)}`` as :func:`calibrate` describes (median
    predicted / measured per solver, and per solver and direction shrunk towards it)."""
    ratios: dict[str, list[float]] = {}
    for p, sid, pred, t in runs:
        ratios.setdefault(sid, []).append(pred / t)
        ratios.setdefault(f"{sid}@{p.direction}", []).append(pred / t)
    factors = {key: (statistics.median(xs), len(xs)) for key, xs in sorted(ratios.items())}
    for key, (f, k) in factors.items():
        if "@" in key:
            f_all = factors[key.split("@")[0]][0]
            f = math.exp((k * math.log(f) + SHRINK_PROBES * math.log(f_all))
                         / (k + SHRINK_PROBES))
            factors[key] = (f, k)
    return factors


