"""Databases that travel: the wticonv-db format, export -> import round trips, and what
an import replaces (wticonv.db.transfer, its Python API). Bad records refused:
test_db_transfer_bad.py; the `wticonv db` command: test_db_transfer_cli.py.

Stores are temporary; no device is opened and nothing is compiled.
"""

from __future__ import annotations

import difflib
import io
import json
import re

import pytest
import wticonv
from db_transfer_helpers import (  # core/tests: conftest.py puts it on sys.path
    CPU,
    GPU,
    K1,
    K2,
    TREES,
    VD,
    VERSIONS,
    V,
    contents,
    fill,
)
from wticonv.contract.registry import SolverRegistry
from wticonv.db.store import Store
from wticonv.db.transfer import FORMAT, FORMAT_VERSION, export_db, import_db, read_db
from wticonv.errors import DbFileError


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
    filled.put_perf_record(GPU, K2, "direct.tiled", VD, "4x4/v1", 0.01, 0.02)
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
    checked = import_db(Store(tmp_path / "b"), path, VERSIONS, check=True)  # a system db
    assert checked["patterns"] == [pattern] and checked["bad"] == []
    assert checked["records"]["calibration"] == 3 and not checked["written"]
    served = import_db(Store(tmp_path / "b"), path, VERSIONS, devices=[CPU], check=True)
    assert served["records"]["calibration"] == 3 and served["skipped"] == 0  # CPU matches
    other = import_db(Store(tmp_path / "b"), path, VERSIONS, devices=[GPU], check=True)
    assert other["records"]["calibration"] == 0
    assert other["skipped"] == sum(checked["records"].values())
    with pytest.raises(ValueError, match="does not match .*measured on"):
        export_db(filled, tmp_path / "nv.jsonl", devices=[CPU], kinds=["calibration"],
                  match="NVIDIA*|*|*")
    with pytest.raises(ValueError, match="export one device"):
        export_db(filled, path, match=pattern)             # two devices


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
    target.put_find_records(GPU, K1, [("direct.tiled", VD, 0, 0.5, 3, 0)])   # replaced
    target.put_find_records(GPU, "1-8-8-1x1-1-8-8-1-0x0-1x1-1x1-0-NCHW-FP32-F",
                            [("direct.naive", VD, 0, 0.5, 3, 0)])            # kept
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
    # the records' solvers are installed, at the records' versions
    assert all(versions[s] == v for s, v in VERSIONS.items())
    result = wticonv.import_db(path, devices=[CPU], store=fresh)
    assert result["devices"] == [CPU] and result["skipped"] == 9
    assert contents(fresh)[CPU] == contents(filled)[CPU]
    assert fresh.record_device_keys() == [CPU]
    checked = wticonv.import_db(path, check=True, store=Store(tmp_path / "c"))
    assert not checked["written"] and Store(tmp_path / "c").record_device_keys() == []


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
    target.put_calibration(GPU, [("direct.naive", VD, 2.0, 9)])            # kept whole
    target.put_find_records(GPU, K1, [("direct.tiled", VD, 0, 0.5, 3, 0)])  # kept whole
    with pytest.raises(DbFileError) as e:
        import_db(target, path, VERSIONS)
    assert e.value.good == 9 - 2 - 4 - 1                   # 9 records, 2 bad, 5 left out
    result = import_db(target, path, VERSIONS, skip_bad=True)
    assert sorted(result["left_out"]) == sorted([
        (f"the calibration (factors and learned corrections) of {GPU}", 4, [bad_cal]),
        (f"the find-db records of {K1} on {GPU}", 1, [bad_find])])
    assert result["records"] == {"find-db": 1, "perf-db": 1, "calibration": 0,
                                 "correction": 0}
    assert target.get_calibration(GPU) == {"direct.naive": (VD, 2.0)}
    assert target.get_correction(GPU) == {}
    assert set(target.get_find_records(GPU, K1)) == {"direct.tiled"}
    assert set(target.get_find_records(GPU, K2)) == {"direct.tiled"}


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
