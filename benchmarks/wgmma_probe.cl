/* Kernels of benchmarks/wgmma_probe.py: wgmma (sm_90a) reached from NVIDIA's OpenCL
 * through deferred PTX (wticonv.runtime.ptx), with the operand lists of the GEMM plugin's
 * wgmma_ops.h (A from registers, B from local memory, K-major, no swizzle). */
#define WG_DEFER "//@"
#include "wgmma_ops.h"

inline uint smem(__local const float *p) { return (uint)(size_t)p; }

/* descriptor: start address, leading (along k) and stride (along n) byte offsets */
inline ulong desc(__local const float *p, uint lbo, uint sbo)
{
    return (ulong)((smem(p) >> 4) & 0x3FFF) | ((ulong)((lbo >> 4) & 0x3FFF) << 16)
         | ((ulong)((sbo >> 4) & 0x3FFF) << 32);
}

#define FENCE() asm volatile(WG_DEFER "wgmma.fence.sync.aligned;\n" ::: "memory")
#define COMMIT() asm volatile(WG_DEFER "wgmma.commit_group.sync.aligned;\n" ::: "memory")
#define WAIT0() asm volatile(WG_DEFER "wgmma.wait_group.sync.aligned 0;\n" ::: "memory")
#define PROXY() asm volatile(WG_DEFER "fence.proxy.async.shared::cta;\n" ::: "memory")

/* D (64 x 64) = A (64 x 8, row-major) . B (8 x 64), B given transposed (64 x 8); one
 * warpgroup. B goes to local memory as 8 x 4 core matrices, element (n, k) at byte
 * (n / 8) * sbo + (k / 4) * lbo + (n % 8) * 16 + (k % 4) * 4. */
__kernel __attribute__((reqd_work_group_size(128, 1, 1)))
void product(__global const float *A, __global const float *Bt, __global float *D,
             const uint lbo, const uint sbo)
{
    __local float bs[64 * 8] __attribute__((aligned(128)));
    const int t = get_local_id(0);
    for (int i = t; i < 64 * 8; i += 128) {
        const int n = i / 8, k = i % 8;
        bs[((n / 8) * sbo + (k / 4) * lbo + (n % 8) * 16 + (k % 4) * 4) / 4] = Bt[i];
    }
    PROXY();
    barrier(CLK_LOCAL_MEM_FENCE);
    const int w = t / 32, lane = t % 32, gr = lane / 4, tq = lane % 4;
    const int r = 16 * w + gr;
    uint a[4];     /* fragment: (gr, tq), (gr + 8, tq), (gr, tq + 4), (gr + 8, tq + 4) */
    a[0] = as_uint(A[r * 8 + tq]);
    a[1] = as_uint(A[(r + 8) * 8 + tq]);
    a[2] = as_uint(A[r * 8 + tq + 4]);
    a[3] = as_uint(A[(r + 8) * 8 + tq + 4]);
    float d[32];
    for (int i = 0; i < 32; ++i)
        d[i] = 0.0f;
    FENCE();
    WG_MMA_64(d, a, desc(bs, lbo, sbo), 0);
    COMMIT();
    WAIT0();
    for (int j = 0; j < 8; ++j)
        for (int h = 0; h < 2; ++h)
            for (int e = 0; e < 2; ++e)
                D[(r + 8 * h) * 64 + 8 * j + 2 * tq + e] = d[4 * j + 2 * h + e];
}

/* Throughput on operands already in place: each work-group issues 4 x iters wgmma
 * m64n128k8 (A in registers, B in local memory), no loads. */
__kernel __attribute__((reqd_work_group_size(128, 1, 1)))
void wgmma_rate(__global float *D, const int iters)
{
    __local float bs[128 * 8] __attribute__((aligned(128)));
    const int t = get_local_id(0);
    for (int i = t; i < 128 * 8; i += 128)
        bs[i] = 1e-3f * (i % 5);
    PROXY();
    barrier(CLK_LOCAL_MEM_FENCE);
    uint a[4] = {as_uint(1e-3f * t), as_uint(2e-3f), as_uint(3e-3f), as_uint(4e-3f)};
    float d[64];
    #pragma unroll
    for (int i = 0; i < 64; ++i)
        d[i] = 0.0f;
    const ulong db = desc(bs, 128, 256);
    for (int it = 0; it < iters; ++it) {
        FENCE();
        WG_MMA_128(d, a, db, 1);
        WG_MMA_128(d, a, db, 1);
        WG_MMA_128(d, a, db, 1);
        WG_MMA_128(d, a, db, 1);
        COMMIT();
        WAIT0();
    }
    float s = 0.0f;
    #pragma unroll
    for (int i = 0; i < 64; ++i)
        s += d[i];
    D[get_global_id(0)] = s;
}

/* The same on mma.sync m16n8k8: each warp issues 16 x iters independent products. */
__kernel __attribute__((reqd_work_group_size(128, 1, 1)))
void mma_rate(__global float *D, const int iters)
{
    const int t = get_global_id(0);
    const uint a[4] = {t, t + 1, t + 2, t + 3}, b[2] = {t * 3, t * 5};
    float d[16][4];
    for (int i = 0; i < 16; ++i)
        for (int j = 0; j < 4; ++j)
            d[i][j] = 0.0f;
    for (int it = 0; it < iters; ++it) {
        #pragma unroll
        for (int i = 0; i < 16; ++i)
            asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
                         "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                         : "+f"(d[i][0]), "+f"(d[i][1]), "+f"(d[i][2]), "+f"(d[i][3])
                         : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    }
    float s = 0.0f;
    for (int i = 0; i < 16; ++i)
        for (int j = 0; j < 4; ++j)
            s += d[i][j];
    D[t] = s;
}
