"""Bad input through the command line: each CLI row of docs/reliability.md's "Bad input"
table (the API's rows: test_bad_input.py). What the user typed wrong exits with status 2
and one line ``wticonv: error: ...``; a problem no solver can run exits with status 1."""

from __future__ import annotations

import json
import re

import pytest

import wticonv
from wticonv.cli import main
from wticonv.problem.conv import parse_key

FLAGS = "-n 2 -c 3 -H 8 -W 7 -k 4 -y 3 -x 3 -p 1 -q 1".split()


def run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def _one_line_error(capsys, argv, fragment):
    rc, out, err = run(capsys, *argv)
    lines = err.strip().splitlines()
    assert rc == 2, (rc, out, err)
    assert len(lines) == 1 and lines[0].startswith("wticonv: error: "), err
    assert fragment in lines[0] and "Traceback" not in err
    return lines[0]


@pytest.mark.parametrize("argv, fragment", [
    # empty tensors: the CLI makes its own data, so there is nothing to run
    (["conv", "-n", "0", *FLAGS[2:]], "n=0 must be a positive integer (>= 1)"),
    (["conv", *FLAGS[:2], "-c", "0", *FLAGS[4:]], "c=0 must be a positive integer"),
    (["conv", *FLAGS, "-k", "0"], "k=0 must be a positive integer"),
    (["conv", *FLAGS, "-H", "0"], "h=0 must be a positive integer"),
    (["explain", *FLAGS, "-W", "0"], "w=0 must be a positive integer"),
    # geometry
    (["conv", *FLAGS, "-p", "0", "-H", "2"], "output h size < 1"),
    (["conv", *FLAGS, "-u", "0"], "stride_h=0 must be a positive integer"),
    (["conv", *FLAGS, "-j", "0"], "dilation_w=0 must be a positive integer"),
    (["conv", *FLAGS, "-q", "-1"], "pad_w=-1 must not be negative"),
    (["conv", *FLAGS, "-g", "2"], "groups=2 must divide c=3"),
    (["conv", *FLAGS, "-y", "x"], "'x' is not an integer"),
    (["conv", *FLAGS, "-F", "7"], "-F 7 is not a direction set"),
    (["conv", *FLAGS, "-m", "trans"], "-m trans is not supported"),
    # data types and layouts other than fp32 NCHW
    (["explain", "3-8-7-3x3-4-8-7-2-1x1-1x1-1x1-0-NCHW-FP16-F"],
     "dtype='fp16' is not supported; wticonv computes in fp32 only"),
    (["explain", "3-8-7-3x3-4-8-7-2-1x1-1x1-1x1-0-NHWC-FP32-F"],
     "layout='NHWC' is not supported"),
    (["conv", "-Z", "1", *FLAGS], "-Z must be 0 (not supported)"),
    # workspace limit
    (["conv", *FLAGS, "--workspace-limit", "-1"], "-1 is not in the range x>=0"),
    (["bench", "resnet50", "--workspace-limit", "1e3"], "'1e3' is not a valid integer"),
    # solvers
    (["conv", *FLAGS, "-S", "gemm.nope"], "no solver 'gemm.nope' is installed"),
    # measuring commands
    (["find", "1-2-3"], "'1-2-3' is not a find-db key (they look like"),
])
def test_bad_arguments_exit_2_with_one_line(capsys, argv, fragment):
    _one_line_error(capsys, argv, fragment)


def test_bench_line_with_another_data_type_is_refused(capsys, tmp_path):
    f = tmp_path / "half.txt"
    f.write_text("./bin/MIOpenDriver convfp16 -n 1 -c 3 -H 8 -W 8 -k 4 -y 3 -x 3\n")
    line = _one_line_error(capsys, ["bench", str(f)], "'convfp16' asks for fp16")
    assert "half.txt" in line


