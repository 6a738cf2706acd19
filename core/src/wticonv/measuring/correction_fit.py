"""Fit the learned per-device correction (:mod:`wticonv.selection.correction`).

Per solver, a model of ``log(measured / predicted)`` on the
:data:`~wticonv.selection.correction.FEATURES` of every probe run of that solver:

- **boosted regression trees** (scikit-learn's ``GradientBoostingRegressor``: Friedman,
  *Greedy function approximation: a gradient boosting machine*, Annals of Statistics 29,
  2001; the cost model of TVM's AutoTVM is boosted trees too) where scikit-learn is
  installed (``pip install 'wticonv[learn]'``), for a solver with at least
  :data:`MIN_TREE_RUNS` runs: :data:`TREES` (150 trees of depth 4,
  learning rate 0.1, 80 % subsamples, leaves of 5 runs or more, squared error). They
  find what a linear model cannot: the interactions of direction, picture, groups and
  parallel work where a solver's model goes wrong (1x1 layers on 1x1 pictures in
  backward weights, depthwise backward weights).
  Held out network by network on the H200 (26 networks at N=32, 900 probes) they put
  93.8 % of the cases within 10 % of the best, against 90.0 % for the linear model
  (docs/find-and-tune.md; depth 3 then). The fitted trees are
  stored as plain arrays; selection evaluates them with NumPy, without scikit-learn.
- else (or with fewer runs, at least :data:`MIN_RUNS`) a **ridge regression** (Hoerl and
  Kennard, *Technometrics* 12, 1970) on the
  standardized features, solved in closed form with NumPy; the penalty (:data:`RIDGE`)
  pulls every coefficient but the bias towards zero, towards one factor per solver.
"""

from __future__ import annotations

import math

import numpy as np

from wticonv.selection.correction import ALWAYS_LEFT, FEATURES, features

__all__ = ["RIDGE", "MIN_RUNS", "MIN_TREE_RUNS", "TREES", "fit_correction", "model_kind",
           "trees_available"]

#: The boosted trees' settings (scikit-learn's names), chosen by held-out replays of H200
#: measurements: 60-300 trees of depth 2-4 all came within 1 % of these. Squared error,
#: not the Huber loss: with 1000 probes (a calibration's budget since its inputs are
#: drawn once, :func:`wticonv.measuring.inputs.timing_inputs`) both put the test networks'
#: cases within 10 % of the best as often (94.0 / 93.8 % at N=32, 91.2 / 92.0 % at N=1),
#: and squared error fits in a third of the time (3.9 s against 11.5 s for 5000 runs on
#: the development machine; Huber's per-leaf percentiles dominate), time the probes get.
#: Leaves of at least 5 runs (scikit-learn's default is 1): on the H200's 1158 probes of
#: 2026-12-02 the geometric mean of the networks' time-weighted slowdowns fell on all four
#: held-out sets (dev and test, N=1 and 32) by 0.0004-0.0022, and the worst network from
#: 1.058 to 1.038 (dev, N=32); 10 runs lost 0.5-1.1 points within 10 % at N=1. Another
#: random seed moves these figures by up to 0.002, so the gain is of that order.
TREES = {"n_estimators": 150, "max_depth": 4, "learning_rate": 0.1, "subsample": 0.8,
         "min_samples_leaf": 5, "loss": "squared_error", "random_state": 0}

#: Ridge penalty, per run: the penalty is ``RIDGE x runs x |coef|^2`` on standardized
#: features (chosen by leave-one-network-out replays, docs/find-and-tune.md).
RIDGE = 0.02

#: A solver measured on fewer runs gets only a constant factor (the bias).
MIN_RUNS = 12

#: Fewest runs boosted trees are fitted to; a solver with fewer (but at least
#: :data:`MIN_RUNS`) gets the ridge regression. 150 trees of depth 4 on a dozen runs fit
#: their noise: on the development machines' CPU, where a 240 s calibration times
#: ``direct.naive`` on 12 probes, such trees ranked it above ``direct.depthwise`` on
#: ConvNeXt's 7x7 depthwise layers, 8x slower (held out, tools/heldout.py).
MIN_TREE_RUNS = 40


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


