"""Find mode and the find-db: timing every solver, recording, ranking by measured time,
stale and corrupt records, concurrent writers."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

import wticonv
from wticonv import ConvProblem
from wticonv.measuring import timing
from wticonv.measuring.find import find
from wticonv.db.store import Store

P = ConvProblem(2, 8, 12, 12, 16, 3, 3, pad_h=1, pad_w=1)


def test_find_records_and_immediate_mode_ranks_by_measured_time(own_handle):
    h = own_handle
    before = h.select(P)
    assert all(v.wti_source == "model" for v in before.candidates)
    results = find(h, P, iterations=3)
    timed = [r for r in results if r.time_ms is not None]
    assert len(timed) == len(before.candidates)            # every dynamic candidate ran
    assert [r.time_ms for r in timed] == sorted(r.time_ms for r in timed)
    # short kernels (under timing.SHORT_RUN_MS) get up to SHORT_RUNS times the runs
    assert all(1 <= r.runs <= 3 * timing.SHORT_RUNS and r.time_ms > 0 for r in timed)
    assert all(r.reason for r in results if r.time_ms is None)
    records = h.device.store.get_find_records(h.device.key, P.key)
    assert set(records) == {r.solver_id for r in timed}
    after = h.select(P)
    assert after.solver_id == timed[0].solver_id
    assert after.chosen.wti_source == "find-db"
    assert after.chosen.measured_ms == pytest.approx(timed[0].time_ms)
    assert [v.measured_ms for v in after.candidates] == sorted(
        v.measured_ms for v in after.candidates)
    # Other problems are not affected.
    assert all(v.wti_source == "model" for v in h.select(P.with_batch(3)).candidates)


def test_time_cap_cuts_slow_solvers_short(own_handle):
    results = find(own_handle, P, iterations=5, time_cap_ms=1e-6, record=False)
    timed = [r for r in results if r.time_ms is not None]
    assert timed and all(r.runs == 1 and r.capped for r in timed)
    assert own_handle.device.store.get_find_records(own_handle.device.key, P.key) == {}


def test_stale_and_corrupt_records_are_ignored(own_handle):
    h = own_handle
    store, key = h.device.store, h.device.key
    naive_ws = 0
    store.put_find_records(key, P.key, [("direct.naive", "0.0.0-other", naive_ws, 0.001, 3, 0)])
    h.forget_selections()      # written behind the handle's back: forget what it chose
    sel = h.select(P)
    naive = next(v for v in sel.verdicts if v.solver_id == "direct.naive")
    assert naive.wti_source == "model" and "stale" in naive.note
    assert sel.solver_id != "direct.naive"
    version = h.registry.solvers["direct.naive"].version
    with pytest.raises(ValueError, match="time"):
        store.put_find_records(key, P.key, [("direct.naive", version, 0, float("nan"), 3, 0)])
    # a row damaged on disk (written by something else): ignored with a warning
    conn = store._connect()
    conn.execute("INSERT OR REPLACE INTO find_db VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                 (key, P.key, "direct.naive", version, naive_ws, -1.0, 3, 0, 0.0))
    h.forget_selections()
    with pytest.warns(UserWarning, match="corrupt find-db record"):
        sel = h.select(P)
    assert sel.solver_id != "direct.naive"
    store.put_find_records(key, P.key, [("direct.naive", version, naive_ws, 0.001, 3, 0)])
    h.forget_selections()
    assert h.select(P).solver_id == "direct.naive"       # a valid record wins
    # ... but a measured slow solver never outranks one predicted faster (ranked by time)
    store.put_find_records(key, P.key, [("direct.naive", version, naive_ws, 1e4, 3, 0)])
    h.forget_selections()
    sel = h.select(P)
    assert sel.solver_id != "direct.naive"
    assert sel.candidates[-1].solver_id == "direct.naive"
    summary = store.summary()
    assert summary["find_db"] == 1
    store.clear()
    assert store.summary()["find_db"] == 0


def test_concurrent_writers_keep_the_find_db_consistent(tmp_path):
    code = textwrap.dedent(f"""
        import sys
        from wticonv.db.store import Store
        s = Store({str(tmp_path)!r})
        w = int(sys.argv[1])
        for i in range(40):
            s.put_find_records("dev", f"problem-{{w}}-{{i}}",
                               [("a.x", "1", 0, 1.0 + i, 3, 0), ("b.y", "1", 64, 2.0, 3, 1)])
    """)
    procs = [subprocess.Popen([sys.executable, "-c", code, str(w)]) for w in range(4)]
    assert all(p.wait(timeout=120) == 0 for p in procs)
    s = Store(tmp_path)
    assert s.summary()["find_db"] == 4 * 40 * 2
    rec = s.get_find_records("dev", "problem-3-39")
    assert rec == {"a.x": ("1", 0, 40.0, 3, False), "b.y": ("1", 64, 2.0, 3, True)}


def test_cli_find_then_explain(own_store, monkeypatch, capsys):
    from wticonv.cli import main

    monkeypatch.setenv("WTICONV_CACHE_DIR", str(own_store.cache_dir))
    flags = ["-n", "1", "-c", "4", "-H", "9", "-W", "9", "-k", "8", "-y", "3", "-x", "3",
             "-p", "1", "-q", "1", "-F", "1"]
    assert main(["find", *flags, "-i", "2", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)["finds"][0]
    fastest = found["results"][0]
    assert fastest["time_ms"] > 0
    assert main(["explain", *flags, "--json"]) == 0
    sel = json.loads(capsys.readouterr().out)["selections"][0]
    assert sel["problem"] == found["problem"] and sel["chosen"] == fastest["solver_id"]
    chosen = sel["solvers"][0]
    assert chosen["wti_source"] == "find-db" and chosen["measured_ms"] == fastest["time_ms"]


def test_handle_remembers_selections_until_find_records_new_times(own_handle):
    h = own_handle
    q = P.with_batch(5)
    first = h.select(q)
    assert h.select(q) is first                      # remembered
    assert h.select(q, workspace_limit=0) is not first
    find(h, q, iterations=1)                         # new times: selections start afresh
    again = h.select(q)
    assert again is not first and again.chosen.wti_source == "find-db"
    h.forget_selections()
    assert h.select(q) is not again


def test_evaluate_scores_the_fallback_against_the_fastest(own_handle, tmp_path):
    from wticonv.measuring.evaluate import RULES, evaluate, summarize, write_csv

    problems = [P, P.with_direction("wrw"), ConvProblem(1, 16, 10, 10, 24, 1, 1)]
    cases = evaluate(own_handle, problems, iterations=2, counts={problems[2]: 4})
    assert [c.problem for c in cases] == problems
    assert [c.count for c in cases] == [1, 1, 4]
    for c in cases:
        assert c.measured_ms[c.best] == min(c.measured_ms.values())
        assert c.slowdown["fallback"] >= 1.0
        model = wticonv.selection.ranking.select(own_handle.registry, c.problem, own_handle.device,
                                         measured=False)
        assert c.chosen["fallback"] == model.solver_id     # the models' choice, not find-db's
    s = summarize(cases)
    assert set(s) == set(RULES)
    fb = s["fallback"]
    assert fb["cases"] == 3 and 0 <= fb["top1"] <= fb["within_10pct"] <= 1
    assert fb["worst_slowdown"] >= fb["mean_slowdown"] >= 1.0
    chosen = sum(c.count * c.measured_ms[c.chosen["fallback"]] for c in cases)
    assert fb["time_weighted"] == pytest.approx(
        chosen / sum(c.count * c.measured_ms[c.best] for c in cases))
    assert fb["time_weighted"] <= fb["worst_slowdown"]
    path = tmp_path / "m.csv"
    write_csv(cases, path)
    lines = path.read_text().splitlines()
    assert lines[0] == ("problem,direction,solver,predicted_ms,measured_ms,fallback_choice,"
                        "fastest,count")
    assert len(lines) == 1 + sum(len(c.measured_ms) for c in cases)
    assert sum(line.endswith(",1,1") or line.endswith(",1,4")
               for line in lines[1:]) == 3                          # one fastest per case
    assert sum(line.endswith(",4") for line in lines[1:]) == len(cases[2].measured_ms)


def test_evaluate_plot(tmp_path, own_handle):
    pytest.importorskip("matplotlib")
    from wticonv.measuring.evaluate import evaluate, write_plot

    cases = evaluate(own_handle, [P], iterations=1)
    write_plot(cases, tmp_path / "p.png")
    assert (tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_calibration_factors_scale_the_wti_and_explain_shows_both(own_handle):
    h = own_handle
    store, key = h.device.store, h.device.key
    before = {v.solver_id: v.wti for v in h.select(P).candidates}
    version = h.registry.solvers["direct.naive"].version
    store.put_calibration(key, [("direct.naive", version, 50.0, 3),
                                ("direct.tiled", "0-other-version", 0.01, 3)])
    h.forget_selections()
    sel = h.select(P)
    naive = next(v for v in sel.verdicts if v.solver_id == "direct.naive")
    tiled = next(v for v in sel.verdicts if v.solver_id == "direct.tiled")
    assert naive.wti_source == "calibrated" and naive.raw_wti == pytest.approx(
        before["direct.naive"])
    assert naive.wti == pytest.approx(50.0 * before["direct.naive"])
    assert tiled.raw_wti is None and tiled.wti == pytest.approx(before["direct.tiled"])
    raw = wticonv.selection.ranking.select(h.registry, P, h.device, calibrated=False)
    assert next(v for v in raw.verdicts if v.solver_id == "direct.naive").raw_wti is None
    # a direction's own factor wins over the solver's all-directions one
    store.put_calibration(key, [("direct.naive", version, 50.0, 3),
                                (f"direct.naive@{P.direction}", version, 2.0, 1),
                                ("direct.naive@wrw", version, 7.0, 1)])
    h.forget_selections()
    naive = next(v for v in h.select(P).verdicts if v.solver_id == "direct.naive")
    assert naive.wti == pytest.approx(2.0 * before["direct.naive"])
    w = P.with_direction("bwd")
    raw_bwd = next(v for v in h.select(w).verdicts if v.solver_id == "direct.naive").raw_wti
    naive_bwd = next(v for v in h.select(w).verdicts if v.solver_id == "direct.naive")
    assert naive_bwd.wti == pytest.approx(50.0 * raw_bwd)   # no bwd factor: all-directions
    with pytest.raises(ValueError, match="positive finite"):
        store.put_calibration(key, [("direct.naive", version, float("inf"), 1)])
    store.clear()


def test_calibrate_measures_the_probes_and_stores_factors(own_handle, monkeypatch):
    from wticonv.measuring import calibrate as cal
    small = [ConvProblem(1, 8, 10, 10, 8, 3, 3, pad_h=1, pad_w=1, direction=d)
             for d in ("fwd", "bwd", "wrw")]
    monkeypatch.setattr(cal, "_probes", lambda kind, n: small)
    # every solver timed on every probe, however the loaded machine's measured peak makes
    # direct.naive's flat model look (calibrate skips those predicted 10x the fastest)
    monkeypatch.setattr(cal, "SKIP_SLOWER_THAN", float("inf"))
    factors = cal.calibrate(own_handle, iterations=1)
    assert "direct.naive" in factors and "direct.tiled" in factors
    assert all(f > 0 and 1 <= k <= 3 for f, k in factors.values())
    for d in ("fwd", "bwd", "wrw"):            # one probe per direction: its own ratio
        assert factors[f"direct.naive@{d}"][1] == 1
    assert factors["direct.naive"][0] == pytest.approx(
        sorted(factors[f"direct.naive@{d}"][0] for d in ("fwd", "bwd", "wrw"))[1])
    stored = own_handle.device.store.get_calibration(own_handle.device.key)
    assert {sid: f for sid, (_, f) in stored.items()} == pytest.approx(
        {sid: f for sid, (f, _) in factors.items()})
    sel = own_handle.select(small[0])
    assert any(v.wti_source == "calibrated" for v in sel.candidates)


def test_cli_calibrate_writes_every_probe_measurement_to_csv(own_store, monkeypatch, capsys,
                                                             tmp_path):
    import csv as csvmod

    from wticonv.measuring import calibrate as cal
    from wticonv.cli import main

    small = [ConvProblem(1, 8, 10, 10, 8, 3, 3, pad_h=1, pad_w=1, direction=d)
             for d in ("fwd", "bwd", "wrw")]
    monkeypatch.setattr(cal, "_probes", lambda kind, n: small)
    # every solver timed on every probe, however the loaded machine's measured peak makes
    # direct.naive's flat model look (calibrate skips those predicted 10x the fastest)
    monkeypatch.setattr(cal, "SKIP_SLOWER_THAN", float("inf"))
    monkeypatch.setenv("WTICONV_CACHE_DIR", str(own_store.cache_dir))
    out = tmp_path / "probes.csv"
    assert main(["calibrate", "--json", "--csv", str(out)]) == 0
    factors = json.loads(capsys.readouterr().out)["factors"]
    rows = list(csvmod.DictReader(out.open()))
    assert {r["problem"] for r in rows} == {p.key for p in small}
    assert all(r["direction"] == keys_direction(r["problem"]) for r in rows)
    naive = [float(r["predicted_ms"]) / float(r["measured_ms"])
             for r in rows if r["solver"] == "direct.naive"]
    assert len(naive) == 3 and all(x > 0 for x in naive)
    # the stored all-directions factor is the median of the CSV's predicted / measured:
    # the file holds every time in full (repr), so a replay refits from the same values
    assert factors["direct.naive"]["factor"] == pytest.approx(sorted(naive)[1], rel=1e-12)
    assert all(repr(float(r["measured_ms"])) == r["measured_ms"] for r in rows)
    assert main(["calibrate", "--csv", str(tmp_path / "no" / "such.csv")]) == 2
    assert "does not exist" in capsys.readouterr().err


def keys_direction(key: str) -> str:
    from wticonv.problem import parse_key
    return parse_key(key).direction


@pytest.mark.parametrize("short", [False, True], ids=["usual", "short kernels"])
def test_find_interleaves_the_solvers_timed_runs(own_handle, monkeypatch, short):
    """One run of each solver per round; kernels under timing.SHORT_RUN_MS (here: all of
    them, or none) stay for SHORT_RUNS times the rounds."""
    monkeypatch.setattr(timing, "SHORT_RUN_MS", 1e9 if short else 0.0)
    rounds = 3 * (timing.SHORT_RUNS if short else 1)
    h = own_handle
    order = []
    real_run = h.run

    def run(problem, tensors, selection=None, **kw):
        out = real_run(problem, tensors, selection=selection, **kw)
        order.append(out.solver_id)
        return out

    monkeypatch.setattr(h, "run", run)
    results = find(h, P, iterations=3, time_cap_ms=1e6, record=False, search=False)
    ran = [r.solver_id for r in results if r.time_ms is not None]
    assert len(ran) >= 3 and all(r.runs == rounds for r in results if r.time_ms is not None)
    warmups, timed = order[:len(ran)], order[len(ran):]
    assert sorted(warmups) == sorted(ran)            # every solver warmed up first
    assert timed == warmups * rounds                 # then one run of each per round


def test_find_records_each_solvers_fastest_run(own_handle, monkeypatch):
    # timing.STATISTIC: interference only adds time, so the fastest run is kept
    h = own_handle
    real_run = h.run
    runs = {}

    def run(problem, tensors, selection=None, **kw):
        out = real_run(problem, tensors, selection=selection, **kw)
        k = runs[out.solver_id] = runs.get(out.solver_id, -1) + 1
        out.kernel_ms = (0.5, 3.0, 1.0, 2.0)[k]      # the warm-up, then three timed runs
        return out

    monkeypatch.setattr(h, "run", run)
    results = [r for r in find(h, P, iterations=3, time_cap_ms=1e6, record=False,
                               search=False) if r.time_ms is not None]
    assert len(results) >= 3 and all(r.runs == 3 for r in results)
    # the fastest timed run, not the (faster still) warm-up, the median or the last
    assert all(r.time_ms == 1.0 for r in results), [(r.solver_id, r.time_ms) for r in results]


def test_find_never_times_disabled_solvers(own_handle, monkeypatch):
    # issue 17: WTICONV_DISABLE_SOLVERS keeps a solver out of find (and of its tuning),
    # not only out of the ranking.
    from wticonv.contract.registry import SolverRegistry

    h = wticonv.Handle(own_handle.device,
                       SolverRegistry(disabled={"direct.naive", "direct.tiled"}))
    ran = []
    real_run = h.run

    def run(problem, tensors, **kw):
        sel = kw.get("selection")
        ran.append(sel.solver_id if sel is not None else kw.get("solver"))
        return real_run(problem, tensors, **kw)

    monkeypatch.setattr(h, "run", run)
    results = {r.solver_id: r for r in find(h, P, iterations=1, record=False)}
    assert "direct.naive" not in ran and "direct.tiled" not in ran
    for sid in ("direct.naive", "direct.tiled"):
        assert results[sid].time_ms is None
        assert results[sid].reason == "disabled (WTICONV_DISABLE_SOLVERS)"
    assert any(r.time_ms is not None for r in results.values())


def test_calibrate_reports_figures_read_on_a_busy_machine(own_handle, monkeypatch):
    """A device that reads more than SPEED_CHANGE faster after the probes than its figures
    say (they were read under load) gets a SpeedChangedWarning; with strict, an error and
    no calibration stored."""
    from wticonv.errors import DeviceError, SpeedChangedWarning
    from wticonv.measuring import calibrate as cal
    from wticonv.runtime import peak

    h = own_handle
    fast = h.device.peak_flops * (1 + cal.SPEED_CHANGE) * 1.2
    monkeypatch.setattr(peak, "measure_peak_flops", lambda dev, *a, **k: fast)
    store, key = h.device.store, h.device.key
    with pytest.raises(DeviceError, match=r"calibration not stored.*1\.5x too fast"):
        cal.calibrate(h, n=1, budget_s=0.5, strict=True)
    assert not store.get_correction(key)
    with pytest.warns(SpeedChangedWarning, match="read while the machine was busy"):
        cal.calibrate(h, n=1, budget_s=0.5)
    assert store.get_correction(key)
    monkeypatch.setattr(peak, "measure_peak_flops", lambda dev, *a, **k: h.device.peak_flops)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error", SpeedChangedWarning)
        cal.calibrate(h, n=1, budget_s=0.5, strict=True)     # the same speed: no warning
