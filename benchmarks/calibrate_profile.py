"""Where the time of ``wticonv calibrate`` goes: a cProfile of one calibration.

Runs :func:`wticonv.measuring.calibrate.calibrate` for its default budget on the default
device, in the current cache directory (set ``WTICONV_CACHE_DIR`` to an empty folder for
a cold run: kernel builds included), under cProfile. Prints the probes measured, the
solver runs, and the functions with the most cumulative and own time.

    WTICONV_CACHE_DIR=$(mktemp -d) python benchmarks/calibrate_profile.py --top 40
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time

import wticonv
from wticonv.measuring.calibrate import calibrate


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--budget-s", type=float, default=None)
    ap.add_argument("--stats", default=None, metavar="FILE", help="write the raw profile")
    args = ap.parse_args(argv)
    handle = wticonv.Handle()
    runs: list = []
    prof = cProfile.Profile()
    start = time.monotonic()
    prof.enable()
    calibrate(handle, measurements=runs, budget_s=args.budget_s)
    prof.disable()
    wall = time.monotonic() - start
    probes = len({p for p, *_ in runs})
    print(f"{handle.device.info.name}: {probes} probes, {len(runs)} solver runs in "
          f"{wall:.1f} s ({wall / max(probes, 1) * 1e3:.0f} ms per probe)")
    c = handle.device.programs.counters
    print(f"programs: {c.source_builds} built from source ({c.isolated_builds} in the build "
          f"helper), {c.binary_loads} loaded from stored binaries, {c.memory_hits} memory hits")
    st = pstats.Stats(prof, stream=sys.stdout)
    if args.stats:
        st.dump_stats(args.stats)
    st.sort_stats("cumulative").print_stats(args.top)
    st.sort_stats("tottime").print_stats(args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