def model_kind(model) -> str:
    """``"trees"``, ``"ridge"`` or ``"constant"``: what a fitted (or stored) model of
    :func:`fit_correction` is: boosted trees, a ridge regression, or a bias alone."""
    if isinstance(model, dict):
        return "trees"
    return "ridge" if any(model[1:]) else "constant"


def trees_available() -> bool:
    """Whether scikit-learn can be imported (the boosted-trees correction needs it)."""
    import importlib.util

    return importlib.util.find_spec("sklearn") is not None


def _heap(tree, depth: int) -> tuple[list[int], list[float], list[float]]:
    """A fitted scikit-learn tree as a complete tree of ``depth`` in heap order (splits'
    features and thresholds, leaf values): a leaf reached early is copied down below
    always-left splits."""
    splits = 2 ** depth - 1
    feature, threshold = [0] * splits, [ALWAYS_LEFT] * splits
    value = [0.0] * 2 ** depth

    def fill(node: int, pos: int, level: int) -> None:
        if level == depth:
            value[pos - splits] = float(tree.value[node].reshape(-1)[0])
            return
        if tree.children_left[node] < 0:           # a leaf above the full depth
            fill(node, 2 * pos + 1, level + 1)
            fill(node, 2 * pos + 2, level + 1)
            return
        feature[pos], threshold[pos] = int(tree.feature[node]), float(tree.threshold[node])
        fill(int(tree.children_left[node]), 2 * pos + 1, level + 1)
        fill(int(tree.children_right[node]), 2 * pos + 2, level + 1)

    fill(0, 0, 0)
    return feature, threshold, value


def _trees(x: np.ndarray, y: np.ndarray) -> dict:
    """Boosted trees fitted to ``y ~ x``, exported as the complete heap-ordered arrays
    :class:`wticonv.selection.correction.Trees` evaluates."""
    from sklearn.ensemble import GradientBoostingRegressor

    model = GradientBoostingRegressor(**TREES).fit(x, y)
    depth = TREES["max_depth"]
    out = {"base": float(np.ravel(model.init_.constant_)[0]), "depth": depth,
           "feature": [], "threshold": [], "value": []}
    for (est,) in model.estimators_:
        f, t, v = _heap(est.tree_, depth)
        out["feature"].append(f)
        out["threshold"].append(t)
        out["value"].append([model.learning_rate * x for x in v])
    return out


def fit_correction(runs, device, ridge: float = RIDGE, method: str | None = None
                   ) -> dict[str, tuple[list[float] | dict, int]]:
    """``{solver_id: (model, runs)}`` fitted to ``runs``, tuples ``(problem, solver_id, raw
    predicted ms, measured ms)`` measured on ``device`` (its kind and compute units enter
    the features). ``method``: ``"trees"`` (a dict of arrays; the default where
    scikit-learn is installed) or ``"linear"`` (coefficients in FEATURES order). A solver
    with fewer than :data:`MIN_RUNS` runs gets a linear model with the median log ratio as
    its bias and no other term."""
    if method is None:
        method = "trees" if trees_available() else "linear"
    if method not in ("trees", "linear"):
        raise ValueError(f"method={method!r} must be 'trees', 'linear' or None")
    if not (isinstance(ridge, (int, float)) and 0 < ridge < float("inf")):
        raise ValueError(f"ridge={ridge!r} must be a positive finite number")
    by_solver: dict[str, tuple[list, list]] = {}
    # in a fixed order whatever order the runs came in (probes are timed in random order,
    # a replay reads them sorted): the trees' subsampling draws rows by position, so the
    # same runs give the same model in calibrate and in tools/heldout.py
    for p, sid, pred, t in sorted(runs, key=lambda r: (r[0].key, r[1], r[2], r[3])):
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
        elif method == "trees" and len(ys) >= MIN_TREE_RUNS:
            coef = _trees(np.asarray(xs), y)
        else:
            coef = [float(c) for c in _solve(np.asarray(xs), y, ridge)]
        out[sid] = (coef, len(ys))
    return out
