"""What the tests of databases that travel share (test_db_transfer.py,
test_db_transfer_bad.py, test_db_transfer_cli.py): the devices, keys and solver versions
of the records, records of every kind to fill a store with (``fill``, which the
``filled`` fixtures call), and the lines of hand-written files (``_rec``, ``_file``), good
and bad.

Not a test module: each of them loads it by its path (``_load``) and imports from it.
"""

from __future__ import annotations

import json
from importlib.metadata import version as _dist_version

from wticonv.db.schema import FIGURES_METHOD
from wticonv.db.store import Store
from wticonv.db.transfer import FORMAT

GPU = "NVIDIA CUDA|NVIDIA H200|550.54.15"
CPU = "Portable Computing Language|pthread-haswell-Intel Xeon|3.1+debian"
K1 = "64-56-56-3x3-64-56-56-16-1x1-1x1-1x1-0-NCHW-FP32-F"
K2 = "8-9-9-3x3-4-9-9-2-1x1-1x1-1x1-0-NCHW-FP32-B"
K3 = "1-8-8-1x1-1-8-8-1-0x0-1x1-1x1-0-NCHW-FP32-F"
V = _dist_version("wticonv-gemm")         # the installed built-in solvers' versions: a record
VD = _dist_version("wticonv-direct")      # of another version would be set aside on import
VW = _dist_version("wticonv-winograd")
VERSIONS = {"direct.naive": VD, "direct.tiled": VD, "gemm.im2col": V, "winograd.f2x3": VW}
TREES = {"base": 0.25, "depth": 2, "feature": [[0, 1, 1], [1, 0, 0]],
         "threshold": [[0.5, -1.25, 3.0], [2.0, 0.125, 1e300]],
         "value": [[-0.1, 0.2, 0.3, -0.4], [0.01, 0.02, 0.03, 0.04]]}


def fill(store: Store) -> None:
    """Records of every kind on two devices (a learned correction of each form)."""
    for dev, scale in ((GPU, 1.0), (CPU, 40.0)):
        store.put_find_records(dev, K1, [("direct.naive", VD, 0, 9.5 * scale, 3, 1),
                                         ("gemm.im2col", V, 1 << 20, 0.3 * scale, 5, 0)])
        store.put_find_records(dev, K2, [("direct.tiled", VD, 256, 0.0123 * scale, 5, 0)])
        store.put_perf_record(dev, K1, "direct.tiled", VD, "8x4/v4", 0.21 * scale, 0.33 * scale)
        store.put_calibration(dev, [("gemm.im2col", V, 0.8125 * scale, 40),
                                    ("gemm.im2col@fwd", V, 0.75, 12),
                                    ("winograd.f2x3@wrw", VW, 1.3, 7)])
        store.put_correction(dev, [("gemm.im2col", V, ("bias", "bwd"), [0.1, -0.2], 44),
                                   ("winograd.f2x3", VW, ("bias", "bwd"), TREES, 61)])


def contents(store: Store) -> dict:
    """Everything selection reads of a store, per device."""
    out = {}
    for dev in (GPU, CPU):
        out[dev] = {"find": {k: store.get_find_records(dev, k)
                             for k in store.find_problem_keys(dev)},
                    "perf": store.get_perf_records(dev), "cal": store.get_calibration(dev),
                    "cor": store.get_correction(dev)}
    return out


def _file(tmp_path, *records, header=None) -> str:
    head = header if header is not None else json.dumps(
        {"format": FORMAT, "version": 1, "figures_method": FIGURES_METHOD})
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join([head, *records]) + "\n")
    return str(path)


def _rec(**change) -> str:
    rec = {"kind": "find-db", "device": GPU, "problem": K1, "solver": "direct.naive",
           "direction": None,
           "values": {"workspace": 0, "time_ms": 1.5, "runs": 3, "capped": False}}
    values = change.pop("values", {})
    rec.update(change)
    # the installed version of the record's solver unless the change gives one
    rec.setdefault("solver_version", VERSIONS.get(str(rec["solver"]).split("@")[0], V))
    rec["values"] = {**rec["values"], **values} if isinstance(values, dict) else values
    if rec["kind"] in OTHER_VALUES:       # another kind: its own values, as given
        rec["values"] = {**OTHER_VALUES[rec["kind"]],
                         **{k: v for k, v in values.items() if k in OTHER_VALUES[rec["kind"]]}}
    return json.dumps(rec)


