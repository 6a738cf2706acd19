"""System databases (wticonv.db.system): found through entry points or WTICONV_SYSTEM_DB,
used by selection where the user's store has no records of its own, overridden by the
user's, named by explain, and never fatal when broken.

Selection runs on small Python solvers and a stand-in device with a temporary store:
nothing is compiled.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
from wticonv import ConvProblem, hookimpl
from wticonv.contract.registry import SolverRegistry
from wticonv.db.schema import FIGURES_METHOD
from wticonv.db.store import Store
from wticonv.db.system import ENV, reset_system_databases, system_databases
from wticonv.db.transfer import FORMAT, Record, format_db
from wticonv.selection.ranking import select
from wticonv.testing.launches import RecordingDevice

P = ConvProblem(n=2, c=16, h=14, w=14, k=32, r=3, s=3, pad_h=1, pad_w=1)
OTHER = P.with_batch(4)


class Fake:
    def __init__(self, sid, wti, configs=None):
        self.solver_id, self._wti, self.configs = sid, wti, configs

    @hookimpl
    def is_applicable(self, problem, device):
        return True

    @hookimpl
    def is_dynamic(self):
        return True

    @hookimpl
    def get_wti(self, problem, device, perf_config):
        return self._wti * (2.0 if perf_config == "fast" else 1.0)

    @hookimpl
    def workspace_size(self, problem, device):
        return 0

    @hookimpl
    def run(self, problem, device, tensors, workspace):
        return None


class Tunable(Fake):
    @hookimpl
    def perf_configs(self, problem, device, workspace_limit):
        return self.configs


def registry():
    reg = SolverRegistry(load_entry_points=False, trace=False)
    reg.register(Fake("a.fast", 0.5), version="1.0")
    reg.register(Fake("b.slow", 0.1), version="1.0")
    reg.register(Tunable("c.tuned", 0.05, ["fast", "slow"]), version="2.0")
    return reg


@pytest.fixture
def device(tmp_path):
    dev = RecordingDevice("cpu")
    dev.store = Store(tmp_path / "user")
    return dev


def rec(kind, device, solver, values, problem=None, direction=None, version="1.0"):
    return Record(kind, device, problem, solver, direction, version, values)


KEY = RecordingDevice("cpu").key                    # "wticonv recording|recording cpu|0"
PATTERN = "wticonv recording|recording *|0"


def cal(solver, factor, device=PATTERN, version="1.0"):
    return rec("calibration", device, solver, {"factor": factor, "probes": 5},
               version=version)


def find(solver, ms, problem=P, device=PATTERN, version="1.0"):
    return rec("find-db", device, solver, {"workspace": 0, "time_ms": ms, "runs": 3,
                                           "capped": False}, problem.key, version=version)


def verdict(sel, sid):
    return next(v for v in sel.verdicts if v.solver_id == sid)


def test_system_calibration_serves_a_device_the_user_has_not_calibrated(device, system):
    path = system(cal("b.slow", 10.0))          # b.slow: 10x faster than its model says
    sel = select(registry(), P, device)
    slow = verdict(sel, "b.slow")
    assert sel.solver_id == "b.slow" and slow.wti == pytest.approx(1.0)
    assert slow.raw_wti == 0.1 and slow.wti_source == "calibrated"
    assert slow.source == "system calibration" and slow.system_db == str(path)
    assert verdict(sel, "a.fast").source == "model"           # no factor for it


def test_the_users_own_calibration_overrides_the_system_one(device, system):
    system(cal("b.slow", 10.0))
    device.store.put_calibration(device.key, [("a.fast", "1.0", 0.5, 9)])
    sel = select(registry(), P, device)
    fast, slow = verdict(sel, "a.fast"), verdict(sel, "b.slow")
    assert fast.source == "user calibration" and fast.wti == pytest.approx(0.25)
    assert slow.source == "model" and slow.raw_wti is None     # never mixed with the system's
    assert sel.solver_id == "a.fast"


def test_a_calibration_of_other_solver_versions_hides_none_that_counts(device, system):
    """A calibration none of whose records is of an installed solver version (made before
    an upgrade) is passed over: a stale exact key for a usable pattern, a stale user
    calibration for the system one. Where none counts, explain still names the first."""
    path = system(cal("b.slow", 10.0),                                     # the pattern
                  cal("b.slow", 99.0, device=KEY, version="0.9"),          # stale exact key
                  cal("a.fast", 99.0, device=KEY, version="0.9"))
    sel = select(registry(), P, device)
    slow = verdict(sel, "b.slow")
    assert slow.source == "system calibration" and slow.system_db == str(path)
    assert slow.wti == pytest.approx(1.0)                  # the pattern's 10, not the 99
    # a stale calibration of the user's own: the system one still serves
    device.store.put_calibration(device.key, [("b.slow", "0.8", 50.0, 9)])
    sel = select(registry(), P, device)
    assert verdict(sel, "b.slow").source == "system calibration"
    assert verdict(sel, "b.slow").wti == pytest.approx(1.0)
    # one usable record of the user's makes theirs the calibration, whole
    device.store.put_calibration(device.key, [("a.fast", "1.0", 0.5, 9)])
    sel = select(registry(), P, device)
    assert verdict(sel, "a.fast").source == "user calibration"
    assert verdict(sel, "b.slow").source == "model"
    # nothing counts anywhere: the first (the user's) is named, and corrects nothing
    from wticonv.db.system import DeviceView, pick_calibration
    stale = ({"b.slow": ("0.8", 50.0)}, {})
    view = DeviceView(calibrations=[("sys", {"b.slow": ("0.7", 3.0)}, {}, "any|key|1")])
    assert pick_calibration(stale, view, {"b.slow": "1.0"})[2] == "user calibration"
    assert pick_calibration(({}, {}), view, {"b.slow": "1.0"})[3] == "sys"
    assert pick_calibration(({}, {}), view, {"b.slow": "0.7"})[0] == {"b.slow": ("0.7", 3.0)}
    assert pick_calibration(({}, {}), DeviceView(), None) == ({}, {}, "", "")


def test_system_find_db_ranks_a_problem_the_user_has_not_measured(device, system):
    system(find("b.slow", 0.01), find("a.fast", 0.5))
    sel = select(registry(), P, device)
    assert sel.solver_id == "b.slow" and sel.chosen.measured_ms == 0.01
    assert sel.chosen.source == "system find-db" and sel.chosen.wti_source == "find-db"
    # the user's own records of the problem replace the system's (never mixed in)
    device.store.put_find_records(device.key, P.key, [("a.fast", "1.0", 0, 0.001, 3, 0)])
    sel = select(registry(), P, device)
    assert sel.solver_id == "a.fast" and sel.chosen.source == "user find-db"
    assert verdict(sel, "b.slow").measured_ms is None
    assert select(registry(), OTHER, device).chosen.source == "model"    # none for OTHER


def test_system_perf_db_gives_a_tunable_solver_its_config(device, system):
    perf = rec("perf-db", PATTERN, "c.tuned", {"perf_config": "fast", "time_ms": 1.0,
                                               "default_ms": 2.0}, P.key, version="2.0")
    system(perf)
    v = verdict(select(registry(), P, device), "c.tuned")
    assert v.perf_config == "fast" and v.perf_source == "system perf-db" and v.wti == 0.1
    device.store.put_perf_record(device.key, P.key, "c.tuned", "2.0", "slow", 1.5, 2.0)
    v = verdict(select(registry(), P, device), "c.tuned")
    assert v.perf_config == "slow" and v.perf_source == "perf-db"


def test_stale_and_foreign_system_records_are_not_used(device, system):
    system(cal("b.slow", 10.0, version="0.9"),
           find("b.slow", 0.01, version="0.9"),
           rec("perf-db", PATTERN, "c.tuned", {"perf_config": "gone", "time_ms": 1.0,
                                               "default_ms": 2.0}, P.key, version="2.0"),
           cal("a.fast", 0.01, device="NVIDIA CUDA|NVIDIA H200|*"))
    sel = select(registry(), P, device)
    slow, tuned = verdict(sel, "b.slow"), verdict(sel, "c.tuned")
    assert sel.solver_id == "a.fast" and verdict(sel, "a.fast").wti == 0.5   # not the GPU's
    assert slow.source == "model" and slow.measured_ms is None and slow.raw_wti is None
    assert "system find-db record stale (solver version 0.9)" in slow.note
    assert tuned.perf_source == "default" and "not offered here" in tuned.note


def test_the_most_specific_device_wins(device, system):
    system(cal("b.slow", 10.0, device="wticonv recording|*|*"), cal("b.slow", 3.0),
           cal("b.slow", 2.0, device=KEY))
    assert verdict(select(registry(), P, device), "b.slow").wti == pytest.approx(0.2)
    system(cal("b.slow", 7.0, device="wticonv recording|recording cpu|?"), name="two.jsonl")
    view = system_databases().view(KEY)
    assert view.calibration == {"b.slow": ("1.0", 2.0)}          # exact key over patterns
    assert system_databases().view("wticonv recording|recording gpu|0").calibration == \
        {"b.slow": ("1.0", 3.0)}


def test_a_learned_correction_travels_with_its_calibration(device, system):
    from wticonv.selection.correction import FEATURES

    coefs = [0.0] * len(FEATURES)
    coefs[0] = -2.0                     # log(measured / predicted) = -2: e^2 faster
    model = rec("correction", PATTERN, "b.slow", {"features": list(FEATURES),
                                                  "model": coefs, "runs": 40})
    system(model)
    slow = verdict(select(registry(), P, device), "b.slow")
    assert slow.wti == pytest.approx(0.1 * 2.718281828 ** 2, rel=1e-6)
    assert slow.source == "system calibration"


def test_a_broken_system_database_warns_once_and_selection_goes_on(device, system):
    good = json.loads(format_db([cal("b.slow", 10.0)])[1])
    system(lines=[json.dumps({"format": FORMAT, "version": 1,
                              "figures_method": FIGURES_METHOD}), json.dumps(good),
                  '{"kind": "calibration", "oops"', json.dumps(dict(good, solver="A"))],
           name="bad-records.jsonl")
    system(lines=['{"format": "wticonv-db", "version": 7}'], name="future.jsonl")
    system(lines=["\x00\x01 not json"], name="garbage.jsonl")
    system(lines=[], name="placeholder.jsonl").unlink()          # a file that went away
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        sel = select(registry(), P, device)
        select(registry(), OTHER, device)
    messages = [str(w.message) for w in seen]
    assert len(messages) == 4, messages                           # one per broken file
    bad = next(m for m in messages if "bad-records.jsonl" in m)
    assert "has 2 bad record(s), ignored (first: line 3: not valid JSON" in bad
    assert "its 1 good one(s) are used" in bad and "`wticonv db system` lists them" in bad
    assert "mend the file, or drop it from WTICONV_SYSTEM_DB" in bad     # the user's file
    # `wticonv db system` lists every bad record, not only the first
    from click.testing import CliRunner

    from wticonv.cli import cli
    out = CliRunner().invoke(cli, ["db", "system"]).output
    assert "bad: line 3: not valid JSON" in out and "bad: line 4:" in out
    assert any("future.jsonl cannot be used" in m and "upgrade wticonv" in m
               for m in messages)
    assert any("garbage.jsonl cannot be used" in m for m in messages)
    assert any("placeholder.jsonl cannot be used" in m and "cannot read" in m
               for m in messages)
    assert sel.solver_id == "b.slow"                 # the good record still serves
    assert verdict(sel, "b.slow").source == "system calibration"


def test_a_calibration_fitted_to_figures_of_another_method_is_not_used(device, system):
    # a calibration is relative to the device figures (peak, bandwidth) it was fitted
    # with: one exported before FIGURES_METHOD 2 (no figures_method in its header) would
    # mis-correct predictions made from figures measured now
    good = json.loads(format_db([cal("b.slow", 10.0)])[1])
    assert json.loads(format_db([cal("b.slow", 10.0)])[0])["figures_method"] == FIGURES_METHOD
    system(lines=[json.dumps({"format": FORMAT, "version": 1}), json.dumps(good)],
           name="old-method.jsonl")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        sel = select(registry(), P, device)
    (message,) = [str(w.message) for w in seen]
    assert "old-method.jsonl has 1 bad record(s)" in message
    assert "figures_method is missing" in message and "calibrate the device again" in message
    assert verdict(sel, "b.slow").source != "system calibration"


def _distribution(root, dist, package, files, entry):
    """An installed distribution with a ``wticonv.system_db`` entry point."""
    pkg = root / package
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for name, lines in files.items():
        (pkg / name).write_text("\n".join(lines) + "\n")
    info = root / f"{dist.replace('-', '_')}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[wticonv.system_db]\n{entry}\n")


def test_system_databases_are_found_through_entry_points(tmp_path, monkeypatch, device):
    _distribution(tmp_path, "acme-db", "acme_db",
                  {"cpu.jsonl": format_db([cal("b.slow", 10.0)]), "notes.txt": ["x"]},
                  "main = acme_db")
    _distribution(tmp_path, "broken-db", "broken_db", {}, "main = broken_db.missing:thing")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv(ENV)
    reset_system_databases()
    try:
        with pytest.warns(UserWarning, match=r"broken-db 1.0 \(entry point main = "
                                             r"broken_db.missing:thing\) cannot be used"):
            dbs = system_databases()
        names = [d.name for d in dbs.databases]
        assert "acme-db 1.0: cpu.jsonl" in names                    # not notes.txt
        assert not any("notes" in n for n in names)
        slow = verdict(select(registry(), P, device), "b.slow")
        assert slow.source == "system calibration"
        assert slow.system_db == "acme-db 1.0: cpu.jsonl"
    finally:
        reset_system_databases()


def test_no_system_database_when_the_variable_is_empty(device, monkeypatch):
    monkeypatch.setenv(ENV, "")
    reset_system_databases()
    assert system_databases().databases == []
    assert select(registry(), P, device).chosen.source == "model"


def test_the_shipped_distribution_reads_clean(monkeypatch):
    """wticonv-sysdb (plugins/sysdb), where installed: every file reads without a bad
    record, and its records serve the device they were measured on."""
    import importlib_metadata

    if not any(ep.value == "wticonv_sysdb" for ep in
               importlib_metadata.entry_points(group="wticonv.system_db")):
        pytest.skip("wticonv-sysdb is not installed")
    monkeypatch.delenv(ENV)
    reset_system_databases()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            dbs = [d for d in system_databases().databases if "wticonv-sysdb" in d.name]
        assert dbs
        for db in dbs:
            assert not db.error and not db.bad and db.records, db.name
            assert db.header["comment"].startswith("tools/make_system_db.py")
            kinds = {r.kind for r in db.records}
            assert {"calibration", "correction"} <= kinds
            for measured in db.header.get("measured_on", []):
                assert system_databases().view(measured).calibration_source == db.name
    finally:
        reset_system_databases()


def test_a_partly_stale_calibration_names_the_solvers_it_leaves_uncorrected(device, system):
    system(cal("b.slow", 10.0), cal("a.fast", 3.0, version="0.9"))
    sel = select(registry(), P, device)
    assert verdict(sel, "b.slow").source == "system calibration"
    assert verdict(sel, "a.fast").source == "model"
    assert sel.calibration_note.startswith("1 of the 2 record(s) of the system calibration "
                                           "(the system database ")
    assert sel.calibration_note.endswith("are of other solver versions, or of solvers not "
                                         "installed: a.fast not corrected")
    device.store.put_calibration(device.key, [("b.slow", "1.0", 2.0, 5)])   # all count
    assert select(registry(), P, device).calibration_note == ""


def _make_system_db():
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "tools" / "make_system_db.py"
    spec = importlib.util.spec_from_file_location("make_system_db", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_a_shipped_calibration_is_refitted_from_recorded_probes(tmp_path):
    """tools/make_system_db.py --refit: the H100's recorded probes refitted with the
    installed models, stored for its key at the installed solvers' versions."""
    mod = _make_system_db()
    cal = (Path(__file__).resolve().parents[2] / "benchmarks" / "results"
           / "evaluate-test9-n1-h100-a" / "calibrate.csv")
    key = "NVIDIA CUDA|NVIDIA H100 80GB HBM3|580.159.04"
    n = mod.refit(key, [str(cal)], str(tmp_path))
    assert n > 3000
    store = Store(tmp_path)
    factors, models = store.get_calibration(key), store.get_correction(key)
    versions = {sid: e.version for sid, e in SolverRegistry().solvers.items()}
    assert factors["direct.naive"][0] == versions["direct.naive"]
    assert 0.2 < factors["direct.naive"][1] < 5
    assert models["gemm.im2col_3xtf32"][0] == versions["gemm.im2col_3xtf32"]
    with pytest.raises(SystemExit, match="does not name"):
        mod.refit("NVIDIA CUDA|NVIDIA H200|580.159.04", [str(cal)], str(tmp_path / "b"))


