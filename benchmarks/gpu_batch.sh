#!/usr/bin/env bash
# Several GPU measurements in one call to the lent GPU machine, each under its own time
# limit, their outputs gathered into one archive (the machine sends back a few files only):
#
#   . .whl/gpu-env.sh && bash benchmarks/gpu_batch.sh OUTDIR STEP[:SECONDS] ...
#
# Steps (each writes under OUTDIR/STEP/, its console output to OUTDIR/STEP.log):
#   train     issue 22: benchmarks/torch_train_step.py, resnet18 N=8, 5 steps, GPU
#   tests     tests/test_gpu.py, the torch tests and direct.tiled's (pytest -m "gpu or not gpu")
#   sysdb     issue 23: tools/make_system_db.py gpu, budget 60 s, the JSONL file copied
#   fleet     issue 23: benchmarks/fleet_speedup.py on three small networks, N=8
#   fleetall  the same on every usable device (the GPU and, with benchmarks/carry_pocl.sh
#             unpacked, the CPU through PoCL), ROUNDS rounds (2), the fleet first
#             if FLEET_FIRST is set
#   errors    benchmarks/solver_errors.py resnet18 -n 2 and torch_resnet18_errors.py (GPU)
#   bisect    torch_resnet18_errors.py (GPU) with each of SETS (';'-separated lists of
#             solver ids) disabled in turn (WTICONV_DISABLE_SOLVERS): which solver makes
#             the gradients differ
#   percall   torch_resnet18_errors.py --per-call (GPU): every convolution call of the
#             model against float64 as it runs
#   poison    the same with the handle's workspace filled with NaN before every run
#   conv32    benchmarks/conv_vs_torch.py resnet50 -n 32, all directions, --json
#   wg        issue 19: benchmarks/tc_wgmma.sh (the tensor-core GEMM tests, then the
#             wgmma tiles, plain and pipelined, against cuBLAS)
#   eval1 / eval32   issue 18: evaluate_after_calibrate.sh at N=1 / N=32 on the test
#             networks (NETS, default the nine of the CPU protocol), budget BUDGET_S (240)
# A step that fails or runs out of time is logged and the next one runs. At the end
# OUTDIR.tar.gz holds OUTDIR (remade after each step). SECONDS defaults to 300.
set -u
out=${1:?usage: gpu_batch.sh OUTDIR STEP[:SECONDS] ...}
shift
mkdir -p "$out"
py=${PYTHON:-python3}
nets=${NETS:-convnext_small efficientnet_b2 mnasnet0_75 mobilenet_v3_small regnet_x_800mf regnet_y_3_2gf resnet34 shufflenet_v2_x2_0 squeezenet1_0}
export PYTHONUNBUFFERED=1
for spec in "$@"; do
    step=${spec%%:*}
    limit=300
    [ "$step" != "$spec" ] && limit=${spec#*:}
    d="$out/$step"
    mkdir -p "$d"
    start=$(date +%s)
    echo "== $step (limit ${limit} s) $(date -u +%H:%M:%S)" | tee -a "$out/batch.log"
    case "$step" in
        train) cmd=("$py" benchmarks/torch_train_step.py --model resnet18 -n 8 --device gpu
                    --steps 5 --out "$d/torch-train-step-resnet18-n8.csv") ;;
        tests) cmd=("$py" -m pytest -q -p no:cacheprovider -m "gpu or not gpu" tests/test_gpu.py
                    core/tests/ plugins/direct/tests/test_tiled.py -k "gpu or torch or tiled"
                    --junitxml "$d/junit.xml") ;;
        sysdb) cmd=(sh -c "$py tools/make_system_db.py gpu --budget-s 60 --cache $d/cache &&
                    cp plugins/sysdb/src/wticonv_sysdb/nvidia-*.jsonl $d/") ;;
        fleet) cmd=("$py" benchmarks/fleet_speedup.py alexnet squeezenet1_1 resnet18 -n 8
                    --devices gpu --rounds 2 --out "$d") ;;
        fleetall) cmd=("$py" benchmarks/fleet_speedup.py alexnet squeezenet1_1 resnet18 -n 8
                       --rounds "${ROUNDS:-2}" ${FLEET_FIRST:+--fleet-first} --out "$d") ;;
        errors) cmd=(sh -c "$py benchmarks/solver_errors.py resnet18 -n 2 --device gpu
                     --json $d/solver-errors-resnet18-n2.json;
                     $py benchmarks/torch_resnet18_errors.py --device gpu") ;;
        bisect) cmd=(bash -c 'IFS=";"; for set in $SETS; do echo "== disabled: $set"; WTICONV_DISABLE_SOLVERS="$set" "$0" benchmarks/torch_resnet18_errors.py --device gpu | grep -E "^(output|conv1.weight|layer1.1.bn2|largest)"; done' "$py") ;;
        percall) cmd=("$py" benchmarks/torch_resnet18_errors.py --device gpu --per-call) ;;
        poison) cmd=("$py" benchmarks/torch_resnet18_errors.py --device gpu --per-call
                     --poison-workspace) ;;
        conv32) cmd=("$py" benchmarks/conv_vs_torch.py resnet50 -n 32 --device gpu
                     --directions fwd,bwd,wrw --json "$d/conv-resnet50-n32.json") ;;
        wg) cmd=(env PYTHON="$py" sh benchmarks/tc_wgmma.sh "$d") ;;
        eval1|eval32) cmd=(env PYTHON="$py" sh benchmarks/evaluate_after_calibrate.sh "$d"
                           "${step#eval}" "${BUDGET_S:-240}" $nets) ;;
        *) echo "unknown step $step" | tee -a "$out/batch.log"; continue ;;
    esac
    timeout -k 10 "$limit" "${cmd[@]}" >"$out/$step.log" 2>&1
    rc=$?
    echo "   $step: rc=$rc in $(( $(date +%s) - start )) s" | tee -a "$out/batch.log"
    tail -n 25 "$out/$step.log"
    rm -rf "$d/cache"
    # after every step, so that a call cut short still brings back what was done
    tar -czf "$out.tar.gz" -C "$(dirname "$out")" "$(basename "$out")"
done
