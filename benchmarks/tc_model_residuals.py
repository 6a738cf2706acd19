"""How well the tensor-core WTI model predicts recorded runs, without the device.

    python benchmarks/tc_model_residuals.py
        --conv benchmarks/results/tc-resnet50-n32-h200-fit.json
        [--gemm benchmarks/results/tc-gemm-shapes-3xtf32-h200.json,...] [--by-solver]

``--conv`` takes ``conv_vs_torch.py --json`` files: for every row whose chosen solver is a
tensor-core one (math class 3xtf32 or tf32), the solver's raw predicted time on a
stand-in of the measuring device (an H200 by default: 132 compute units, the measured
62.574 TFLOP/s FP32 peak and 4.17 TB/s, tensor cores) over the measured kernel time.
``--gemm`` takes ``tc_gemm.py --json`` files: every run of a tile of
``wticonv_gemm.tensorcore.TC_CONFIGS``, the model's time (efficiency plus traffic and
launch terms, as wti.py charges them) over the measured one. It prints, per input, the
number of runs, the median ratio and the rms of log(ratio) (docs/performance.md, "Tensor
cores from OpenCL", quotes these), and with ``--by-solver`` the median per solver and
direction. Rows of solvers not installed here (``winograd.f4x3_tf32`` in older files) are
left out with a warning naming them. Held-out use: fit constants on one network's file,
then run this on others.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections import defaultdict

from wticonv.contract.registry import SolverRegistry
from wticonv.problem import ConvProblem
from wticonv.selection.ranking import select
from wticonv.testing.launches import RecordingDevice
from wticonv_gemm.sgemm import ColMap, GemmOp, Operand, gemm_launch, predict_seconds
from wticonv_gemm.tensorcore import TC_CONFIGS


def tensor_core_device(compute_units: int, peak: float, bandwidth: float):
    """A recording stand-in that :func:`wticonv.runtime.kit.tensor_cores` accepts."""
    return RecordingDevice("gpu", compute_units=compute_units, peak_flops=peak,
                           bandwidth=bandwidth, compute_capability=(9, None))


def summary(label: str, logs: list[float]) -> str:
    if not logs:
        return f"{label}: no runs"
    rms = math.sqrt(sum(x * x for x in logs) / len(logs))
    return (f"{label}: {len(logs)} runs, median predicted/measured "
            f"{math.exp(statistics.median(logs)):.2f}, rms log error {rms:.3f}")


class RecordError(Exception):
    """A recorded-runs file that is not what its option takes."""


def _load(path: str, what: str, want: type):
    with open(path) as f:
        data = json.load(f)
    if not isinstance(data, want):
        raise RecordError(f"{path} is not a {what} file (its top level is a "
                          f"{type(data).__name__}, not a {want.__name__})")
    return data


def conv_residuals(path: str, registry, device) -> dict[tuple[str, str], list[float]]:
    """``{(solver, direction): [log(predicted / measured)]}`` of a conv_vs_torch file's
    tensor-core rows."""
    out: dict[tuple[str, str], list[float]] = defaultdict(list)
    data = _load(path, "conv_vs_torch.py --json", dict)
    if not isinstance(data.get("rows"), list):
        raise RecordError(f"{path} is not a conv_vs_torch.py --json file (no list of rows)")
    missing = set()
    for r in data["rows"]:
        if not isinstance(r, dict) or not {"solver", "key", "direction", "ours_ms"} <= set(r):
            raise RecordError(f"{path}: a row lacks solver, key, direction or ours_ms: "
                              f"{r!r:.80}")
        sid = r["solver"]
        if sid not in registry.ids():
            missing.add(sid)
            continue
        if registry.get(sid).math == "fp32":
            continue
        sel = select(registry, ConvProblem.from_key(r["key"]), device, measured=False,
                     calibrated=False, allow_tf32=True)
        pred = {v.solver_id: v.predicted_ms for v in sel.verdicts
                if v.applicable and v.predicted_ms}
        if sid in pred:
            out[(sid, r["direction"])].append(math.log(pred[sid] / r["ours_ms"]))
    if missing:
        print(f"tc_model_residuals: {path}: left out the rows of solvers not installed here: "
              f"{', '.join(sorted(missing))}", file=sys.stderr)
    return out


def gemm_residuals(path: str, device) -> list[float]:
    """log(predicted / measured) of a tc_gemm file's runs of TC_CONFIGS tiles."""
    tiles = {math_class: {c.label: c for c in cfgs} for math_class, cfgs in TC_CONFIGS.items()}
    logs = []
    data = _load(path, "tc_gemm.py --json", list)
    for row in data:
        if not isinstance(row, dict) or not {"M", "N", "K", "ours"} <= set(row):
            raise RecordError(f"{path}: a row lacks M, N, K or ours (is it a tc_gemm.py "
                              f"--json file?): {row!r:.80}")
        M, N, K = row["M"], row["N"], row["K"]
        op = GemmOp(M, N, K, a=Operand("a", ms=K, ks=1), b=Operand("b", ks=N, cols=ColMap()),
                    c=Operand("c", ms=N, cols=ColMap()))
        for run in row["ours"]:
            cfg = tiles.get(run["class"], {}).get(run["config"])
            if cfg is None:
                continue
            launch = gemm_launch(op, "gpu", device.info.compute_units, math=run["class"],
                                 tc=cfg)
            logs.append(math.log(predict_seconds([launch], device) * 1e3 / run["ms"]))
    return logs


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--conv", default="", help="comma-separated conv_vs_torch --json files")
    ap.add_argument("--gemm", default="", help="comma-separated tc_gemm --json files")
    ap.add_argument("--compute-units", type=int, default=132)
    ap.add_argument("--peak", type=float, default=62.574e12, help="FP32 FLOP/s")
    ap.add_argument("--bandwidth", type=float, default=4.17e12, help="bytes/s")
    ap.add_argument("--by-solver", action="store_true",
                    help="also the median per solver and direction")
    args = ap.parse_args(argv)
    if not args.conv and not args.gemm:
        ap.error("give --conv and/or --gemm files")
    if args.compute_units < 1 or args.peak <= 0 or args.bandwidth <= 0:
        ap.error("--compute-units, --peak and --bandwidth must be positive")
    device = tensor_core_device(args.compute_units, args.peak, args.bandwidth)
    registry = SolverRegistry()
    try:
        if args.conv:
            every: dict[tuple[str, str], list[float]] = defaultdict(list)
            for path in args.conv.split(","):
                for k, v in conv_residuals(path, registry, device).items():
                    every[k] += v
            print(summary(f"convolutions ({args.conv})", [x for v in every.values()
                                                         for x in v]))
            if args.by_solver:
                for (sid, d), v in sorted(every.items()):
                    print(f"  {sid:24} {d}  {len(v):3} runs, median "
                          f"{math.exp(statistics.median(v)):.2f}")
        if args.gemm:
            logs = [x for path in args.gemm.split(",") for x in gemm_residuals(path, device)]
            print(summary(f"GEMMs ({args.gemm})", logs))
    except (OSError, ValueError, RecordError) as e:
        sys.exit(f"tc_model_residuals: cannot read the recorded runs: {e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
