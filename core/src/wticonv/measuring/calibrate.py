"""Per-device corrections to the solvers' WTI models, fitted to measured probe problems.

Each solver's WTI model predicts a time from the device's measured peak, bandwidth and
launch overhead and constants measured on the development machines; on another machine,
or another driver, a solver runs faster or slower than its model says, and by how much
depends on the problem (how many work-items it has, how long its reductions are, groups,
small pictures). :func:`calibrate` measures every applicable solver on probe problems
(:func:`probe_problems`: in turn the development corpus's layers and random realistic
layers of every kind, :func:`wticonv.workloads.generator.random_problems`, at several
batch sizes, in every direction) for a time budget, and fits per solver:

- the learned correction, boosted regression trees (or without scikit-learn a ridge
  regression) of log(measured / predicted) on the problem's features
  (:mod:`wticonv.measuring.correction_fit`, :mod:`wticonv.selection.correction`), which
  selection applies per problem;
- a factor per solver and direction, the median of predicted / measured time, shrunk
  towards the solver's all-directions median (:func:`fit_factors`), shown by ``wticonv
  calibrate`` and applied to solvers the store holds no correction for:

    calibrated WTI = raw WTI x factor(solver, problem)

(the WTI is inversely proportional to the predicted time, so a solver measured twice as
slow as predicted gets factor 0.5). ``from_find_db`` adds every find-db record of the
device to the fit (``wticonv calibrate --from-find-db``): a user's own find runs then
improve the fallback on problems nobody measured. A fit to another solver version is
ignored; ``wticonv cache --clear`` deletes it with everything else.
"""

from __future__ import annotations

import importlib
import itertools
import math
import random
import statistics
import threading
import time
import warnings

from wticonv.errors import ArgumentError, DeviceError, SpeedChangedWarning, WticonvError
from wticonv.problem.conv import ConvProblem
from wticonv.selection.correction import CORRECT_WITHIN
from wticonv.workloads.generator import random_problems
from wticonv.workloads.networks import corpus_networks, load_network

__all__ = ["PROBE_BATCHES", "PROBE_COUNT", "BUDGET_S", "PLAN_AHEAD", "SHRINK_PROBES",
           "SKIP_SLOWER_THAN", "calibrate", "corpus_layers", "fit_factors", "measure_probes",
           "probe_problems", "store_fit"]

#: Batch sizes the probes are drawn at, per device kind (the batch sizes frameworks run
#: at: inference at 1, training at 8-64 on GPUs, smaller on CPUs).
PROBE_BATCHES = {"gpu": (1, 2, 4, 8, 16, 32, 64), "cpu": (1, 2, 4, 8)}

#: Default measuring budget of a calibration per device kind, in seconds (issue 18: at most
#: 60 s on the H200 and 5 min on a 2-core CPU, with the set-up and the fit).
BUDGET_S = {"gpu": 50.0, "cpu": 240.0}

#: The longest budget accepted, in seconds (a day).
MAX_BUDGET_S = 86400.0

#: Most direct-algorithm FLOPs of one probe, per device kind: a solver's slowest run on it
#: stays within a second or so (a naive kernel at a few GFLOP/s on a 2-core CPU).
PROBE_MAX_FLOPS = {"gpu": 2e11, "cpu": 2e9}

#: A probe times only the solvers whose raw prediction is at most this many times the
#: fastest raw prediction: the others would need a correction of over 10x to be chosen.
#: Replayed on recorded probes, leaving them out kept the held-out figures within a point
#: (CPU N=4: 80.5 % against 81.7 % within 10 % of the best; H200 N=1: 89.9 % against
#: 90.3 %) and saved 85 % of the CPU's probe time (their kernels are the slow ones) and
#: 15 % of the H200's runs, time for more probes. Selection applies the learned
#: correction within the same figure (wticonv.selection.correction.CORRECT_WITHIN).
SKIP_SLOWER_THAN = CORRECT_WITHIN

#: The seed of the probe draw: every calibration measures the same probes, in order.
PROBE_SEED = 18


