"""Output files of `wticonv evaluate` and `wticonv calibrate` (``--csv``, ``--plot``) are
checked before any measuring, written after the results are shown, and a failure to
write them is one line; calibrations take a lock; new device figures drop a calibration
fitted to the old ones."""

from __future__ import annotations

import csv
import warnings

import pytest

from wticonv import ConvProblem
from wticonv.cli import main

NET = "conv -n 1 -c 4 -H 6 -W 6 -k 4 -y 3 -x 3 -p 1 -q 1\n"


@pytest.fixture
def cli_env(own_store, monkeypatch, tmp_path):
    from wticonv.measuring import calibrate as cal
    monkeypatch.setenv("WTICONV_CACHE_DIR", str(own_store.cache_dir))
    monkeypatch.setattr(cal, "_probes", lambda kind, n: [
        ConvProblem(1, 4, 6, 6, 4, 3, 3, pad_h=1, pad_w=1, direction=d)
        for d in ("fwd", "bwd", "wrw")])
    net = tmp_path / "net.txt"
    net.write_text(NET)
    measured = []
    import wticonv.measuring.find as find

    real = find.timed_together
    monkeypatch.setattr(find, "timed_together",
                        lambda *a, **k: measured.append(1) or real(*a, **k))
    return net, measured


def _fails_before_measuring(capsys, argv, measured, fragment):
    rc = main(argv)
    out, err = capsys.readouterr()
    assert rc == 2, (out, err)
    assert err.strip().splitlines()[-1].startswith("wticonv: error: ") and fragment in err
    assert "Traceback" not in err and measured == []


@pytest.mark.parametrize("command", ["evaluate", "calibrate"])
def test_a_folder_or_an_unwritable_csv_fails_before_measuring(cli_env, capsys, tmp_path,
                                                               command):
    net, measured = cli_env
    head = ["evaluate", str(net), "-i", "1"] if command == "evaluate" else ["calibrate"]
    _fails_before_measuring(capsys, head + ["--csv", str(tmp_path)], measured, "is a folder")
    _fails_before_measuring(capsys, head + ["--csv", "/proc/wticonv.csv"], measured,
                            "cannot be written")
    _fails_before_measuring(capsys, head + ["--csv", ""], measured, "an empty file name")
    assert not (tmp_path / "wticonv.csv").exists()


def test_plot_without_matplotlib_fails_before_measuring(cli_env, capsys, monkeypatch,
                                                         tmp_path):
    import importlib.util

    net, measured = cli_env
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "matplotlib" else real(name, *a))
    _fails_before_measuring(capsys, ["evaluate", str(net), "--plot", str(tmp_path / "p.png")],
                            measured, "pip install 'wticonv[plot]'")
    assert not (tmp_path / "p.png").exists()


def test_a_csv_that_cannot_be_written_at_the_end_keeps_the_summary(cli_env, capsys,
                                                                   monkeypatch, tmp_path):
    from wticonv.measuring import evaluate as ev
    net, measured = cli_env

    def full_disk(cases, path, device=None):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ev, "write_csv", full_disk)
    rc = main(["evaluate", str(net), "-i", "1", "--csv", str(tmp_path / "e.csv")])
    out, err = capsys.readouterr()
    assert rc == 1 and measured
    assert "fallback" in out and "within 10%" in out          # the summary was shown
    assert err.strip().splitlines()[-1] == (
        f"wticonv: error: --csv {str(tmp_path / 'e.csv')!r} could not be written: "
        "No space left on device")
    assert "Traceback" not in err


def test_csvs_record_the_device(cli_env, capsys, tmp_path):
    net, _ = cli_env
    net.write_text(NET * 2)                  # one layer that occurs twice
    assert main(["calibrate", "--csv", str(tmp_path / "c.csv")]) == 0
    assert main(["evaluate", str(net), "-i", "1", "--csv", str(tmp_path / "e.csv")]) == 0
    out = capsys.readouterr().out
    assert out.index("calibrated ") < out.index("rule")
    head = next(line for line in out.splitlines() if line.startswith("rule"))
    assert head.split()[-1] == "time-wtd"
    fallback = next(line for line in out.splitlines() if line.startswith("fallback "))
    assert float(fallback.split()[-1]) >= 1.0 and out.count(" x2 ") == 3   # 3 directions
    import wticonv

    dev = wticonv.Handle().device
    cal = list(csv.DictReader((tmp_path / "c.csv").open()))
    ev = list(csv.DictReader((tmp_path / "e.csv").open()))
    assert {(r["device"], r["kind"], int(r["compute_units"])) for r in cal} == {
        (dev.info.name, dev.kind, dev.info.compute_units)}
    assert float(cal[0]["peak_flops"]) == pytest.approx(dev.peak_flops, rel=1e-5)
    assert float(cal[0]["bandwidth"]) == pytest.approx(dev.bandwidth, rel=1e-5)
    assert {(r["device"], r["kind"]) for r in ev} == {(dev.info.name, dev.kind)}
    assert list(ev[0])[-3:] == ["count", "device", "kind"] and {r["count"] for r in ev} == {"2"}


