"""direct.chanvec in one direction (backward weights by default: ``chanvec_wrw``; backward
data: ``chanvec_fwd`` on dy; ``wticonv_direct/kernels/chanvec.cl``) against every other
solver, layer by layer (issue 21; docs/performance.md, "channels in the lanes").

    python benchmarks/chanvec_layers.py [NETWORK] [-n 8] [--direction wrw] [--rounds 3]
        [--json F]

Rounds are interleaved: per round and layer, ``wticonv.measuring.find.find`` times every
installed solver but direct.naive (far slower; nothing is recorded). Each solver keeps its
best time over the rounds, since the 2-core machines here have slow spells of seconds.
The table gives per layer direct.chanvec's time, the best other solver's and their ratio
(below 1: chanvec is faster), and the model's predicted time; then the geometric mean
of the ratios and the network's summed time with and without chanvec. The layers are the
network's problems of that direction that direct.chanvec takes (K/G a multiple of 16, in
backward data C/G and stride 1; not depthwise, no dilation).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("network", nargs="?", default="resnet50")
    ap.add_argument("-n", "--batch", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("-i", "--iterations", type=int, default=3)
    ap.add_argument("--direction", choices=("fwd", "bwd", "wrw"), default="wrw")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    if args.rounds < 1 or args.iterations < 1 or args.batch < 1:
        ap.error("--rounds, -i and -n must be at least 1")
    os.environ["WTICONV_DISABLE_SOLVERS"] = "direct.naive"
    import wticonv
    from wticonv.measuring.find import find
    from wticonv.runtime.device import select_device
    from wticonv.workloads.networks import load_network
    from wticonv_direct import chanvec, chanvec_plan

    handle = wticonv.Handle(select_device(args.device))
    dev = handle.device
    layers, seen = [], set()
    for layer in load_network(args.network, args.batch).layers:
        p = layer.problem.with_direction(args.direction)
        if p.key not in seen and not chanvec_plan.decline_reason(p, dev):
            seen.add(p.key)
            layers.append((layer.name, p, layer.count))
    if not layers:
        sys.exit(f"chanvec_layers: direct.chanvec takes no {args.direction} layer of "
                 f"{args.network} on {dev.info.name}")
    best: dict = {}
    for rnd in range(args.rounds):
        for _, p, _ in layers:
            for r in find(handle, p, args.iterations, 1000.0, None, record=False,
                          search=False):
                if r.time_ms is not None:
                    t = best.get((p.key, r.solver_id))
                    best[(p.key, r.solver_id)] = r.time_ms if t is None else min(t, r.time_ms)
        print(f"round {rnd + 1} of {args.rounds} done", file=sys.stderr)
    rows, ratios, with_cv, without = [], [], 0.0, 0.0
    print(f"{'layer':16s} {'key':52s} {'chanvec':>8s} {'model':>8s} {'best other':>22s} "
          f"{'ratio':>6s}")
    for name, p, count in layers:
        mine = best.get((p.key, chanvec.ChanvecSolver.solver_id))
        others = {sid: t for (k, sid), t in best.items()
                  if k == p.key and sid != chanvec.ChanvecSolver.solver_id}
        if mine is None or not others:
            continue
        sid, t = min(others.items(), key=lambda kv: kv[1])
        model = 1e3 * chanvec.predicted_seconds(p, dev)
        ratios.append(mine / t)
        with_cv += count * min(mine, t)
        without += count * t
        rows.append({"layer": name, "key": p.key, "chanvec_ms": mine, "model_ms": model,
                     "best_other": sid, "best_other_ms": t, "count": count})
        print(f"{name[:16]:16s} {p.key:52s} {mine:8.3f} {model:8.3f} {sid:>13s} {t:8.3f} "
              f"{mine / t:6.2f}")
    geo = math.exp(sum(map(math.log, ratios)) / len(ratios))
    print(f"geometric mean chanvec / best other over {len(ratios)} layers: {geo:.3f}; "
          f"network {args.direction} time {without:.1f} ms without chanvec, {with_cv:.1f} ms with it "
          "(each layer's faster)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"network": args.network, "n": args.batch, "rounds": args.rounds,
                       "direction": args.direction,
                       "device": dev.info.name, "layers": rows, "geomean": geo}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
