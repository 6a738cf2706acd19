"""The learned per-device correction of the WTI models: what selection applies.

A solver's WTI model predicts its time from the device's measured peak, bandwidth and
launch overhead. What the models leave out (how few work-items a problem has against what
the device holds, long serial reductions, grouped and depthwise reductions, small
pictures, the driver's own compiler) differs per device and per solver, so
``wticonv calibrate`` measures the solvers on a set of probe problems that covers these
features and fits, per solver, a linear model of the log of measured over predicted time
(:mod:`wticonv.measuring.correction_fit`):

    log(measured / predicted) ~ coef(solver) . features(problem, device, predicted)

and selection multiplies each raw WTI by ``exp(-coef . features)`` (the WTI is inversely
proportional to the predicted time). The features (:data:`FEATURES`) are those of cost
models such as TVM's AutoTVM and Ansor (Chen et al., *Learning to Optimize Tensor
Programs*, NeurIPS 2018; Zheng et al., OSDI 2020: loop extents, parallelism, reduction
length) and MIOpen's TunaNet (the problem's sizes, filter, stride, groups and direction),
in log space: sizes, the parallel work of the direction's output against the device's
resident work-items, the serial reduction length, the picture, the filter, stride,
groups and depthwise, and the predicted time itself (where launch latency dominates).

A correction fitted to another solver version, or to other features, is ignored.
"""

from __future__ import annotations

import math

from wticonv.runtime.kit import resident_work_items

__all__ = ["CORRECT_WITHIN", "FEATURES", "features", "correction_factor",
           "correction_factors", "Trees", "resident_work_items"]

#: Names of the features, in the order of :func:`features` (stored with each fit; a
#: stored fit of other features is not applied).
FEATURES = (
    "bias", "bwd", "wrw", "log_predicted_ms", "starved", "wrw_starved", "log_reduction",
    "wrw_log_reduction", "log_picture", "log_channels_in", "log_channels_out", "log_batch",
    "one_by_one", "strided", "large_filter", "grouped", "depthwise", "wrw_grouped",
    "wrw_depthwise", "dilated",
)

def _log(x: float) -> float:
    return math.log(max(x, 1.0))


def features(problem, device, predicted_ms: float) -> tuple[float, ...]:
    """The :data:`FEATURES` of ``problem`` on ``device`` for a solver predicting
    ``predicted_ms`` (its raw, uncalibrated prediction): one float each.

    Parallel work and serial reduction are ``problem.direct_work`` (fwd: N K Ho Wo
    outputs of C/g R S taps; bwd: N C H W of K/g R S / strides; wrw: K C/g R S of
    N Ho Wo); ``starved`` is ``min(0, log(work / resident
    work-items))``, zero once the device is full.
    """
    p = problem
    d = p.direction
    cg, kg = p.c // p.groups, p.k // p.groups
    work, reduction = p.direct_work
    starved = min(0.0, math.log(max(work, 1) / resident_work_items(device)))
    wrw = 1.0 if d == "wrw" else 0.0
    depthwise = 1.0 if p.is_depthwise else 0.0
    grouped = 1.0 if p.groups > 1 and not p.is_depthwise else 0.0
    log_reduction = _log(reduction)
    return (
        1.0, 1.0 if d == "bwd" else 0.0, wrw,
        math.log(max(predicted_ms, 1e-6)),
        starved, wrw * starved, log_reduction, wrw * log_reduction,
        _log(p.h * p.w), _log(cg), _log(kg), _log(p.n),
        1.0 if p.r == p.s == 1 else 0.0,
        1.0 if p.stride_h * p.stride_w > 1 else 0.0,
        1.0 if p.r * p.s >= 25 else 0.0,
        grouped, depthwise, wrw * grouped, wrw * depthwise,
        1.0 if p.dilation_h * p.dilation_w > 1 else 0.0,
    )


