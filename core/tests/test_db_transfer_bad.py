"""Databases that travel: bad records, headers and files refused with one clear message
each, and nothing imported unless asked to skip them (wticonv.db.transfer). The format
and round trips: test_db_transfer.py; the `wticonv db` command: test_db_transfer_cli.py.

Stores are temporary; no device is opened and nothing is compiled.
"""

from __future__ import annotations

import json
import re

import pytest
from db_transfer_helpers import (  # core/tests: conftest.py puts it on sys.path
    BAD,
    CPU,
    GOOD,
    GPU,
    K2,
    K3,
    VERSIONS,
    _file,
    _rec,
)
from wticonv.db.store import Store
from wticonv.db.transfer import FORMAT, import_db, read_db
from wticonv.errors import DbFileError


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