@pytest.mark.parametrize("argv", [
    ["conv", *FLAGS, "-F", "1", "-i", "1"],
    ["explain", *FLAGS],
    ["bench", "resnet50", "-n", "1"],
    ["find", *FLAGS, "-F", "1"],
    ["tune", *FLAGS, "-F", "1"],
    ["evaluate", "resnet50", "-n", "1"],
    ["calibrate"],
])
@pytest.mark.parametrize("spec, fragment", [
    ("9:9", "no OpenCL device 9:9; devices present: "),
    ("tpu", "device 'tpu' is not understood: use 'gpu', 'cpu' or 'PLATFORM:DEVICE'"),
])
def test_unknown_device_exits_2_on_every_command(capsys, argv, spec, fragment):
    _one_line_error(capsys, [*argv, "--device", spec], fragment)


def test_unknown_device_in_the_environment_exits_2(capsys, monkeypatch):
    monkeypatch.setenv("WTICONV_DEVICE", "3:1")
    _one_line_error(capsys, ["explain", *FLAGS], "no OpenCL device 3:1")


def test_a_set_aside_device_exits_2(capsys, handle, tmp_path, monkeypatch):
    from wticonv.runtime.probe import verdict_key
    from wticonv.db.store import Store

    spec = handle.device.info.index
    Store(tmp_path).put_device_verdict(verdict_key(handle.device.info), False,
                                       "its first use, in a child process, aborted (SIGABRT)")
    monkeypatch.setenv("WTICONV_CACHE_DIR", str(tmp_path))
    line = _one_line_error(capsys, ["explain", *FLAGS, "--device", spec],
                           f"OpenCL device {spec} ")
    assert "is set aside: its first use, in a child process, aborted (SIGABRT)" in line


def _im2col_minimum(key: str) -> int:
    """gemm.im2col's least workspace for ``key`` on the default device: one image's column
    buffer (C x R x S x Ho x Wo floats, in whole panels on CPUs: wticonv_gemm.plan)."""
    from wticonv.runtime.kit import kernel_family
    from wticonv_gemm import plan

    return plan.col_bytes(parse_key(key), kernel_family(wticonv.get_handle().device), 1)


def test_forced_solver_under_its_minimum_fails_naming_it(capsys):
    need = _im2col_minimum("3-8-7-3x3-4-8-7-2-1x1-1x1-1x1-0-NCHW-FP32-F")
    assert need >= 4 * 3 * 3 * 3 * 8 * 7    # one image's columns: C x R x S x Ho x Wo floats
    rc, out, _ = run(capsys, "conv", *FLAGS, "-F", "1", "-i", "1", "-S", "gemm.im2col",
                     "--workspace-limit", "100")
    assert rc == 1
    assert (f"Forward Convolution FAILED: solver 'gemm.im2col' cannot run problem "
            f"3-8-7-3x3-4-8-7-2-1x1-1x1-1x1-0-NCHW-FP32-F: needs at least {need} bytes of "
            "workspace (one image's column buffer); the limit is 100") in out
    rc, out, _ = run(capsys, "conv", *FLAGS, "-F", "1", "-i", "1", "-S", "gemm.im2col",
                     "--workspace-limit", str(need))
    assert rc == 0 and "Verifies OK" in out


def test_limit_below_every_solvers_minimum_names_the_least(capsys, monkeypatch):
    monkeypatch.setenv("WTICONV_LOAD_PLUGINS", "wticonv-gemm")
    rc, out, _ = run(capsys, "conv", *FLAGS, "-i", "1", "--workspace-limit", "10", "--json")
    results = json.loads(out)["results"]
    assert rc == 1 and [r["direction"] for r in results] == ["fwd", "bwd", "wrw"]
    for r in results:
        assert not r["ok"] and r["message"].startswith("no solver can run problem")
        need = re.search(r"the least any needs is (\d+) bytes \(gemm.im2col\); raise the "
                         r"limit to at least that", r["message"])
        key = {"fwd": "3-8-7-3x3-4-8-7-2-1x1-1x1-1x1-0-NCHW-FP32-F",
               "bwd": "4-8-7-3x3-3-8-7-2-1x1-1x1-1x1-0-NCHW-FP32-B",
               "wrw": "4-8-7-3x3-3-8-7-2-1x1-1x1-1x1-0-NCHW-FP32-W"}[r["direction"]]
        assert need and int(need[1]) == _im2col_minimum(key), r["message"]


