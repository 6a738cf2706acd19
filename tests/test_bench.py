"""The main job, ``wticonv bench``: real networks, driver files, ONNX models, failures."""

from __future__ import annotations

import csv
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

from wticonv.measuring.bench import parse_directions, run_bench
from wticonv.cli import main
from wticonv.workloads.networks import BUILTIN_NETWORKS, load_network


@pytest.mark.parametrize("name, distinct, total", [
    ("resnet50", 23, 53), ("vgg16", 9, 13), ("mobilenetv2", 30, 52), ("inception3", 45, 96)])
def test_builtin_networks_load(name, distinct, total):
    net = load_network(name, 4)
    assert name in BUILTIN_NETWORKS
    assert len(net.layers) == distinct and net.total_layers == total
    assert all(layer.problem.n == 4 for layer in net.layers)


def test_light_resnet50_onnx_has_the_builtin_layers():
    onnx = pytest.importorskip("onnx")
    path = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light",
                        "light_resnet50.onnx")
    from_onnx = load_network(path)
    builtin = load_network("resnet50", 1)
    assert {layer.problem for layer in from_onnx.layers} == {
        layer.problem for layer in builtin.layers}
    assert from_onnx.total_layers == builtin.total_layers == 53


def test_resnet50_forward_verified(handle):
    report = run_bench(handle, load_network("resnet50", 1), ["fwd"], iterations=1)
    assert len(report.rows) == 23 and not report.failures
    for row in report.rows:
        assert row.error is not None and row.error <= row.tolerance
        assert row.measured_ms > 0 and row.gflops > 0 and row.solver
    assert report.total_ms() > 0 and report.layers == 23


def test_mobilenetv2_all_directions_verified(handle):
    report = run_bench(handle, load_network("mobilenetv2", 1), parse_directions("all"),
                       iterations=1)
    assert len(report.rows) == 30 * 3 and not report.failures
    assert {r.direction for r in report.rows} == {"fwd", "bwd", "wrw"}


def test_bench_driver_file_json(tmp_path, capsys):
    f = tmp_path / "net.txt"
    f.write_text("# two identical layers and one strided\n"
                 "./bin/MIOpenDriver conv -n 2 -c 8 -H 10 -W 10 -k 4 -y 3 -x 3 -p 1 -q 1\n"
                 "conv -n 2 -c 8 -H 10 -W 10 -k 4 -y 3 -x 3 -p 1 -q 1\n"
                 "\n"
                 "conv --batchsize 2 --in_channels 4 --in_h 9 --in_w 9 --out_channels 8 "
                 "--fil_h 3 --fil_w 3 --conv_stride_h 2 --conv_stride_w 2\n")
    rc = main(["bench", str(f), "--json", "-i", "1"])
    data = json.loads(capsys.readouterr().out)
    assert rc == 0 and data["failures"] == 0 and data["layers"] == 2
    assert [r["count"] for r in data["rows"][::3]] == [2, 1]
    assert len(data["rows"]) == 6 and data["batch"] == 2
    assert data["kernel_builds"] >= 0 and data["total_measured_ms"] > 0


def test_bench_table_output(tmp_path, capsys):
    f = tmp_path / "net.txt"
    f.write_text("conv -n 1 -c 3 -H 12 -W 12 -k 4 -y 5 -x 5 -p 2 -q 2 -l 2 -j 2\n")
    rc = main(["bench", str(f), "--directions", "fwd,wrw"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "3-12-12-5x5-4-8-8-1-2x2-1x1-2x2-0-NCHW-FP32-F" in out
    assert "all layers verified" in out and "kernel builds:" in out


def test_bench_bad_driver_file_names_the_line(tmp_path, capsys):
    f = tmp_path / "net.txt"
    f.write_text("conv -n 1 -c 3\nconv -n 1 -c 3 -g 2\n")
    rc = main(["bench", str(f)])
    err = capsys.readouterr().err
    assert rc == 2 and f"{f}:2:" in err and "groups=2 must divide c=3" in err


def test_bench_onnx_model_with_asymmetric_and_same_padding(tmp_path, capsys):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 11, 10])
    y = helper.make_tensor_value_info("z", TensorProto.FLOAT, None)
    w1 = helper.make_tensor("w1", TensorProto.FLOAT, [8, 3, 3, 3],
                            np.zeros(8 * 27, np.float32).tolist())
    w2 = helper.make_tensor("w2", TensorProto.FLOAT, [8, 1, 3, 3],
                            np.zeros(72, np.float32).tolist())
    nodes = [helper.make_node("Conv", ["x", "w1"], ["h"], name="stem", pads=[0, 1, 1, 0],
                              strides=[2, 2]),
             helper.make_node("Conv", ["h", "w2"], ["z"], name="dw", auto_pad="SAME_UPPER",
                              group=8)]
    graph = helper.make_graph(nodes, "tiny", [x], [y], initializer=[w1, w2])
    path = tmp_path / "tiny.onnx"
    onnx.save(helper.make_model(graph), str(path))
    net = load_network(str(path))
    stem, dw = net.layers
    assert (stem.problem.h, stem.problem.w, stem.problem.pad_h) == (12, 11, 0)
    assert (dw.problem.groups, dw.problem.pad_h, dw.problem.ho) == (8, 1, stem.problem.ho)
    assert any("asymmetric padding" in note for note in net.notes)
    rc = main(["bench", str(path), "-n", "2", "--json", "-i", "1"])
    data = json.loads(capsys.readouterr().out)
    assert rc == 0 and data["failures"] == 0 and data["batch"] == 2


