"""Tuning and the perf-db: searching perf configs, storing the fastest, using it in
immediate mode, and handling stale, invalid, oversized and corrupt records."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from wticonv import (ArgumentError, ConvProblem, Handle, NoApplicableSolverError,
                     SolverNotApplicableError, SolverWarning, hookimpl)
from wticonv.measuring.bench import measure
from wticonv.measuring.find import find
from wticonv.contract.registry import SolverRegistry
from wticonv.db.store import Store
from wticonv.measuring import tune as tune_module
from wticonv.measuring.tune import tune

#: A small forward problem direct.tiled takes (its CPU perf configs: v16, v8 and, the
#: reduction being 72 long, both with the filter packed).
P = ConvProblem(2, 8, 12, 12, 16, 3, 3, pad_h=1, pad_w=1)
TILED = "direct.tiled"


def _tiled(sel):
    return next(v for v in sel.verdicts if v.solver_id == TILED)


def test_tune_times_every_perf_config_and_immediate_mode_uses_the_fastest(own_handle):
    h = own_handle
    offered = h.registry.call(TILED, "perf_configs", problem=P, device=h.device,
                              workspace_limit=None)
    assert len(offered) >= 2 and len(set(offered)) == len(offered)
    before = _tiled(h.select(P))
    assert before.perf_config is None and before.perf_source == "default"
    results = tune(h, P, iterations=2)
    tunable = {sid for sid in h.registry.ids() if h.registry.solvers[sid].tunable}
    assert {TILED, "gemm.im2col", "gemm.1x1"} <= tunable    # the tunable built-ins
    assert {r.solver_id for r in results} == tunable         # each one reported
    r = next(r for r in results if r.solver_id == TILED)
    assert not r.reason and r.recorded and set(r.times) == set(offered)
    assert all(isinstance(t, float) and t > 0 for t in r.times.values())
    assert r.default_ms > 0
    if r.best_config == "default":      # nothing beat it by MIN_GAIN after the confirmation
        assert r.best_ms == r.default_ms
        assert min(r.times.values()) * tune_module.MIN_GAIN > r.default_ms
    else:
        assert r.best_ms == r.times[r.best_config] == min(r.times.values())
        assert r.best_ms * tune_module.MIN_GAIN <= r.default_ms
    assert r.speedup == pytest.approx(r.default_ms / r.best_ms)
    records = h.device.store.get_perf_records(h.device.key)
    after = _tiled(h.select(P))               # tune forgot the remembered selections
    if r.best_config == "default":            # the default won: no record is kept
        assert (P.key, TILED) not in records and after.perf_config is None
    else:
        assert r.times[r.best_config] == r.best_ms
        assert records[(P.key, TILED)] == (h.registry.solvers[TILED].version, r.best_config,
                                           r.best_ms, r.default_ms)
        assert after.perf_config == r.best_config and after.perf_source == "perf-db"
    forced = h.select(P, solver=TILED, perf_config="default")   # the default, record or not
    assert forced.chosen.perf_config is None and forced.chosen.perf_source == "forced"
    # the stored perf config runs, and computes the right answer
    m = measure(h, P, 1, solver=TILED)
    assert m.verdict.perf_config == after.perf_config and m.error <= m.tolerance


@pytest.mark.parametrize("direction", ["fwd", "bwd", "wrw"])
def test_every_offered_perf_config_is_correct(own_handle, direction):
    h, p = own_handle, P.with_direction(direction)
    offered = h.registry.call(TILED, "perf_configs", problem=p, device=h.device,
                              workspace_limit=None)
    assert offered
    for cfg in offered:
        m = measure(h, p, 0, solver=TILED, perf_config=cfg)
        assert m.verdict.perf_config == cfg and m.verdict.perf_source == "forced"
        assert m.error <= m.tolerance, cfg


def test_forcing_a_perf_config(own_handle):
    h = own_handle
    offered = h.registry.call(TILED, "perf_configs", problem=P, device=h.device,
                              workspace_limit=None)
    sel = h.select(P, solver=TILED, perf_config=offered[-1])
    assert sel.chosen.perf_config == offered[-1] and sel.chosen.perf_source == "forced"
    with pytest.raises(SolverNotApplicableError, match="'nope' is not offered"):
        h.select(P, solver=TILED, perf_config="nope")
    with pytest.raises(ArgumentError, match="together with its solver"):
        h.select(P, perf_config=offered[0])
    with pytest.raises(ArgumentError, match="not tunable"):
        h.select(P, solver="direct.naive", perf_config=offered[0])


def test_stale_invalid_oversized_and_corrupt_records(own_handle):
    h = own_handle
    store, key = h.device.store, h.device.key
    version = h.registry.solvers[TILED].version
    # another solver version: ignored and reported, kept until tuned again
    store.put_perf_record(key, P.key, TILED, "0.0.0-other", "v8", 1.0, 2.0)
    with pytest.warns(SolverWarning, match="tuned for version 0.0.0-other"):
        v = _tiled(h.select(P))
    assert v.perf_config is None and "stale" in v.note
    assert (P.key, TILED) in store.get_perf_records(key)
    # a perf config the solver does not offer: reported, deleted, the default runs
    store.put_perf_record(key, P.key, TILED, version, "128x999", 1.0, 2.0)
    h.forget_selections()
    with pytest.warns(SolverWarning, match="does not offer; deleted"):
        v = _tiled(h.select(P))
    assert v.perf_config is None and "invalid" in v.note
    assert (P.key, TILED) not in store.get_perf_records(key)
    # a perf config whose workspace is over the caller's limit: skipped for that call only
    # (a backward-weights problem whose reduction is split on either kind of device)
    q = ConvProblem(8, 3, 30, 30, 4, 3, 3, pad_h=1, pad_w=1, direction="wrw")
    big = next(c for c in h.registry.call(TILED, "perf_configs", problem=q, device=h.device,
                                           workspace_limit=None)
               if h.registry.call(TILED, "workspace_size", problem=q, device=h.device,
                                  workspace_limit=None, perf_config=c) > 0)
    store.put_perf_record(key, q.key, TILED, version, big, 1.0, 2.0)
    h.forget_selections()
    v = _tiled(h.select(q, workspace_limit=0))
    assert v.perf_config is None and v.workspace == 0 and "workspace limit" in v.note
    assert _tiled(h.select(q)).perf_config == big
    store.delete_perf_record(key, q.key, TILED)
    store.put_perf_record(key, P.key, TILED, version, big, 1.0, 2.0)
    # a row damaged on disk: reported, deleted, never trusted
    store._connect().execute("UPDATE perf_db SET time_ms = -1 WHERE solver_id = ?", (TILED,))
    store._perf.clear()
    h.forget_selections()
    with pytest.warns(UserWarning, match="corrupt perf-db record"):
        v = _tiled(h.select(P))
    assert v.perf_config is None and store.summary()["perf_db"] == 0
    # what the store refuses to write
    for bad in (("", 1.0, 1.0), ("v8", float("nan"), 1.0), ("v8", 1.0, 0.0),
                ("x" * 101, 1.0, 1.0), ("tab\there", 1.0, 1.0)):
        with pytest.raises(ValueError, match="perf-db record"):
            store.put_perf_record(key, P.key, TILED, version, *bad)
    assert store.summary()["perf_db"] == 0


def test_find_tunes_then_times_with_the_fastest_perf_config(own_handle):
    h = own_handle
    results = find(h, P, iterations=2)
    tiled = next(r for r in results if r.solver_id == TILED)
    rec = h.device.store.get_perf_records(h.device.key).get((P.key, TILED))
    stored = rec[1] if rec else None       # None: tuning found the default fastest
    assert tiled.perf_config == stored and tiled.time_ms > 0
    v = _tiled(h.select(P))
    assert v.perf_config == stored and v.wti_source == "find-db"
    assert v.measured_ms == pytest.approx(tiled.time_ms)
    # without search: timed with what immediate mode gives it (now the perf-db's)
    again = find(h, P, iterations=1, record=False, search=False)
    assert next(r for r in again if r.solver_id == TILED).perf_config == stored


class _BadlyTunable:
    """A tunable solver whose perf_configs hook breaks the contract (a repeated name)."""

    solver_id = "broken.tunable"

    @hookimpl
    def is_applicable(self, problem, device):
        return True

    @hookimpl
    def is_dynamic(self):
        return True

    @hookimpl
    def get_wti(self, problem, device):
        return 0.5

    @hookimpl
    def workspace_size(self, problem, device):
        return 0

    @hookimpl
    def perf_configs(self, problem, device):
        return ["a", "a"]

    @hookimpl
    def run(self, problem, device, tensors, workspace):  # pragma: no cover - never chosen
        raise AssertionError("a solver set aside must not run")


def test_a_broken_perf_configs_hook_is_reported_not_fatal(own_handle):
    reg = SolverRegistry(load_entry_points=False)
    assert reg.register(_BadlyTunable()).tunable
    h = Handle(own_handle.device, reg)
    results = tune(h, P, iterations=1)
    assert len(results) == 1 and "not a list of distinct" in results[0].reason
    assert not results[0].recorded
    # with a perf-db record to check, selection asks the hook, which fails: set aside
    h.device.store.put_perf_record(h.device.key, P.key, "broken.tunable", "", "a", 1.0, 1.0)
    with pytest.warns(SolverWarning, match="failed in perf_configs"):
        with pytest.raises(NoApplicableSolverError, match="perf_configs failed"):
            h.select(P)


def test_processes_sharing_the_databases_keep_them_consistent(tmp_path):
    """Writers of the find-db, perf-db and calibration in four processes at once, with
    readers in between: every record lands whole."""
    code = textwrap.dedent(f"""
        import sys
        from wticonv.db.store import Store
        s = Store({str(tmp_path)!r})
        w = int(sys.argv[1])
        for i in range(30):
            s.put_perf_record("dev", f"problem-{{w}}-{{i}}", "a.x", "1", f"cfg{{i}}",
                              1.0 + i, 2.0 + i)
            s.put_find_records("dev", f"problem-{{w}}-{{i}}", [("a.x", "1", 0, 1.0 + i, 3, 0)])
            s.put_calibration(f"dev{{w}}", [("a.x", "1", 1.0 + i, 18)])
            s._perf.clear()
            assert s.get_perf_records("dev")[(f"problem-{{w}}-{{i}}", "a.x")][1] == f"cfg{{i}}"
    """)
    procs = [subprocess.Popen([sys.executable, "-c", code, str(w)]) for w in range(4)]
    assert all(p.wait(timeout=120) == 0 for p in procs)
    s = Store(tmp_path)
    counts = s.summary()
    assert counts["perf_db"] == counts["find_db"] == 4 * 30 and counts["calibration"] == 4
    recs = s.get_perf_records("dev")
    assert recs[("problem-2-29", "a.x")] == ("1", "cfg29", 30.0, 31.0)
    assert s.get_calibration("dev3") == {"a.x": ("1", 30.0)}


def test_cli_tune_explain_and_cache(own_store, monkeypatch, capsys):
    from wticonv.cli import main

    monkeypatch.setenv("WTICONV_CACHE_DIR", str(own_store.cache_dir))
    flags = ["-n", "2", "-c", "8", "-H", "12", "-W", "12", "-k", "16", "-y", "3", "-x", "3",
             "-p", "1", "-q", "1", "-F", "1"]
    assert main(["tune", *flags, "-i", "1", "--json"]) == 0
    tuned = json.loads(capsys.readouterr().out)["tunes"][0]
    assert tuned["problem"] == P.key
    best = tuned["results"][0]
    won = best["best_config"] != "default"       # else the default was fastest: no record
    assert best["solver_id"] == TILED and (best["best_config"] in best["times"] or not won)
    assert main(["explain", *flags]) == 0
    assert ("perf-db" in capsys.readouterr().out) == won
    assert main(["explain", *flags, "--json"]) == 0
    sel = json.loads(capsys.readouterr().out)["selections"][0]
    tiled = next(v for v in sel["solvers"] if v["solver_id"] == TILED)
    assert tiled["perf_config"] == (best["best_config"] if won else None)
    assert tiled["perf_source"] == ("perf-db" if won else "default")
    assert main(["tune", *flags, "-S", "direct.naive"]) == 2
    assert "not tunable" in capsys.readouterr().err
    assert main(["cache", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["tables"]["perf_db"] == int(won)
    assert main(["cache", "--clear"]) == 0
    capsys.readouterr()
    assert main(["cache", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["tables"]["perf_db"] == 0


def test_a_default_faster_than_every_perf_config_keeps_no_record(own_handle, monkeypatch):
    """tune compares the default with the listed configs: when the default wins, the
    perf-db keeps no record (and an earlier one is deleted)."""
    import wticonv.measuring.timing as find_mod

    h = own_handle
    store, key = h.device.store, h.device.key
    version = h.registry.solvers[TILED].version
    offered = h.registry.call(TILED, "perf_configs", problem=P, device=h.device,
                              workspace_limit=None)
    store.put_perf_record(key, P.key, TILED, version, offered[0], 1.0, 2.0)
    seen = []

    def fake_timed(handle, problem, iterations, cap, limit, solver, perf_config=None,
                   tensors=None, statistic=None):
        seen.append(perf_config)
        return (1.0 if perf_config == "default" else 2.0 + len(seen), 1, False, 0,
                perf_config)

    monkeypatch.setattr(find_mod, "timed", fake_timed)
    r = tune(h, P)[0]
    assert seen[0] == "default" and set(seen[1:]) == set(offered)
    assert r.best_config == "default" and r.best_ms == r.default_ms == 1.0 and r.recorded
    assert (P.key, TILED) not in store.get_perf_records(key)
    assert _tiled(h.select(P)).perf_config is None


def test_tune_and_find_check_their_arguments(own_handle):
    from wticonv import SolverNotFoundError

    h = own_handle
    with pytest.raises(SolverNotFoundError, match="bogus"):
        tune(h, P, solvers=["bogus"])
    with pytest.raises(ArgumentError, match="not tunable"):
        tune(h, P, solvers=["direct.naive"])
    with pytest.raises(ArgumentError, match="workspace_limit"):
        tune(h, P, workspace_limit=-1)
    with pytest.raises(ArgumentError, match="workspace_limit"):
        find(h, P, workspace_limit=-1)
    with pytest.raises(ArgumentError, match="iterations"):
        find(h, P, iterations=0)
    assert [r.solver_id for r in tune(h, P, iterations=1, solvers=TILED)] == [TILED]


def test_compute_with_a_forced_perf_config(own_handle):
    import numpy as np

    from wticonv import reference, rms_range

    h = own_handle
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, P.x_shape).astype(np.float32)
    w = rng.uniform(-1, 1, P.w_shape).astype(np.float32)
    offered = h.registry.call(TILED, "perf_configs", problem=P, device=h.device,
                              workspace_limit=None)
    for cfg in (offered[-1], "default"):
        y = h.compute(P, x=x, w=w, solver=TILED, perf_config=cfg)
        assert rms_range(y, reference(P, x=x, w=w)) < 1e-5
    with pytest.raises(SolverNotApplicableError, match="not offered"):
        h.compute(P, x=x, w=w, solver=TILED, perf_config="nope")


def test_cli_rejects_bad_targets_before_measuring(own_store, monkeypatch, capsys, tmp_path):
    from wticonv.cli import main

    monkeypatch.setenv("WTICONV_CACHE_DIR", str(own_store.cache_dir))
    flags = ["-n", "1", "-c", "4", "-H", "6", "-W", "6", "-k", "4", "-y", "3", "-x", "3"]
    cases = [
        (["find", "mobilenetv2", "--directions", ","], "--directions"),
        (["tune", *flags, "--directions", "wrw"], "use -F"),
        (["evaluate", "mobilenetv2", "--csv", str(tmp_path / "no" / "x.csv")], "does not exist"),
        (["evaluate", "mobilenetv2", "--plot", str(tmp_path / "x.txt")], ".png"),
    ]
    for argv, text in cases:
        assert main(argv) == 2, argv
        assert text in capsys.readouterr().err, argv
    # a find-db key takes -n as its batch size
    assert main(["tune", P.key, "-n", "3", "-i", "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["tunes"][0]["problem"] == \
        P.with_batch(3).key
    # a problem too large for the device: find says why nothing ran
    big = ["-n", "100000", "-c", "256", "-H", "56", "-W", "56", "-k", "256", "-y", "1",
           "-x", "1", "-F", "1"]
    assert main(["find", *big, "-i", "1"]) == 0
    out = capsys.readouterr().out
    assert "fastest none (" in out and "bytes" in out


def test_a_tune_under_a_workspace_limit_keeps_a_record_that_needs_more(own_handle):
    """A perf-db record tuned with more workspace (direct.tiled's split backward weights,
    "s2") still serves callers with more; tuning under a limit it does not fit keeps it
    (it replaced it with the best config that fit, and a default win deleted it)."""
    h = own_handle
    q = ConvProblem(4, 6, 32, 32, 6, 3, 3, pad_h=1, pad_w=1, groups=3, direction="wrw")
    version = h.registry.solvers["direct.tiled"].version
    store, key = h.device.store, h.device.key
    store.put_perf_record(key, q.key, "direct.tiled", version, "s2", 0.1, 0.2)
    (r,) = tune(h, q, workspace_limit=0, solvers=["direct.tiled"], iterations=1)
    assert "s2" not in r.times and r.best_config is not None
    assert r.kept == "s2" and not r.recorded
    assert store.get_perf_records(key)[(q.key, "direct.tiled")][1] == "s2"
    (free,) = tune(h, q, solvers=["direct.tiled"], iterations=1)        # no limit: replaced
    assert free.kept == "" and free.recorded


def test_a_forced_perf_config_over_the_workspace_limit_says_so(own_handle):
    """direct.tiled's "+pack" configs need workspace: forced under a limit of 0 bytes,
    the refusal names the limit, not "not offered"; an unknown name is told how to run
    the solver's own default."""
    h = own_handle
    offered = h.registry.call(TILED, "perf_configs", problem=P, device=h.device,
                              workspace_limit=None)
    packed = next(c for c in offered if c.endswith("+pack"))
    with pytest.raises(SolverNotApplicableError, match="needs more workspace than the limit"):
        h.select(P, solver=TILED, perf_config=packed, workspace_limit=0)
    with pytest.raises(SolverNotApplicableError, match="'default' runs the solver's own"):
        h.select(P, solver=TILED, perf_config="nope")
