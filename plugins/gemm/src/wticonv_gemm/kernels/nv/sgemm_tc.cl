/* Tensor-core SGEMM for NVIDIA GPUs of compute capability 8.0 or newer, through inline
 * PTX: mma.sync.m16n8k8 with TF32 operands and FP32 accumulators, and cp.async copies
 * from global to local memory. Only NVIDIA's OpenCL builds it, hence its folder:
 * kernels/nv/ holds the kernels that need that driver; the CPU kernel-file checks
 * (Oclgrind: every .cl file directly in kernels/ builds and runs) leave the folder
 * out, and tests/test_gpu.py builds and checks these on the GPU.
 *
 * It computes what sgemm (sgemm_gpu.cl) computes, with the same arguments:
 *
 *   C[g](m, n) = sum_b sum_k A[g](b, m, k) * B[g](b, k, n)   (+ C[g](m, n) when beta = 1)
 *
 *   A(b, m, k) = A + a_off + g*a_gs + bofs(b, a_bs, a_bs2) + m*a_ms + k*a_ks
 *   B(b, k, n) = B + b_off + g*b_gs + bofs(b, b_bs, b_bs2) + k*b_ks + gemm_col(n)
 *   C(m, n)    = C + c_off + g*c_gs + m*c_ms + gemm_col(n)     (gemm_common.h)
 *
 * bofs(b, s1, s2) = (b / NB2)*s1 + (b % NB2)*s2; grid dimension 2 runs G groups x S
 * split-K layers, layer s summing batch terms [s*NBS, (s+1)*NBS) into C + s*c_ss.
 *
 * Two numerical classes (TC_SPLIT):
 *   0  tf32:   each operand rounded to TF32 (cvt.rna: 10-bit mantissa), one product;
 *   1  3xtf32: each operand split into a TF32 high part and the TF32 rounding of the
 *              remainder, x = hi + lo; three products summed, lo.hi + hi.lo + hi.hi
 *              (the small terms first), which is FP32-accurate: the dropped lo.lo term
 *              is about 2^-22 of a product.
 * Local memory holds FP32 tiles; the split is done in registers as each warp loads its
 * fragments. The tensor cores add their products with truncation, not rounding (Ootomo and
 * Yokota, "Recovering single precision accuracy from Tensor Cores while surpassing the
 * FP32 theoretical peak performance", IJHPCA 2022), which over a long K biases the sum
 * by about K/8 x 2^-23 of it, more than an FP32 sum's error; so in 3xTF32 each TC_KF
 * values of k go to a fresh accumulator of 4 registers, added to the running sum in FP32
 * with rounding.
 *
 * Work-group: TC_BM x TC_BN outputs, (TC_BM / TC_WM) x (TC_BN / TC_WN) warps, each warp
 * TC_WM x TC_WN outputs as (TC_WM / 16) x (TC_WN / 8) mma tiles. K advances TC_BK at a
 * time through TC_STAGES local tiles: cp.async fills the tile TC_STAGES - 1 steps ahead
 * while the current one is multiplied. Tiles are row-major with padded rows (A: TC_BK + 4
 * words, B: TC_BN + 8), so that a warp's fragment loads hit 32 distinct banks.
 * Out-of-range rows, columns and k are staged as zeros (cp.async with a source size of 0)
 * and never written. With TC_C2 the host promises C's column pairs (2n, 2n+1) contiguous
 * and 8-byte aligned (a dense matrix, or pictures with an even number of pixels per row).
 *
 * Loads (tc_common.h, shared with sgemm_wg.cl): element by element (4-byte cp.async) or,
 * with TC_VEC, 16 bytes at a time.
 *
 * Launch: local size (THREADS, 1, 1); global size (THREADS * ceil(N / TC_BN),
 * ceil(M / TC_BM), G * S).
 *
 * Fragment layouts are those of the PTX ISA for mma.m16n8k8 .tf32 (gr = lane / 4,
 * tq = lane % 4): A a0 (gr, tq), a1 (gr + 8, tq), a2 (gr, tq + 4), a3 (gr + 8, tq + 4);
 * B b0 (tq, gr), b1 (tq + 4, gr); C c0 (gr, 2tq), c1 (gr, 2tq + 1), c2 (gr + 8, 2tq),
 * c3 (gr + 8, 2tq + 1).
 *
 * Measured on the H200 (benchmarks/results/tc-gemm-h200.txt): cp.async staging ran 1.15x
 * faster than staging through registers, and ldmatrix for the A fragments no faster than
 * these 32-bit loads, so it is not used.
 */

