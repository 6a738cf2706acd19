"""tools/replay_evaluate.py: replaying a real calibration and evaluation against the models
of this checkout gives the choices the evaluation made (the models have not changed)."""

import csv
import importlib.util
from pathlib import Path

import pytest

from wticonv import ConvProblem

TOOL = Path(__file__).resolve().parents[2] / "tools" / "replay_evaluate.py"
pytestmark = pytest.mark.skipif(not TOOL.is_file(),
                                reason="needs the wticonv repository's tools/")


def _tool():
    spec = importlib.util.spec_from_file_location("replay_evaluate", TOOL)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_replay_reproduces_the_evaluations_choices(own_store, monkeypatch, tmp_path, capsys):
    from wticonv.measuring import calibrate as cal
    from wticonv.cli import main

    probes = [ConvProblem(1, 8, 10, 10, 8, 3, 3, pad_h=1, pad_w=1, direction=d)
              for d in ("fwd", "bwd", "wrw")]
    monkeypatch.setattr(cal, "_probes", lambda kind, n: probes)
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
                               bandwidth=h.device.bandwidth,
                               launch_overhead_s=h.device.launch_overhead_s)
    dev.info = h.device.info                         # the same vector width and limits
    # the file records the vector width that the CPU kernels' plans follow; the device the
    # tool builds from the file has it (files without the column: the stand-in's default)
    cal_rows = tool._read(tmp_path / "cal.csv")
    assert {r["vector_width"] for r in cal_rows} == {str(h.device.info.vector_width)}
    assert tool.device_for(cal_rows).info.vector_width == h.device.info.vector_width
    old = [{k: v for k, v in r.items() if k != "vector_width"} for r in cal_rows]
    assert tool.device_for(old).info.vector_width == tool.RecordingDevice("cpu").info.vector_width
    out = tool.replay(h.registry, dev, tool._read(tmp_path / "cal.csv"), rows, label="test")
    within, mean = out.within, out.mean
    replayed = {key: tool.select(h.registry, tool.parse_key(key), dev,
                                 measured=False).solver_id for key in chosen}
    assert replayed == chosen
    slowdowns = {}
    for key in chosen:
        times = {r["solver"]: float(r["measured_ms"]) for r in rows
                 if r["problem"] == key and r["measured_ms"]}
        slowdowns[key] = times[chosen[key]] / min(times.values())
    assert within == pytest.approx(sum(s <= 1.1 for s in slowdowns.values()) / 6)
    assert mean == pytest.approx(sum(slowdowns.values()) / 6)
    assert out.cases == 6 and out.worst == pytest.approx(max(slowdowns.values()))
    # every case counted once here: the time-weighted slowdown is the chosen solvers' total
    # time over the fastest ones'
    total = {key: min(float(r["measured_ms"]) for r in rows
                      if r["problem"] == key and r["measured_ms"]) for key in chosen}
    assert out.weighted == pytest.approx(sum(slowdowns[k] * total[k] for k in chosen)
                                         / sum(total.values()))
    line = tool.overall([out, out])
    assert "12 cases" in line and f"geomean time-weighted {out.weighted:.4f}" in line


CAL_HEAD = "problem,direction,solver,predicted_ms,measured_ms,device,kind,compute_units," \
           "peak_flops,bandwidth\n"
EV_HEAD = "problem,direction,solver,predicted_ms,measured_ms,fallback_choice,fastest," \
          "device,kind\n"
KEY = "8-10-10-3x3-8-10-10-1-1x1-1x1-1x1-0-NCHW-FP32-F"


