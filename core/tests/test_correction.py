"""The learned per-device correction: probe problems, features, the fit, the store, selection
and ``calibrate`` (budget, --from-find-db)."""

from __future__ import annotations

import math
import statistics
import warnings

import pytest

from wticonv.measuring import calibrate as cal
from wticonv.measuring.correction_fit import (MIN_RUNS, MIN_TREE_RUNS, fit_correction,
                                              trees_available)
from wticonv.problem.conv import ConvProblem
from wticonv.selection.correction import CORRECT_WITHIN, FEATURES, correction_factor, features
from wticonv.testing.launches import RecordingDevice
from wticonv.workloads.generator import LAYER_KINDS, MAX_FLOPS_PER_IMAGE, random_problems

GPU = RecordingDevice("gpu")


def test_random_problems_are_distinct_valid_reproducible_and_bounded():
    a = random_problems(200, 8, seed=3)
    assert len(a) == len(set(a)) == 200
    assert a == random_problems(200, 8, seed=3)
    assert a != random_problems(200, 8, seed=4)
    assert random_problems(50, 8, seed=3) == a[:50]            # a prefix is a sample
    assert all(p.n == 8 and p.direction == "fwd" for p in a)
    assert all(p.flops <= MAX_FLOPS_PER_IMAGE * 8 for p in a)
    assert any(p.is_depthwise for p in a) and any(p.h == p.w == 1 for p in a)
    assert any(1 < p.groups < p.c for p in a) and any(p.dilation_h > 1 for p in a)
    only = random_problems(20, 1, seed=0, kinds={"se 1x1": 1.0})
    assert all(p.h == p.w == 1 and p.r == p.s == 1 for p in only)
    with pytest.raises(ValueError, match="unknown layer kinds"):
        random_problems(3, kinds={"4x4": 1.0})
    with pytest.raises(ValueError, match="count=0 must be an integer >= 1"):
        random_problems(0)
    for bad, says in ((dict(count=2.5), "must be an integer"), (dict(count=3, seed=None),
                      "seed=None"), (dict(count=3, kinds={}), "non-empty mapping"),
                      (dict(count=3, kinds={"1x1": -1}), "positive numbers")):
        with pytest.raises(ValueError, match=says):
            random_problems(**bad)
    with pytest.raises(ValueError, match=r"only \d+ distinct problems of kinds \['stem'\]"):
        random_problems(900, kinds={"stem": 1.0})           # about 800 exist: no endless draw
    assert abs(sum(LAYER_KINDS.values()) - 1.0) < 1e-9


def test_probe_problems_cover_batches_and_directions_and_keep_prefixes():
    from wticonv.measuring.calibrate import (PROBE_BATCHES, PROBE_MAX_FLOPS, corpus_layers,
                                             probe_problems)
    from wticonv.workloads.networks import corpus_networks, load_network

    gpu = probe_problems("gpu", 300)
    assert len(gpu) == len(set(gpu)) == 300
    assert probe_problems("gpu", 40) == gpu[:40]
    assert {p.direction for p in gpu} == {"fwd", "bwd", "wrw"}
    assert {p.n for p in gpu} <= set(PROBE_BATCHES["gpu"]) and len({p.n for p in gpu}) >= 5
    cpu = probe_problems("cpu", 300)
    assert all(p.n == 1 or p.flops <= PROBE_MAX_FLOPS["cpu"] for p in cpu)
    assert {p.n for p in probe_problems("cpu", 30, n=3)} == {3}
    # in turn a layer of the dev networks (in corpus_layers' order) and a random problem
    def layer(p):
        return p.with_batch(1).with_direction("fwd")

    dev = corpus_layers()
    assert len(dev) == len(set(dev)) > 500
    assert [layer(p) for p in gpu[0::2]] == dev[:150]
    test_only = {layer.problem for c in corpus_networks("test")
                 for layer in load_network(c.name, 1).layers} - set(dev)
    assert test_only and not test_only & {layer(p) for p in gpu[0::2]}
    # the corpus share (half its layers) runs out: random problems go on
    long = probe_problems("gpu", 2 * len(dev) + 100)
    assert len(long) == len(set(long)) == 2 * len(dev) + 100