#ifndef TC_BM
#define TC_BM 128       /* work-group tile rows (multiple of TC_WM) */
#endif
#ifndef TC_BN
#define TC_BN 128       /* work-group tile columns (multiple of TC_WN) */
#endif
#ifndef TC_WM
#define TC_WM 64        /* warp tile rows (multiple of 16) */
#endif
#ifndef TC_WN
#define TC_WN 32        /* warp tile columns (multiple of 8) */
#endif
#ifndef TC_BK
#define TC_BK 16        /* k per local tile (multiple of TC_KF) */
#endif
#ifndef TC_KF
#define TC_KF 16        /* k per fragment batch (multiple of 8); in 3xTF32 the products of
                           one batch are summed in a fresh accumulator */
#endif
#ifndef TC_STAGES
#define TC_STAGES 3     /* local tiles in flight (cp.async pipeline depth), at least 2 */
#endif
#ifndef TC_SPLIT
#define TC_SPLIT 1      /* 1: 3xTF32 (FP32-accurate), 0: TF32 */
#endif
#ifndef TC_VEC
#define TC_VEC 0        /* 1: 16-byte loads (A along k, B along n); see above */
#endif
#ifndef TC_A_KFAST
#define TC_A_KFAST 1    /* element loads: 1 when A is contiguous along k, 0 along m */
#endif
#ifndef TC_B_KFAST
#define TC_B_KFAST 0    /* element loads: 1 when B is contiguous along k, 0 along n */
#endif
#ifndef TC_C2
#define TC_C2 0         /* 1: C's columns come in contiguous 8-byte-aligned pairs (2n, 2n+1):
                           stored as float2, one column offset per pair */
#endif

#include "gemm_common.h"

#define KS (TC_KF / 8)
#define WARPS_M (TC_BM / TC_WM)
#define WARPS_N (TC_BN / TC_WN)
#define THREADS (32 * WARPS_M * WARPS_N)
#define MT (TC_WM / 16)                           /* mma tiles per warp, rows */
#define NT (TC_WN / 8)                            /* mma tiles per warp, columns */
#define AS_LD (TC_BK + 4)                         /* padded row lengths, words */
#define BS_LD (TC_BN + 8)
#define A_TILE (TC_BM * AS_LD)
#define B_TILE (TC_BK * BS_LD)

#if TC_BK % TC_KF || TC_KF % 8 || TC_BM % TC_WM || TC_BN % TC_WN || TC_WM % 16 || TC_WN % 8
#error "sgemm_tc: TC_BK must be a multiple of TC_KF, TC_KF of 8, TC_BM of TC_WM, TC_BN of TC_WN, TC_WM of 16, TC_WN of 8"
#endif

/* Where A's element (m, k) goes in its local tile, and each thread's A load slots (see
 * tc_common.h): 16-byte chunks, BK / 4 threads to a row; single elements, consecutive
 * threads along the direction A is contiguous in. */
#define A_DST(m, k) (m) * AS_LD + (k)         /* added to a tile pointer: no outer brackets */
#define TC_A_VEC_SLOT const int a_k = 4 * (tid % (TC_BK / 4)), a_m = tid / (TC_BK / 4);
#if TC_A_KFAST
#define TC_A_ELEMENT_SLOT const int a_k = tid % TC_BK, a_m = tid / TC_BK;
#define A_M(v) (a_m + (v) * (THREADS / TC_BK))
#define A_K(v) a_k
#else
#define TC_A_ELEMENT_SLOT const int a_m = tid % TC_BM, a_k = tid / TC_BM;
#define A_M(v) a_m
#define A_K(v) (a_k + (v) * (THREADS / TC_BM))
#endif
#include "tc_common.h"

#define MMA(d, a, b)                                                                     \
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "                  \
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"                 \
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                        \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]))