WRONG = '''
import pyopencl as cl
import numpy as np
from wticonv import hookimpl

class Zero:
    """Claims to apply and writes zeros: a solver that is wrong."""
    solver_id = "wrong.zero"
    @hookimpl
    def is_applicable(self, problem, device): return True
    @hookimpl
    def is_dynamic(self): return True
    @hookimpl
    def get_wti(self, problem, device): return 0.5
    @hookimpl
    def workspace_size(self, problem, device): return 0
    @hookimpl
    def run(self, problem, device, tensors, workspace):
        out = {"fwd": tensors.y, "bwd": tensors.x, "wrw": tensors.w}[problem.direction]
        cl.enqueue_fill_buffer(device.queue, out, np.float32(0), 0, out.size)
solver = Zero()
'''


def test_bench_fails_on_a_wrong_solver(tmp_path, fake_dist):
    site = fake_dist("wrong-plugin", {"wrong_plugin": WRONG}, {"zero": "wrong_plugin:solver"})
    net = tmp_path / "one.txt"
    net.write_text("conv -n 1 -c 4 -H 6 -W 6 -k 4 -y 3 -x 3 -p 1 -q 1\n")
    path = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))
    env = dict(os.environ, PYTHONPATH=path)
    res = subprocess.run([sys.executable, "-m", "wticonv", "bench", str(net), "--json",
                          "--directions", "fwd", "-i", "1"],
                         capture_output=True, text=True, env=env)
    assert res.returncode == 1, res.stderr
    row = json.loads(res.stdout)["rows"][0]
    assert row["solver"] == "wrong.zero" and not row["ok"]
    assert row["error"] == pytest.approx(1.0, abs=1e-6) or row["error"] > 0.1
    assert "verification FAILED" in row["message"]
    ok = subprocess.run([sys.executable, "-m", "wticonv", "bench", str(net), "--json",
                         "--directions", "fwd", "-i", "1"], capture_output=True, text=True,
                        env=dict(env, WTICONV_DISABLE_SOLVERS="wrong.zero"))
    assert ok.returncode == 0
    good = json.loads(ok.stdout)["rows"][0]
    assert good["ok"] and good["solver"] != "wrong.zero"


def test_bench_with_a_forced_solver_counts_declines_apart(capsys):
    # issue 17: winograd.f2x3 declines ResNet-50's 1x1 and 7x7 layers; that is no
    # failure: each says "declined: reason", and the exit status stays 0.
    rc = main(["bench", "resnet50", "-n", "1", "--directions", "fwd", "-i", "1",
               "-S", "winograd.f2x3", "--json"])
    data = json.loads(capsys.readouterr().out)
    declined = [r for r in data["rows"] if r["declined"]]
    ran = [r for r in data["rows"] if not r["declined"]]
    assert rc == 0 and data["failures"] == 0, data
    assert data["declined"] == len(declined) > 0 and ran
    assert all(r["message"].startswith("declined: ") and not r["ok"] for r in declined)
    assert all(r["solver"] == "winograd.f2x3" and r["ok"] for r in ran)
    rc = main(["bench", "resnet50", "-n", "1", "--directions", "fwd", "-i", "1",
               "-S", "winograd.f2x3", "--no-verify"])
    out = capsys.readouterr().out
    assert rc == 0 and f"{len(declined)} declined by winograd.f2x3" in out