def test_timing_inputs_are_views_of_one_random_pool(monkeypatch):
    import numpy as np

    from wticonv.measuring import inputs

    a = ConvProblem(2, 8, 10, 10, 4, 3, 3, pad_h=1, pad_w=1)
    b = a.with_direction("wrw")
    xa = inputs.timing_inputs(a)
    assert set(xa) == {"x", "w"} and set(inputs.timing_inputs(b)) == {"x", "y"}
    assert xa["x"].shape == (2, 8, 10, 10) and xa["w"].shape == (4, 8, 3, 3)
    assert xa["x"].dtype == np.float32 and not xa["x"].flags.writeable
    assert -1.0 <= xa["x"].min() < -0.9 and 0.9 < xa["x"].max() < 1.0
    assert np.shares_memory(xa["x"], inputs.timing_inputs(b)["x"])     # drawn once
    # past the pool's largest size: the pool repeated, read-only, never drawn again
    monkeypatch.setattr(inputs, "POOL_MAX_VALUES", 1000)
    monkeypatch.setattr(inputs, "_pool", np.empty(0, dtype=np.float32))
    monkeypatch.setattr(inputs, "random_inputs", None)
    big = inputs.timing_inputs(a)                       # x: 1600 values, w: 288
    pool = inputs._pool
    assert pool.size == 1000 and big["x"].shape == (2, 8, 10, 10)
    assert not np.shares_memory(big["x"], pool) and not big["x"].flags.writeable
    flat = big["x"].ravel()
    assert np.array_equal(flat[:1000], pool) and np.array_equal(flat[1000:], pool[:600])
    assert np.shares_memory(big["w"], pool) and np.array_equal(big["w"].ravel(), pool[:288])


def test_features_see_parallelism_reduction_groups_and_direction():
    assert len(features(ConvProblem(1, 8, 8, 8, 8, 3, 3), GPU, 1.0)) == len(FEATURES)
    f = dict(zip(FEATURES, features(ConvProblem(1, 1152, 1, 1, 48, 1, 1), GPU, 0.01)))
    # 48 outputs against 132 x 2048 resident work-items: starved by log(48 / 270336)
    assert f["starved"] == pytest.approx(math.log(48 / (132 * 2048)))
    assert f["log_reduction"] == pytest.approx(math.log(1152))
    assert f["one_by_one"] == 1.0 and f["bwd"] == f["wrw"] == 0.0
    assert f["log_predicted_ms"] == pytest.approx(math.log(0.01))
    big = dict(zip(FEATURES, features(ConvProblem(64, 256, 56, 56, 256, 3, 3, pad_h=1,
                                                  pad_w=1), GPU, 5.0)))
    assert big["starved"] == 0.0 and big["one_by_one"] == 0.0
    dw = ConvProblem(8, 96, 28, 28, 96, 3, 3, pad_h=1, pad_w=1, groups=96, direction="wrw")
    d = dict(zip(FEATURES, features(dw, GPU, 1.0)))
    assert d["wrw"] == d["depthwise"] == d["wrw_depthwise"] == 1.0 and d["grouped"] == 0.0
    # wrw: work is the filter (96 x 1 x 3 x 3), the reduction N Ho Wo
    assert d["wrw_starved"] == pytest.approx(math.log(96 * 9 / (132 * 2048)))
    assert d["log_reduction"] == pytest.approx(math.log(8 * 28 * 28))


def test_fit_recovers_a_planted_law_and_the_factor_inverts_it():
    probs = [p.with_direction(d) for p in random_problems(120, 4, seed=9)
             for d in ("fwd", "bwd", "wrw")]
    runs = []
    for i, p in enumerate(probs):
        pred = 0.05 + (i % 17) * 0.3
        f = dict(zip(FEATURES, features(p, GPU, pred)))
        law = 0.4 - 0.3 * f["starved"] + 0.5 * f["wrw_depthwise"]   # log(measured / pred)
        runs.append((p, "s", pred, pred * math.exp(law)))
    coef, n = fit_correction(runs, GPU, ridge=1e-6, method="linear")["s"]
    assert n == len(runs)
    errs = []
    for p, _, pred, t in runs:
        factor = correction_factor(coef, features(p, GPU, pred))
        errs.append(abs(math.log(pred / factor / t)))      # corrected prediction vs measured
    assert max(errs) < 1e-3
    few = fit_correction(runs[:MIN_RUNS - 1], GPU, method="trees")["s"][0]
    assert few[1:] == [0.0] * (len(FEATURES) - 1)        # too few runs: a constant only
    some = fit_correction(runs[:MIN_TREE_RUNS - 1], GPU, method="trees")["s"][0]
    assert isinstance(some, list) and any(some[1:])      # too few for trees: a line
    if trees_available():
        assert isinstance(fit_correction(runs[:MIN_TREE_RUNS], GPU)["s"][0], dict)
    assert correction_factor([10.0] + [0.0] * (len(FEATURES) - 1),
                             features(probs[0], GPU, 1.0)) == pytest.approx(math.exp(-5))


