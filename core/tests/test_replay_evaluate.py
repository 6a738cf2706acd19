"""tools/replay_evaluate.py: replaying a real calibration and evaluation against the models
of this checkout gives the choices the evaluation made (the models have not changed)."""

import csv
import importlib.util
from pathlib import Path

import pytest

from wticonv import ConvProblem

TOOL = Path(__file__).resolve().parents[2] / "tools" / "replay_evaluate.py"


def _tool():
    spec = importlib.util.spec_from_file_location("replay_evaluate", TOOL)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_replay_reproduces_the_evaluations_choices(own_store, monkeypatch, tmp_path, capsys):
    from wticonv import calibrate as cal
    from wticonv.cli import main

    probes = [ConvProblem(1, 8, 10, 10, 8, 3, 3, pad_h=1, pad_w=1, direction=d)
              for d in ("fwd", "bwd", "wrw")]
    monkeypatch.setattr(cal, "_probes", lambda n: probes)
    monkeypatch.setenv("WTICONV_CACHE_DIR", str(own_store.cache_dir))
    net = tmp_path / "net.txt"
    net.write_text("conv -n 2 -c 16 -H 12 -W 12 -k 16 -y 1 -x 1\n"
                   "conv -n 2 -c 8 -H 9 -W 9 -k 12 -y 3 -x 3 -p 1 -q 1\n")
    assert main(["calibrate", "--csv", str(tmp_path / "cal.csv")]) == 0
    assert main(["evaluate", str(net), "-i", "1", "--csv", str(tmp_path / "ev.csv")]) == 0
    capsys.readouterr()
    rows = list(csv.DictReader((tmp_path / "ev.csv").open()))
    chosen = {r["problem"]: r["solver"] for r in rows if r["fallback_choice"] == "1"}
    assert len(chosen) == 6                          # 2 layers x 3 directions

    tool = _tool()
    import wticonv

    h = wticonv.Handle()
    dev = tool.RecordingDevice("cpu", compute_units=h.device.info.compute_units,
                               peak_flops=h.device.peak_flops,
                               bandwidth=h.device.bandwidth)
    dev.info = h.device.info                         # the same vector width and limits
    within, mean, misses = tool.replay(h.registry, dev, tool._read(tmp_path / "cal.csv"),
                                       rows, label="test")
    replayed = {key: tool.select(h.registry, tool.keys.parse_key(key), dev,
                                 measured=False).solver_id for key in chosen}
    assert replayed == chosen
    slowdowns = {}
    for key in chosen:
        times = {r["solver"]: float(r["measured_ms"]) for r in rows
                 if r["problem"] == key and r["measured_ms"]}
        slowdowns[key] = times[chosen[key]] / min(times.values())
    assert within == pytest.approx(sum(s <= 1.1 for s in slowdowns.values()) / 6)
    assert mean == pytest.approx(sum(slowdowns.values()) / 6)
