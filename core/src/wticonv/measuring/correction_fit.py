"""Fit the learned per-device correction (:mod:`wticonv.selection.correction`).

Per solver, a ridge regression (Hoerl and Kennard, *Technometrics* 12, 1970) of
``log(measured / predicted)`` on the standardized :data:`~wticonv.selection.correction.FEATURES`
of every probe run of that solver, solved in closed form with NumPy. A linear model in log
space, not trees or a network: a calibration measures each solver on a few hundred runs
at most, where a low-variance model generalizes best, and selection must apply it in
microseconds (one dot product per solver). The ridge penalty (:data:`RIDGE`) pulls every
coefficient but the bias towards zero, that is towards one constant factor per solver.
"""

from __future__ import annotations

import math

import numpy as np

from wticonv.selection.correction import FEATURES, features

__all__ = ["RIDGE", "MIN_RUNS", "fit_correction"]

#: Ridge penalty, per run: the penalty is ``RIDGE x runs x |coef|^2`` on standardized
#: features (chosen by leave-one-network-out replays, docs/find-and-tune.md).
RIDGE = 0.02

#: A solver measured on fewer runs gets only a constant factor (the bias).
MIN_RUNS = 12


def _solve(x: np.ndarray, y: np.ndarray, ridge: float) -> np.ndarray:
    """Ridge coefficients of ``y ~ x`` (column 0 of ``x`` is the bias, not penalized) in
    the raw feature scale."""
    mean = x[:, 1:].mean(axis=0)
    std = x[:, 1:].std(axis=0)
    keep = std > 1e-9
    z = (x[:, 1:][:, keep] - mean[keep]) / std[keep]
    a = np.hstack([np.ones((len(y), 1)), z])
    pen = ridge * len(y) * np.eye(a.shape[1])
    pen[0, 0] = 0.0
    beta = np.linalg.solve(a.T @ a + pen, a.T @ y)
    coef = np.zeros(x.shape[1])
    coef[1:][keep] = beta[1:] / std[keep]
    coef[0] = beta[0] - float(np.dot(coef[1:][keep], mean[keep]))
    return coef


def fit_correction(runs, device, ridge: float = RIDGE) -> dict[str, tuple[list[float], int]]:
    """``{solver_id: (coefficients in FEATURES order, runs)}`` fitted to ``runs``, tuples
    ``(problem, solver_id, raw predicted ms, measured ms)`` measured on ``device`` (its
    kind and compute units enter the features). A solver with fewer than
    :data:`MIN_RUNS` runs gets the median log ratio as its bias and no other term."""
    by_solver: dict[str, tuple[list, list]] = {}
    for p, sid, pred, t in runs:
        if not (pred and t and pred > 0 and t > 0):
            continue
        xs, ys = by_solver.setdefault(sid, ([], []))
        xs.append(features(p, device, pred))
        ys.append(math.log(t / pred))
    out = {}
    for sid, (xs, ys) in sorted(by_solver.items()):
        y = np.asarray(ys)
        if len(ys) < MIN_RUNS:
            coef = [0.0] * len(FEATURES)
            coef[0] = float(np.median(y))
        else:
            coef = [float(c) for c in _solve(np.asarray(xs), y, ridge)]
        out[sid] = (coef, len(ys))
    return out
