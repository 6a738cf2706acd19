/* SGEMM for CPUs (PoCL): vectorised register tiles, one work-item per tile, no local memory.
 *
 * Same operation and addressing as sgemm_gpu.cl:
 *   C[g](m, n) = sum_b sum_k A[g](b, m, k) * B[g](b, k, n)   (+ C when beta = 1)
 * with A(b, m, k) = A + a_off + g*a_gs + (b/NB2)*a_bs + (b%NB2)*a_bs2 + m*a_ms + k*a_ks
 * (B likewise) and image-mapped columns
 * col(n) = (n / P)*ns + ((n % P) / Wo)*hs + ((n % P) % Wo)*ws for B and C.
 *
 * Two kernels:
 *  - sgemm_nn: a register tile of GEMM_MR rows x 2*GEMM_VW columns held in two vector
 *    registers per row; per k it broadcasts GEMM_MR scalars of A and loads two vectors of
 *    B. A work-item computes a block of RB x CB tiles (run-time arguments) in the loop
 *    order of Goto and van de Geijn's GEMM (BLIS): the reduction in chunks of GEMM_KC
 *    steps; per chunk and column block, the chunk's panel of B (GEMM_KC x 2*GEMM_VW) is
 *    copied to private memory, then the RB row blocks pass over it (the panel in L1, the
 *    RB x GEMM_MR rows of A the chunk reads in L2 across the column blocks). The copy
 *    loads a vector of B with one vector load where its columns are contiguous, two loads
 *    and a select where they cross one image boundary (1x1 convolutions on NCHW tensors),
 *    element by element otherwise (strided columns, tiny images). Where A is contiguous
 *    along k, its RB x GEMM_MR rows of the chunk are copied too (by the first column
 *    block, into rows GEMM_KC + GEMM_APAD floats apart): A's own rows are often a multiple
 *    of 4 KiB apart (K = 1024 or 2048, a filter of 1024 input channels), and the
 *    GEMM_MR rows a step reads then share one set of the L1 cache, more of them than it
 *    has ways (8 on Zen 4): every step missed L1. The copy made 1024^3 and 2048^3 4-5 %
 *    faster on a 2-core Zen 4 (11.5 against 12.1 ms, 98 against 103 ms, best of 25 and 6
 *    interleaved rounds). Elsewhere the copy lost (GEMM_APACK_STRIDE): with A's rows
 *    2 KiB apart and 32 columns (Winograd F(4x4, 3x3)'s 36 GEMMs on ResNet-50's 512 ->
 *    512 3x3 layer at N=8) reading A in place took 0.67x the time, 0.88-0.93x on rows
 *    2-18 KiB apart with 128-392 columns; rows a multiple of 4 KiB apart keep the copy.
 *    K. Goto, R. van de Geijn, "Anatomy of high-performance matrix
 *    multiplication", ACM TOMS 34(3), 2008.
 *  - sgemm_nt: for B given as rows along k (B(b, k, n) = B + ... + colB(n) + k, k
 *    contiguous in both operands, as in the backward-weights GEMM); each work-item
 *    computes GEMM_NT_MR x GEMM_NT_NR dot products with vector partial sums along k.
 *
 * The work-group size is 1: PoCL then runs each work-item's explicit vector code as is.
 */
#ifndef GEMM_VW
#define GEMM_VW 16       /* vector width in floats: 16 (AVX-512), 8 (AVX2), 4 (SSE, NEON) */
#endif
#ifndef GEMM_MR
#define GEMM_MR 12       /* rows per work-item in sgemm_nn: 2*GEMM_MR accumulator vectors +
                            3 must fit the vector registers (32 with AVX-512, 16 with AVX2) */
#endif
#ifndef GEMM_KC
#define GEMM_KC 256      /* reduction steps per chunk in sgemm_nn: the chunk's panel of B,
                            GEMM_KC x 2*GEMM_VW floats (32 KiB), is copied to private memory
                            and stays in the L1 cache while the row blocks pass over it */
#endif
#ifndef GEMM_APACK_ROWS
#define GEMM_APACK_ROWS 192 /* most rows of A (RB x GEMM_MR) sgemm_nn copies to private memory
                              per chunk (0: never; more rows than this: read in place); 192
                              rows take 192 x (GEMM_KC + GEMM_APAD) floats, 204 KiB */
