"""Databases that travel: the wticonv-db format, export -> import round trips, and bad
records refused with one clear message each (wticonv.db.transfer, `wticonv db`).

Stores are temporary; no device is opened and nothing is compiled.
"""

from __future__ import annotations

import difflib
import io
import json
import re

import pytest
import wticonv
from wticonv.cli import main
from wticonv.contract.registry import SolverRegistry
from wticonv.db.schema import FIGURES_METHOD
from wticonv.db.store import Store
from wticonv.db.transfer import FORMAT, FORMAT_VERSION, export_db, import_db, read_db
from wticonv.errors import DbFileError

GPU = "NVIDIA CUDA|NVIDIA H200|550.54.15"
CPU = "Portable Computing Language|pthread-haswell-Intel Xeon|3.1+debian"
K1 = "64-56-56-3x3-64-56-56-16-1x1-1x1-1x1-0-NCHW-FP32-F"
K2 = "8-9-9-3x3-4-9-9-2-1x1-1x1-1x1-0-NCHW-FP32-B"
K3 = "1-8-8-1x1-1-8-8-1-0x0-1x1-1x1-0-NCHW-FP32-F"
V = "0.2.0"        # the built-in solvers' version (wticonv-direct, -gemm, -winograd)
VERSIONS = {"direct.naive": V, "direct.tiled": V, "gemm.im2col": V, "winograd.f2x3": V}
TREES = {"base": 0.25, "depth": 2, "feature": [[0, 1, 1], [1, 0, 0]],
         "threshold": [[0.5, -1.25, 3.0], [2.0, 0.125, 1e300]],
         "value": [[-0.1, 0.2, 0.3, -0.4], [0.01, 0.02, 0.03, 0.04]]}


def fill(store: Store) -> None:
    """Records of every kind on two devices (a learned correction of each form)."""
    for dev, scale in ((GPU, 1.0), (CPU, 40.0)):
        store.put_find_records(dev, K1, [("direct.naive", V, 0, 9.5 * scale, 3, 1),
                                         ("gemm.im2col", V, 1 << 20, 0.3 * scale, 5, 0)])
        store.put_find_records(dev, K2, [("direct.tiled", V, 256, 0.0123 * scale, 5, 0)])
        store.put_perf_record(dev, K1, "direct.tiled", V, "8x4/v4", 0.21 * scale, 0.33 * scale)
        store.put_calibration(dev, [("gemm.im2col", V, 0.8125 * scale, 40),
                                    ("gemm.im2col@fwd", V, 0.75, 12),
                                    ("winograd.f2x3@wrw", V, 1.3, 7)])
        store.put_correction(dev, [("gemm.im2col", V, ("bias", "bwd"), [0.1, -0.2], 44),
                                   ("winograd.f2x3", V, ("bias", "bwd"), TREES, 61)])


def contents(store: Store) -> dict:
    """Everything selection reads of a store, per device."""
    out = {}
    for dev in (GPU, CPU):
        out[dev] = {"find": {k: store.get_find_records(dev, k)
                             for k in store.find_problem_keys(dev)},
                    "perf": store.get_perf_records(dev), "cal": store.get_calibration(dev),
                    "cor": store.get_correction(dev)}
    return out


@pytest.fixture
def filled(tmp_path):
    store = Store(tmp_path / "a")
    fill(store)
    return store


def test_round_trip_into_a_fresh_store_gives_equal_records(filled, tmp_path):
    path = tmp_path / "all.jsonl"
    summary = export_db(filled, path)
    assert summary["records"] == {"find-db": 6, "perf-db": 2, "calibration": 6,
                                  "correction": 4}
    fresh = Store(tmp_path / "b")
    result = import_db(fresh, path, VERSIONS)
    assert result["written"] and result["bad"] == [] and result["records"] == summary["records"]
    assert contents(fresh) == contents(filled)
    assert contents(fresh)[CPU]["cor"]["winograd.f2x3"][2] == TREES
    assert contents(fresh)[GPU]["cal"]["gemm.im2col"] == (V, 0.8125)
    # the second export is the first, line for line, but for the header's date
    again = tmp_path / "again.jsonl"
    export_db(fresh, again)
    assert path.read_text().splitlines()[1:] == again.read_text().splitlines()[1:]


