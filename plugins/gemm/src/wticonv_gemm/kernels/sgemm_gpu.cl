/* SGEMM for GPUs: local-memory tiles with register blocking.
 *
 *   C[g](m, n) = sum_b sum_k A[g](b, m, k) * B[g](b, k, n)   (+ C[g](m, n) when beta = 1)
 *
 * for every group g (grid dimension 2). The "b" sum (a batch reduction, NB terms) lets the
 * backward-weights GEMM run over images without a transposed copy of dy.
 *
 * Addressing (all offsets in elements, 64-bit):
 *   A(b, m, k) = A + a_off + g*a_gs + bofs(b, a_bs, a_bs2) + m*a_ms + k*a_ks
 *   B(b, k, n) = B + b_off + g*b_gs + bofs(b, b_bs, b_bs2) + k*b_ks + colB(n)
 *   C(m, n)    = C + c_off + g*c_gs + m*c_ms + colC(n)
 * where bofs(b, s1, s2) = (b / NB2)*s1 + (b % NB2)*s2 (a two-level batch, e.g. images
 * and picture rows), and col(n) maps a column to an image pixel: with q = n / P, p = n % P, ho = p / Wo,
 * wo = p % Wo, col(n) = q*ns + ho*hs + wo*ws. A plain row-major matrix uses P = Wo = N,
 * ns = hs = 0, ws = 1; NCHW tensors use their image, row and pixel strides, so the
 * convolution's GEMMs read x and dy and write y and dx in place.
 *
 * Split-K: grid dimension 2 runs G x S work-group layers; layer (g, s) sums the batch terms
 * [s*NBS, (s+1)*NBS) into C + s*c_ss (partial sums), which splitk_reduce then adds in a
 * fixed order (deterministic, no atomics). S = 1, NBS = NB, c_ss = 0 without a split.
 *
 * Column offsets are computed once per thread (they do not change along k). Out-of-range
 * rows, columns and k are never read (zeros are staged instead) nor written.
 *
 * Tunables (chosen per problem shape by params.py; each set is one build, reused for every
 * size):
 */
#ifndef GEMM_MWG
#define GEMM_MWG 128   /* rows of C per work-group */
#endif
#ifndef GEMM_NWG
#define GEMM_NWG 128   /* columns of C per work-group */
#endif
#ifndef GEMM_KWG
#define GEMM_KWG 8     /* k per local-memory tile */
#endif
#ifndef GEMM_MDIMC
#define GEMM_MDIMC 16  /* work-items along m; each computes GEMM_MWG / GEMM_MDIMC rows */
#endif
#ifndef GEMM_NDIMC
#define GEMM_NDIMC 16  /* work-items along n; each computes GEMM_NWG / GEMM_NDIMC columns */
#endif
#ifndef GEMM_PIPELINE
#define GEMM_PIPELINE 1 /* 1: load the next k-step from global memory while computing this one */
#endif
#ifndef GEMM_VEC
#define GEMM_VEC 0      /* 1: float4 global loads of A (along k) and B (along n); the host sets
                           it only for k-contiguous A and for B whose columns come in
                           contiguous runs of 4, with strides and offsets that are multiples
                           of 4 (16-byte aligned) */
#endif
#ifndef GEMM_A_KFAST
#define GEMM_A_KFAST 1 /* 1: A is contiguous along k (a_ks == 1), load k-fastest; 0: m-fastest */
#endif
#ifndef GEMM_B_KFAST
#define GEMM_B_KFAST 0 /* 1: B is contiguous along k, load k-fastest; 0: n-fastest */
#endif

#define MWI (GEMM_MWG / GEMM_MDIMC)
#define NWI (GEMM_NWG / GEMM_NDIMC)
#define NTHREADS (GEMM_MDIMC * GEMM_NDIMC)
#define A_LOADS (GEMM_MWG * GEMM_KWG / NTHREADS)
#define B_LOADS (GEMM_NWG * GEMM_KWG / NTHREADS)
/* Rows of the local tiles are padded by 4 floats: float4 reads stay aligned, and the
 * transposing stores of A spread over more banks. */
