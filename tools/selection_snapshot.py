"""Record every solver's verdict for a set of network layers, or compare with a record.

For every layer of resnet50, vgg16, inception3 and mobilenetv2 at N in {1, 8, 32, 33}, in
all three directions, on a GPU and a CPU :class:`~wticonv.testing.launches.RecordingDevice`,
selection is run and each verdict (applicable, WTI, workspace, reason, ...) and the chosen
solver are written out; ``--check`` compares them with a snapshot instead (floats exactly).

    python tools/selection_snapshot.py --write snap.json
    python tools/selection_snapshot.py --check snap.json
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict

import wticonv
from wticonv.measuring.bench import parse_directions
from wticonv.errors import NoApplicableSolverError
from wticonv.workloads.networks import load_network
from wticonv.selection.ranking import select
from wticonv.testing.launches import RecordingDevice

NETWORKS = ("resnet50", "vgg16", "inception3", "mobilenetv2")


def snapshot() -> dict:
    """``{case: {"chosen": id, "solvers": [verdict dicts]}}`` for every case."""
    reg = wticonv.get_handle().registry
    out = {}
    for kind in ("gpu", "cpu"):
        dev = RecordingDevice(kind)
        for name in NETWORKS:
            for n in (1, 8, 32, 33):
                for i, layer in enumerate(load_network(name, n).layers):
                    for d in parse_directions("all"):
                        p = layer.problem.with_direction(d)
                        case = f"{kind} {name} N={n} #{i} {d} {p.key}"
                        try:
                            s = select(reg, p, dev)
                        except NoApplicableSolverError as e:
                            out[case] = {"error": str(e)}
                            continue
                        out[case] = {"chosen": s.solver_id,
                                     "solvers": [asdict(v) for v in s.verdicts]}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", metavar="JSON")
    mode.add_argument("--check", metavar="JSON")
    args = ap.parse_args(argv)
    snap = json.loads(json.dumps(snapshot()))    # as the file would hold it
    if args.write:
        with open(args.write, "w") as f:
            json.dump(snap, f, indent=0, sort_keys=True)
        print(f"{len(snap)} cases written to {args.write}")
        return 0
    with open(args.check) as f:
        ref = json.load(f)
    bad = [c for c in sorted(set(ref) | set(snap)) if ref.get(c) != snap.get(c)]
    for c in bad[:20]:
        print(f"DIFFERS: {c}\n  was: {ref.get(c)}\n  now: {snap.get(c)}")
    print(f"{len(snap)} cases, {len(bad)} differ")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