def test_bench_says_so_when_a_forced_solver_declines_every_layer(handle, capsys):
    """A tensor-core solver forced on a device without tensor cores: nothing runs, the
    reason is one note (not one per layer), and the exit status is 1."""
    from wticonv.runtime.kit import tensor_cores

    if tensor_cores(handle.device):
        pytest.skip("the tensor-core solver runs on this device")
    rc = main(["bench", "resnet50", "-n", "1", "--directions", "fwd", "-i", "1",
               "-S", "gemm.1x1_3xtf32"])
    out = capsys.readouterr().out
    assert rc == 1
    assert "nothing ran: gemm.1x1_3xtf32 declined every layer" in out
    assert out.count("compute capability 8.0") == 1 and "note 2" not in out
    assert "0 runs done" in out and "all layers verified" not in out
    rc = main(["bench", "resnet50", "-n", "1", "--directions", "fwd", "-i", "1",
               "-S", "gemm.1x1_3xtf32", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert rc == 1 and data["allow_tf32"] is False
    assert {r["math"] for r in data["rows"]} == {"3xtf32"}


def _benchmark_module(name: str):
    """A script of benchmarks/ imported as a module (they are not a package)."""
    import importlib
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.pop(0)


def test_measure_corpus_keys_file(tmp_path):
    """benchmarks/measure_corpus.py --keys: comments and duplicates dropped, keys in order;
    a bad key, an empty or a missing file end the run with the file and line named."""
    measure_corpus = _benchmark_module("measure_corpus")
    a = "64-56-56-1x1-64-56-56-1-0x0-1x1-1x1-0-NCHW-FP32-F"
    b = "64-56-56-3x3-64-56-56-16-1x1-1x1-1x1-0-NCHW-FP32-W"
    good = tmp_path / "good.txt"
    good.write_text(f"# re-measure\n{a}  # a 1x1\n\n{b}\n{a}\n")
    assert [p.key for p in measure_corpus.keys_file_problems(str(good))] == [a, b]
    bad = tmp_path / "bad.txt"
    bad.write_text(f"{a}\nhello\n")
    with pytest.raises(SystemExit, match=r"bad.txt, line 2: cannot parse find-db key 'hello'"):
        measure_corpus.keys_file_problems(str(bad))
    empty = tmp_path / "empty.txt"
    empty.write_text("# nothing\n")
    with pytest.raises(SystemExit, match="no problem keys"):
        measure_corpus.keys_file_problems(str(empty))
    with pytest.raises(SystemExit, match="No such file"):
        measure_corpus.keys_file_problems(str(tmp_path / "missing.txt"))


def test_summarize_evaluations_figures_and_targets(tmp_path, capsys):
    """benchmarks/summarize_evaluations.py: per-network and overall figures of a folder of
    evaluate CSVs, each against issue #18's target; cases without a measured choice are
    counted apart; an empty folder is an error."""
    se = _benchmark_module("summarize_evaluations")
    head = "problem,direction,solver,predicted_ms,measured_ms,fallback_choice,fastest,count\n"
    # net a: case 1 chose the best (1 ms, x2); case 2 chose 3 ms where 1.5 is best (x1)
    (tmp_path / "eval-a.csv").write_text(
        head + "p1,fwd,s,1,1.0,1,1,2\np1,fwd,t,1,2.0,0,0,2\n"
               "p2,bwd,s,1,1.5,0,1,1\np2,bwd,t,1,3.0,1,0,1\n"
               "p3,wrw,s,1,,1,0,1\np3,wrw,t,1,1.0,0,1,1\n")
    (tmp_path / "eval-b.csv").write_text(head + "q1,fwd,s,1,1.0,1,1,1\nq1,fwd,t,1,1.05,0,0,1\n")
    a = se.network_figures(list(csv.DictReader((tmp_path / "eval-a.csv").open())))
    assert (a["cases"], a["missing"], a["within"]) == (2, 1, 0.5)
    assert a["mean"] == pytest.approx(1.5) and a["worst"] == pytest.approx(2.0)
    assert a["time_weighted"] == pytest.approx((2 * 1.0 + 3.0) / (2 * 1.0 + 1.5))
    out_csv = tmp_path / "all.csv"
    assert se.main([str(tmp_path), "--csv", str(out_csv)]) == 0
    out = capsys.readouterr().out
    geo = math.sqrt(a["time_weighted"] * 1.0)
    assert f"geomean time-weighted {geo:.4f} (NOT met)" in out
    assert "within 10 % 66.7% (NOT met)" in out and "worst case 2.00x (met)" in out
    rows = list(csv.DictReader(out_csv.open()))
    assert len(rows) == 8 and {r["network"] for r in rows} == {"a", "b"}
    # the combined file is refused where the next run would read it as a network
    assert se.main([str(tmp_path), "--csv", str(tmp_path / "eval-all.csv")]) == 2
    assert "would be read as a network" in capsys.readouterr().err
    assert se.main([str(tmp_path / "none")]) == 2
    assert "is not a folder" in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert se.main([str(empty)]) == 2
    assert "no eval-*.csv file" in capsys.readouterr().err
    for text, fragment in ((head + "p1,fwd,s,1,0,1,1,1\n", "line 2: measured_ms '0'"),
                           (head + "p1,fwd,s,1,-5,1,1,1\n", "line 2: measured_ms '-5'"),
                           (head + "p1,fwd,s,1,1.0,1,1,0\n", "line 2: count '0'"),
                           ("problem,solver\np1,s\n", "no column measured_ms, fallback_choice"),
                           ("", "no rows")):
        (empty / "eval-x.csv").write_text(text)
        assert se.main([str(empty)]) == 2
        assert fragment in capsys.readouterr().err


def test_summarize_evaluations_without_a_solver_compares_the_users_time(tmp_path, capsys):
    """--without SOLVER: each network's time with the fallback's choices over its time with
    the lowest-predicted other solver, from the same measurements."""
    se = _benchmark_module("summarize_evaluations")
    head = "problem,direction,solver,predicted_ms,measured_ms,fallback_choice,fastest,count\n"
    # p1 (x2): the fallback chose new (1.0 ms); without it, t (predicted 2 < u's 3): 1.5 ms;
    # p2: the fallback chose t (2.0 ms) either way
    (tmp_path / "eval-a.csv").write_text(
        head + "p1,fwd,new,1,1.0,1,1,2\np1,fwd,t,2,1.5,0,0,2\np1,fwd,u,3,1.2,0,0,2\n"
               "p2,fwd,new,5,1.0,0,1,1\np2,fwd,t,1,2.0,1,0,1\n")
    assert se.main([str(tmp_path), "--without", "new"]) == 0
    out = capsys.readouterr().out
    ratio = (2 * 1.0 + 2.0) / (2 * 1.5 + 2.0)
    assert f"{2 * 1.0 + 2.0:10.1f} ms {2 * 1.5 + 2.0:10.1f} ms {ratio:6.3f}" in out
    assert f"geometric mean {ratio:.3f}" in out
    # a solver no row has (a typo) and files without predictions are errors, not 1.000s
    assert se.main([str(tmp_path), "--without", "nwe"]) == 2
    assert "--without 'nwe': no run of it" in capsys.readouterr().err
    (tmp_path / "eval-a.csv").write_text(head + "p1,fwd,new,,1.0,1,1,2\np1,fwd,t,,1.5,0,0,2\n")
    assert se.main([str(tmp_path), "--without", "new"]) == 2
    assert "needs each row's predicted_ms" in capsys.readouterr().err


def test_summarize_evaluations_noise_floor_scores_another_runs_fastest(tmp_path, capsys):
    """--noise-floor OTHERDIR: each case's choice is the solver fastest in the other run
    (among those both measured), scored with this run's times; a network missing from
    OTHERDIR is an error."""
    se = _benchmark_module("summarize_evaluations")
    head = "problem,direction,solver,predicted_ms,measured_ms,fallback_choice,fastest,count\n"
    this, other = tmp_path / "this", tmp_path / "other"
    this.mkdir()
    other.mkdir()
    # this run: p1 s 1.0 / t 1.3, p2 s 2.0 / t 1.0 (x3); the other run found t fastest
    # on p1 and s fastest on p2 (u, measured only there, is not a choice here)
    (this / "eval-a.csv").write_text(head + "p1,fwd,s,1,1.0,1,1,1\np1,fwd,t,1,1.3,0,0,1\n"
                                            "p2,fwd,s,1,2.0,0,0,3\np2,fwd,t,1,1.0,1,1,3\n")
    (other / "eval-a.csv").write_text(head + "p1,fwd,s,1,1.2,0,0,1\np1,fwd,t,1,1.1,0,1,1\n"
                                             "p2,fwd,s,1,0.9,0,1,3\np2,fwd,t,1,1.0,0,0,3\n"
                                             "p2,fwd,u,1,0.1,1,0,3\n")
    rows = list(csv.DictReader((this / "eval-a.csv").open()))
    g = se.network_figures(rows, se.fastest_of(list(csv.DictReader((other / "eval-a.csv")
                                                                   .open()))))
    assert (g["cases"], g["within"]) == (2, 0.0)
    assert g["worst"] == pytest.approx(2.0) and g["mean"] == pytest.approx((1.3 + 2.0) / 2)
    assert g["time_weighted"] == pytest.approx((1.3 + 3 * 2.0) / (1.0 + 3 * 1.0))
    assert se.main([str(this), "--noise-floor", str(other)]) == 0
    out = capsys.readouterr().out
    assert "noise floor" in out and "within 10 % 0.0% (NOT met)" in out
    (this / "eval-b.csv").write_text(head + "q1,fwd,s,1,1.0,1,1,1\n")
    assert se.main([str(this), "--noise-floor", str(other)]) == 2
    assert "eval-b.csv does not exist" in capsys.readouterr().err
    assert se.main([str(this), "--noise-floor", str(tmp_path / "none")]) == 2
    assert "is not a folder" in capsys.readouterr().err
    (this / "eval-b.csv").unlink()
    (other / "eval-a.csv").write_text(head + "p1,fwd,s,1,abc,0,0,1\n")
    assert se.main([str(this), "--noise-floor", str(other)]) == 2
    err = capsys.readouterr().err          # the other run's file is named, not this one's
    assert f"--noise-floor: {other / 'eval-a.csv'}: line 2: measured_ms 'abc'" in err


def test_evaluate_after_calibrate_checks_its_arguments_before_calibrating(tmp_path):
    """benchmarks/evaluate_after_calibrate.sh refuses a bad N, budget or network name
    before the calibration spends its minute (exit 2, the reason on stderr)."""
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "benchmarks/evaluate_after_calibrate.sh"
    env = dict(os.environ, PYTHON=sys.executable)
    for args, fragment in ((["0", "60", "squeezenet1_0"], "N (0) must be a whole number"),
                           (["", "60", "squeezenet1_0"], "N () must be a whole number"),
                           (["2", "1.5", "squeezenet1_0"], "BUDGET_S (1.5) must be"),
                           (["2", "60", "no_such_net"], "no_such_net"),
                           (["2", "60"], "usage:")):
        run = subprocess.run(["sh", str(script), str(tmp_path / "out"), *args], env=env,
                             capture_output=True, text=True, timeout=120)
        assert run.returncode == 2 and fragment in run.stderr, (args, run.stderr)
    assert not (tmp_path / "out").exists()          # nothing calibrated, nothing written


def test_tensor_core_model_residuals_match_the_documented_figures(capsys):
    """benchmarks/tc_model_residuals.py on the recorded H200 runs gives the figures
    docs/performance.md quotes for the tensor-core WTI model (fitted on ResNet-50, held
    out on four other networks, and on the GEMMs): a model change shows up here."""
    from pathlib import Path

    tool = _benchmark_module("tc_model_residuals")
    res = Path(__file__).resolve().parents[1] / "benchmarks" / "results"
    held_out = ",".join(str(res / f"tc-{n}-n32-h200.json") for n in
                        ("googlenet", "efficientnet_b0", "alexnet", "convnext_tiny"))
    assert tool.main(["--conv", str(res / "tc-resnet50-n32-h200-fit.json")]) == 0
    assert tool.main(["--conv", held_out]) == 0
    assert tool.main(["--gemm", f"{res / 'tc-gemm-shapes-3xtf32-h200.json'},"
                                f"{res / 'tc-gemm-shapes-tf32-h200.json'}"]) == 0
    fit, held, gemm = capsys.readouterr().out.strip().splitlines()
    assert "38 runs, median predicted/measured 0.94, rms log error 0.124" in fit
    assert "88 runs, median predicted/measured 1.02, rms log error 0.153" in held
    assert "42 runs, median predicted/measured 1.02, rms log error 0.134" in gemm
