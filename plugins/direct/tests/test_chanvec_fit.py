"""tools/fit_chanvec.py: direct.chanvec's efficiency constants from measured runs."""

from __future__ import annotations

import csv
import importlib.util
from pathlib import Path

import pytest
from wticonv import ConvProblem
from wticonv.runtime.kit import launches_seconds
from wticonv.testing.launches import RecordingDevice
from wticonv_direct import chanvec, chanvec_plan

TOOL = Path(__file__).resolve().parents[3] / "tools" / "fit_chanvec.py"
pytestmark = pytest.mark.skipif(not TOOL.is_file(),
                                reason="needs the wticonv repository's tools/")
COLUMNS = ["problem", "direction", "solver", "predicted_ms", "measured_ms", "device", "kind",
           "compute_units", "peak_flops", "bandwidth", "launch_overhead_s", "vector_width"]


def _tool():
    spec = importlib.util.spec_from_file_location("fit_chanvec", TOOL)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _runs(path, block_eff, half, tap, extra=()):
    """Runs timed exactly as the model with these constants predicts, plus ``extra``
    (key, measured ms) rows."""
    dev = RecordingDevice("cpu")
    problems = [ConvProblem(n=n, c=c, h=h, w=h, k=k, r=r, s=r, pad_h=r // 2, pad_w=r // 2,
                            groups=g)
                for n, c, h, k, r, g in ((8, 64, 56, 256, 1, 1), (8, 512, 7, 512, 3, 1),
                                         (4, 16, 28, 64, 1, 1), (2, 256, 14, 1024, 1, 1),
                                         (8, 3, 56, 64, 7, 1), (4, 128, 28, 128, 3, 4),
                                         (8, 256, 14, 256, 3, 8), (2, 64, 28, 64, 1, 2))]
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        rows = []
        for p in problems:
            b = chanvec_plan.block(p)
            q = (p.c // p.groups) * p.r * p.s
            e = block_eff[b] * q / (q + half + tap * p.r * p.s)
            t = launches_seconds(chanvec_plan.plan(p, e), dev)
            rows.append((p.key, 1e3 * t))
        for key, ms in [*rows, *extra]:
            w.writerow([key, "fwd", "direct.chanvec", ms, ms, "cpu0", "cpu", 2, dev.peak_flops,
                        dev.bandwidth, dev.launch_overhead_s, 16])
    return problems


def test_fit_finds_the_constants_the_runs_were_made_with(tmp_path, capsys):
    tool = _tool()
    # one run far below the model's floor (two launches in 1 us) is left out
    probs = _runs(tmp_path / "cal.csv", {(6, 4): 0.9, (12, 2): 0.5}, 80, 5)
    assert {chanvec_plan.block(p) for p in probs} == {(6, 4), (12, 2)}
    _runs(tmp_path / "cal2.csv", {(6, 4): 0.9, (12, 2): 0.5}, 80, 5,
          extra=[(probs[0].key, 1e-3)])
    assert tool.main([str(tmp_path / "cal2.csv")]) == 0
    out = capsys.readouterr().out
    assert "9 runs, 1 below the model's floor" in out
    assert ("BLOCK_EFFICIENCY = {(6, 4): 0.90, (12, 2): 0.50}, REDUCTION_HALF = 80, "
            "TAP_OVERHEAD = 5") in out
    assert "rms log error 0.000" in out


def test_fit_says_when_no_run_is_of_the_solver(tmp_path, capsys):
    path = tmp_path / "none.csv"
    path.write_text(",".join(COLUMNS) + "\n")
    assert _tool().main([str(path)]) == 1
    assert "no CPU runs of direct.chanvec" in capsys.readouterr().err


def test_fit_of_backward_weights_finds_its_constants(tmp_path, capsys):
    dev = RecordingDevice("cpu")
    problems = [ConvProblem(n=n, c=c, h=h, w=h, k=k, r=r, s=r, pad_h=r // 2, pad_w=r // 2,
                            groups=g, direction="wrw")
                for n, c, h, k, r, g in ((8, 64, 56, 256, 1, 1), (8, 512, 7, 512, 3, 1),
                                         (4, 16, 28, 64, 1, 1), (2, 256, 14, 1024, 1, 1),
                                         (8, 3, 56, 64, 7, 1), (4, 128, 28, 128, 3, 4),
                                         (8, 256, 14, 256, 3, 8), (2, 64, 28, 64, 1, 2))]
    block_eff, row, item, pointwise = {(6, 4): 0.86, (12, 2): 0.7}, 4, 32, 0.65
    with open(tmp_path / "cal.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        for p in problems:
            b = chanvec_plan.block(p)
            known = chanvec.wrw_fill_used(p, 2)      # fill of 2 units x real slots: not fitted
            rows = p.n * p.ho
            e = (block_eff[b] * rows * p.wo / (rows * (p.wo + row) + item) * known
                 * (pointwise if p.r == 1 else 1))
            ms = 1e3 * launches_seconds(chanvec_plan.plan(p, e), dev)
            w.writerow([p.key, "wrw", "direct.chanvec", ms, ms, "cpu0", "cpu", 2,
                        dev.peak_flops, dev.bandwidth, dev.launch_overhead_s, 16])
    assert _tool().main([str(tmp_path / "cal.csv")]) == 0
    out = capsys.readouterr().out
    assert "-- wrw: 8 runs" in out and "-- fwd" not in out
    assert ("WRW_EFFICIENCY = {(6, 4): 0.86, (12, 2): 0.70}, WRW_ROW_OVERHEAD = 4, "
            "WRW_ITEM_OVERHEAD = 32, WRW_POINTWISE = 0.65, PACK_BYTES_FACTOR = "
            f"{chanvec_plan.PACK_BYTES_FACTOR}: rms log error 0.000") in out


def test_fit_refuses_files_that_are_not_calibrate_csvs(tmp_path, capsys):
    evaluate_csv = tmp_path / "eval.csv"
    evaluate_csv.write_text("problem,direction,solver,predicted_ms,measured_ms,fallback_choice,"
                            "fastest,count,device,kind\nk,wrw,direct.chanvec,1,1,1,1,1,c,cpu\n")
    assert _tool().main([str(evaluate_csv)]) == 2
    assert "is not a `wticonv calibrate --csv` file: no column compute_units" in \
        capsys.readouterr().err
    assert _tool().main([str(tmp_path / "missing.csv")]) == 2
    assert "cannot read" in capsys.readouterr().err