def correction_factor(coefs, feats) -> float:
    """The WTI multiplier of one solver's linear correction: ``exp(-coefs . feats)``, the
    exponent clipped to +-:data:`MAX_LOG_FACTOR` so that no extrapolation goes wild."""
    z = sum(c * f for c, f in zip(coefs, feats, strict=True))
    return math.exp(-max(-MAX_LOG_FACTOR, min(MAX_LOG_FACTOR, z)))


#: A solver's learned correction is applied only where its raw prediction is at most this
#: many times the fastest raw prediction for the problem (beyond it, its per-direction
#: factor). ``wticonv calibrate`` times only those solvers on its probes
#: (:data:`wticonv.measuring.calibrate.SKIP_SLOWER_THAN` is this figure), so a model
#: evaluated beyond it would extrapolate; and skipping those solvers' trees cuts the cost
#: of selecting a new problem (docs/find-and-tune.md, *Selection cost*).
CORRECT_WITHIN = 10.0

#: Largest |log| of a correction factor (a factor between 1/148 and 148).
MAX_LOG_FACTOR = 5.0

#: A threshold no feature passes (a split that always goes left): where a fitted tree
#: stopped early, its leaf is copied down to the full depth below such splits.
ALWAYS_LEFT = 1e300


class Trees:
    """Boosted regression trees of several solvers, evaluated together with NumPy.

    Built from stored models: ``{"base": float, "depth": D, "feature": [[...]],
    "threshold": [[...]], "value": [[...]]}``, each tree complete to depth D in heap order
    (node i's children are 2i+1 and 2i+2; ``2**D - 1`` splits, ``2**D`` leaves whose values
    are already scaled by the learning rate; a split goes right where the feature is above
    its threshold). For a problem, all trees of all solvers descend together, one level
    per step (D gathers and comparisons over flat arrays); a solver's log correction is its
    base plus its trees' leaves. Comparisons are made in float32, as scikit-learn's trees
    make them.
    """

    def __init__(self, models: dict[str, dict]) -> None:
        import numpy as np

        self.np = np
        self.solvers = sorted(models)
        depths = {int(m["depth"]) for m in models.values()}
        if len(depths) != 1:
            raise ValueError(f"trees of different depths {sorted(depths)} cannot be mixed")
        self.depth = depths.pop()
        if not 1 <= self.depth <= 6:
            raise ValueError(f"trees of depth {self.depth}: 1 to 6 levels are evaluated")
        owner, feature, threshold, value = [], [], [], []
        for i, sid in enumerate(self.solvers):
            m = models[sid]
            owner += [i] * len(m["feature"])
            feature += m["feature"]
            threshold += m["threshold"]
            value += m["value"]
        n = len(owner)
        self.splits, self.leaves = 2 ** self.depth - 1, 2 ** self.depth
        self.owner = np.asarray(owner, dtype=np.intp)
        # every split's feature as a flat index into the rows of all solvers (owner * F + f)
        # and its threshold, tree by tree: entry t * splits + node
        self.feature = (np.asarray(feature, dtype=np.intp).reshape(n, self.splits)
                        + (self.owner * len(FEATURES))[:, None]).ravel()
        self.threshold = np.asarray(threshold, dtype=np.float64).ravel()
        self.value = np.asarray(value, dtype=np.float64).ravel()
        # a descent keeps each tree's node as an index into the flat split arrays,
        # split_base + node: node's child 2 node + 1 + right is then at 2 x index +
        # child_offset + right, and after D levels the leaf's value is at index + leaf_offset
        split_base = np.arange(n, dtype=np.intp) * self.splits
        self.split_base = split_base
        self.child_offset = 1 - split_base
        self.leaf_offset = np.arange(n, dtype=np.intp) * self.leaves - self.splits - split_base
        # trees are grouped by solver: each solver's leaves sum over one run of them
        self.starts = np.searchsorted(self.owner, np.arange(len(self.solvers)))
        self.has_trees = np.bincount(self.owner, minlength=len(self.solvers)) > 0
        self.base = np.asarray([float(models[sid]["base"]) for sid in self.solvers])
        self._models = models
        self._subsets: dict[tuple[str, ...], Trees] = {}

    def subset(self, solvers) -> Trees:
        """The trees of ``solvers`` only (those of this set's :attr:`solvers`), built once
        per subset: a problem evaluates only the trees of the solvers that apply to it."""
        key = tuple(sid for sid in self.solvers if sid in solvers)
        if key == tuple(self.solvers):
            return self
        sub = self._subsets.get(key)
        if sub is None:
            if len(self._subsets) >= 64:            # a bounded memo of subsets
                self._subsets.clear()
            sub = self._subsets[key] = Trees({sid: self._models[sid] for sid in key})
        return sub

    def log_corrections(self, rows) -> list[float]:
        """Each solver's log(measured / predicted) for its feature row (``rows``: one
        feature tuple per solver, in :attr:`solvers` order)."""
        np = self.np
        x = np.asarray(rows, dtype=np.float32).astype(np.float64).ravel()
        right = x[self.feature] > self.threshold        # every split compared at once
        flat = self.split_base
        for _ in range(self.depth):
            flat = 2 * flat + self.child_offset + right[flat]
        leaves = self.value[flat + self.leaf_offset]
        sums = np.where(self.has_trees, np.add.reduceat(leaves, self.starts), 0.0) \
            if len(leaves) else np.zeros(len(self.solvers))
        return (self.base + sums).tolist()


