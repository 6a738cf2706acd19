"""The wticonv command: every subcommand, JSON output, and how bad arguments fail."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from wticonv.cli import main

KEY = "8-9-9-3x3-4-9-9-2-1x1-1x1-1x1-0-NCHW-FP32-F"
FLAGS = "-n 2 -c 8 -H 9 -W 9 -k 4 -y 3 -x 3 -p 1 -q 1".split()


def run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_solvers_json_lists_naive(capsys):
    rc, out, _ = run(capsys, "solvers", "--json")
    data = json.loads(out)
    naive = next(s for s in data["solvers"] if s["solver"] == "direct.naive")
    assert rc == 0 and naive["distribution"] == "wticonv-direct" and naive["dynamic"] is True
    assert data["quarantined"] == []
    # each solver says what it covers: its scope attribute
    scopes = {s["solver"]: s["scope"] for s in data["solvers"]}
    assert scopes["winograd.f2x3"] == "3x3 stride 1, no dilation, all directions"
    assert scopes["gemm.1x1_3xtf32"] == (scopes["gemm.1x1"] + "; on tensor cores (NVIDIA GPUs "
                                         "of compute capability 8.0 or newer)")


def test_solvers_table(capsys):
    rc, out, _ = run(capsys, "solvers")
    assert rc == 0 and "direct.naive" in out and "wticonv-direct" in out


def test_devices(capsys):
    rc, out, _ = run(capsys, "devices", "--json")
    rows = json.loads(out)
    assert rc == 0 and rows and {"index", "name", "peak_gflops", "status", "set_aside"} <= set(rows[0])
    # the preferred float vector width, which the CPU kernels' plans and replays follow
    import wticonv

    width = wticonv.Handle().device.info.vector_width
    assert width in {r["vector_width"] for r in rows} and all(
        isinstance(r["vector_width"], int) and r["vector_width"] >= 1 for r in rows)


def test_explain_key_json(capsys):
    rc, out, _ = run(capsys, "explain", KEY, "--json")
    sel = json.loads(out)["selections"][0]
    assert rc == 0 and sel["problem"] == KEY
    assert sel["chosen"] == sel["solvers"][0]["solver_id"] and sel["solvers"][0]["rank"] == 1
    v = next(v for v in sel["solvers"] if v["solver_id"] == "direct.naive")
    assert 0 < v["wti"] <= 0.01 and v["workspace"] == 0 and v["predicted_ms"] > 0


def test_explain_flags_all_directions_table(capsys):
    rc, out, _ = run(capsys, "explain", *FLAGS)
    assert rc == 0
    assert KEY in out and "4-9-9-3x3-8-9-9-2-1x1-1x1-1x1-0-NCHW-FP32-B" in out
    assert out.count("CHOSEN") == 3


def test_conv_verifies_each_direction(capsys):
    rc, out, _ = run(capsys, "conv", *FLAGS, "-i", "2", "-t", "1", "-S", "direct.naive")
    assert rc == 0
    for line in ("Forward Convolution Verifies OK", "Backward Convolution Data Verifies OK",
                 "Backward Convolution Weights Verifies OK"):
        assert line in out
    assert "Forward Conv. Algorithm: direct.naive" in out
    assert "GPU Kernel Time Forward Conv. Elapsed:" in out and "GFLOP/s" in out


def test_conv_json_bias_flag_accepted(capsys):
    rc, out, _ = run(capsys, "conv", *FLAGS, "-F", "1", "-b", "1", "-i", "1", "--json", "-S",
                     "direct.naive")
    res = json.loads(out)["results"]
    assert rc == 0 and len(res) == 1 and res[0]["ok"] and res[0]["error"] < 1e-5
    assert res[0]["kernel_ms"] > 0 and res[0]["solver"] == "direct.naive"


def test_cache_command(capsys):
    rc, out, _ = run(capsys, "cache", "--json")
    info = json.loads(out)
    assert rc == 0 and info["path"].endswith("wticonv.sqlite")
    assert info["tables"]["device_figures"] >= 1


@pytest.mark.parametrize("argv, fragment", [
    (["conv", "-n", "2", "--frobnicate", "1"], "unknown argument(s) --frobnicate 1"),
    (["conv", "-n", "2", "--perf-config", "v8"], "--perf-config v8 needs -S SOLVER"),
    (["conv", "-n", "x"], "'x' is not an integer"),
    (["conv", "-g", "2"], "groups=2 must divide c=3"),
    (["conv", "-S", "nope.nope", "-n", "1"], "no solver 'nope.nope' is installed"),
    (["explain", "1-2-3"], "cannot parse find-db key"),
    (["explain"], "explain needs a problem"),
    (["explain", "64-56-56-3x3-64-56-56-8-1x1-1x1-1x1-0-NCHW-FP32-F", "x"],
     "one problem at a time: a find-db key alone, or conv flags"),
    (["bench", "alexnet9"], "network 'alexnet9' is neither a built-in"),
    (["bench", "resnet50", "--directions", "up"], "direction='up' is unknown"),
    (["bench", "resnet50", "-n", "0"], "0 is not in the range x>=1"),
    (["bench", "resnet50", "--device", "7:7"], "no OpenCL device 7:7"),
    (["frobnicate"], "No such command 'frobnicate'"),
    (["calibrate", "--budget-s", "abc"], "'abc' is not a valid number of seconds"),
    (["evaluate", "alexnet", "--time-cap-ms", "x"], "'x' is not a valid number of milliseconds"),
])
def test_bad_arguments_one_line_exit_2(capsys, argv, fragment):
    rc, out, err = run(capsys, *argv)
    assert rc == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("wticonv: error: ")
    assert fragment in lines[0]
    assert "Traceback" not in err and out == ""


def test_console_script_exit_status_and_no_traceback():
    bad = subprocess.run([sys.executable, "-m", "wticonv", "conv", "-k", "0"],
                         capture_output=True, text=True)
    assert bad.returncode == 2
    assert bad.stderr.strip() == ("wticonv: error: bad conv arguments: invalid problem: "
                                  "k=0 must be a positive integer (>= 1)")
    ok = subprocess.run([sys.executable, "-m", "wticonv", "--version"], capture_output=True,
                        text=True)
    assert ok.returncode == 0 and "wticonv" in ok.stdout


def test_no_arguments_prints_help(capsys):
    rc, out, _ = run(capsys)
    assert rc == 0 and out.startswith("Usage: wticonv") and "bench" in out


def test_passthrough_commands_take_dash_h(capsys):
    rc, out, _ = run(capsys, "explain", "-h")
    assert rc == 0 and "find-db key" in out


def test_conv_reports_each_direction_even_when_one_declines(capsys):
    rc, out, _ = run(capsys, "conv", "-n", "2", "-c", "4", "-H", "6", "-W", "6", "-k", "4",
                     "-y", "1", "-x", "1", "-p", "1", "-S", "gemm.1x1", "-i", "1")
    assert rc == 1
    assert out.count("FAILED: solver 'gemm.1x1' cannot run problem") == 3
    assert "only unpadded 1x1 convolutions" in out


@pytest.mark.parametrize("argv, fragment", [
    (["bench", "resnet50", "-S", "nope.nope"], "no solver 'nope.nope' is installed"),
    (["conv", "-V", "2"], "-V 2 must be 0 or 1"),
])
def test_more_bad_arguments(capsys, argv, fragment):
    rc, out, err = run(capsys, *argv)
    assert rc == 2 and err.count("\n") == 1 and fragment in err


def test_bench_directory_is_refused(capsys, tmp_path):
    rc, _, err = run(capsys, "bench", str(tmp_path))
    assert rc == 2 and "is a directory" in err


def test_bench_line_forw_limits_that_layer(capsys, tmp_path):
    f = tmp_path / "net.txt"
    f.write_text("conv -n 1 -c 4 -H 6 -W 6 -k 4 -y 3 -x 3 -p 1 -q 1 -F 1 -S x.y\n"
                 "conv -n 1 -c 4 -H 7 -W 7 -k 4 -y 3 -x 3 -p 1 -q 1\n")
    rc, out, _ = run(capsys, "bench", str(f), "--json", "-i", "1")
    data = json.loads(out)
    assert rc == 0
    assert [r["direction"] for r in data["rows"]] == ["fwd", "fwd", "bwd", "wrw"]
    assert any("-S" in note and "ignored" in note for note in data["notes"])


def test_tables_print_plugin_text_as_written(capsys):
    """A "[" in a plugin's scope, name or reason is text, not Rich markup: a closing tag
    that matches nothing used to raise MarkupError, and a tag-like word vanished."""
    from wticonv.cli import render

    rows = [{"solver": "x.tag", "distribution": "wticonv-x [beta]", "version": "1",
             "dynamic": True, "math": "fp32", "disabled": False,
             "scope": "y[n, k] = sum of x[n, c] * w [/tiled]", "entry_point": "x = m:s"}]
    render.solvers(rows, [{"entry_point": "bad = m:s", "distribution": "d", "version": "1",
                           "reason": "needs [red]nothing[/red] [/oops]"}])
    out = " ".join(capsys.readouterr().out.split())
    assert "wticonv-x [beta]" in out and "x[n, c] * w [/tiled]" in out
    assert "needs [red]nothing[/red] [/oops]" in out


def test_progress_labels_are_text_not_markup():
    """calibrate's progress labels start with "[probe 7, 9/240 s]", which Rich markup
    would take for a style and drop."""
    from rich.progress import TextColumn
    from wticonv.cli import render

    with render.Progress(enabled=True) as bar:
        bar.update(1, 2, "[probe 7, 9/240 s] 64-56-56-3x3")
        label = next(c for c in bar._p.columns if isinstance(c, TextColumn))
        assert label.markup is False
        text = label.render(bar._p.tasks[0])
    assert text.plain.rstrip() == "[probe 7, 9/240 s] 64-56-56-3x3"   # padded to 48


def test_conv_names_the_perf_config_it_ran(capsys):
    """A tuned record's perf config shows on the algorithm line (and in --json)."""
    from wticonv import Handle

    h = Handle()
    if h.device.kind != "cpu":
        pytest.skip("direct.tiled's CPU perf configs")
    version = h.registry.solvers["direct.tiled"].version
    h.device.store.put_perf_record(h.device.key, KEY, "direct.tiled", version, "v8", 1.0, 2.0)
    try:
        rc, out, _ = run(capsys, "conv", *FLAGS, "-F", "1", "-i", "1", "-S", "direct.tiled")
        assert rc == 0 and "perf config v8 (perf-db)" in out
        rc, out, _ = run(capsys, "conv", *FLAGS, "-F", "1", "-i", "1", "-S", "direct.tiled",
                         "--json")
        r = json.loads(out)["results"][0]
        assert (r["perf_config"], r["perf_source"]) == ("v8", "perf-db")
        # --perf-config forces one (over the record), "default" the solver's own
        rc, out, _ = run(capsys, "conv", *FLAGS, "-F", "1", "-i", "1", "-S", "direct.tiled",
                         "--perf-config", "v16")
        assert rc == 0 and "perf config v16 (forced)" in out
        rc, out, _ = run(capsys, "conv", *FLAGS, "-F", "1", "-i", "1", "-S", "direct.tiled",
                         "--perf-config", "default")
        assert rc == 0 and "perf config" not in out
    finally:
        h.device.store.delete_perf_record(h.device.key, KEY, "direct.tiled")