#endif
#ifndef GEMM_APACK_STRIDE
#define GEMM_APACK_STRIDE 1024 /* A's rows are copied only where they lie a multiple of this
                                * many floats apart (4 KiB: the GEMM_MR rows a step reads
                                * then share one L1 set); elsewhere the copy cost more than
                                * it saved (see below). 0: wherever A is contiguous along k */
#endif
#ifndef GEMM_APAD
#define GEMM_APAD 16     /* floats after each copied row of A: rows 272 floats (17 cache
                            lines) apart fall in different sets of the L1 cache */
#endif
#ifndef GEMM_NT_MR
#define GEMM_NT_MR 4     /* rows per tile in sgemm_nt */
#endif
#ifndef GEMM_NT_NR
#define GEMM_NT_NR 4     /* columns per tile in sgemm_nt */
#endif
#ifndef GEMM_NT_KC
#define GEMM_NT_KC 128   /* reduction steps per chunk in sgemm_nt (a multiple of GEMM_VW):
                            the rows of A and B a block of 4 x 4 tiles reads in a chunk,
                            32 x GEMM_NT_KC floats (16 KiB), stay in the L1 cache while
                            its tiles pass over them */
#endif
#ifndef GEMM_NT_MAXB
#define GEMM_NT_MAXB 16  /* most tiles in one sgemm_nt work-item's block (RB x CB) */
#endif

#include "wticonv/common.h"
#define floatv WTICONV_FLOATN(GEMM_VW)
#define intv WTICONV_INTN(GEMM_VW)
#define VLOAD WTICONV_VLOADN(GEMM_VW)
#define VSTORE WTICONV_VSTOREN(GEMM_VW)
#define VW GEMM_VW
#define NR (2 * GEMM_VW)   /* columns per sgemm_nn work-item */

__constant int LANES[16] = WTICONV_LANE_INDEX;

#define B_CONTIG 0
#define B_TWOSEG 1
#define B_GATHER 2

#include "gemm_common.h"

/* How to load the VW columns n0 .. n0+VW-1 (clamped to N-1) of B: offsets of each lane
 * are in off[]; returns B_CONTIG (off[i] = off[0] + i), B_TWOSEG (two contiguous runs, the
 * second starting at lane *split, both loadable within [0, b_len)) or B_GATHER. */
inline int b_mode(const long *off, const int valid, const long b_len, int *split)
{
    int breaks = 0, at = VW;
    for (int i = 1; i < VW; ++i) {
        if (off[i] != off[i - 1] + 1) {
            ++breaks;
            at = i;
        }
    }
    *split = at;
    if (valid < VW)
        return B_GATHER;
    if (breaks == 0)
        return off[0] + VW <= b_len ? B_CONTIG : B_GATHER;
    if (breaks == 1 && off[0] + VW <= b_len && off[at] - at >= 0 && off[at] - at + VW <= b_len)
        return B_TWOSEG;
    return B_GATHER;
}

inline floatv b_load(const __global float *p, const long *off, const int mode,
                     const int split, const intv lo_mask)
{
    if (mode == B_CONTIG)
        return VLOAD(0, p + off[0]);
    if (mode == B_TWOSEG)
        return select(VLOAD(0, p + off[split] - split), VLOAD(0, p + off[0]), lo_mask);
    float t[VW];
    for (int i = 0; i < VW; ++i)
        t[i] = p[off[i]];
    return VLOAD(0, t);
}

/* One k-step of sgemm_nn's register tile: broadcast A(m0+i, k) to a vector, multiply-add it
 * with the two B vectors of this step, move every A row pointer to the next k. */
#define ROW_MADS(v0, v1)                                                                  \
    _Pragma("unroll") for (int i = 0; i < GEMM_MR; ++i) {                                \
        const floatv a_ = (floatv)(*ap[i]);                                               \
        ap[i] += a_ks;                                                                    \
        c0[i] = WTICONV_MAD(a_, (v0), c0[i]);                                             \
        c1[i] = WTICONV_MAD(a_, (v1), c1[i]);                                             \
    }