@pytest.mark.parametrize("cal, ev, args, fragment", [
    (None, None, [], "missing.csv: cannot be read as a CSV file"),
    (EV_HEAD + f"{KEY},fwd,direct.naive,1,1,1,1,d,cpu\n", None, [],
     "is an `evaluate --csv` file; --calibration takes the file of `wticonv calibrate --csv`"),
    (CAL_HEAD, None, [], "no rows; expected the file of `wticonv calibrate --csv`"),
    (CAL_HEAD + f"{KEY},fwd,direct.naive,1,1,d,cpu,2,4e11,4e10\n",
     CAL_HEAD + f"{KEY},fwd,direct.naive,1,1,d,cpu,2,4e11,4e10\n", [],
     "no column fallback_choice, fastest"),
    (CAL_HEAD + f"{KEY},fwd,direct.naive,1,fast,d,cpu,2,4e11,4e10\n", None, [],
     "line 2: could not convert string to float: 'fast'"),
    (CAL_HEAD + "1-2-3,fwd,direct.naive,1,1,d,cpu,2,4e11,4e10\n", None, [], "line 2:"),
    (CAL_HEAD + f"{KEY},fwd,direct.naive,1,1,d,cpu,2,4e11,4e10\n",
     EV_HEAD + f"{KEY},fwd,direct.naive,1,1,1,1,d,cpu\n", ["--peak", "449"],
     "peak flops 449 is too small: give FLOP/s (e.g. 4.49e11), not GFLOP/s"),
    (CAL_HEAD + f"{KEY},fwd,direct.naive,1,,d,cpu,2,4e11,4e10\n", None, [],
     "line 2: no measured_ms (every probe run of a calibration is measured)"),
    (CAL_HEAD + f"{KEY},fwd,direct.naive,1,1,d,cpu,two,4e11,4e10\n", None, [],
     "the calibration's compute_units 'two' is not a whole number"),
    (CAL_HEAD + f"{KEY},fwd,direct.naive,1,1,d,cpu,2,nan,4e10\n", None, [],
     "peak flops nan is not a finite number of FLOP/s"),
    (CAL_HEAD.replace("\n", ",vector_width\n") + f"{KEY},fwd,direct.naive,1,1,d,cpu,2,4e11,"
     "4e10,8.0\n", None, [], "the calibration's vector_width '8.0' is not a whole number"),
    (CAL_HEAD + f"{KEY},fwd,direct.naive,1,1,d,cpu,2,4e11,4e10\n", None,
     ["--vector-width", "0"], "vector width 0 must be at least 1"),
    (CAL_HEAD + f"{KEY},fwd,direct.naive,1,1,d,cpu,2,4e11,4e10\n",
     EV_HEAD + f"{KEY},fwd,direct.naive,1,1,1,1,d,cpu\n", ["--kind", "gpu"],
     "the calibration was measured on a cpu device (d); --kind gpu does not match it"),
    (CAL_HEAD + f"{KEY},fwd,direct.naive,1,1,d,cpu,2,4e11,4e10\n",
     EV_HEAD + f"{KEY},fwd,direct.naive,1,1,1,1,H200,gpu\n", [],
     "was measured on H200 (gpu), the calibration on d (cpu)"),
])
def test_replay_refuses_files_and_figures_it_cannot_use(tmp_path, capsys, cal, ev, args,
                                                        fragment):
    paths = []
    for name, text in (("cal.csv", cal), ("ev.csv", ev)):
        if text is not None:
            (tmp_path / name).write_text(text)
        paths.append(str(tmp_path / (name if text is not None else "missing.csv")))
    if ev is None:
        paths[1] = str(tmp_path / "ev.csv")
        (tmp_path / "ev.csv").write_text(EV_HEAD + f"{KEY},fwd,direct.naive,1,1,1,1,d,cpu\n")
    rc = _tool().main(["--calibration", paths[0], paths[1], *args])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("replay_evaluate: error: ") and fragment in err, err
    assert "Traceback" not in err


def test_replay_refuses_bad_figures_and_mixed_files(tmp_path, capsys):
    cal = tmp_path / "cal.csv"
    cal.write_text(CAL_HEAD + f"{KEY},fwd,direct.naive,1,1,d,cpu,2,4e11,4e10\n")
    ev = tmp_path / "ev.csv"
    for text, args, fragment in [
        (EV_HEAD + f"{KEY},fwd,direct.naive,1,1,1,1,d,cpu\n", ["--compute-units", "0"],
         "--compute-units 0 must be at least 1"),
        (EV_HEAD + f"{KEY},fwd,direct.naive,1,inf,1,1,d,cpu\n", [],
         "line 2: measured_ms must be a positive finite number, not inf"),
        (EV_HEAD + f"{KEY},fwd,direct.naive,1,1,1,1,d,cpu\n"
         f"{KEY},fwd,direct.tiled,1,2,0,0,other,cpu\n", [],
         "line 3: measured on other (cpu), line 2 on d (cpu): one device per file"),
    ]:
        ev.write_text(text)
        assert _tool().main(["--calibration", str(cal), str(ev), *args]) == 2
        assert fragment in capsys.readouterr().err