OTHER_VALUES = {"calibration": {"factor": 1.0, "probes": 3},
                "perf-db": {"perf_config": "x", "time_ms": 1.0, "default_ms": 2.0},
                "correction": {"features": ["bias"], "model": [0.0], "runs": 1}}


GOOD = _rec(solver="gemm.im2col", problem=K2)
BAD = {
    "bad JSON": ('{"kind": "find-db", "device": ', "not valid JSON"),
    # Python's json refuses these with a plain ValueError and a RecursionError
    "an integer of 5000 digits": ('{"runs": ' + "1" * 5000 + "}",
                                  "not valid JSON (Exceeds the limit (4300 digits)"),
    "nested too deep": ("[" * 200000 + "]" * 200000, "not valid JSON (nested too deep)"),
    "a time no kernel takes": (_rec(values={"time_ms": 5e-324}),
                               "values.time_ms = 5e-324 is not a time a kernel takes"),
    "a time of years": (_rec(values={"time_ms": 1e308}),
                        "values.time_ms = 1e+308 is not a time a kernel takes"),
    "unknown kind": (_rec(kind="findb"), "unknown kind \"findb\": the kinds are find-db"),
    "bad device key": (_rec(device="H200"), "is not a device key: platform|device name"),
    "pattern without the three parts": (_rec(device="NVIDIA H*"),
                                        "a pattern has the same three parts, with * ?"),
    "bad problem key": (_rec(problem="64-56-56-3x3"), "find-db key"),
    "inconsistent key": (_rec(problem=K1.replace("64-56-56-16", "64-55-56-16")),
                         "is inconsistent"),
    "bad solver id": (_rec(solver="Naive"), "is not a solver id"),
    "wrong solver version": (_rec(solver_version="0.0.9"),
                             f"direct.naive 0.0.9 measured it, but {VD} is installed"),
    "solver not installed": (_rec(solver="nope.never"), "nope.never is not installed"),
    "negative time": (_rec(values={"time_ms": -2.0}),
                      "values.time_ms = -2.0 must be a positive finite number of ms"),
    "NaN time": (_rec(values={"time_ms": float("nan")}), "values.time_ms = NaN"),
    "string runs": (_rec(values={"runs": "3"}), "values.runs = \"3\" must be a whole number"),
    "missing value": (_rec(values={"capped": None}).replace(', "capped": null', ""),
                      "missing capped"),
    "unknown field": (_rec(comment="hi"), "unknown comment"),
    "missing field": (json.dumps({"kind": "perf-db", "device": GPU}), "missing problem"),
    "calibration with a problem": (
        _rec(kind="calibration", values={"factor": 1.0, "probes": 3}),
        "holds for every problem of its device: its problem must be null"),
    "bad direction": (_rec(kind="calibration", problem=None, direction="up",
                           values={"factor": 1.0, "probes": 3}), "must be fwd, bwd, wrw"),
    "zero factor": (_rec(kind="calibration", problem=None,
                         values={"factor": 0, "probes": 3}), "values.factor = 0"),
    "short correction": (_rec(kind="correction", problem=None,
                              values={"features": ["bias", "bwd"], "model": [0.5],
                                      "runs": 3}), "not a usable correction of 2 features"),
    "empty perf config": (_rec(kind="perf-db", values={"perf_config": "", "time_ms": 1.0,
                                                       "default_ms": 2.0}),
                          "values.perf_config = \"\" must be a non-empty printable name"),
    "not an object": ("[1, 2]", "a record must be a JSON object"),
    "a second header": (json.dumps({"format": FORMAT, "version": 1}),
                        "a second header line (two files joined?)"),
}
