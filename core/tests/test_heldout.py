"""tools/heldout.py: held-out figures per corpus network from recorded measurements."""

import csv
import importlib.util
import sys
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parents[2] / "tools"
pytestmark = pytest.mark.skipif(not (TOOLS / "heldout.py").is_file(),
                                reason="needs the wticonv repository's tools/")


def _tool():
    sys.path.insert(0, str(TOOLS))
    spec = importlib.util.spec_from_file_location("heldout", TOOLS / "heldout.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# how much slower than its model the raw models' choice runs in these made-up measurements:
# the second best is predicted up to 2.3x slower on vit's patch layer, so 6x keeps the raw
# choice a loss of more than 1.5x against it
SLOW = 6.0

COLUMNS = ["problem", "direction", "solver", "predicted_ms", "measured_ms", "device", "kind",
           "compute_units", "peak_flops", "bandwidth", "launch_overhead_s"]


def _write(path, problems, tool, registry, device, slow: str, factor: float):
    """Measurements where every candidate runs as predicted, but ``slow`` ``factor`` times
    slower."""
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        for p in problems:
            for sid, pred in tool.raw_predictions(registry, device, p).items():
                t = pred * (factor if sid == slow else 1.0)
                w.writerow([p.key, p.direction, sid, pred, t, "test", "cpu", 2, 4.0e10,
                            1.2e10, 3e-5])


def test_a_solver_slower_than_its_model_is_caught_by_the_fit_and_not_by_raw_models(
        tmp_path, capsys):
    tool = _tool()
    from wticonv.contract.registry import SolverRegistry
    from wticonv.workloads.generator import random_problems
    from wticonv.workloads.networks import load_network

    registry = SolverRegistry()
    device = tool.device_for([{"kind": "cpu", "compute_units": "2", "peak_flops": "4e10",
                               "bandwidth": "1.2e10", "launch_overhead_s": "3e-5"}])
    layers = [layer.problem.with_direction(d) for name in ("vit_b_16", "swin_t")
              for layer in load_network(name, 1).layers for d in ("fwd", "bwd", "wrw")]
    raw = tool.select(registry, layers[0], device, measured=False, calibrated=False)
    slow = raw.solver_id                                # the raw models' choice, 6x slow
    probes = [p.with_direction(d) for p in random_problems(12, 1, seed=2)
              for d in ("fwd", "bwd", "wrw")]
    _write(tmp_path / "probes.csv", probes, tool, registry, device, slow, SLOW)
    _write(tmp_path / "nets.csv", layers, tool, registry, device, slow, SLOW)
    args = ["--probes", str(tmp_path / "probes.csv"), str(tmp_path / "nets.csv")]
    out = {}
    for fit in ("none", "factors", "correction"):
        assert tool.main(args + ["--fit", fit]) == 0
        text = capsys.readouterr().out
        out[fit] = {line.split()[0]: line.split() for line in text.splitlines()[1:-1]}
        assert set(out[fit]) == {"vit_b_16", "swin_t"}
        assert text.splitlines()[-1].startswith("overall: 2 networks, 6 cases")
    worst_none = float(out["none"]["vit_b_16"][6])
    assert worst_none > 1.5                             # 6x slow, against the second best
    for fit in ("factors", "correction"):
        vit = out[fit]["vit_b_16"]
        assert vit[3] == "100.0%" and float(vit[7]) == pytest.approx(1.0)
    assert tool.main(args + ["--from-networks", "--hold-out", "family"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("overall: 2 networks")
    # --classes: the time lost, by class, adds up to the networks' excess over 1
    assert tool.main(args + ["--fit", "none", "--classes", "50"]) == 0
    text = capsys.readouterr().out.splitlines()
    head = text.index(next(line for line in text if line.startswith("time lost")))
    classes = [line.split() for line in text[head + 1:]]
    excess = sum(float(out["none"][name][7]) - 1.0 for name in ("vit_b_16", "swin_t"))
    assert sum(float(c[0]) for c in classes) == pytest.approx(excess, abs=2e-3)
    assert classes[0][2] == slow and float(classes[0][0]) > 0.1


def test_networks_not_fully_measured_are_left_out_and_none_is_an_error(tmp_path, capsys):
    tool = _tool()
    from wticonv.contract.registry import SolverRegistry
    from wticonv.workloads.networks import load_network

    registry = SolverRegistry()
    device = tool.device_for([{"kind": "cpu", "compute_units": "2", "peak_flops": "4e10",
                               "bandwidth": "1.2e10", "launch_overhead_s": "3e-5"}])
    fwd_only = [layer.problem for layer in load_network("vit_b_16", 1).layers]
    _write(tmp_path / "m.csv", fwd_only, tool, registry, device, "", 1.0)
    assert tool.main(["--probes", str(tmp_path / "m.csv"), str(tmp_path / "m.csv")]) == 2
    assert "no corpus network is fully measured" in capsys.readouterr().err


def test_probes_that_are_a_scored_networks_layers_are_left_out_of_its_fit(tmp_path, capsys):
    # calibrate probes the development corpus's layers: scoring a network with a fit to
    # its own layers (at another batch size) would not be held out
    tool = _tool()
    from wticonv.contract.registry import SolverRegistry
    from wticonv.workloads.networks import load_network

    registry = SolverRegistry()
    device = tool.device_for([{"kind": "cpu", "compute_units": "2", "peak_flops": "4e10",
                               "bandwidth": "1.2e10", "launch_overhead_s": "3e-5"}])
    layers = [layer.problem.with_direction(d) for layer in load_network("vit_b_16", 1).layers
              for d in ("fwd", "bwd", "wrw")]
    slow = tool.select(registry, layers[0], device, measured=False,
                       calibrated=False).solver_id
    _write(tmp_path / "nets.csv", layers, tool, registry, device, slow, SLOW)
    _write(tmp_path / "own.csv", [p.with_batch(2) for p in layers], tool, registry, device,
           slow, SLOW)
    _write(tmp_path / "other.csv", [p.with_batch(2).with_direction("fwd") for p in
                                    (q.__class__(2, 3, 224, 224, 768, 16, 16, stride_h=8,
                                                 stride_w=8) for q in layers[:1])],
           tool, registry, device, slow, SLOW)
    rows = {}
    for name, fit in (("own", "correction"), ("own", "none"), ("other", "correction")):
        assert tool.main(["--probes", str(tmp_path / f"{name}.csv"),
                          str(tmp_path / "nets.csv"), "--fit", fit]) == 0
        rows[name, fit] = capsys.readouterr().out.splitlines()[1]
    assert rows["own", "none"].startswith("vit_b_16")
    assert float(rows["own", "none"].split()[6]) > 1.5      # slow is chosen, 6x slow
    # vit's own layers were not fitted: as if there were no probes
    assert rows["own", "correction"] == rows["own", "none"]
    # a probe of another layer (stride 8, not vit's 16) is fitted, and catches slow
    assert float(rows["other", "correction"].split()[6]) < 1.5
