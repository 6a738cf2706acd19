#!/bin/sh
# Issue 19: the GEMM solvers' perf configs on the GPU. ResNet-50 at N=32 against cuDNN
# with a fresh cache, then `wticonv tune` (every tunable solver's perf configs, the
# tensor-core and wgmma tiles included), then the same comparison with the perf-db, and
# the kit's perf_configs check on the GEMM solvers:
#   . .whl/gpu-env.sh && sh benchmarks/gpu_tune_resnet50.sh OUTDIR [TUNE_SECONDS]
set -u
out=${1:?usage: gpu_tune_resnet50.sh OUTDIR [TUNE_SECONDS]}
py=${PYTHON:-python3}
mkdir -p "$out"
export WTICONV_CACHE_DIR="$out/cache"
"$py" -m pytest -q -p no:cacheprovider plugins/gemm/tests/test_gemm_tuning.py > "$out/tests.log" 2>&1
tail -3 "$out/tests.log"
"$py" -c "
from wticonv import Handle
from wticonv.testing import check_solver
h = Handle('gpu')
for sid in ('gemm.1x1', 'gemm.im2col', 'gemm.1x1_3xtf32', 'gemm.im2col_3xtf32'):
    print(check_solver(sid, h, checks=['perf_configs'], raise_on_failure=False))
" > "$out/kit.log" 2>&1
tail -8 "$out/kit.log"
"$py" benchmarks/conv_vs_torch.py resnet50 -n 32 --device gpu --directions fwd,bwd,wrw \
    --json "$out/conv-before.json" > "$out/conv-before.txt" 2>&1
tail -4 "$out/conv-before.txt"
timeout -k 5 "${2:-240}" "$py" -m wticonv tune resnet50 -n 32 --device gpu --json \
    > "$out/tune.json" 2> "$out/tune.log"
echo "tune rc=$?"
"$py" benchmarks/conv_vs_torch.py resnet50 -n 32 --device gpu --directions fwd,bwd,wrw \
    --json "$out/conv-tuned.json" > "$out/conv-tuned.txt" 2>&1
tail -4 "$out/conv-tuned.txt"
rm -rf "$out/cache"
tar -czf "$out.tar.gz" -C "$(dirname "$out")" "$(basename "$out")"