/* sgemm_nn's reduction step t is step k of batch b (t = b K + k). The run of steps from t
 * on that stay in one batch, at most up to t1: sets its batch's two levels *b1, *b2 and its
 * first k *k0, and returns its length. */
inline int batch_run(const long t, const long t1, const int K, const int NB2, long *b1,
                     long *b2, int *k0)
{
    const int b = (int)(t / K);
    *k0 = (int)(t - (long)b * K);
    *b1 = b / NB2;
    *b2 = b - *b1 * NB2;
    return (int)min((long)(K - *k0), t1 - t);
}

__kernel __attribute__((reqd_work_group_size(1, 1, 1)))
void sgemm_nn(const int M, const int N, const int K, const int NB, const int NB2,
              __global const float *restrict A, const long a_off, const long a_gs,
              const long a_bs, const long a_bs2, const long a_ms, const long a_ks,
              __global const float *restrict B, const long b_off, const long b_gs,
              const long b_bs, const long b_bs2, const long b_ks,
              const int bP, const int bWo, const long bns, const long bhs, const long bws,
              const long b_len,
              __global float *restrict C, const long c_off, const long c_gs, const long c_ms,
              const int cP, const int cWo, const long cns, const long chs, const long cws,
              const int beta, const int RB, const int CB)
{
    const long g = get_global_id(2);
    const __global float *Ag = A + a_off + g * a_gs;
    const __global float *Bg = B + b_off + g * b_gs;
    __global float *Cg = C + c_off + g * c_gs;
    /* Vector loads must stay inside B for every (b, k): check against the largest k and b. */
    const long reach = b_off + g * b_gs + ((NB - 1) / NB2) * b_bs +
                       (min(NB, NB2) - 1) * b_bs2 + (K - 1) * b_ks;
    const intv lane = VLOAD(0, LANES);
    float bp[GEMM_KC * NR];          /* the chunk's panel of B, NR floats a step */
#define APLD (GEMM_KC + GEMM_APAD)
#if GEMM_APACK_ROWS > 0
    float apk[GEMM_APACK_ROWS * APLD]; /* the chunk's rows of A, APLD floats apart */
#endif
    /* A's rows are copied where they are contiguous along k and all fit. The copy lives
     * on the stack of the driver's thread, as bp does (glibc gives new threads `ulimit
     * -s`, 8 MiB on most Linux systems; macOS its secondary threads 512 KiB), so its size
     * is bounded at build time. */
    const bool packA = GEMM_APACK_ROWS > 0 && a_ks == 1 && RB * GEMM_MR <= GEMM_APACK_ROWS &&
                       (GEMM_APACK_STRIDE == 0 || a_ms % GEMM_APACK_STRIDE == 0);
    const long T = (long)NB * K;
    for (long t0 = 0; t0 < T; t0 += GEMM_KC) {
        const long t1 = min(T, t0 + (long)GEMM_KC);
        const bool add = beta || t0 > 0;
        for (int cb = 0; cb < CB; ++cb) {
            const int n0 = (get_global_id(1) * CB + cb) * NR;
            if (n0 >= N)
                break;
            /* How this block's two vectors of columns load (offsets from the group's B). */
            const int valid0 = clamp(N - n0, 0, VW), valid1 = clamp(N - n0 - VW, 0, VW);
            long off0[VW], off1[VW];
            for (int i = 0; i < VW; ++i) {
                off0[i] = gemm_col(min(n0 + i, N - 1), bP, bWo, bns, bhs, bws);
                off1[i] = gemm_col(min(n0 + VW + i, N - 1), bP, bWo, bns, bhs, bws);
            }
            int split0, split1;
            const int mode0 = b_mode(off0, valid0, b_len - reach, &split0);
            const int mode1 = b_mode(off1, valid1, b_len - reach, &split1);
            const intv lo0 = lane < (intv)split0, lo1 = lane < (intv)split1;
            /* Copy the chunk's panel of B to bp: its column modes are resolved once here,
             * every row block below reads plain vectors, and B's own row stride (which
             * may be a multiple of 4 KiB) no longer decides where the panel lies. */
            float *dst = bp;
            for (long t = t0; t < t1;) {
                long b1, b2;
                int k0;
                const int steps = batch_run(t, t1, K, NB2, &b1, &b2, &k0);
                t += steps;
                const __global float *bk = Bg + b1 * b_bs + b2 * b_bs2 + k0 * b_ks;
                if (mode0 == B_CONTIG && mode1 == B_CONTIG) {
                    for (int k = 0; k < steps; ++k, bk += b_ks, dst += NR) {
                        VSTORE(VLOAD(0, bk + off0[0]), 0, dst);
                        VSTORE(VLOAD(0, bk + off1[0]), 1, dst);
                    }
                } else {
                    for (int k = 0; k < steps; ++k, bk += b_ks, dst += NR) {
                        VSTORE(b_load(bk, off0, mode0, split0, lo0), 0, dst);
                        VSTORE(valid1 ? b_load(bk, off1, mode1, split1, lo1)
                                      : (floatv)(0.0f), 1, dst);
                    }
                }
            }
            long coff[NR];
            for (int j = 0; j < NR; ++j)
                coff[j] = gemm_col(min(n0 + j, N - 1), cP, cWo, cns, chs, cws);
            const bool cvec = valid0 == VW && valid1 == VW &&
                              coff[VW - 1] == coff[0] + VW - 1 &&
                              coff[NR - 1] == coff[VW] + VW - 1 && coff[VW] == coff[0] + VW;
            /* RB row blocks of GEMM_MR rows pass over the panel in turn. */
            for (int rb = 0; rb < RB; ++rb) {
                const int m0 = (get_global_id(0) * RB + rb) * GEMM_MR;
                if (m0 >= M)
                    break;
                long arow[GEMM_MR];
                for (int i = 0; i < GEMM_MR; ++i)
                    arow[i] = (long)min(m0 + i, M - 1) * a_ms;
                floatv c0[GEMM_MR], c1[GEMM_MR];
                for (int i = 0; i < GEMM_MR; ++i) {
                    c0[i] = (floatv)(0.0f);
                    c1[i] = (floatv)(0.0f);
                }
                const float *bk = bp;
#if GEMM_APACK_ROWS > 0
                /* The first column block copies the row block's chunk of A, just before
                 * using it (copied all at once at the chunk's start, the copy's reads
                 * from memory were not hidden behind arithmetic: 2 % slower at 1024^3);
                 * every column block then reads the copy. */
                if (packA && cb == 0) {
                    for (int i = 0; i < GEMM_MR; ++i) {
                        float *d = apk + (rb * GEMM_MR + i) * APLD;
                        for (long t = t0; t < t1;) {
                            long b1, b2;
                            int k0;
                            const int steps = batch_run(t, t1, K, NB2, &b1, &b2, &k0);
                            t += steps;
                            const __global float *s = Ag + b1 * a_bs + b2 * a_bs2 + arow[i] + k0;
                            int k = 0;
                            for (; k + VW <= steps; k += VW)
                                VSTORE(VLOAD(0, s + k), 0, d + k);
                            for (; k < steps; ++k)
                                d[k] = s[k];
                            d += steps;
                        }
                    }
                }
                if (packA) {
                    const float *ak[GEMM_MR];
                    for (int i = 0; i < GEMM_MR; ++i)
                        ak[i] = apk + (rb * GEMM_MR + i) * APLD;
                    const int steps = (int)(t1 - t0);
                    for (int k = 0; k < steps; ++k) {
                        const floatv v0 = VLOAD(0, bk), v1 = VLOAD(1, bk);
                        bk += NR;
                        _Pragma("unroll") for (int i = 0; i < GEMM_MR; ++i) {
                            const floatv a_ = (floatv)(ak[i][k]);
                            c0[i] = WTICONV_MAD(a_, v0, c0[i]);
                            c1[i] = WTICONV_MAD(a_, v1, c1[i]);
                        }
                    }
                } else
#endif
                for (long t = t0; t < t1;) {
                    long b1, b2;
                    int k0;
                    const int steps = batch_run(t, t1, K, NB2, &b1, &b2, &k0);
                    t += steps;
                    const __global float *ap[GEMM_MR];
                    for (int i = 0; i < GEMM_MR; ++i)
                        ap[i] = Ag + b1 * a_bs + b2 * a_bs2 + arow[i] + k0 * a_ks;
                    for (int k = 0; k < steps; ++k) {
                        const floatv v0 = VLOAD(0, bk), v1 = VLOAD(1, bk);
                        bk += NR;
                        ROW_MADS(v0, v1);
                    }
                }
                for (int i = 0; i < GEMM_MR; ++i) {
                    if (m0 + i >= M)
                        break;
                    __global float *crow = Cg + (long)(m0 + i) * c_ms;
                    if (cvec) {
                        floatv lo = c0[i], hi = c1[i];
                        if (add) {
                            lo += VLOAD(0, crow + coff[0]);
                            hi += VLOAD(0, crow + coff[VW]);
                        }
                        VSTORE(lo, 0, crow + coff[0]);
                        VSTORE(hi, 0, crow + coff[VW]);
                    } else {
                        float r[NR];
                        VSTORE(c0[i], 0, r);
                        VSTORE(c1[i], 1, r);
                        for (int j = 0; j < valid0 + valid1; ++j)
                            crow[coff[j]] = add ? crow[coff[j]] + r[j] : r[j];
                    }
                }
            }
        }
    }
}

