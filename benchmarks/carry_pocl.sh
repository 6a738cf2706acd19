# PyPI's PoCL (a CPU OpenCL driver) for the lent GPU machine, which has none: the CPU
# workers of a fleet there (issue 23) need one.
#
#   sh benchmarks/carry_pocl.sh pack        # here, once: writes .whl/pocl-min.tar.xz
#   . benchmarks/carry_pocl.sh unpack       # there, after . .whl/gpu-env.sh
#
# The wheel (pocl-binary-distribution 3.0, 58 MB) with the 4 MB repository and the other
# wheels is over the 64 MiB a device call may carry. Packed as xz without the kernel
# libraries of the CPUs older than AVX2 (pocl picks kernel-<arch>.bc by the CPU's
# features; the lent machines' CPUs have AVX2 and AVX-512), it takes 28 MB.
# unpack puts the driver into /tmp/site (gpu-env.sh's target, in the wheel's layout, which
# libpocl's relative path to its share/ folder needs) and adds it to the ICD folder
# gpu-env.sh made (/tmp/icd, OCL_ICD_VENDORS).
case "${1:-}" in
pack)
    set -e
    tmp=$(mktemp -d)
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp --platform manylinux2014_x86_64 -d "$tmp" \
        "pocl-binary-distribution==3.0"
    (cd "$tmp" && unzip -q pocl_binary_distribution-*.whl &&
     tar --exclude='*-avx.bc' --exclude='*-avx_f16c.bc' --exclude='*-avx_fma4.bc' \
         --exclude='*-ssse3.bc' --exclude='*-sse41.bc' --exclude='*-sse2.bc' \
         -cf - pyopencl/.libs/libpocl-*.so pocl_binary_distribution) |
        xz -9 -T0 > .whl/pocl-min.tar.xz
    rm -rf "$tmp"
    ls -la .whl/pocl-min.tar.xz ;;
unpack)
    tar -xJf .whl/pocl-min.tar.xz -C /tmp/site &&
    ls /tmp/site/pyopencl/.libs/libpocl-*.so > /tmp/icd/pocl.icd &&
    python3 -c "import pyopencl as cl; print('OpenCL:', [(p.name, [d.name for d in p.get_devices()]) for p in cl.get_platforms()])" ;;
*)
    echo "usage: sh benchmarks/carry_pocl.sh pack | . benchmarks/carry_pocl.sh unpack" >&2 ;;
esac
