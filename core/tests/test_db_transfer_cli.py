"""Databases that travel on the command line: `wticonv db export` and `wticonv db import`,
their reports of bad records, notes and warnings. The format and round trips:
test_db_transfer.py; bad records through the Python API: test_db_transfer_bad.py.

Stores are temporary; no device is opened and nothing is compiled.
"""

from __future__ import annotations

import io
import json

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
    contents,
    fill,
)
from wticonv.cli import main
from wticonv.db.store import Store
from wticonv.db.transfer import FORMAT, export_db, import_db
from wticonv.errors import DbFileError


def run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture
def filled(tmp_path):
    store = Store(tmp_path / "a")
    fill(store)
    return store


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
    assert rc == 2 and "could not be written" in err    # as every file error
    rc, _, err = run(capsys, "db", "import", str(tmp_path / "missing.jsonl"))
    assert rc == 2 and err.startswith("wticonv: error: cannot read") and "missing" in err


# ------------------------------------------- after a fresh user's trial (fleet-trial)
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
                               "missing, not this wticonv's (2)")
    assert lines[0].endswith("(4 record(s) refused: line(s) 3-6)")
    assert lines[1] == (f"wticonv: error: 4 bad record(s) in {path}: nothing imported; fix "
                        "or remove them, or pass --skip-bad to import the 1 good one(s)")
    # many records of one device pattern: one line for all of them
    pattern = "NVIDIA CUDA|NVIDIA *|550.54.15"
    path = _file(tmp_path, *[_rec(device=pattern, solver=s) for s in VERSIONS])
    rc, out, err = run(capsys, "db", "import", path)
    lines = err.splitlines()
    assert rc == 2 and len(lines) == 3, err                  # the last: a system db's note
    assert lines[0] == (f"wticonv: error: {path}:2-5 (4 records): device '{pattern}' is a "
                        "pattern, which only a system database may hold (docs/fleet.md): give "
                        "the exact device key")
    assert lines[1].endswith("fix or remove them: --skip-bad would import nothing, since "
                             "every record is bad or goes in whole with a bad one (a "
                             "device's calibration, a problem's find-db records on a device)")


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


def test_cli_check_takes_a_system_database_that_import_refuses(cache, tmp_path, capsys):
    path = tmp_path / "sys.jsonl"
    pattern = "Portable Computing Language|pthread-*|3.1+debian"
    rc, _, _ = run(capsys, "db", "export", str(path), "--device", CPU, "--kind",
                   "calibration", "--kind", "correction", "--match", pattern)
    assert rc == 0
    rc, out, err = run(capsys, "db", "import", str(path), "--check")
    assert rc == 0 and out.startswith("checked ") and "nothing written (--check)" in out
    assert " of 1 device pattern(s) from " in out
    assert f"names devices by pattern ({pattern!r}): a system database" in " ".join(
        err.split())
    assert "is not a device of this machine" not in err
    rc, out, _ = run(capsys, "db", "import", str(path), "--check", "--json")
    assert rc == 0 and json.loads(out)["patterns"] == [pattern]
    rc, _, err = run(capsys, "db", "import", str(path))
    assert rc == 2 and "is a pattern, which only a system database may hold" in err
    assert "a file that names devices by pattern is a system database" in " ".join(
        err.split())


def test_cli_check_of_a_system_database_with_bad_records_names_its_patterns(cache, tmp_path,
                                                                            capsys):
    path = tmp_path / "sys.jsonl"
    pattern = "Portable Computing Language|pthread-*|3.1+debian"
    assert run(capsys, "db", "export", str(path), "--device", CPU, "--kind", "calibration",
               "--match", pattern)[0] == 0
    lines = path.read_text().splitlines()
    rec = json.loads(lines[1])
    rec["values"]["factor"] = -1
    path.write_text("\n".join([lines[0], json.dumps(rec), *lines[2:]]) + "\n")
    rc, _, err = run(capsys, "db", "import", str(path), "--check")
    flat = " ".join(err.split())
    assert rc == 2 and ":2: values.factor = -1 must be a positive finite number" in flat
    assert f"a system database (devices by pattern: {pattern!r}): fix or remove them" in flat
    assert "--skip-bad" not in flat                  # a system database is never imported
    rc, out, _ = run(capsys, "db", "import", str(path), "--check", "--json")
    assert rc == 2 and json.loads(out)["patterns"] == [pattern]


def test_cli_check_warns_of_records_whose_device_the_header_leaves_out(cache, tmp_path,
                                                                       capsys):
    path = tmp_path / "db.jsonl"
    assert run(capsys, "db", "export", str(path), "--device", CPU, "--kind",
               "calibration")[0] == 0
    lines = path.read_text().splitlines()
    header = json.loads(lines[0])
    header["devices"] = ["NVIDIA CUDA|NVIDIA H200|580.1"]          # edited by hand
    path.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    rc, out, err = run(capsys, "db", "import", str(path), "--check")
    flat = " ".join(err.split())
    assert rc == 0 and out.startswith("checked ")
    assert f"records name 1 device(s) that the header's devices list leaves out ({CPU!r})" \
        in flat


@pytest.mark.parametrize("edit, words", [
    ({"devices": "one|device|1"}, 'has devices "one|device|1", not a list'),
    ({"devices": None}, "has devices null, not a list"),
    ({"devices": [CPU, CPU]}, f"names {CPU!r} twice"),
    ({"devices": [CPU, "NVIDIA CUDA|NVIDIA H200|580.1"]},
     "names 1 device(s) that no good record is for ('NVIDIA CUDA|NVIDIA H200|580.1')"),
    ({"measured_on": "abc"}, 'the header\'s measured_on is "abc", not a list of device keys'),
    ({"comment": 123}, "the header's comment is 123, not text"),
])
def test_cli_check_warns_where_the_header_disagrees(cache, tmp_path, capsys, edit, words):
    """A header edited by hand: the records still count; --check says what is wrong."""
    path = tmp_path / "db.jsonl"
    assert run(capsys, "db", "export", str(path), "--device", CPU, "--kind",
               "calibration")[0] == 0
    lines = path.read_text().splitlines()
    header = dict(json.loads(lines[0]), **edit)
    path.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    rc, out, err = run(capsys, "db", "import", str(path), "--check")
    flat = " ".join(err.split())
    assert rc == 0 and out.startswith("checked ") and words in flat, flat
    assert "remake the file with `wticonv db export` to mend the header" in flat


def test_cli_check_shows_header_warnings_beside_bad_records(cache, tmp_path, capsys):
    """A file with bad records and a header that leaves out a device: both are reported
    at once, not the header only once the records are mended."""
    path = tmp_path / "db.jsonl"
    assert run(capsys, "db", "export", str(path), "--device", CPU, "--kind",
               "calibration")[0] == 0
    lines = path.read_text().splitlines()
    header = dict(json.loads(lines[0]), devices=["NVIDIA CUDA|NVIDIA H200|580.1"])
    bad = dict(json.loads(lines[1]), values={"factor": 1e300, "probes": 3})
    path.write_text("\n".join([json.dumps(header), *lines[1:], json.dumps(bad)]) + "\n")
    rc, out, err = run(capsys, "db", "import", str(path), "--check")
    flat = " ".join(err.split())
    assert rc == 2
    assert "values.factor = 1e+300 is no plausible calibration factor" in flat
    assert "warning:" in flat and "that the header's devices list leaves out" in flat
    rc, out, _ = run(capsys, "db", "import", str(path), "--check", "--json")
    assert rc == 2 and any("leaves out" in w for w in json.loads(out)["warnings"])