def test_boosted_trees_match_scikit_learn_and_find_what_a_line_cannot():
    pytest.importorskip("sklearn")
    from sklearn.ensemble import GradientBoostingRegressor

    from wticonv.measuring.correction_fit import TREES
    from wticonv.selection.correction import Trees, correction_factors

    probs = [p.with_direction(d) for p in random_problems(150, 8, seed=5)
             for d in ("fwd", "bwd", "wrw")]
    runs, xs, ys = [], [], []
    for i, p in enumerate(probs):
        pred = 0.1 + (i % 7) * 0.2
        f = dict(zip(FEATURES, features(p, GPU, pred)))
        # slow only where two features meet: depthwise in backward weights, or starved 1x1
        law = 1.2 * f["wrw_depthwise"] + 0.8 * (f["one_by_one"] * (f["starved"] < -3))
        runs.append((p, "s", pred, pred * math.exp(law)))
        xs.append(features(p, GPU, pred))
        ys.append(math.log(runs[-1][3] / pred))      # the fit's target, rounded alike
    model, _ = fit_correction(runs, GPU)["s"]
    assert isinstance(model, dict) and len(model["feature"]) == TREES["n_estimators"]
    # the fit takes the runs in one order, whatever order they come in (the trees'
    # subsampling draws by position): calibrate's random probe order and a replay's sorted
    # one give the same model
    assert fit_correction(runs[::-1], GPU)["s"][0] == model
    order = sorted(range(len(runs)), key=lambda i: (runs[i][0].key, runs[i][2]))
    ref = GradientBoostingRegressor(**TREES).fit([xs[i] for i in order],
                                                 [ys[i] for i in order]).predict(xs)
    ours = Trees({"s": model})
    got = [ours.log_corrections([x])[0] for x in xs]
    assert got == pytest.approx(list(ref), abs=1e-9)
    tree_err = statistics.fmean(abs(g - y) for g, y in zip(got, ys))
    line, _ = fit_correction(runs, GPU, method="linear")["s"]
    line_err = statistics.fmean(abs(math.log(1 / correction_factor(line, x)) - y)
                                for x, y in zip(xs, ys))
    assert tree_err < 0.05 and line_err > 3 * tree_err   # a line cannot fit the interaction
    factors = correction_factors({"s": ("1", FEATURES, model)}, {"s": "1"}, probs[0], GPU,
                                 {"s": runs[0][2]})
    assert factors["s"] == pytest.approx(math.exp(-got[0]))
    assert correction_factors({"s": ("1", FEATURES, model)}, {"s": "2"}, probs[0], GPU,
                              {"s": 1.0}) == {}
    # several solvers' trees at once, and a subset of them, give each solver its own answer
    other = dict(model, base=model["base"] + 1.0)
    both = Trees({"s": model, "t": other})
    assert both.log_corrections([xs[3], xs[4]]) == pytest.approx([got[3], got[4] + 1.0])
    assert both.subset({"t", "u"}).solvers == ["t"]
    assert both.subset({"t"}).log_corrections([xs[4]]) == pytest.approx([got[4] + 1.0])
    assert both.subset({"s", "t"}) is both
    # a solver predicted over CORRECT_WITHIN times the fastest keeps its raw WTI: calibrate
    # never times it there, so its trees were not fitted there
    two = {"s": ("1", FEATURES, model), "t": ("1", FEATURES, other)}
    fast = runs[0][2]
    near = correction_factors(two, {"s": "1", "t": "1"}, probs[0], GPU,
                              {"s": fast, "t": fast * CORRECT_WITHIN})
    assert set(near) == {"s", "t"} and near["s"] == pytest.approx(factors["s"])
    far = correction_factors(two, {"s": "1", "t": "1"}, probs[0], GPU,
                             {"s": fast, "t": fast * CORRECT_WITHIN * 1.01})
    assert far == {"s": pytest.approx(factors["s"])}
    assert cal.SKIP_SLOWER_THAN == CORRECT_WITHIN == 10.0


def test_bad_arguments_are_refused_with_the_rule():
    from wticonv.workloads.networks import corpus_networks

    assert len(corpus_networks()) == len(corpus_networks("dev")) + len(corpus_networks("test"))
    with pytest.raises(ValueError, match="must be 'dev', 'test' or None"):
        corpus_networks("tst")
    runs = [(ConvProblem(1, 8, 8, 8, 8, 1, 1), "s", 1.0, 2.0)] * 20
    with pytest.raises(ValueError, match="method='bogus'"):
        fit_correction(runs, GPU, method="bogus")
    with pytest.raises(ValueError, match="ridge=0"):
        fit_correction(runs, GPU, ridge=0, method="linear")


def test_calibrate_refuses_a_budget_that_is_not_a_time(own_handle, own_store, monkeypatch,
                                                       capsys):
    from wticonv.cli import main
    from wticonv.errors import ArgumentError
    from wticonv.measuring import calibrate as cal

    for bad in (float("nan"), float("inf"), 0, -1.0, True):
        with pytest.raises(ArgumentError, match="budget_s="):
            cal.calibrate(own_handle, budget_s=bad)
    monkeypatch.setenv("WTICONV_CACHE_DIR", str(own_store.cache_dir))
    for bad in ("nan", "inf", "0"):
        assert main(["calibrate", "--budget-s", bad]) == 2
        assert "--budget-s" in capsys.readouterr().err


