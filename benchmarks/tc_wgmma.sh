#!/bin/sh
# Issue 19: the wgmma GEMM (kernels/nv/sgemm_wg.cl) checked and timed on a Hopper GPU.
#
#   . .whl/gpu-env.sh && sh benchmarks/tc_wgmma.sh OUTDIR
#
# 1. tests/test_gpu.py -k tensor_core_gemm: every tile of both classes against float64,
#    the wgmma tiles plain and pipelined (WG_PIPE), 16-byte and element loads;
# 2. benchmarks/tc_gemm.py per class on the tiles in WG3 (3xTF32) and WG1 (TF32), given as
#    tc_gemm's --configs (wgp...: pipelined), beside mma.sync's best tile and cuBLAS,
#    at 4096^3, 2048x4096x2048 and 250x301x271 (element loads); OUTDIR/tc-gemm-CLASS.json.
# PYTHON (default python3) is the interpreter with wticonv installed. Exits 1 if a part
# failed (the others still run).
set -u
out=${1:?usage: sh benchmarks/tc_wgmma.sh OUTDIR}
py=${PYTHON:-python3}
mkdir -p "$out"
rc=0
"$py" -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu.py -k tensor_core_gemm || rc=1
for spec in "3xtf32:${WG3:-wg128x128x32x2,wgp128x128x32x3,wgp128x128x32x4,wg128x128x64x2,128x128x64x64x16x8x3}" \
            "tf32:${WG1:-wg256x128x32x3,wgp256x128x32x3,wgp256x128x32x4,128x128x64x64x32x32x3}"; do
    math=${spec%%:*}
    "$py" benchmarks/tc_gemm.py --classes "$math" --configs "${spec#*:}" -i 10 \
        --sizes 4096x4096x4096,2048x4096x2048,250x301x271 --json "$out/tc-gemm-$math.json" \
        || rc=1
done
exit $rc
