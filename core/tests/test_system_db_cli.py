"""System databases on the command line: `wticonv db system` (the databases, what each
serves on this machine's devices, the matching calibrations it passes over, bad records)
and `wticonv explain` naming a ranking's system source. Selection itself, entry points
and the shipped files: test_system_db.py, whose record helpers these tests share (the
`system` fixture is in conftest.py).
"""

from __future__ import annotations

import json

from test_system_db import cal, find      # core/tests: conftest.py puts it on sys.path
from wticonv.db.store import Store
from wticonv.db.system import ENV, reset_system_databases
from wticonv.db.transfer import format_db


def test_explain_names_the_system_source(handle, tmp_path, monkeypatch, capsys, system):
    """`wticonv explain` (table and --json) on the real device, with a system calibration
    for it and an empty cache (its figures copied: nothing is measured)."""
    from wticonv.cli import main
    from wticonv.runtime.device import list_devices

    cache = Store(tmp_path / "cache")
    cache.copy_device_records(handle.device.store, [i.key for i, _ in list_devices()])
    monkeypatch.setenv("WTICONV_CACHE_DIR", str(tmp_path / "cache"))
    version = handle.registry.solvers["direct.naive"].version
    path = system(cal("direct.naive", 1e4, device=handle.device.key, version=version))
    key = "8-9-9-3x3-4-9-9-2-1x1-1x1-1x1-0-NCHW-FP32-F"
    assert main(["explain", key, "--json", "--device", handle.device.info.index]) == 0
    chosen = json.loads(capsys.readouterr().out)["selections"][0]
    naive = next(v for v in chosen["solvers"] if v["solver_id"] == "direct.naive")
    assert chosen["chosen"] == "direct.naive" and naive["source"] == "system calibration"
    assert naive["system_db"] == str(path)
    assert main(["explain", key, "--device", handle.device.info.index]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "system calibration" in out and f"the system database {path}" in out


def test_db_system_lists_the_databases_and_what_they_serve_here(handle, capsys, system):
    from wticonv.cli import main

    version = handle.registry.solvers["direct.naive"].version
    path = system(cal("direct.naive", 2.0, device=handle.device.key, version=version),
                  find("direct.naive", 1.0, device="Other|device|1", version=version))
    assert main(["db", "system", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["source"] == f"{ENV}={str(path)!r}"
    db = data["databases"][0]
    assert db["name"] == str(path) and db["error"] == "" and db["bad"] == 0
    assert db["records"]["calibration"] == 1 and db["records"]["find-db"] == 1
    assert db["devices"] == sorted([handle.device.key, "Other|device|1"])
    here = next(d for d in data["devices"] if d["key"] == handle.device.key)
    assert here["calibration"] == str(path) and here["find_db_problems"] == 0
    assert main(["db", "system"]) == 0
    out = capsys.readouterr().out
    assert f"{path}: 2 record(s) (find-db 1, calibration 1)" in out
    assert f"calibration: {path}" in out


def test_db_system_and_explain_say_when_no_record_is_of_an_installed_version(
        handle, tmp_path, monkeypatch, capsys, system):
    """A system calibration all of whose records are of other solver versions (or of
    solvers not installed) serves nothing: `db system` says so, and explain's note."""
    from wticonv.cli import main
    from wticonv.runtime.device import list_devices

    cache = Store(tmp_path / "cache")
    cache.copy_device_records(handle.device.store, [i.key for i, _ in list_devices()])
    monkeypatch.setenv("WTICONV_CACHE_DIR", str(tmp_path / "cache"))
    dev = handle.device.key
    path = system(cal("direct.naive", 1e4, device=dev, version="0.0.1"),
                  cal("gemm.im2col", 2.0, device=dev, version="0.0.1"),
                  cal("acme.gone", 2.0, device=dev))
    assert main(["db", "system", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    (db,) = data["databases"]
    assert db["unusable"] == 3 and db["records"]["calibration"] == 3
    here = next(d for d in data["devices"] if d["key"] == dev)
    assert (here["calibration"], here["calibration_records"],
            here["calibration_usable"]) == (str(path), 3, 0)
    assert main(["db", "system"]) == 0
    out = capsys.readouterr().out
    assert (f"{path}: 3 record(s) (calibration 3); none of them usable here (all of other "
            "solver versions, or of solvers not installed)") in out
    assert (f"calibration: {path}: none of its 3 record(s) usable here (other solver "
            "versions, or solvers not installed): not used") in out
    key = "8-9-9-3x3-4-9-9-2-1x1-1x1-1x1-0-NCHW-FP32-F"
    assert main(["explain", key, "--json", "--device", handle.device.info.index]) == 0
    chosen = json.loads(capsys.readouterr().out)["selections"][0]
    assert all(v["source"] != "system calibration" for v in chosen["solvers"])
    assert chosen["calibration_note"] == (
        f"the system calibration (the system database {path}) holds no record of an "
        "installed solver version (its 3 record(s) are of other versions, or of solvers not "
        "installed): it corrects no WTI here; `wticonv calibrate` makes one for these "
        "versions")
    assert main(["explain", key, "--device", handle.device.info.index]) == 0
    assert "note: the system calibration (the system database" in " ".join(
        capsys.readouterr().out.split())


def test_db_system_names_the_matching_calibrations_it_passes_over(handle, capsys, system):
    """Two system calibrations match the device: the exact key is used, the pattern is
    listed as passed over (less specific); with the exact key's records stale, the
    pattern is used and the exact key is passed over (no record usable)."""
    from wticonv.cli import main

    dev = handle.device.key
    version = handle.registry.solvers["direct.naive"].version
    pattern = dev.split("|")[0] + "|*|" + dev.split("|")[2]
    exact = system(cal("direct.naive", 2.0, device=dev, version=version), name="exact.jsonl")
    wide = system(cal("direct.naive", 3.0, device=pattern, version=version), name="wide.jsonl")
    assert main(["db", "system", "--json"]) == 0
    here = next(d for d in json.loads(capsys.readouterr().out)["devices"] if d["key"] == dev)
    assert here["calibration"] == str(exact) and here["calibration_device"] == dev
    assert here["passed_over"] == [{"name": str(wide), "device": pattern,
                                    "why": "less specific"}]
    assert main(["db", "system"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert f"also matches: {wide} for {pattern!r}, passed over (less specific)" in out

    twin = system(cal("direct.naive", 4.0, device=pattern, version=version), name="twin.jsonl")
    assert main(["db", "system", "--json"]) == 0             # the same pattern, read later
    here = next(d for d in json.loads(capsys.readouterr().out)["devices"] if d["key"] == dev)
    assert [o["name"] for o in here["passed_over"]] == [str(wide), str(twin)]
    assert here["passed_over"][1]["why"].startswith("the same device key or pattern as a "
                                                    "database read before it")

    reset_system_databases()
    exact.write_text("\n".join(format_db([cal("direct.naive", 2.0, device=dev,
                                                version="0.0.1")])) + "\n")
    assert main(["db", "system", "--json"]) == 0
    here = next(d for d in json.loads(capsys.readouterr().out)["devices"] if d["key"] == dev)
    assert here["calibration"] == str(wide) and here["calibration_device"] == pattern
    assert here["passed_over"][0] == {"name": str(exact), "device": dev,
                                      "why": "no record usable here"}


def test_db_system_lists_alike_bad_records_once(handle, capsys, system):
    """Thirty records refused for one reason are one line, as `db import` reports them."""
    from wticonv.cli import main

    good = json.loads(format_db([cal("direct.naive", 2.0, device=handle.device.key)])[1])
    broken = [json.dumps(dict(good, solver=f"x.s{i}", values={"factor": -1.0, "probes": 5}))
              for i in range(30)]
    path = system(lines=[format_db([])[0], *broken], name="many-bad.jsonl")
    assert main(["db", "system", "--json"]) == 0
    (db,) = json.loads(capsys.readouterr().out)["databases"]
    assert db["bad"] == 30 and len(db["bad_records"]) == 1
    assert db["bad_records"][0].startswith("line 2-31 (30 records): values.factor = -1.0")
    assert main(["db", "system"]) == 0
    out = capsys.readouterr().out
    assert f"{path}: 0 record(s)" in out and out.count("bad: ") == 1


def test_db_system_warns_where_the_header_disagrees_with_the_records(handle, capsys, system):
    """A header edited by hand: a devices entry that is no device key or pattern, and a
    record's device the list leaves out. The records still serve; `db system` says so."""
    from wticonv.cli import main

    rec = cal("direct.naive", 2.0, device=handle.device.key)
    header, line = format_db([rec])
    bad_header = json.dumps(dict(json.loads(header), devices=["Portable|pthread-*"]))
    path = system(lines=[bad_header, line], name="edited.jsonl")
    assert main(["db", "system", "--json"]) == 0
    (db,) = json.loads(capsys.readouterr().out)["databases"]
    assert db["records"]["calibration"] == 1 and db["bad"] == 0
    first, second = db["warnings"]
    assert "1 entry that is no device key or pattern (\"Portable|pthread-*\"" in first
    assert f"records name 1 device(s) that the header's devices list leaves out " \
           f"({handle.device.key!r})" in second
    assert main(["db", "system"]) == 0
    out = capsys.readouterr().out
    assert out.count("warning: ") == 2 and f"warning: {path}: the header's" in out
