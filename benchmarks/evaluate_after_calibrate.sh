#!/bin/sh
# Calibrate, then score the fallback on corpus networks, as a user would (issue #18):
#   sh benchmarks/evaluate_after_calibrate.sh OUTDIR N BUDGET_S NETWORK...
# writes OUTDIR/calibrate.{csv,txt} and OUTDIR/eval-NETWORK.{csv,txt}; stops starting
# networks once BUDGET_S seconds have passed since the calibration ended (the first
# network always runs). PYTHON (default: python) is the interpreter with wticonv installed
# (.venv/bin/python here; on the GPU machine, python after . .whl/gpu-env.sh). DEVICE
# (default: gpu) is the device to use, CAL_ARGS (default: none) extra calibrate options
# such as --budget-s 60, and EVAL_ARGS (default: -i 5 --time-cap-ms 50) what evaluate
# times each solver with; the CPU of issue #18: DEVICE=cpu EVAL_ARGS="-i 3".
# Summarize OUTDIR with benchmarks/summarize_evaluations.py. Exits 1 if a network failed.
if [ $# -lt 4 ]; then
    echo "usage: sh benchmarks/evaluate_after_calibrate.sh OUTDIR N BUDGET_S NETWORK..." >&2
    echo "(NETWORK: a corpus or built-in name, as 'wticonv networks' lists)" >&2
    exit 2
fi
out=$1 n=$2 budget=$3
shift 3
case "$n" in
    ''|*[!0-9]*|0*) echo "N ($n) must be a whole number of at least 1" >&2; exit 2 ;;
esac
case "$budget" in
    ''|*[!0-9]*) echo "BUDGET_S ($budget) must be a whole number of seconds" >&2; exit 2 ;;
esac
py=${PYTHON:-python}
device=${DEVICE:-gpu}
eval_args=${EVAL_ARGS:--i 5 --time-cap-ms 50}
cal_args=${CAL_ARGS:-}
# every network name checked before the calibration spends its minute
"$py" -c 'import sys
from wticonv.errors import WticonvError
from wticonv.workloads.networks import load_network
try:
    for name in sys.argv[1:]:
        load_network(name, 1)
except WticonvError as e:
    sys.exit(str(e))' "$@" || exit 2
mkdir -p "$out"
failed=0
# shellcheck disable=SC2086  # cal_args and eval_args are split into options on purpose
"$py" -m wticonv calibrate --device "$device" $cal_args --csv "$out/calibrate.csv" > "$out/calibrate.txt" 2>&1 \
    || { tail -3 "$out/calibrate.txt" >&2; exit 1; }
start=$(date +%s)
for net in "$@"; do
    [ $(( $(date +%s) - start )) -gt "$budget" ] && { echo "budget spent before $net"; break; }
    "$py" -m wticonv evaluate "$net" -n "$n" $eval_args --device "$device" \
        --csv "$out/eval-$net.csv" > "$out/eval-$net.txt" 2>&1 \
        || { echo "$net failed:" >&2; tail -3 "$out/eval-$net.txt" >&2; failed=1; continue; }
    echo "$net $(( $(date +%s) - start )) s: $(grep '^fallback' "$out/eval-$net.txt")"
done
exit $failed