#define APAD (GEMM_MWG + 4)
#define BPAD (GEMM_NWG + 4)

#include "gemm_common.h"

__kernel __attribute__((reqd_work_group_size(GEMM_NDIMC, GEMM_MDIMC, 1)))
void sgemm(GEMM_GPU_PARAMS)
{
    __local float As[GEMM_KWG][APAD];
    __local float Bs[GEMM_KWG][BPAD];
    const int tx = get_local_id(0), ty = get_local_id(1);
    const int tid = ty * GEMM_NDIMC + tx;
    const int m0 = get_group_id(1) * GEMM_MWG, n0 = get_group_id(0) * GEMM_NWG;
    GEMM_GPU_GROUP

    /* Load slots: each work-item stages A_LOADS elements of the A tile and B_LOADS of the
     * B tile per k-step; their row/column offsets are fixed, so they are computed once. */
    long a_pos[A_LOADS], b_pos[B_LOADS];
    int a_kk[A_LOADS], b_kk[B_LOADS];
    bool a_ok[A_LOADS], b_ok[B_LOADS];
#pragma unroll
    for (int i = 0; i < A_LOADS; ++i) {
        const int idx = tid + i * NTHREADS;
#if GEMM_A_KFAST
        const int kk = idx % GEMM_KWG, mm = idx / GEMM_KWG;
#else
        const int mm = idx % GEMM_MWG, kk = idx / GEMM_MWG;
#endif
        a_kk[i] = kk;
        a_ok[i] = m0 + mm < M;
        a_pos[i] = (long)min(m0 + mm, M - 1) * a_ms + kk * a_ks;
    }
#pragma unroll
    for (int i = 0; i < B_LOADS; ++i) {
        const int idx = tid + i * NTHREADS;
#if GEMM_B_KFAST
        const int kk = idx % GEMM_KWG, nn = idx / GEMM_KWG;
#else
        const int nn = idx % GEMM_NWG, kk = idx / GEMM_NWG;
#endif
        b_kk[i] = kk;
        b_ok[i] = n0 + nn < N;
        b_pos[i] = gemm_col(min(n0 + nn, N - 1), bP, bWo, bns, bhs, bws) + kk * b_ks;
    }

#if GEMM_VEC
    /* float4 slots: A along k (4 consecutive k of one row), B along n (4 columns). */
    long a_pos4[A_LOADS / 4], b_pos4[B_LOADS / 4];
    int a_k4[A_LOADS / 4], a_m4[A_LOADS / 4], b_k4[B_LOADS / 4], b_n4[B_LOADS / 4];
    bool a_ok4[A_LOADS / 4];
#pragma unroll
    for (int i = 0; i < A_LOADS / 4; ++i) {
        const int idx = tid + i * NTHREADS;
        const int kq = idx % (GEMM_KWG / 4), mm = idx / (GEMM_KWG / 4);
        a_k4[i] = 4 * kq;
        a_m4[i] = mm;
        a_ok4[i] = m0 + mm < M;
        a_pos4[i] = (long)min(m0 + mm, M - 1) * a_ms + 4 * kq;
    }
#pragma unroll
    for (int i = 0; i < B_LOADS / 4; ++i) {
        const int idx = tid + i * NTHREADS;
        const int nq = idx % (GEMM_NWG / 4), kk = idx / (GEMM_NWG / 4);
        b_n4[i] = 4 * nq;
        b_k4[i] = kk;
        b_pos4[i] = gemm_col(min(n0 + 4 * nq, N - 1), bP, bWo, bns, bhs, bws) + kk * b_ks;
    }
    float4 ra4[A_LOADS / 4], rb4[B_LOADS / 4];
#endif

    float acc[MWI][NWI];
#pragma unroll
    for (int i = 0; i < MWI; ++i)
#pragma unroll
        for (int j = 0; j < NWI; ++j)
            acc[i][j] = 0.0f;

    /* Software pipeline over the flattened (b, k0) steps: the global loads of step t+1 are
     * in flight while step t is computed from local memory. */
    const int ktiles = (K + GEMM_KWG - 1) / GEMM_KWG;
    const int steps = (b_hi - b_lo) * ktiles;
    float ra[A_LOADS], rb[B_LOADS];
#if GEMM_VEC
#define LOAD_STEP(t)                                                                       \
    do {                                                                                   \
        const int b_ = b_lo + (t) / ktiles, k0_ = ((t) % ktiles) * GEMM_KWG;              \
        const long b1_ = b_ / NB2, b2_ = b_ - b1_ * NB2;                                   \
        const __global float *Ab_ = Ag + b1_ * a_bs + b2_ * a_bs2 + k0_;                   \
        const __global float *Bb_ = Bg + b1_ * b_bs + b2_ * b_bs2 + k0_ * b_ks;            \
        _Pragma("unroll") for (int i = 0; i < A_LOADS / 4; ++i) {                         \
            const int k = k0_ + a_k4[i];                                                   \
            const __global float *pa = Ab_ + a_pos4[i];                                    \
            if (a_ok4[i] && k + 3 < K)                                                     \
                ra4[i] = *(const __global float4 *)pa;                                     \
            else                                                                           \
                ra4[i] = (float4)(a_ok4[i] && k < K ? pa[0] : 0.0f,                        \
                                  a_ok4[i] && k + 1 < K ? pa[1] : 0.0f,                    \
                                  a_ok4[i] && k + 2 < K ? pa[2] : 0.0f, 0.0f);             \
        }                                                                                  \
        _Pragma("unroll") for (int i = 0; i < B_LOADS / 4; ++i) {                         \
            const int k = k0_ + b_k4[i], n = n0 + b_n4[i];                                 \
            const __global float *pb = Bb_ + b_pos4[i];                                    \
            if (k < K && n + 3 < N)                                                        \
                rb4[i] = *(const __global float4 *)pb;                                     \
            else                                                                           \
                rb4[i] = (float4)(k < K && n < N ? pb[0] : 0.0f,                           \
                                  k < K && n + 1 < N ? pb[1] : 0.0f,                       \
                                  k < K && n + 2 < N ? pb[2] : 0.0f, 0.0f);                \
        }                                                                                  \
    } while (0)
#define STORE_STEP()                                                                       \
    do {                                                                                   \
        _Pragma("unroll") for (int i = 0; i < A_LOADS / 4; ++i) {                         \
            As[a_k4[i]][a_m4[i]] = ra4[i].x;                                               \
            As[a_k4[i] + 1][a_m4[i]] = ra4[i].y;                                           \
            As[a_k4[i] + 2][a_m4[i]] = ra4[i].z;                                           \
            As[a_k4[i] + 3][a_m4[i]] = ra4[i].w;                                           \
        }                                                                                  \
        _Pragma("unroll") for (int i = 0; i < B_LOADS / 4; ++i)                           \
            vstore4(rb4[i], 0, &Bs[b_k4[i]][b_n4[i]]);                                     \
    } while (0)
#else
#define LOAD_STEP(t)                                                                       \
    do {                                                                                   \
        const int b_ = b_lo + (t) / ktiles, k0_ = ((t) % ktiles) * GEMM_KWG;              \
        const long b1_ = b_ / NB2, b2_ = b_ - b1_ * NB2;                                   \
        const __global float *Ab_ = Ag + b1_ * a_bs + b2_ * a_bs2 + k0_ * a_ks;            \
        const __global float *Bb_ = Bg + b1_ * b_bs + b2_ * b_bs2 + k0_ * b_ks;            \
        _Pragma("unroll") for (int i = 0; i < A_LOADS; ++i)                                \
            ra[i] = (a_ok[i] && k0_ + a_kk[i] < K) ? Ab_[a_pos[i]] : 0.0f;                 \
        _Pragma("unroll") for (int i = 0; i < B_LOADS; ++i)                                \
            rb[i] = (b_ok[i] && k0_ + b_kk[i] < K) ? Bb_[b_pos[i]] : 0.0f;                 \
    } while (0)
#define STORE_STEP()                                                                       \
    do {                                                                                   \
        _Pragma("unroll") for (int i = 0; i < A_LOADS; ++i) {                             \
            const int idx = tid + i * NTHREADS;                                            \
            A_STORE(idx, ra[i]);                                                           \
        }                                                                                  \
        _Pragma("unroll") for (int i = 0; i < B_LOADS; ++i) {                             \
            const int idx = tid + i * NTHREADS;                                            \
            B_STORE(idx, rb[i]);                                                           \
        }                                                                                  \
    } while (0)
#endif
#if GEMM_A_KFAST
#define A_STORE(idx, v) As[(idx) % GEMM_KWG][(idx) / GEMM_KWG] = (v)
#else
#define A_STORE(idx, v) As[(idx) / GEMM_MWG][(idx) % GEMM_MWG] = (v)
#endif
#if GEMM_B_KFAST
#define B_STORE(idx, v) Bs[(idx) % GEMM_KWG][(idx) / GEMM_KWG] = (v)
#else
#define B_STORE(idx, v) Bs[(idx) / GEMM_NWG][(idx) % GEMM_NWG] = (v)
#endif
#if GEMM_PIPELINE
    if (steps > 0) {
        LOAD_STEP(0);
        STORE_STEP();
        barrier(CLK_LOCAL_MEM_FENCE);
    }
#endif
    for (int t = 0; t < steps; ++t) {
#if GEMM_PIPELINE
        if (t + 1 < steps)
            LOAD_STEP(t + 1);
#else
        LOAD_STEP(t);
        barrier(CLK_LOCAL_MEM_FENCE);
        STORE_STEP();
        barrier(CLK_LOCAL_MEM_FENCE);
#endif
#pragma unroll
        for (int kk = 0; kk < GEMM_KWG; ++kk) {
            float a[MWI], bv[NWI];
#pragma unroll
            for (int i = 0; i < MWI / 4; ++i) {
                const float4 v = vload4(0, &As[kk][i * GEMM_MDIMC * 4 + ty * 4]);
                a[4 * i] = v.x; a[4 * i + 1] = v.y; a[4 * i + 2] = v.z; a[4 * i + 3] = v.w;
            }
#pragma unroll
            for (int j = 0; j < NWI / 4; ++j) {
                const float4 v = vload4(0, &Bs[kk][j * GEMM_NDIMC * 4 + tx * 4]);
                bv[4 * j] = v.x; bv[4 * j + 1] = v.y; bv[4 * j + 2] = v.z;
                bv[4 * j + 3] = v.w;
            }
#pragma unroll
            for (int i = 0; i < MWI; ++i)
#pragma unroll
                for (int j = 0; j < NWI; ++j)
                    acc[i][j] = mad(a[i], bv[j], acc[i][j]);
        }
#if GEMM_PIPELINE
        barrier(CLK_LOCAL_MEM_FENCE);
        if (t + 1 < steps) {
            STORE_STEP();
            barrier(CLK_LOCAL_MEM_FENCE);
        }
#endif
    }

    __global float *Cg = C + c_off + split * c_ss + grp * c_gs;
    for (int j = 0; j < NWI; ++j) {
        const int n = n0 + (j / 4) * GEMM_NDIMC * 4 + tx * 4 + (j % 4);
        if (n >= N)
            continue;
        const long col = gemm_col(n, cP, cWo, cns, chs, cws);
        for (int i = 0; i < MWI; ++i) {
            const int m = m0 + (i / 4) * GEMM_MDIMC * 4 + ty * 4 + (i % 4);
            if (m >= M)
                continue;
            __global float *c = Cg + m * c_ms + col;
            *c = beta ? *c + acc[i][j] : acc[i][j];
        }
    }
}

/* C[c_off + i] (+)= sum over s < S of part[part_off + s*count + i], in order of s
 * (deterministic).
 * Global size: count, padded to the work-group size. */
__kernel void splitk_reduce(__global const float *restrict part, const long part_off,
                            __global float *restrict C, const long c_off, const long count,
                            const int S, const int beta)
{
    const long i = get_global_id(0);
    if (i >= count)
        return;
    float acc = 0.0f;
    for (int s = 0; s < S; ++s)
        acc += part[part_off + s * count + i];
    C[c_off + i] = beta ? C[c_off + i] + acc : acc;
}