__kernel __attribute__((reqd_work_group_size(THREADS, 1, 1)))
void sgemm_tc(GEMM_GPU_PARAMS)
{
    __local float as[TC_STAGES * A_TILE] __attribute__((aligned(16)));
    __local float bs[TC_STAGES * B_TILE] __attribute__((aligned(16)));
    const int tid = get_local_id(0);
    const int lane = tid & 31, warp = tid >> 5;
    const int gr = lane >> 2, tq = lane & 3;
    const int wm = (warp / WARPS_N) * TC_WM, wn = (warp % WARPS_N) * TC_WN;
    const int m0 = get_group_id(1) * TC_BM, n0 = get_group_id(0) * TC_BN;
    GEMM_GPU_GROUP
    const int ktiles = (K + TC_BK - 1) / TC_BK;
    const int steps = max(b_hi - b_lo, 0) * ktiles;

    TC_LOAD_SLOTS

    float acc[MT][NT][4];
    #pragma unroll
    for (int i = 0; i < MT; ++i)
        #pragma unroll
        for (int j = 0; j < NT; ++j)
            acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.0f;

    #pragma unroll
    for (int s = 0; s < TC_STAGES - 1; ++s) {
        ISSUE(s)
    }
    for (int t = 0; t < steps; ++t) {
        /* tile t has landed (at most TC_STAGES - 2 younger groups are pending), and every
         * warp is done with tile t - 1, whose buffer the next issue refills */
        asm volatile("cp.async.wait_group " STR(TC_STAGES - 2) ";");
        barrier(CLK_LOCAL_MEM_FENCE);
        ISSUE(t + TC_STAGES - 1)
        __local const float *at = as + (t % TC_STAGES) * A_TILE;
        __local const float *bt = bs + (t % TC_STAGES) * B_TILE;
        #pragma unroll
        for (int kf = 0; kf < TC_BK; kf += TC_KF) {
            uint ah[KS][MT][4], bh[KS][NT][2];
#if TC_SPLIT
            uint al[KS][MT][4], bl[KS][NT][2];
#endif
            #pragma unroll
            for (int ks = 0; ks < KS; ++ks) {
                #pragma unroll
                for (int i = 0; i < MT; ++i) {
                    const int r = (wm + 16 * i + gr) * AS_LD + kf + 8 * ks + tq;
                    const float x0 = at[r], x1 = at[r + 8 * AS_LD];
                    const float x2 = at[r + 4], x3 = at[r + 8 * AS_LD + 4];
                    SPLIT(ah[ks][i][0], al[ks][i][0], x0)
                    SPLIT(ah[ks][i][1], al[ks][i][1], x1)
                    SPLIT(ah[ks][i][2], al[ks][i][2], x2)
                    SPLIT(ah[ks][i][3], al[ks][i][3], x3)
                }
                #pragma unroll
                for (int j = 0; j < NT; ++j) {
                    const int c = (kf + 8 * ks + tq) * BS_LD + wn + 8 * j + gr;
                    const float y0 = bt[c], y1 = bt[c + 4 * BS_LD];
                    SPLIT(bh[ks][j][0], bl[ks][j][0], y0)
                    SPLIT(bh[ks][j][1], bl[ks][j][1], y1)
                }
            }
            #pragma unroll
            for (int i = 0; i < MT; ++i)
                #pragma unroll
                for (int j = 0; j < NT; ++j) {
#if TC_SPLIT
                    /* this batch's products in a fresh accumulator, then a rounded sum */
                    float p[4] = {0.0f, 0.0f, 0.0f, 0.0f};
                    #pragma unroll
                    for (int ks = 0; ks < KS; ++ks) {
                        MMA(p, al[ks][i], bh[ks][j]);
                        MMA(p, ah[ks][i], bl[ks][j]);
                        MMA(p, ah[ks][i], bh[ks][j]);
                    }
                    #pragma unroll
                    for (int e = 0; e < 4; ++e)
                        acc[i][j][e] += p[e];
#else
                    #pragma unroll
                    for (int ks = 0; ks < KS; ++ks)
                        MMA(acc[i][j], ah[ks][i], bh[ks][j]);
#endif
                }
        }
    }
    asm volatile("cp.async.wait_group 0;");

    __global float *Cg = C + c_off + split * c_ss + grp * c_gs;
#if TC_C2
    #pragma unroll
    for (int j = 0; j < NT; ++j) {
        const int n = n0 + wn + 8 * j + 2 * tq;
        if (n >= N)
            continue;
        const long col = gemm_col(n, cP, cWo, cns, chs, cws);
        #pragma unroll
        for (int i = 0; i < MT; ++i)
            #pragma unroll
            for (int v = 0; v < 2; ++v) {
                const int m = m0 + wm + 16 * i + gr + 8 * v;
                if (m >= M)
                    continue;
                __global float *c = Cg + m * c_ms + col;
                float2 r = (float2)(acc[i][j][2 * v], acc[i][j][2 * v + 1]);
                if (n + 1 < N) {
                    if (beta)
                        r += vload2(0, c);
                    vstore2(r, 0, c);
                } else {
                    c[0] = beta ? c[0] + r.x : r.x;
                }
            }
    }
#else
    #pragma unroll
    for (int j = 0; j < NT; ++j)
        #pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int n = n0 + wn + 8 * j + 2 * tq + h;
            if (n >= N)
                continue;
            const long col = gemm_col(n, cP, cWo, cns, chs, cws);
            #pragma unroll
            for (int i = 0; i < MT; ++i)
                #pragma unroll
                for (int v = 0; v < 2; ++v) {
                    const int m = m0 + wm + 16 * i + gr + 8 * v;
                    if (m >= M)
                        continue;
                    __global float *c = Cg + m * c_ms + col;
                    const float r = acc[i][j][2 * v + h];
                    *c = beta ? *c + r : r;
                }
        }
#endif
}