def test_calibrations_take_turns(own_handle, monkeypatch):
    from wticonv.measuring import calibrate as cal
    held = []
    store = own_handle.device.store
    real = store.exclusive

    def exclusive(name, waiting=None):
        held.append(name)
        return real(name, waiting)

    monkeypatch.setattr(store, "exclusive", exclusive)
    monkeypatch.setattr(cal, "_probes", lambda kind, n: [ConvProblem(1, 4, 6, 6, 4, 3, 3)])
    cal.calibrate(own_handle, iterations=1)
    assert "calibrate" in held


def test_new_device_figures_drop_the_calibration_fitted_to_the_old(own_handle, monkeypatch):
    import wticonv.runtime.peak as peak

    dev, store = own_handle.device, own_handle.device.store
    held = []
    real = store.exclusive
    monkeypatch.setattr(store, "exclusive", lambda name, *a: held.append(name) or real(name, *a))
    old = (dev.peak_flops, dev.bandwidth)
    store.put_calibration(dev.key, [("direct.naive", "1", 2.0, 3)])
    monkeypatch.setattr(peak, "measure_device_figures", lambda d: old)   # unchanged
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        dev.measure_figures()
    assert store.get_calibration(dev.key)
    monkeypatch.setattr(peak, "measure_device_figures", lambda d: (1.05 * old[0], old[1]))
    with warnings.catch_warnings():                  # a creep within the tolerance
        warnings.simplefilter("error")
        dev.measure_figures()
    assert store.get_calibration(dev.key)
    monkeypatch.setattr(peak, "measure_device_figures", lambda d: (2 * old[0], old[1]))
    with pytest.warns(UserWarning, match="calibration was fitted to the old ones"):
        assert dev.measure_figures() == (2 * old[0], old[1])
    assert "measure" in held and held.index("calibrate") < held.index("measure")
    assert store.get_calibration(dev.key) == {}


def test_a_second_calibration_says_that_it_waits(own_store):
    import fcntl
    import threading

    own_store.cache_dir.mkdir(parents=True, exist_ok=True)
    held = open(own_store.cache_dir / "calibrate.lock", "a")    # another "process"
    fcntl.flock(held, fcntl.LOCK_EX)
    said = []

    def waiting():
        said.append("waiting")
        threading.Timer(0.05, fcntl.flock, (held, fcntl.LOCK_UN)).start()

    with own_store.exclusive("calibrate", waiting):
        said.append("in")
    with own_store.exclusive("calibrate", waiting):      # free now: no waiting
        said.append("in again")
    held.close()
    assert said == ["waiting", "in", "in again"]


def test_outputs_that_would_overwrite_the_network_or_each_other_are_refused(cli_env, capsys,
                                                                            tmp_path):
    net, measured = cli_env
    _fails_before_measuring(capsys, ["evaluate", str(net), "--csv", str(net)], measured,
                            "is also the NETWORK")
    same = str(tmp_path / "out.png")
    _fails_before_measuring(capsys, ["evaluate", str(net), "--csv", same, "--plot", same],
                            measured, "is also the --csv")
    _fails_before_measuring(capsys, ["evaluate", str(net), "--time-cap-ms", "nan"], measured,
                            "nan is not a finite number of milliseconds")
    assert net.read_text() == NET


def test_written_files_are_named(cli_env, capsys, tmp_path):
    net, _ = cli_env
    out = tmp_path / "e.csv"
    assert main(["evaluate", str(net), "-i", "1", "--csv", str(out)]) == 0
    assert f"wrote {out}" in capsys.readouterr().err
    import json

    assert main(["evaluate", str(net), "-i", "1", "--directions", "fwd", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [c["count"] for c in data["cases"]] == [1]
    assert {rule: set(sm) >= {"mean_slowdown", "time_weighted"}
            for rule, sm in data["summary"].items()} == dict.fromkeys(data["summary"], True)
    assert data["summary"]["fallback"]["time_weighted"] == pytest.approx(
        data["cases"][0]["slowdown"]["fallback"])               # one case: its slowdown


def test_calibrate_says_which_solvers_got_which_model(cli_env, capsys):
    import json

    from wticonv.measuring.correction_fit import model_kind

    assert model_kind({"base": 0.0}) == "trees"
    assert model_kind([0.3, 0.0, 0.1]) == "ridge" and model_kind([0.3, 0.0]) == "constant"
    assert main(["calibrate", "--json"]) == 0          # 3 probes: under 12 runs each
    out = json.loads(capsys.readouterr().out)
    assert out["models"]["trees"] == out["models"]["ridge"] == 0
    assert out["models"]["constant"] >= 3 and out["learned_solvers"] == 0
    assert main(["calibrate"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("calibrated"))
    assert f"learned correction: a constant factor for {out['models']['constant']} solvers " \
           "(under 12 runs)" in line and "boosted trees for" not in line