def test_refit_takes_stale_solvers_runs_from_the_last_file_only(tmp_path):
    """--stale PREFIX: the runs of solvers whose kernels changed come from the last --refit
    file only; every other solver's runs from all of them."""
    import csv

    mod = _make_system_db()
    cal = (Path(__file__).resolve().parents[2] / "benchmarks" / "results"
           / "evaluate-test9-n1-h100-a" / "calibrate.csv")
    with open(cal, newline="") as f:
        rows = list(csv.DictReader(f))
    cols = list(rows[0])
    older, newer = tmp_path / "older.csv", tmp_path / "newer.csv"
    for path, part in ((older, rows[:len(rows) // 2]), (newer, rows[len(rows) // 2:])):
        with open(path, "w", newline="") as f:
            w = csv.DictWriter(f, cols)
            w.writeheader()
            w.writerows(part)
    key = "NVIDIA CUDA|NVIDIA H100 80GB HBM3|580.159.04"
    files = [str(older), str(newer)]
    everything = mod.refit(key, files, str(tmp_path / "all"))
    stale = mod.refit(key, files, str(tmp_path / "stale"), ("winograd.",))
    older_winograd = sum(r["solver"].startswith("winograd.") for r in rows[:len(rows) // 2])
    assert older_winograd > 0 and stale <= everything - older_winograd
    # the factors (median ratios): winograd's moved with its runs, direct.naive's did not
    f_all = Store(tmp_path / "all").get_calibration(key)
    f_stale = Store(tmp_path / "stale").get_calibration(key)
    assert f_stale["winograd.f2x3"][1] != f_all["winograd.f2x3"][1]
    assert f_stale["direct.naive"][1] == f_all["direct.naive"][1]


def test_refit_takes_stale_solvers_runs_from_the_last_k_files(tmp_path):
    """--stale PREFIX@K: the stale solvers' runs come from the last K files; @1 is the
    plain prefix."""
    import csv

    mod = _make_system_db()
    cal = (Path(__file__).resolve().parents[2] / "benchmarks" / "results"
           / "evaluate-test9-n1-h100-a" / "calibrate.csv")
    with open(cal, newline="") as f:
        rows = list(csv.DictReader(f))
    third = len(rows) // 3
    parts = [rows[:third], rows[third:2 * third], rows[2 * third:]]
    files = []
    for i, part in enumerate(parts):
        files.append(str(tmp_path / f"{i}.csv"))
        with open(files[-1], "w", newline="") as f:
            w = csv.DictWriter(f, list(rows[0]))
            w.writeheader()
            w.writerows(part)
    key = "NVIDIA CUDA|NVIDIA H100 80GB HBM3|580.159.04"
    everything = mod.refit(key, files, str(tmp_path / "all"))
    last1 = mod.refit(key, files, str(tmp_path / "s1"), ("winograd.",))
    assert mod.refit(key, files, str(tmp_path / "s1b"), ("winograd.@1",)) == last1
    last2 = mod.refit(key, files, str(tmp_path / "s2"), ("winograd.@2",))
    wino = [sum(r["solver"].startswith("winograd.") for r in part) for part in parts]
    assert wino[0] > 0 and wino[1] > 0
    assert last1 < last2 < everything
    f2 = Store(tmp_path / "s2").get_calibration(key)
    f1 = Store(tmp_path / "s1").get_calibration(key)
    assert f2["winograd.f2x3"][1] != f1["winograd.f2x3"][1]
    # overlapping prefixes: the longest that matches decides, whatever their order
    both = [mod.refit(key, files, str(tmp_path / f"o{i}"), order)
            for i, order in enumerate((("winograd.", "winograd.f2x3@2"),
                                       ("winograd.f2x3@2", "winograd.")))]
    assert both[0] == both[1] > last1


@pytest.mark.parametrize("stale, files, message", [
    (("",), 2, "would match every solver"),
    (("@1",), 2, "would match every solver"),
    (("winograd.@2",), 2, "K must be a whole number from 1 to 1"),
    (("winograd.@0",), 3, "K must be a whole number from 1 to 2"),
    (("winograd.@x",), 2, "K must be a whole number"),
    (("winograd.@\u00b2",), 3, "K must be a whole number"),
    (("winograd.@1", "winograd.@2"), 3, "given twice"),
    (("winogard.",), 2, "has no run of such a solver"),
    (("winograd.",), 1, "at least two --refit files"),
])
def test_refit_refuses_a_stale_prefix_that_would_lose_data(tmp_path, stale, files, message):
    """A --stale prefix that matches every solver, or none in the last file (a typo, or a
    last file without that solver), or one --refit file: an error, nothing stored."""
    mod = _make_system_db()
    cal = str(Path(__file__).resolve().parents[2] / "benchmarks" / "results"
              / "evaluate-test9-n1-h100-a" / "calibrate.csv")
    with pytest.raises(SystemExit, match=message):
        mod.refit("NVIDIA CUDA|NVIDIA H100 80GB HBM3|580.159.04", [cal] * files,
                  str(tmp_path), stale)
    assert not list(tmp_path.iterdir())