@pytest.mark.parametrize("kind", ["find-db", "perf-db", "calibration", "correction"])
def test_each_kind_round_trips_alone(filled, tmp_path, kind):
    path = tmp_path / f"{kind}.jsonl"
    export_db(filled, path, kinds=[kind])
    fresh = Store(tmp_path / "b")
    import_db(fresh, path, VERSIONS)
    want, got = contents(filled), contents(fresh)
    part = {"find-db": "find", "perf-db": "perf", "calibration": "cal",
            "correction": "cor"}[kind]
    for dev in (GPU, CPU):
        assert got[dev][part] == want[dev][part]
        assert all(not got[dev][p] for p in ("find", "perf", "cal", "cor") if p != part)


def test_header_and_sorted_lines(filled, tmp_path):
    path = tmp_path / "all.jsonl"
    export_db(filled, path, comment="made by a test")
    lines = path.read_text().splitlines()
    header = json.loads(lines[0])
    assert header["format"] == FORMAT and header["version"] == FORMAT_VERSION == 1
    assert header["wticonv"] == wticonv.__version__ and header["comment"] == "made by a test"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", header["created"])
    assert header["devices"] == sorted([GPU, CPU])
    recs = [json.loads(line) for line in lines[1:]]
    assert [list(r) for r in recs[:1]] == [["kind", "device", "problem", "solver",
                                            "direction", "solver_version", "values"]]
    kinds = [r["kind"] for r in recs]
    assert kinds == sorted(kinds, key=["find-db", "perf-db", "calibration",
                                       "correction"].index)
    order = [(r["kind"], r["device"], r["problem"] or "", r["solver"], r["direction"] or "")
             for r in recs]
    assert order == sorted(order, key=lambda o: (kinds.index(o[0]),) + o[1:])
    cal = next(r for r in recs if r["kind"] == "calibration" and r["direction"] == "fwd")
    assert cal["problem"] is None and cal["values"] == {"factor": 0.75, "probes": 12}


def test_two_exports_differ_in_the_changed_lines_only(filled, tmp_path):
    before, after = tmp_path / "1.jsonl", tmp_path / "2.jsonl"
    export_db(filled, before)
    filled.put_perf_record(GPU, K2, "direct.tiled", V, "4x4/v1", 0.01, 0.02)
    export_db(filled, after)
    diff = [d for d in difflib.unified_diff(before.read_text().splitlines()[1:],
                                            after.read_text().splitlines()[1:], lineterm="",
                                            n=0) if d[:1] in "+-" and d[:3] not in ("+++", "---")]
    assert len(diff) == 1 and diff[0].startswith("+") and '"4x4/v1"' in diff[0]


def test_export_filters_devices_and_kinds(filled, tmp_path):
    path = tmp_path / "cpu.jsonl"
    summary = export_db(filled, path, devices=["Portable Computing Language|*"],
                        kinds=["calibration"])
    assert summary == {"records": {"calibration": 3}, "devices": [CPU], "measured_on": [],
                       "left_out": 0}
    db = read_db(path)
    assert {r.device for r in db.records} == {CPU} and {r.kind for r in db.records} == \
        {"calibration"}
    with pytest.raises(ValueError, match="unknown record kind"):
        export_db(filled, path, kinds=["findb"])


def test_match_writes_a_pattern_that_only_system_databases_take(filled, tmp_path):
    path = tmp_path / "pocl.jsonl"
    pattern = "Portable Computing Language|pthread-*|3.1+debian"
    export_db(filled, path, devices=[CPU], kinds=["calibration", "correction"], match=pattern)
    header = json.loads(path.read_text().splitlines()[0])
    assert header["devices"] == [pattern] and header["measured_on"] == [CPU]
    assert {r.device for r in read_db(path, patterns=True).records} == {pattern}
    with pytest.raises(DbFileError) as e:
        import_db(Store(tmp_path / "b"), path, VERSIONS)
    assert "is a pattern, which only a system database may hold" in str(e.value)
    with pytest.raises(ValueError, match="export one device"):
        export_db(filled, path, match=pattern)             # two devices