/* k-contiguous "dot product" GEMM: C(m, n) = sum_b sum_k A(b, m, k) * B(b, n, k) with
 * A(b, m, k) = A + a_off + g*a_gs + bofs(b) + m*a_ms + k and
 * B(b, n, k) = B + b_off + g*b_gs + bofs(b) + colB(n) + k, bofs as in sgemm_nn.
 *
 * A work-item computes a block of RB x CB tiles (run-time arguments, RB*CB at most
 * GEMM_NT_MAXB) of GEMM_NT_MR x GEMM_NT_NR dot products each, in vector partial sums along
 * k. The reduction runs in chunks of GEMM_NT_KC steps: per chunk, every tile of the block
 * passes over the block's rows of A and B in turn, so that those rows (RB*MR + CB*NR rows
 * of GEMM_NT_KC floats) are read from memory once and from the L1 cache by the other
 * tiles; the tiles' partial sums wait in private memory between chunks. */
__kernel __attribute__((reqd_work_group_size(1, 1, 1)))
void sgemm_nt(const int M, const int N, const int K, const int NB, const int NB2,
              __global const float *restrict A, const long a_off, const long a_gs,
              const long a_bs, const long a_bs2, const long a_ms,
              __global const float *restrict B, const long b_off, const long b_gs,
              const long b_bs, const long b_bs2,
              const int bP, const int bWo, const long bns, const long bhs, const long bws,
              __global float *restrict C, const long c_off, const long c_gs, const long c_ms,
              const int cP, const int cWo, const long cns, const long chs, const long cws,
              const int beta, const int RB, const int CB)
{
#define NT_TILE (GEMM_NT_MR * GEMM_NT_NR)
    const long g = get_global_id(2);
    const int mb0 = get_global_id(0) * RB, nb0 = get_global_id(1) * CB;
    const __global float *Ag = A + a_off + g * a_gs;
    const __global float *Bg = B + b_off + g * b_gs;
    long arow[GEMM_NT_MAXB * GEMM_NT_MR], bcol[GEMM_NT_MAXB * GEMM_NT_NR];
    for (int i = 0; i < RB * GEMM_NT_MR; ++i)
        arow[i] = (long)min(mb0 * GEMM_NT_MR + i, M - 1) * a_ms;
    for (int j = 0; j < CB * GEMM_NT_NR; ++j)
        bcol[j] = gemm_col(min(nb0 * GEMM_NT_NR + j, N - 1), bP, bWo, bns, bhs, bws);
    floatv part[GEMM_NT_MAXB * NT_TILE];
    float tail[GEMM_NT_MAXB * NT_TILE];
    for (int t = 0; t < RB * CB * NT_TILE; ++t) {
        part[t] = (floatv)(0.0f);
        tail[t] = 0.0f;
    }
    const int kv = K - K % VW;
    for (int b = 0; b < NB; ++b) {
        const long b1 = b / NB2, b2 = b - b1 * NB2;
        const __global float *Ab = Ag + b1 * a_bs + b2 * a_bs2;
        const __global float *Bb = Bg + b1 * b_bs + b2 * b_bs2;
        for (int k0 = 0; k0 < K; k0 += GEMM_NT_KC) {
            const int k1 = min(kv, k0 + GEMM_NT_KC);
            for (int rb = 0; rb < RB; ++rb) {
                if ((mb0 + rb) * GEMM_NT_MR >= M)
                    break;
                const __global float *ap[GEMM_NT_MR];
                for (int i = 0; i < GEMM_NT_MR; ++i)
                    ap[i] = Ab + arow[rb * GEMM_NT_MR + i];
                for (int cb = 0; cb < CB; ++cb) {
                    if ((nb0 + cb) * GEMM_NT_NR >= N)
                        break;
                    const __global float *bp[GEMM_NT_NR];
                    for (int j = 0; j < GEMM_NT_NR; ++j)
                        bp[j] = Bb + bcol[cb * GEMM_NT_NR + j];
                    floatv *pt = part + (rb * CB + cb) * NT_TILE;
                    floatv acc[GEMM_NT_MR][GEMM_NT_NR];
#pragma unroll
                    for (int i = 0; i < GEMM_NT_MR; ++i)
#pragma unroll
                        for (int j = 0; j < GEMM_NT_NR; ++j)
                            acc[i][j] = pt[i * GEMM_NT_NR + j];
                    for (int k = k0; k < k1; k += VW) {
                        floatv av[GEMM_NT_MR], bv[GEMM_NT_NR];
                        /* unrolled, so that the vectors stay in registers (a loop kept
                         * them on the stack: a store and a load more per vector, PoCL
                         * 3.1) */
#pragma unroll
                        for (int i = 0; i < GEMM_NT_MR; ++i)
                            av[i] = VLOAD(0, ap[i] + k);
#pragma unroll
                        for (int j = 0; j < GEMM_NT_NR; ++j)
                            bv[j] = VLOAD(0, bp[j] + k);
#pragma unroll
                        for (int i = 0; i < GEMM_NT_MR; ++i)
#pragma unroll
                            for (int j = 0; j < GEMM_NT_NR; ++j)
                                acc[i][j] = WTICONV_MAD(av[i], bv[j], acc[i][j]);
                    }
#pragma unroll
                    for (int i = 0; i < GEMM_NT_MR; ++i)
#pragma unroll
                        for (int j = 0; j < GEMM_NT_NR; ++j)
                            pt[i * GEMM_NT_NR + j] = acc[i][j];
                    /* the picture's last K % VW steps, after its last chunk */
                    if (k0 + GEMM_NT_KC >= K) {
                        float *tt = tail + (rb * CB + cb) * NT_TILE;
                        for (int k = kv; k < K; ++k)
                            for (int i = 0; i < GEMM_NT_MR; ++i)
                                for (int j = 0; j < GEMM_NT_NR; ++j)
                                    tt[i * GEMM_NT_NR + j] = WTICONV_MAD(
                                        ap[i][k], bp[j][k], tt[i * GEMM_NT_NR + j]);
                    }
                }
            }
        }
    }
    __global float *Cg = C + c_off + g * c_gs;
    for (int rb = 0; rb < RB; ++rb) {
        for (int cb = 0; cb < CB; ++cb) {
            const floatv *pt = part + (rb * CB + cb) * NT_TILE;
            const float *tt = tail + (rb * CB + cb) * NT_TILE;
            for (int j = 0; j < GEMM_NT_NR; ++j) {
                const int n = (nb0 + cb) * GEMM_NT_NR + j;
                if (n >= N)
                    break;
                const long col = gemm_col(n, cP, cWo, cns, chs, cws);
                for (int i = 0; i < GEMM_NT_MR; ++i) {
                    const int m = (mb0 + rb) * GEMM_NT_MR + i;
                    if (m >= M)
                        break;
                    float lanes[VW];
                    VSTORE(pt[i * GEMM_NT_NR + j], 0, lanes);
                    float s = tt[i * GEMM_NT_NR + j];
                    for (int l = 0; l < VW; ++l)
                        s += lanes[l];
                    __global float *c = Cg + (long)m * c_ms + col;
                    *c = beta ? *c + s : s;
                }
            }
        }
    }
#undef NT_TILE
}