def corpus_layers() -> list[ConvProblem]:
    """The distinct conv layers (forward, N=1) of the corpus's development networks
    (:func:`wticonv.workloads.networks.corpus_networks`, split "dev"), in a fixed shuffled
    order. No test-split network is drawn from (a test network's layer is probed only where
    a dev network has it too); held-out figures are measured on them
    (docs/find-and-tune.md)."""
    seen: dict[ConvProblem, None] = {}
    for c in corpus_networks("dev"):
        for layer in load_network(c.name, 1).layers:
            seen.setdefault(layer.problem.with_direction("fwd"))
    layers = list(seen)
    random.Random(PROBE_SEED).shuffle(layers)
    return layers


def probe_problems(kind: str, count: int = 600, n: int | None = None) -> list[ConvProblem]:
    """The first ``count`` probes of a ``kind`` ("gpu"/"cpu") device, in order: in turn a
    layer of the development corpus (the first half of :func:`corpus_layers`, 354 of 708:
    the kinds of layer networks are made of, in the proportions they have; the draw the
    shipped figures were measured with) and a random realistic problem
    (:func:`wticonv.workloads.generator.random_problems`, the space between them), each at
    a batch size drawn from :data:`PROBE_BATCHES` (``n``: all at that one), halved while
    over :data:`PROBE_MAX_FLOPS`, in a direction drawn at random; no probe twice. Any
    prefix covers every kind of layer, so a calibration cut short by its budget is still a
    sample of the whole space.

    Replayed on the H200's measurements (tools/heldout.py), 500 probes of which 354 were
    corpus layers fitted the learned correction to 87.2 % of the test networks' cases at
    N=1 within 10 % of the best, 500 random problems to 84.6 %; at N=32 91.5 and 91.4 %."""
    rng = random.Random(PROBE_SEED)
    batches = PROBE_BATCHES.get(kind, PROBE_BATCHES["cpu"])
    cap = PROBE_MAX_FLOPS.get(kind, PROBE_MAX_FLOPS["cpu"])
    # corpus, random, corpus, random, ...; random only once the corpus share is used up
    layers = corpus_layers()
    turns = itertools.zip_longest(layers[:-(-len(layers) // 2)],
                                  random_problems(max(count, 1), 1, seed=PROBE_SEED))
    out: dict[ConvProblem, None] = {}
    for p in (p for pair in turns for p in pair if p is not None):
        if len(out) == count:
            break
        b = n or rng.choice(batches)
        while n is None and b > 1 and p.flops * b > cap:
            b //= 2
        out.setdefault(p.with_batch(b).with_direction(rng.choice(("fwd", "bwd", "wrw"))))
    return list(out)


#: Probes drawn per calibration: more than a budget measures (about 1000 in 50 s on the
#: H200), so the budget, not the list, ends it.
PROBE_COUNT = 4000


def _probes(kind: str, n: int | None) -> list[ConvProblem]:
    return probe_problems(kind, PROBE_COUNT, n=n)


def _import_in_background() -> None:
    """Import scikit-learn's boosted trees in a daemon thread while the probes run (3-5 s
    of the fit's time otherwise)."""
    from wticonv.measuring.correction_fit import trees_available

    if trees_available():
        threading.Thread(target=importlib.import_module, args=("sklearn.ensemble",),
                         name="wticonv-import-sklearn", daemon=True).start()


#: Per-direction factors are shrunk towards the solver's all-directions factor as if it
#: were this many more probes: with two or three probes in a direction, one disturbed
#: measurement would otherwise move the factor by 30 % or more (seen on the development
#: machines' shared 2-core CPU).
SHRINK_PROBES = 2


#: A calibration warns (:class:`wticonv.errors.SpeedChangedWarning`) when the device's
#: peak, read again after its probes, exceeds the figure its fit uses by more than this
#: fraction. A calibration run beside another one (2-core Zen 4, 2026-12-06) read its
#: figures under that load and predicted ResNet-50 at N=1 in 110 ms on the quiet machine,
#: where it took 237; made again alone: 173.
SPEED_CHANGE = 0.25


def _speed_change(dev) -> str | None:
    """Why ``dev``'s figures look read under load (a fresh peak reading more than
    :data:`SPEED_CHANGE` above the one in use), or None."""
    from wticonv.runtime.peak import measure_peak_flops

    used, now = dev.peak_flops, measure_peak_flops(dev)
    if now <= used * (1 + SPEED_CHANGE):
        return None
    return (f"{dev.info.name} measured {now / 1e9:.0f} GFLOP/s after the calibration's probes "
            f"but its figures say {used / 1e9:.0f}: they were read while the machine was "
            f"busy, so this calibration predicts about {now / used:.1f}x too fast on a quiet "
            "machine; run `wticonv devices --measure`, then calibrate again with nothing "
            "else running")


def calibrate(handle, n: int | None = None, iterations: int = 3, time_cap_ms: float = 100.0,
              progress=None, measurements: list | None = None,
              budget_s: float | None = None, from_find_db: bool = False,
              strict: bool = False) -> dict[str, tuple[float, int]]:
    """Measure every applicable solver on the probe problems for ``budget_s`` seconds
    (default :data:`BUDGET_S` of the device's kind) and store each solver's learned
    correction and factors for ``handle``'s device.

    Each solver's time on a probe is the fastest of ``iterations`` timed runs (after a
    warm-up; fewer once ``time_cap_ms`` of kernel time is spent; by default 3 runs and
    100 ms, against find mode's 5 and 1000, for more probes in a budget; the solvers' runs
    interleaved, :func:`wticonv.measuring.timing.timed_together`), the statistic find mode
    and :mod:`wticonv.measuring.evaluate` judge by. ``n`` measures every probe at that
    batch size (default: several, :data:`PROBE_BATCHES`). ``from_find_db`` adds the
    device's find-db records to the fit (solvers of the installed version only).

    Raises ArgumentError if ``budget_s`` is not a number of seconds in (0, a day]. When
    the device reads more than :data:`SPEED_CHANGE` faster after the probes than the
    figures the fit uses, warns (:class:`~wticonv.errors.SpeedChangedWarning`), or with
    ``strict`` raises DeviceError and stores nothing.

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

    dev = handle.device
    if budget_s is not None and (isinstance(budget_s, bool) or not isinstance(
            budget_s, (int, float)) or not 0 < budget_s <= MAX_BUDGET_S):
        raise ArgumentError(f"budget_s={budget_s!r} must be a number of seconds above 0 and "
                            f"at most {MAX_BUDGET_S:g} (a day), or None for the default")
    budget = BUDGET_S.get(dev.kind, BUDGET_S["cpu"]) if budget_s is None else budget_s
    with dev.store.exclusive("calibrate", waiting):
        # The device's figures (measured on its first use) before the import thread takes
        # a core: read beside it, the 2-core Zen 4's peak read 117 GFLOP/s of its 230.
        _ = dev.peak_flops
        _import_in_background()
        runs = _measure_probes(handle, _probes(dev.kind, n), iterations, time_cap_ms,
                               progress, budget)
        changed = _speed_change(dev)
        if changed is not None:
            if strict:
                raise DeviceError(f"calibration not stored: {changed}")
            warnings.warn(f"wticonv: {changed}", SpeedChangedWarning, stacklevel=2)
        fitted = runs + (_find_db_runs(handle) if from_find_db else [])
        factors = store_fit(dev.store, dev.key, handle.registry, fitted, dev)
    if measurements is not None:
        measurements.extend(runs)
    handle.forget_selections()
    return factors


def store_fit(store, device_key: str, registry, runs, device) -> dict:
    """Fit the calibration to ``runs`` (``(problem, solver id, raw predicted ms, measured
    ms)`` measured on ``device``) and store it in ``store`` for ``device_key`` at the
    solvers' versions in ``registry``: the per-solver and per-direction factors
    (:func:`fit_factors`) and the learned corrections
    (:func:`wticonv.measuring.correction_fit.fit_correction`), each replacing the
    device's earlier ones. Returns the factors, ``{key: (factor, runs)}``."""
    from wticonv.measuring.correction_fit import fit_correction
    from wticonv.selection.correction import FEATURES

    factors = fit_factors(runs)
    versions = {sid: e.version for sid, e in registry.solvers.items()}
    store.put_calibration(device_key, [(key, versions[key.split("@")[0]], f, k)
                                       for key, (f, k) in factors.items()])
    store.put_correction(device_key, [(sid, versions[sid], FEATURES, coef, k)
                                      for sid, (coef, k) in fit_correction(runs, device).items()])
    return factors


def _raw_predictions(handle, p) -> dict[str, float]:
    from wticonv.selection.ranking import select

    model = select(handle.registry, p, handle.device, measured=False, calibrated=False)
    return {v.solver_id: v.predicted_ms for v in model.verdicts
            if v.applicable and v.predicted_ms}


def _find_db_runs(handle) -> list:
    """``(problem, solver_id, raw predicted ms, measured ms)`` of every find-db record of
    the device whose solver version is installed."""
    from wticonv.problem.conv import parse_key

    store, key = handle.device.store, handle.device.key
    runs = []
    for pkey in store.find_problem_keys(key):
        try:
            p = parse_key(pkey)
            predicted = _raw_predictions(handle, p)
        except WticonvError:
            continue
        for sid, (ver, _ws, t, _n, _capped) in store.get_find_records(key, pkey).items():
            entry = handle.registry.solvers.get(sid)
            if entry is not None and entry.version == ver and sid in predicted:
                runs.append((p, sid, predicted[sid], t))
    return runs


#: Probes planned at a time: the programs of their solvers are compiled together, several
#: at once (:mod:`wticonv.measuring.precompile`), before any of them is timed. The first
#: 200 probes name nearly every program a calibration needs; later chunks add a few.
PLAN_AHEAD = 200


def _measure_probes(handle, probes, iterations, time_cap_ms, progress, budget_s) -> list:
    """``(problem, solver_id, raw predicted ms, measured ms)`` of the applicable solvers
    predicted within :data:`SKIP_SLOWER_THAN` of the fastest on each probe, in order,
    until ``budget_s`` seconds are spent (at least until one probe ran). The probes are
    planned :data:`PLAN_AHEAD` at a time and their programs compiled first."""
    from wticonv.measuring.precompile import precompile
    from wticonv.measuring.timing import timed_together

    runs: list = []
    start = time.monotonic()
    for first in range(0, len(probes), PLAN_AHEAD):
        if runs and time.monotonic() - start > budget_s:
            break
        planned = []
        for p in probes[first:first + PLAN_AHEAD]:
            try:
                predicted = _raw_predictions(handle, p)
            except WticonvError:
                continue
            if predicted:
                fastest = min(predicted.values())
                predicted = {sid: t for sid, t in predicted.items()
                             if t <= SKIP_SLOWER_THAN * fastest}
            planned.append((p, predicted))
        precompile(handle, ((p, dict.fromkeys(pred)) for p, pred in planned))
        for j, (p, predicted) in enumerate(planned):
            if runs and time.monotonic() - start > budget_s:
                break
            if progress is not None:
                progress(first + j, len(probes), p)
            try:
                timings = timed_together(handle, p, iterations, time_cap_ms, None,
                                         dict.fromkeys(predicted))
            except WticonvError:
                continue
            runs.extend((p, sid, predicted[sid], t[0]) for sid, t in timings.items()
                        if not isinstance(t, WticonvError))
    return runs


def measure_probes(handle, probes, iterations: int = 3, time_cap_ms: float = 100.0,
                   budget_s: float = math.inf, progress=None) -> list:
    """Measure ``probes`` as :func:`calibrate` does, for at most ``budget_s`` seconds (at
    least until one probe ran): ``(problem, solver_id, raw predicted ms, measured ms)``
    per solver run, in order. A fleet (:mod:`wticonv.fleet`) measures its share of the
    probes on each worker with it."""
    return _measure_probes(handle, probes, iterations, time_cap_ms, progress, budget_s)


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


