#!/usr/bin/env bash
# The FFT solver's measurements for fitting and judging its WTI model (issue 20), on the
# device named by --device (default: the first GPU), into folder OUT:
#   benchmarks/fft_measure.sh OUT STEP...    STEP: fit32 fit1 fitcpu test32 test1 probes32 probes1
#                                              targets32 targets8
# fitN     per-launch times of the FFT solvers (benchmarks/fft_launches.py) on the
#          calibration probes and the development networks at N (the constants are fitted
#          to these only);
# testN, probesN   the FFT solvers timed as `wticonv evaluate` times them
#          (benchmarks/measure_corpus.py --solvers 'fft.*') on the held-out test networks'
#          and the calibration probes' FFT-applicable problems: merged with the recorded
#          runs of the other solvers, tools/heldout.py scores the fallback with it installed;
# targetsN every solver on the target layers (5x5 and larger, C and K >= 64).
# Key files: benchmarks/results/fft-keys-STEP.txt (testcpu4, probescpu4: the CPU replay
# files' problems). KIND=cpu for the CPU (default gpu); ITER runs per solver (default 5).
set -euo pipefail
out=$1; shift
kind=${KIND:-gpu}
dev=${DEVICE:-$kind}
budget=${BUDGET_S:-150}
py=${PYTHON:-python}
mkdir -p "$out"
for step in "$@"; do
  keys=benchmarks/results/fft-keys-$step.txt
  case $step in
    fit*) $py benchmarks/fft_launches.py --keys "$keys" --device "$dev" -i 3 \
            --budget-s "$budget" --out "$out/fft-launches-$step-$kind.csv" ;;
    test*|probes*) $py benchmarks/measure_corpus.py --keys "$keys" --solvers 'fft.*' \
            --kind "$kind" --device "$dev" -i "${ITER:-5}" --budget-s "$budget" \
            --out "$out/fft-$step-$kind.csv" ;;
    targets*) $py benchmarks/measure_corpus.py --keys "$keys" --kind "$kind" --device "$dev" \
            -i 5 --budget-s "$budget" --out "$out/fft-$step-$kind.csv" ;;
    *) echo "unknown step $step" >&2; exit 2 ;;
  esac
done