def test_store_keeps_corrections_and_rejects_bad_ones(own_store):
    own_store.put_correction("dev", [("direct.naive", "1", FEATURES, [0.5] * len(FEATURES), 30)])
    assert own_store.get_correction("dev") == {
        "direct.naive": ("1", FEATURES, [0.5] * len(FEATURES))}
    with pytest.raises(ValueError, match="one finite coefficient per feature"):
        own_store.put_correction("dev", [("x", "1", FEATURES, [float("nan")] * len(FEATURES), 3)])
    with pytest.raises(ValueError, match="one finite coefficient per feature"):
        own_store.put_correction("dev", [("x", "1", FEATURES, [1.0], 3)])
    tree = {"base": 0.1, "depth": 1, "feature": [[2]], "threshold": [[0.5]],
            "value": [[-0.2, 0.3]]}
    own_store.put_correction("dev2", [("t", "1", FEATURES, tree, 9)])
    assert own_store.get_correction("dev2")["t"][2] == tree
    for bad in ({**tree, "value": [[0.0]]}, {**tree, "value": [[0.0, float("inf")]]},
                {**tree, "feature": [[99]]}, {k: v for k, v in tree.items() if k != "base"}):
        with pytest.raises(ValueError, match="boosted trees"):
            own_store.put_correction("dev2", [("t", "1", FEATURES, bad, 9)])
    assert "direct.naive" in own_store.get_correction("dev")          # nothing written
    with own_store._transaction() as conn:
        conn.execute("UPDATE calibration_models SET coefficients = 'not json'")
    own_store._factors.clear()
    with pytest.warns(UserWarning, match="corrupt learned correction"):
        assert own_store.get_correction("dev") == {}
    assert own_store.summary()["calibration_models"] == 2          # dev and dev2
    own_store.clear()
    assert own_store.summary()["calibration_models"] == 0


def test_selection_applies_the_correction_of_the_installed_version_only(own_handle):
    h = own_handle
    p = ConvProblem(1, 8, 10, 10, 8, 3, 3, pad_h=1, pad_w=1)
    raw = {v.solver_id: v.wti for v in h.select(p).candidates}
    version = h.registry.solvers["direct.naive"].version
    twice_as_slow = [math.log(2.0)] + [0.0] * (len(FEATURES) - 1)
    h.device.store.put_correction(h.device.key, [
        ("direct.naive", version, FEATURES, twice_as_slow, 20),
        ("direct.tiled", "0-other", FEATURES, twice_as_slow, 20)])
    h.forget_selections()
    sel = {v.solver_id: v for v in h.select(p).verdicts}
    assert sel["direct.naive"].wti == pytest.approx(raw["direct.naive"] / 2)
    assert sel["direct.naive"].wti_source == "calibrated"
    assert sel["direct.tiled"].wti == pytest.approx(raw["direct.tiled"])     # other version
    h.device.store.put_correction(h.device.key, [
        ("direct.naive", version, FEATURES[:-1] + ("other",), twice_as_slow, 20)])
    h.forget_selections()
    naive = next(v for v in h.select(p).verdicts if v.solver_id == "direct.naive")
    assert naive.wti == pytest.approx(raw["direct.naive"])       # fitted to other features
    h.device.store.clear()


def test_calibrate_spends_its_budget_and_fits_the_find_db_too(own_handle, monkeypatch):
    from wticonv.measuring import calibrate as cal
    from wticonv.measuring.find import find

    probes = [ConvProblem(1, 8, 10, 10, 8, 3, 3, pad_h=1, pad_w=1, direction=d)
              for d in ("fwd", "bwd", "wrw")]
    monkeypatch.setattr(cal, "_probes", lambda kind, n: probes)
    # every solver timed on every probe, however the loaded machine's measured peak makes
    # direct.naive's flat model look (calibrate skips those predicted 10x the fastest)
    monkeypatch.setattr(cal, "SKIP_SLOWER_THAN", float("inf"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        one = cal.calibrate(own_handle, iterations=1, budget_s=1e-9)   # one probe at least
    assert one["direct.naive"][1] == 1
    stored = own_handle.device.store.get_correction(own_handle.device.key)
    assert stored["direct.naive"][1] == FEATURES
    extra = ConvProblem(1, 16, 6, 6, 8, 1, 1)
    find(own_handle, extra, iterations=1)
    both = cal.calibrate(own_handle, iterations=1, from_find_db=True)
    plain = cal.calibrate(own_handle, iterations=1)
    assert plain["direct.naive"][1] == 3
    assert both["direct.naive"][1] == 4          # the find-db's record of `extra` added
    own_handle.device.store.clear()