def test_replay_says_which_cases_it_leaves_out(tmp_path, capsys):
    tool = _tool()
    cal = tool.load(TOOL.parents[1] / "benchmarks/results/calibrate-cpu-pocl.csv", "calibration")
    rows = tool.load(TOOL.parents[1] / "benchmarks/results/evaluate-vgg16-n8-cpu.csv",
                     "evaluation")
    dev = tool.device_for(cal)
    from wticonv.contract.registry import SolverRegistry

    reg = SolverRegistry(disabled=["direct.chanvec"])    # recorded before it existed
    tool.replay(reg, dev, cal, rows, label="vgg16")
    out = capsys.readouterr()
    assert "27 cases" in out.out and out.err == ""
    some = sorted({r["problem"] for r in rows})[:5]
    renamed = [dict(r, solver="bogus.solver")
               if r["fallback_choice"] == "1" and r["problem"] in some else r for r in rows]
    tool.replay(reg, dev, cal, renamed, label="vgg16")
    out = capsys.readouterr()
    assert "22 cases" in out.out
    assert "solvers not installed here: bogus.solver" in out.err
    assert "5 case(s) left out, their choice not measured in the file" in out.err


def test_a_gpu_that_ran_tensor_core_solvers_is_replayed_with_them():
    """Rows with a run of a non-FP32 solver make the stand-in an NVIDIA GPU with tensor
    cores, so the replay predicts (and may choose) the same tensor-core solvers as the
    device did; rows of FP32 solvers only give one without them."""
    from wticonv.contract.registry import SolverRegistry
    from wticonv.runtime.kit import tensor_cores, wgmma

    tool = _tool()
    registry = SolverRegistry()
    split = [sid for sid in registry.ids() if registry.get(sid).math == "3xtf32"]
    assert split, "the built-in plugins register 3xtf32 solvers"
    base = {"kind": "gpu", "compute_units": "132", "peak_flops": "6.25e13",
            "bandwidth": "4.1e12", "direction": "fwd",
            "problem": "64-28-28-1x1-64-28-28-1-0x0-1x1-1x1-0-NCHW-FP32-F"}
    fp32_only = [dict(base, solver="gemm.1x1"), dict(base, solver="direct.naive")]
    plain = tool.device_for(fp32_only, registry=registry)
    assert not tensor_cores(plain)
    with_tc = tool.device_for(fp32_only + [dict(base, solver=split[0])], registry=registry)
    assert tensor_cores(with_tc) and not wgmma(with_tc)     # major 8 only: no sm_90a paths
    assert with_tc.peak_flops == 6.25e13                    # the figures are still the rows'
    problem = ConvProblem(1, 64, 28, 28, 64, 1, 1)
    offered = set(tool.raw_predictions(registry, with_tc, problem))
    assert set(split) & offered and not set(split) & set(
        tool.raw_predictions(registry, plain, problem))
    # a CPU's rows never make a tensor-core stand-in, and the stand-in refuses one
    cpu = tool.device_for([dict(base, kind="cpu", solver=split[0])], registry=registry)
    assert not tensor_cores(cpu)
    with pytest.raises(ValueError, match="CPU stand-in"):
        tool.RecordingDevice("cpu", compute_capability=(9, 0))


def test_replay_a_calibration_on_another_device_or_none(capsys, monkeypatch):
    """--fit-from fits to another file's probes, predicted with that file's device (the
    same file: the same replay as without it); --uncalibrated scores the raw models."""
    # the files were recorded before direct.chanvec existed: a case it would take now
    # has no measurement of it
    monkeypatch.setenv("WTICONV_DISABLE_SOLVERS", "direct.chanvec")
    tool = _tool()
    results = TOOL.parents[1] / "benchmarks/results"
    cal, ev = results / "calibrate-cpu-pocl.csv", results / "evaluate-vgg16-n8-cpu.csv"
    outputs = {}
    for name, extra in (("own", []), ("same", ["--fit-from", str(cal)]),
                        ("none", ["--uncalibrated"]),
                        ("xeon", ["--fit-from",
                                  str(results / "calibrate-test-n4-cpu-xeon.csv")])):
        assert tool.main(["--calibration", str(cal), str(ev), *extra]) == 0
        outputs[name] = capsys.readouterr().out
    assert outputs["same"] == outputs["own"]
    assert "27 cases" in outputs["none"] and outputs["none"] != outputs["own"]
    assert "27 cases" in outputs["xeon"] and outputs["xeon"] not in (outputs["own"],
                                                                      outputs["none"])
    assert tool.main(["--calibration", str(cal), str(ev), "--fit-from",
                      str(results / "missing.csv")]) == 2
    assert "missing.csv: cannot be read" in capsys.readouterr().err
