"""Reads `wticonv devices --json` on stdin, prints one set-up line per device, and exits 0
when a CPU device is usable (1 otherwise). Used by tools/setup-cpu-driver.sh."""

import json
import sys

rows = json.load(sys.stdin)
for r in rows:
    line = f"{r['index']} {r['kind']} {r['name']!r} ({r['platform']} {r['driver']}): {r['status']}"
    if r["set_aside"]:
        line += " -- " + r["set_aside"]
    elif r["peak_gflops"]:
        line += f", peak {r['peak_gflops']:.1f} GFLOP/s"
    print("setup:   " + line)
sys.exit(0 if any(r["kind"] == "cpu" and r["status"] == "usable" for r in rows) else 1)