def _file(tmp_path, *records, header=None) -> str:
    head = header if header is not None else json.dumps(
        {"format": FORMAT, "version": 1, "figures_method": FIGURES_METHOD})
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join([head, *records]) + "\n")
    return str(path)


def _rec(**change) -> str:
    rec = {"kind": "find-db", "device": GPU, "problem": K1, "solver": "direct.naive",
           "direction": None, "solver_version": V,
           "values": {"workspace": 0, "time_ms": 1.5, "runs": 3, "capped": False}}
    values = change.pop("values", {})
    rec.update(change)
    rec["values"] = {**rec["values"], **values} if isinstance(values, dict) else values
    if rec["kind"] in OTHER_VALUES:       # another kind: its own values, as given
        rec["values"] = {**OTHER_VALUES[rec["kind"]],
                         **{k: v for k, v in values.items() if k in OTHER_VALUES[rec["kind"]]}}
    return json.dumps(rec)


OTHER_VALUES = {"calibration": {"factor": 1.0, "probes": 3},
                "perf-db": {"perf_config": "x", "time_ms": 1.0, "default_ms": 2.0},
                "correction": {"features": ["bias"], "model": [0.0], "runs": 1}}


GOOD = _rec(solver="gemm.im2col", problem=K2)
BAD = {
    "bad JSON": ('{"kind": "find-db", "device": ', "not valid JSON"),
    "unknown kind": (_rec(kind="findb"), "unknown kind \"findb\": the kinds are find-db"),
    "bad device key": (_rec(device="H200"), "is not a device key: platform|device name"),
    "bad problem key": (_rec(problem="64-56-56-3x3"), "find-db key"),
    "inconsistent key": (_rec(problem=K1.replace("64-56-56-16", "64-55-56-16")),
                         "is inconsistent"),
    "bad solver id": (_rec(solver="Naive"), "is not a solver id"),
    "wrong solver version": (_rec(solver_version="0.0.9"),
                             f"direct.naive 0.0.9 measured it, but {V} is installed"),
    "solver not installed": (_rec(solver="nope.never"), "nope.never is not installed"),
    "negative time": (_rec(values={"time_ms": -2.0}),
                      "values.time_ms = -2.0 must be a positive finite number of ms"),
    "NaN time": (_rec(values={"time_ms": float("nan")}), "values.time_ms = NaN"),
    "string runs": (_rec(values={"runs": "3"}), "values.runs = \"3\" must be a whole number"),
    "missing value": (_rec(values={"capped": None}).replace(', "capped": null', ""),
                      "missing capped"),
    "unknown field": (_rec(comment="hi"), "unknown comment"),
    "missing field": (json.dumps({"kind": "perf-db", "device": GPU}), "missing problem"),
    "calibration with a problem": (
        _rec(kind="calibration", values={"factor": 1.0, "probes": 3}),
        "holds for every problem of its device: its problem must be null"),
    "bad direction": (_rec(kind="calibration", problem=None, direction="up",
                           values={"factor": 1.0, "probes": 3}), "must be fwd, bwd, wrw"),
    "zero factor": (_rec(kind="calibration", problem=None,
                         values={"factor": 0, "probes": 3}), "values.factor = 0"),
    "short correction": (_rec(kind="correction", problem=None,
                              values={"features": ["bias", "bwd"], "model": [0.5],
                                      "runs": 3}), "not a usable correction of 2 features"),
    "empty perf config": (_rec(kind="perf-db", values={"perf_config": "", "time_ms": 1.0,
                                                       "default_ms": 2.0}),
                          "values.perf_config = \"\" must be a non-empty printable name"),
    "not an object": ("[1, 2]", "a record must be a JSON object"),
    "a second header": (json.dumps({"format": FORMAT, "version": 1}),
                        "a second header line (two files joined?)"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_record_is_refused_with_its_line_and_imports_nothing(tmp_path, case):
    line, message = BAD[case]
    path = _file(tmp_path, GOOD, line, _rec(solver="direct.tiled", problem=K3))
    store = Store(tmp_path / "s")
    with pytest.raises(DbFileError) as e:
        import_db(store, path, VERSIONS)
    err = e.value
    assert [b.line for b in err.bad] == [3] and message in err.bad[0].error, err.bad
    assert err.good == 2 and f"line 3: {err.bad[0].error}" in str(err)
    assert "nothing imported" in str(err) and "skip_bad=True" in str(err)
    assert store.find_problem_keys(GPU) == []                    # nothing went in
    result = import_db(store, path, VERSIONS, skip_bad=True)     # the good ones only
    assert result["records"]["find-db"] == 2 and [b.line for b in result["bad"]] == [3]
    assert set(store.get_find_records(GPU, K3)) == {"direct.tiled"}
    assert set(store.get_find_records(GPU, K2)) == {"gemm.im2col"}


def test_a_repeated_record_is_bad(tmp_path):
    path = _file(tmp_path, GOOD, _rec(), GOOD.replace("1.5", "2.5"))
    with pytest.raises(DbFileError) as e:
        import_db(Store(tmp_path / "s"), path, VERSIONS)
    assert [str(b) for b in e.value.bad] == [
        "line 4: repeats the find-db record of line 2 (same device, problem, solver and "
        "direction): keep one of them"]


@pytest.mark.parametrize("header, message", [
    (_rec(), "no header: the first line must be"),
    (json.dumps({"format": "miopen-fdb", "version": 1}), "is not 'wticonv-db'"),
    (json.dumps({"format": FORMAT, "version": 2}), "reads version 1; upgrade wticonv"),
    (json.dumps({"format": FORMAT}), "format version null"),
    ("{not json", "not valid JSON"),
])
def test_a_missing_or_foreign_header_refuses_the_whole_file(tmp_path, header, message):
    path = _file(tmp_path, GOOD, header=header)
    store = Store(tmp_path / "s")
    for skip_bad in (False, True):                  # even --skip-bad imports nothing
        with pytest.raises(DbFileError, match=re.escape(message)):
            import_db(store, path, VERSIONS, skip_bad=skip_bad)
    assert store.find_problem_keys(GPU) == []


def test_an_empty_or_unreadable_file(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    with pytest.raises(DbFileError, match="is empty: a database file starts with its header"):
        read_db(empty)
    with pytest.raises(DbFileError, match="cannot read .*missing.jsonl"):
        read_db(tmp_path / "missing.jsonl")
    binary = tmp_path / "bin.jsonl"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(DbFileError, match="not a text"):
        read_db(binary)


def test_a_corrupt_stored_record_is_left_out_of_an_export_with_a_warning(filled, tmp_path):
    conn = filled._connect()
    conn.execute("UPDATE find_db SET time_ms = -1 WHERE device_key = ? AND solver_id = ?",
                 (GPU, "direct.tiled"))
    path = tmp_path / "out.jsonl"
    with pytest.warns(UserWarning, match="left out a stored find-db record of direct.tiled "
                                         "on NVIDIA CUDA.*values.time_ms = -1.0"):
        summary = export_db(filled, path)
    assert summary["left_out"] == 1 and summary["records"]["find-db"] == 5
    assert read_db(path).bad == [] and len(read_db(path).records) == 17


def test_import_replaces_what_the_measuring_commands_replace(filled, tmp_path):
    path = tmp_path / "gpu.jsonl"
    export_db(filled, path, devices=[GPU], kinds=["find-db", "calibration"])
    target = Store(tmp_path / "t")
    target.put_find_records(GPU, K1, [("direct.tiled", V, 0, 0.5, 3, 0)])   # replaced
    target.put_find_records(GPU, "1-8-8-1x1-1-8-8-1-0x0-1x1-1x1-0-NCHW-FP32-F",
                            [("direct.naive", V, 0, 0.5, 3, 0)])            # kept
    target.put_correction(GPU, [("gemm.im2col", V, ("bias",), [3.0], 9)])  # half of a fit
    import_db(target, path, VERSIONS)
    assert set(target.get_find_records(GPU, K1)) == {"direct.naive", "gemm.im2col"}
    assert len(target.find_problem_keys(GPU)) == 3
    assert target.get_calibration(GPU) == filled.get_calibration(GPU)
    assert target.get_correction(GPU) == {}     # the old calibration's models went with it


def test_the_python_api_and_the_device_filter(filled, tmp_path):
    path = tmp_path / "all.jsonl"
    wticonv.export_db(path, store=filled)
    fresh = Store(tmp_path / "b")
    versions = {sid: e.version for sid, e in SolverRegistry().solvers.items()}
    assert all(versions[s] == V for s in VERSIONS)      # the records' solvers are installed
    result = wticonv.import_db(path, devices=[CPU], store=fresh)
    assert result["devices"] == [CPU] and result["skipped"] == 9
    assert contents(fresh)[CPU] == contents(filled)[CPU]
    assert fresh.record_device_keys() == [CPU]
    checked = wticonv.import_db(path, check=True, store=Store(tmp_path / "c"))
    assert not checked["written"] and Store(tmp_path / "c").record_device_keys() == []


# ----------------------------------------------------------------- the command line
def run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture
def cache(tmp_path, monkeypatch, filled):
    """The default cache of the commands, holding :func:`fill`'s records."""
    monkeypatch.setenv("WTICONV_CACHE_DIR", str(tmp_path / "a"))
    return filled


def test_cli_export_and_import_round_trip(cache, tmp_path, capsys, monkeypatch):
    path = tmp_path / "out.jsonl"
    rc, out, _ = run(capsys, "db", "export", str(path), "--json")
    data = json.loads(out)
    assert rc == 0 and data["records"]["find-db"] == 6 and data["file"] == str(path)
    rc, out, err = run(capsys, "db", "export", "-", "--device", GPU, "--kind", "perf-db")
    assert rc == 0 and len(out.splitlines()) == 2 and "exported 1 record(s)" in err
    assert json.loads(out.splitlines()[1])["values"]["perf_config"] == "8x4/v4"
    monkeypatch.setenv("WTICONV_CACHE_DIR", str(tmp_path / "fresh"))
    rc, out, err = run(capsys, "db", "import", str(path))
    assert rc == 0 and out.startswith("imported 18 record(s) (find-db 6, perf-db 2, "
                                      "calibration 6, correction 4) of 2 device(s)")
    assert f"{GPU} is not a device of this machine" in err
    assert contents(Store(tmp_path / "fresh")) == contents(cache)
    monkeypatch.setattr("sys.stdin", io.StringIO(path.read_text()))
    rc, out, _ = run(capsys, "db", "import", "-", "--check", "--json")
    data = json.loads(out)
    assert rc == 0 and data["written"] is False and data["records"]["correction"] == 4


def test_cli_import_reports_each_bad_record_and_exits_2(cache, tmp_path, capsys):
    path = _file(tmp_path, GOOD, BAD["negative time"][0], BAD["unknown kind"][0])
    rc, out, err = run(capsys, "db", "import", path)
    lines = err.splitlines()
    assert rc == 2 and out == ""
    assert lines[0].startswith(f"wticonv: error: {path}:3: values.time_ms = -2.0 must be")
    assert lines[1].startswith(f"wticonv: error: {path}:4: unknown kind \"findb\"")
    assert lines[2] == (f"wticonv: error: 2 bad record(s) in {path}: nothing imported; fix or "
                        "remove them, or pass --skip-bad to import the 1 good one(s)")
    assert cache.get_find_records(GPU, K2).keys() == {"direct.tiled"}     # untouched
    rc, out, err = run(capsys, "db", "import", path, "--skip-bad")
    assert rc == 0 and "imported 1 record(s)" in out and "2 bad record(s) skipped" in out
    assert f"{path}:3: values.time_ms" in err and "(skipped)" in err
    assert cache.get_find_records(GPU, K2).keys() == {"gemm.im2col"}
    rc, out, _ = run(capsys, "db", "import", _file(tmp_path, header='{"format": "x"}'),
                     "--json")
    assert rc == 2 and "is not 'wticonv-db'" in json.loads(out)["error"]


def test_cli_usage_errors(cache, tmp_path, capsys):
    rc, _, err = run(capsys, "db", "export", "-", "--json")
    assert rc == 2 and "give a file name" in err
    rc, _, err = run(capsys, "db", "export", str(tmp_path / "x.jsonl"), "--match", "nobar")
    assert rc == 2 and "must be a device pattern" in err
    rc, _, err = run(capsys, "db", "export", str(tmp_path / "no" / "x.jsonl"))
    assert rc == 1 and "could not be written" in err
    rc, _, err = run(capsys, "db", "import", str(tmp_path / "missing.jsonl"))
    assert rc == 2 and err.startswith("wticonv: error: cannot read") and "missing" in err


# ------------------------------------------- after a fresh user's trial (fleet-trial)
def test_a_whole_number_past_what_sqlite_stores_is_a_bad_record(tmp_path):
    huge = _rec(problem=K3, values={"workspace": 10 ** 30})
    for check in (True, False):                           # --check refuses it too
        with pytest.raises(DbFileError) as e:
            import_db(Store(tmp_path / "s"), _file(tmp_path, GOOD, huge), VERSIONS,
                      check=check)
        (bad,) = e.value.bad
        assert bad.line == 3 and bad.error.startswith(
            "values.workspace = 1000000000000000000000000000000 is too large: a whole "
            "number here must be below 2**63")
    edge = Store(tmp_path / "edge")                       # 2**63 - 1 is stored, read back
    import_db(edge, _file(tmp_path, _rec(problem=K3, values={"workspace": 2 ** 63 - 1})),
              VERSIONS)
    assert edge.get_find_records(GPU, K3)["direct.naive"][1] == 2 ** 63 - 1
    # an int past a float's range, as a time or a coefficient: a bad record, not a crash
    for line in (_rec(problem=K3, values={"time_ms": 10 ** 400}),
                 _rec(kind="correction", problem=None,
                      values={"features": ["bias"], "model": [10 ** 400], "runs": 1})):
        with pytest.raises(DbFileError) as e:
            import_db(Store(tmp_path / "t"), _file(tmp_path, GOOD, line), VERSIONS)
        assert [b.line for b in e.value.bad] == [3]


def _cal(solver, **values):
    return _rec(kind="calibration", problem=None, solver=solver,
                values={"factor": 1.5, "probes": 3, **values})


def test_a_header_that_refuses_the_calibration_is_reported_once(cache, tmp_path, capsys):
    cal = [_cal(s) for s in ("direct.naive", "direct.tiled", "gemm.im2col")]
    cor = _rec(kind="correction", problem=None, values={"features": ["bias"], "model": [0.1],
                                                        "runs": 4})
    old = json.dumps({"format": FORMAT, "version": 1})          # no figures_method
    path = _file(tmp_path, GOOD, *cal, cor, header=old)
    rc, out, err = run(capsys, "db", "import", path)
    lines = err.splitlines()
    assert rc == 2 and len(lines) == 2, err
    assert lines[0].startswith(f"wticonv: error: {path}:1: the header's figures_method is "
                               "null, not this wticonv's (2)")
    assert lines[0].endswith("(4 record(s) refused: line(s) 3-6)")
    assert lines[1] == (f"wticonv: error: 4 bad record(s) in {path}: nothing imported; fix "
                        "or remove them, or pass --skip-bad to import the 1 good one(s)")
    # many records of one device pattern: one line for all of them
    pattern = "NVIDIA CUDA|NVIDIA *|550.54.15"
    path = _file(tmp_path, *[_rec(device=pattern, solver=s) for s in VERSIONS])
    rc, out, err = run(capsys, "db", "import", path)
    lines = err.splitlines()
    assert rc == 2 and len(lines) == 2, err
    assert lines[0] == (f"wticonv: error: {path}:2-5 (4 records): device '{pattern}' is a "
                        "pattern, which only a system database may hold (docs/fleet.md): give "
                        "the exact device key")
    assert lines[1].endswith("no record of it is good, so --skip-bad would import nothing")


def test_the_bad_lines_listed_are_capped(cache, tmp_path, capsys):
    bad = [_rec(problem=K3, solver="direct.naive", values={"time_ms": -1.0 - i})
           for i in range(25)]
    rc, _, err = run(capsys, "db", "import", _file(tmp_path, GOOD, *bad))
    lines = err.splitlines()
    assert rc == 2 and len(lines) == 22
    assert lines[19].startswith(f"wticonv: error: {tmp_path / 'in.jsonl'}:22: values.time_ms "
                                "= -20.0")
    assert lines[20] == "wticonv: error: and 5 more bad record(s)"
    assert lines[21].endswith("pass --skip-bad to import the 1 good one(s)")


def test_an_export_that_matches_nothing_leaves_an_existing_file(cache, tmp_path, capsys):
    path = tmp_path / "keep.jsonl"
    path.write_text("the user's last export\n")
    rc, out, err = run(capsys, "db", "export", str(path), "--device", "AMD*|*|*")
    assert rc == 2 and out == "" and path.read_text() == "the user's last export\n"
    assert "no record matched" in err and f"{path} exists and is left as it was" in err
    assert "`--force`" in err
    with pytest.raises(DbFileError, match="no record matched"):
        export_db(cache, path, kinds=["perf-db"], devices=["AMD*|*|*"])
    rc, _, err = run(capsys, "db", "export", str(path), "--device", "AMD*|*|*", "--force")
    assert rc == 0 and "note: no record matched --device AMD*|*|*" in err
    assert json.loads(path.read_text())["devices"] == [] and len(path.read_text().split(
        "\n")) == 2                                         # a header alone
    new = tmp_path / "new.jsonl"                           # a new file needs no --force
    assert run(capsys, "db", "export", str(new), "--device", "AMD*|*|*")[0] == 0
    assert json.loads(new.read_text())["format"] == FORMAT


def test_skip_bad_leaves_out_a_whole_calibration_and_a_whole_find_db_problem(filled,
                                                                             tmp_path):
    path = tmp_path / "gpu.jsonl"
    export_db(filled, path, devices=[GPU])
    lines = path.read_text().splitlines()

    def spoil(kind, test, change):
        i = next(i for i, line in enumerate(lines) if f'"kind": "{kind}"' in line
                 and test(json.loads(line)))
        obj = json.loads(lines[i])
        change(obj)
        lines[i] = json.dumps(obj)
        return i + 1
    bad_cal = spoil("calibration", lambda r: r["direction"] == "fwd",
                    lambda r: r["values"].update(factor=-0.5))
    bad_find = spoil("find-db", lambda r: r["problem"] == K1 and r["solver"] == "gemm.im2col",
                     lambda r: r["values"].update(runs=0))
    path.write_text("\n".join(lines) + "\n")
    target = Store(tmp_path / "t")
    target.put_calibration(GPU, [("direct.naive", V, 2.0, 9)])            # kept whole
    target.put_find_records(GPU, K1, [("direct.tiled", V, 0, 0.5, 3, 0)])  # kept whole
    with pytest.raises(DbFileError) as e:
        import_db(target, path, VERSIONS)
    assert e.value.good == 9 - 2 - 4 - 1                   # 9 records, 2 bad, 5 left out
    result = import_db(target, path, VERSIONS, skip_bad=True)
    assert sorted(result["left_out"]) == sorted([
        (f"the calibration (factors and learned corrections) of {GPU}", 4, [bad_cal]),
        (f"the find-db records of {K1} on {GPU}", 1, [bad_find])])
    assert result["records"] == {"find-db": 1, "perf-db": 1, "calibration": 0,
                                 "correction": 0}
    assert target.get_calibration(GPU) == {"direct.naive": (V, 2.0)}
    assert target.get_correction(GPU) == {}
    assert set(target.get_find_records(GPU, K1)) == {"direct.tiled"}
    assert set(target.get_find_records(GPU, K2)) == {"direct.tiled"}


def test_importing_half_a_calibration_warns_that_the_other_half_goes(filled, tmp_path,
                                                                   capsys, monkeypatch):
    half, both = tmp_path / "half.jsonl", tmp_path / "both.jsonl"
    export_db(filled, half, devices=[GPU], kinds=["calibration"])
    export_db(filled, both, devices=[GPU], kinds=["calibration", "correction"])
    target = Store(tmp_path / "t")
    fill(target)
    assert import_db(target, both, VERSIONS)["warnings"] == []
    result = import_db(target, half, VERSIONS)
    (warning,) = result["warnings"]
    assert warning.startswith(f"the file holds the calibration factors of {GPU} but not its "
                              "learned corrections")
    assert "so the 2 learned correction(s) stored for it go" in warning
    assert target.get_correction(GPU) == {}                 # as the docs say
    assert target.get_calibration(GPU) == filled.get_calibration(GPU)
    monkeypatch.setenv("WTICONV_CACHE_DIR", str(tmp_path / "cli"))
    fill(Store(tmp_path / "cli"))
    rc, _, err = run(capsys, "db", "import", str(half))
    assert rc == 0 and f"wticonv: warning: the file holds the calibration factors of {GPU}" \
        in err
    rc, _, err = run(capsys, "db", "export", str(tmp_path / "x.jsonl"), "--kind",
                     "calibration")
    assert rc == 0 and "note: calibration and correction are the two halves" in err


def test_perf_db_records_are_checked_against_the_installed_solver(tmp_path, handle,
                                                                 own_store):
    from wticonv.problem.conv import parse_key
    from wticonv.selection.perfdb import offered_perf_configs, perf_record_check

    registry = handle.registry
    versions = {sid: e.version for sid, e in registry.solvers.items()}
    check = perf_record_check(registry, own_store)
    assert registry.solvers["direct.tiled"].tunable
    assert not registry.solvers["direct.naive"].tunable
    dev, key = handle.device.key, K2
    offered = offered_perf_configs(registry, "direct.tiled", parse_key(key), handle.device,
                                   None)

    def perf(solver, config, device=dev):
        return _rec(kind="perf-db", device=device, problem=key, solver=solver,
                    solver_version=versions[solver],
                    values={"perf_config": config, "time_ms": 1.0, "default_ms": 2.0})

    path = _file(tmp_path, perf("direct.tiled", offered[0]), perf("direct.naive", "x"),
                 perf("direct.tiled", "zzz", device=CPU), perf("direct.tiled", "zzz"))
    with pytest.raises(DbFileError) as e:
        import_db(own_store, path, versions, solver_check=check)
    naive, unknown = e.value.bad
    assert naive.line == 3 and naive.error.startswith(
        "direct.naive is not tunable (it offers no perf configs): selection never reads a "
        "perf-db record of it")
    assert unknown.line == 5 and unknown.error.startswith(
        "direct.tiled does not offer perf config 'zzz' for this problem on this device "
        f"(it offers {offered[0]}")
    # the record of another machine's device is checked where it is used; the good one
    # of this device goes in
    result = import_db(own_store, path, versions, skip_bad=True, solver_check=check)
    assert result["records"]["perf-db"] == 2
    assert own_store.get_perf_records(dev)[(key, "direct.tiled")][1] == offered[0]


def test_a_utf8_bom_is_read_and_other_encodings_say_save_it_as_utf8(filled, tmp_path,
                                                                    monkeypatch):
    path = tmp_path / "all.jsonl"
    summary = export_db(filled, path)
    text = path.read_text()
    bom = tmp_path / "bom.jsonl"
    bom.write_bytes(b"\xef\xbb\xbf" + text.replace("\n", "\r\n").encode())
    assert import_db(Store(tmp_path / "b"), bom, VERSIONS)["records"] == summary["records"]
    monkeypatch.setattr("sys.stdin", io.StringIO("\ufeff" + text))
    assert import_db(Store(tmp_path / "c"), "-", VERSIONS)["records"] == summary["records"]
    utf16, latin1 = tmp_path / "utf16.jsonl", tmp_path / "latin1.jsonl"
    utf16.write_bytes(text.encode("utf-16"))
    latin1.write_bytes(text.replace("Xeon", "X\u00e9on").encode("latin-1"))
    with pytest.raises(DbFileError, match="looks like UTF-16 text; save it as UTF-8"):
        read_db(utf16)
    with pytest.raises(DbFileError, match=r"another encoding \(Latin-1.*save it as UTF-8"):
        read_db(latin1)