def test_bench_under_every_solvers_minimum_fails_the_layer(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("WTICONV_LOAD_PLUGINS", "wticonv-gemm")
    f = tmp_path / "net.txt"
    f.write_text("conv -n 1 -c 3 -H 8 -W 8 -k 4 -y 3 -x 3 -F 1\n")
    rc, out, _ = run(capsys, "bench", str(f), "--workspace-limit", "10", "-i", "1", "--json")
    data = json.loads(out)
    assert rc == 1 and len(data["rows"]) == 1 and not data["rows"][0]["ok"]
    need = _im2col_minimum("3-8-8-3x3-4-6-6-1-0x0-1x1-1x1-0-NCHW-FP32-F")
    assert f"the least any needs is {need} bytes (gemm.im2col)" in json.dumps(data)


@pytest.mark.parametrize("name, what", [
    ("model.onnx", "is a directory"), ("net", "is a directory"),
    ("/dev/null", "is not a regular file (a device, a pipe or a socket)"),
])
def test_bench_on_a_directory_or_a_device_says_so(capsys, tmp_path, name, what):
    spec = name if name.startswith("/") else str(tmp_path / name)
    if not name.startswith("/"):
        (tmp_path / name).mkdir()
    _one_line_error(capsys, ["bench", spec], f"network '{spec}' {what}; give a file of "
                    "MIOpenDriver conv lines, an .onnx model, or a built-in name (resnet50, ")


def test_every_solver_disabled_lists_the_reasons_apart(capsys, monkeypatch, handle):
    ids = handle.registry.ids()
    monkeypatch.setenv("WTICONV_DISABLE_SOLVERS", ",".join(ids))
    rc, out, _ = run(capsys, "conv", *FLAGS, "-F", "1", "-i", "1")
    reasons = "; ".join(f"{sid}: disabled (WTICONV_DISABLE_SOLVERS)" for sid in ids)
    assert rc == 1 and out.strip() == (
        "Forward Convolution FAILED: no solver can run problem "
        "3-8-7-3x3-4-8-7-2-1x1-1x1-1x1-0-NCHW-FP32-F (fwd 2x3x8x7 * 4x3x3x3 pad 1 stride 1): "
        + reasons)


def test_a_cache_database_that_cannot_be_used_exits_2(capsys, monkeypatch, tmp_path):
    (tmp_path / "wticonv.sqlite").mkdir()         # the database's path is taken
    monkeypatch.setenv("WTICONV_CACHE_DIR", str(tmp_path))
    for argv in (["explain", *FLAGS], ["cache"]):
        _one_line_error(capsys, argv, f"the cache database {tmp_path / 'wticonv.sqlite'} "
                                      "cannot be used (unable to open database file)")


@pytest.mark.parametrize("argv", [["solvers"], ["cache"], ["devices"]])
def test_commands_without_a_device_ignore_a_bad_wticonv_device(capsys, monkeypatch, argv):
    monkeypatch.setenv("WTICONV_DEVICE", "9:9")
    rc, out, err = run(capsys, *argv)
    assert rc == 0 and out and "error" not in err


def test_cache_on_an_unusable_directory_shows_the_temporary_one_and_clears_nothing(
        capsys, monkeypatch, tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("x")
    monkeypatch.setenv("WTICONV_CACHE_DIR", str(afile))
    rc, out, err = run(capsys, "cache")
    assert rc == 0 and f"the cache directory {afile} cannot be used" in err
    path = out.splitlines()[0].removeprefix("cache database: ")
    assert "wticonv-cache-" in path and not path.startswith(str(afile))
    rc, out, err = run(capsys, "cache", "--clear")
    assert rc == 2 and "nothing was cleared" in err and "cleared every record" not in out
    assert afile.read_text() == "x"