_COMPILED: dict[int, tuple[dict, Trees]] = {}


def _trees_of(models: dict) -> Trees | None:
    """The :class:`Trees` of the boosted-trees models among ``models`` (a store's
    ``get_correction`` answer, compiled once per answer object)."""
    hit = _COMPILED.get(id(models))
    if hit is not None and hit[0] is models:
        return hit[1]
    trees = {sid: m[2] for sid, m in models.items() if isinstance(m[2], dict)}
    compiled = Trees(trees) if trees else None
    _COMPILED.clear()
    _COMPILED[id(models)] = (models, compiled)
    return compiled


def correction_factors(models: dict, versions: dict, problem, device,
                       predicted: dict[str, float]) -> dict[str, float]:
    """``{solver_id: WTI multiplier}`` for the solvers of ``predicted`` (raw predicted ms)
    that ``models`` (``{solver: (version, feature names, model)}``, a linear coefficient
    list or boosted trees) holds a model of for their installed ``versions`` and these
    :data:`FEATURES`, and whose prediction is within :data:`CORRECT_WITHIN` of the
    fastest: calibrate never times the others, so their models were not fitted there, and
    selection gives them their stored per-direction factor instead, if any
    (:func:`wticonv.selection.calibration.apply_factors`)."""
    if not predicted:
        return {}
    within = CORRECT_WITHIN * min(predicted.values())
    usable = {sid: m for sid, m in models.items()
              if sid in predicted and predicted[sid] <= within
              and m[0] == versions.get(sid) and tuple(m[1]) == FEATURES}
    if not usable:
        return {}
    out = {}
    base = features(problem, device, 1.0)
    col = FEATURES.index("log_predicted_ms")

    def row(sid):
        r = list(base)
        r[col] = math.log(max(predicted[sid], 1e-6))
        return r

    for sid, m in usable.items():
        if not isinstance(m[2], dict):
            out[sid] = correction_factor(m[2], row(sid))
    if len(out) < len(usable):
        trees = _trees_of(models).subset(usable)
        rows = [row(sid) for sid in trees.solvers]
        for sid, z in zip(trees.solvers, trees.log_corrections(rows), strict=True):
            out[sid] = math.exp(-max(-MAX_LOG_FACTOR, min(MAX_LOG_FACTOR, z)))
    return out
