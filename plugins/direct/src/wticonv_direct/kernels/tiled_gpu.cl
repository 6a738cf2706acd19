/* direct.tiled for GPUs: direct convolution in output blocks, input tiles staged in local
 * memory. One kernel serves all three directions; the host (tiled_plan.py) describes the
 * direction by the affine index maps below, so nothing is compiled per shape.
 *
 * Every direction is the same blocked sum
 *
 *     out(m, p) = sum over q in [q_lo, q_hi) of  A(m, q) * B(q, p)
 *
 * where m runs over output channels of one group, p over output positions and q over the
 * reduction. Both p and q are decoded as three mixed-radix digits (a, b, c):
 *
 *     p = (pa, pb, pc) with radices (., P1, P2);   q = (qa, qb, qc) with radices (., Q1, Q2)
 *
 *     A(m, q) = A[a_g*g + a_0 + m*a_ms + qa*a_qa + qb*a_qb + qc*a_qc]
 *     B(q, p) = S[s_g*g + pa*s_pa + qa*s_qa + ih*SW + iw]   when 0 <= ih < SH, 0 <= iw < SW,
 *               0 otherwise (padding: never read)
 *               with ih = pb*hp + h0 + qb*hq,  iw = pc*wp + w0 + qc*wq
 *     out(m, p) = O[o_g*g + o_split*split + m*o_ms + pa*o_pa + pb*o_pb + pc*o_pc + o_0]
 *
 * - fwd:  m = k, p = (n, ho, wo), q = (c, r, s); A = w, S = x, O = y.
 * - bwd:  one launch per stride phase (a, b) of dx: p = (n, i, j) for dx pixels
 *         (a + i*stride_h, b + j*stride_w), q = (k, t, u) over the filter taps that reach
 *         that phase (r = r0 + t*rstep); A = w read transposed, S = dy, O = dx. Taps that
 *         never reach a phase cost nothing (no multiplications by structural zeros).
 * - wrw:  m = k, p = (c, r, s), q = (n, ho, wo); A = dy, S = x, O = dw, or partial sums
 *         (one slice per split of q, added by tiled_reduce.cl in a fixed
 *         order: deterministic, no atomics).
 *
 * Grid: dimension 0 = blocks of TILED_NWG positions, 1 = blocks of TILED_MWG channels,
 * 2 = groups x splits. Every work-group stages, per step of TILED_KWG reduction indices,
 * an A tile (TILED_MWG x TILED_KWG) and a B tile (TILED_KWG x TILED_NWG) in local memory
 * (the next step's global loads are issued before this step's multiply-adds), then each
 * work-item multiplies a TILED_MWI x TILED_NWI register block. The q digits of a step are
 * decoded once per work-group into a small local table, not once per load.
 * Offsets are 64-bit where they can pass 2^31 (images, groups); positions within one
 * plane are 32-bit (the host declines planes of 2^31 elements or more). a_len, s_len
 * and row_blocks (the input buffers' lengths, the CPU lane mapping) are unused here; they keep the argument list the same as
 * tiled_cpu.cl's.
 */
#ifndef TILED_MWG
#define TILED_MWG 64   /* output channels per work-group */
#endif
#ifndef TILED_NWG
#define TILED_NWG 64   /* output positions per work-group */
#endif
#ifndef TILED_KWG
#define TILED_KWG 16   /* reduction indices per local-memory step */
#endif
#ifndef TILED_MWI
#define TILED_MWI 4    /* output channels per work-item (TILED_MWG / TILED_MWI work-items
                          along m) */
#endif
#ifndef TILED_NWI
#define TILED_NWI 4    /* output positions per work-item (TILED_NWG / TILED_NWI along p);
                          4 lets the local tiles be read as float4 */
#endif

#ifndef TILED_A_KFAST
#define TILED_A_KFAST 0 /* 1: consecutive work-items load A along q (coalesced when A is
                           contiguous along q: fwd weights, wrw dy); 0: along m */
#endif
#ifndef TILED_B_KFAST
#define TILED_B_KFAST 0 /* 1: consecutive work-items load B along q (wrw, where x is
                           contiguous along the reduction); 0: along p (fwd, bwd) */
#endif

#if TILED_MWI % 4 || TILED_NWI % 4
#error "TILED_MWI and TILED_NWI must be multiples of 4 (float4 reads of the local tiles)"
#endif
#define MDIM (TILED_MWG / TILED_MWI)
#define NDIM (TILED_NWG / TILED_NWI)
#define NTHREADS (MDIM * NDIM)
#define A_LOADS (TILED_MWG * TILED_KWG / NTHREADS)
#define B_LOADS (TILED_NWG * TILED_KWG / NTHREADS)
/* Local tiles are padded by 4 floats per row: float4 reads stay aligned and stores
 * along q spread over more banks. */
#define APAD (TILED_MWG + 4)
#define BPAD (TILED_NWG + 4)
#define NO_TAP (-0x3fffffff) /* ih of a q past the end: fails every bounds check */

#if A_LOADS < 1 || B_LOADS < 1 || (TILED_MWG * TILED_KWG) % NTHREADS || \
    (TILED_NWG * TILED_KWG) % NTHREADS
#error "each work-item must load a whole number (>= 1) of A and B tile elements"
#endif

#ifndef TILED_IDX32
#define TILED_IDX32 0   /* 1: every tensor has fewer than 2^31 elements, so offsets along q
                           fit 32 bits (cheaper address arithmetic); 0: 64-bit offsets */
#endif
#if TILED_IDX32
typedef int idx_t;
#else
typedef long idx_t;
#endif

typedef struct {
    idx_t a;  /* qa*a_qa + qb*a_qb + qc*a_qc, or -1 past the end */
    idx_t s;  /* qa*s_qa + qb*hq*SW + qc*wq: the q part of a B element's offset */
    int h;    /* qb*hq (NO_TAP past the end) */
    int w;    /* qc*wq */
} qrow;

__kernel __attribute__((reqd_work_group_size(NDIM, MDIM, 1)))
void tiled_conv(__global const float *restrict A, __global const float *restrict S,
                __global float *restrict O,
                const int M, const int P, const int P1, const int P2,
                const int Q, const int Q1, const int Q2, const int QS, const int G,
                const long a_g, const long a_0, const long a_ms, const long a_qa,
                const long a_qb, const long a_qc,
                const int SH, const int SW, const long s_g, const long s_pa, const long s_qa,
                const int hp, const int h0, const int hq, const int wp, const int w0,
                const int wq,
                const long o_g, const long o_split, const long o_ms, const long o_pa,
                const long o_pb, const long o_pc, const long o_0, const long a_len,
                const long s_len, const int row_blocks)
{
    __local float As[TILED_KWG][APAD];
    __local float Bs[TILED_KWG][BPAD];
    __local qrow tab[2][TILED_KWG];
    const int tx = get_local_id(0), ty = get_local_id(1);
    const int tid = ty * NDIM + tx;
    const int p0 = get_group_id(0) * TILED_NWG, m0 = get_group_id(1) * TILED_MWG;
    const int gz = get_group_id(2);
    const long g = gz % G;
    const int split = gz / G;
    const int q_lo = split * QS, q_hi = min(Q, q_lo + QS);
    const int nsteps = q_hi > q_lo ? (q_hi - q_lo + TILED_KWG - 1) / TILED_KWG : 0;

    /* This work-item's load slots: (reduction row, channel) of each A element and
     * (reduction row, position) of each B element it stages per step. Their pointers and
     * bounds are fixed along q, so they are computed once. */
    int a_kk[A_LOADS], a_mm[A_LOADS], b_kk[B_LOADS], b_pp[B_LOADS];
    const __global float *Ab[A_LOADS];
    const __global float *Sb[B_LOADS];
    bool a_ok[A_LOADS], b_ok[B_LOADS];
    int bh[B_LOADS], bw[B_LOADS];
#pragma unroll
    for (int i = 0; i < A_LOADS; ++i) {
        const int idx = tid + i * NTHREADS;
#if TILED_A_KFAST
        a_kk[i] = idx % TILED_KWG;
        a_mm[i] = idx / TILED_KWG;
#else
        a_mm[i] = idx % TILED_MWG;
        a_kk[i] = idx / TILED_MWG;
#endif
        a_ok[i] = m0 + a_mm[i] < M;
        Ab[i] = A + g * a_g + a_0 + (long)min(m0 + a_mm[i], M - 1) * a_ms;
    }
#pragma unroll
    for (int i = 0; i < B_LOADS; ++i) {
        const int idx = tid + i * NTHREADS;
#if TILED_B_KFAST
        b_kk[i] = idx % TILED_KWG;
        b_pp[i] = idx / TILED_KWG;
#else
        b_pp[i] = idx % TILED_NWG;
        b_kk[i] = idx / TILED_NWG;
#endif
        b_ok[i] = p0 + b_pp[i] < P;
        const int p = min(p0 + b_pp[i], P - 1);
        const int pa = p / (P1 * P2), pr = p - pa * (P1 * P2);
        const int pb = pr / P2, pc = pr - pb * P2;
        bh[i] = pb * hp + h0;
        bw[i] = pc * wp + w0;
        /* Points at (bh, bw), possibly outside the picture: dereferenced only with a q
         * offset that brings it inside. */
        Sb[i] = S + g * s_g + pa * s_pa + (long)bh[i] * SW + bw[i];
    }

    float acc[TILED_MWI][TILED_NWI];
    for (int i = 0; i < TILED_MWI; ++i)
        for (int j = 0; j < TILED_NWI; ++j)
            acc[i][j] = 0.0f;
    float ra[A_LOADS], rb[B_LOADS];

#define DECODE(slot, q)                                                                   \
    do {                                                                                  \
        qrow e_;                                                                          \
        if ((q) < q_hi) {                                                                 \
            const int qa_ = (q) / (Q1 * Q2), qr_ = (q) - qa_ * (Q1 * Q2);                \
            const int qb_ = qr_ / Q2, qc_ = qr_ - qb_ * Q2;                               \
            e_.a = (idx_t)(qa_ * a_qa + qb_ * a_qb + qc_ * a_qc);                        \
            e_.h = qb_ * hq;                                                              \
            e_.w = qc_ * wq;                                                              \
            e_.s = (idx_t)(qa_ * s_qa + (long)e_.h * SW + e_.w);                         \
        } else {                                                                          \
            e_.a = -1; e_.s = 0; e_.h = NO_TAP; e_.w = 0;                                 \
        }                                                                                 \
        tab[slot][tid] = e_;                                                              \
    } while (0)

#define LOAD(slot)                                                                        \
    do {                                                                                  \
        _Pragma("unroll") for (int i = 0; i < A_LOADS; ++i) {                            \
            const qrow e_ = tab[slot][a_kk[i]];                                           \
            ra[i] = (a_ok[i] && e_.a >= 0) ? Ab[i][e_.a] : 0.0f;                         \
        }                                                                                 \
        _Pragma("unroll") for (int i = 0; i < B_LOADS; ++i) {                            \
            const qrow e_ = tab[slot][b_kk[i]];                                           \
            const int ih_ = bh[i] + e_.h, iw_ = bw[i] + e_.w;                             \
            rb[i] = (b_ok[i] && (uint)ih_ < (uint)SH && (uint)iw_ < (uint)SW)            \
                        ? Sb[i][e_.s] : 0.0f;                                             \
        }                                                                                 \
    } while (0)

    if (nsteps > 0) {
        if (tid < TILED_KWG)
            DECODE(0, q_lo + tid);
        barrier(CLK_LOCAL_MEM_FENCE);
        LOAD(0);
    }
    for (int step = 0; step < nsteps; ++step) {
        const int cur = step & 1;
#pragma unroll
        for (int i = 0; i < A_LOADS; ++i)
            As[a_kk[i]][a_mm[i]] = ra[i];
#pragma unroll
        for (int i = 0; i < B_LOADS; ++i)
            Bs[b_kk[i]][b_pp[i]] = rb[i];
        if (tid < TILED_KWG)
            DECODE(cur ^ 1, q_lo + (step + 1) * TILED_KWG + tid);
        barrier(CLK_LOCAL_MEM_FENCE);
        if (step + 1 < nsteps)
            LOAD(cur ^ 1);
#pragma unroll
        for (int kk = 0; kk < TILED_KWG; ++kk) {
            /* A work-item's rows are groups of 4 (MDIM * 4 apart) and so are its
             * columns, so every float4 read of a warp is one contiguous run of local
             * memory (no bank conflicts). */
            float a[TILED_MWI], b[TILED_NWI];
#pragma unroll
            for (int i = 0; i < TILED_MWI / 4; ++i) {
                const float4 v = vload4(0, &As[kk][i * MDIM * 4 + ty * 4]);
                a[4 * i] = v.x; a[4 * i + 1] = v.y; a[4 * i + 2] = v.z; a[4 * i + 3] = v.w;
            }
#pragma unroll
            for (int j = 0; j < TILED_NWI / 4; ++j) {
                const float4 v = vload4(0, &Bs[kk][j * NDIM * 4 + tx * 4]);
                b[4 * j] = v.x; b[4 * j + 1] = v.y; b[4 * j + 2] = v.z; b[4 * j + 3] = v.w;
            }
#pragma unroll
            for (int i = 0; i < TILED_MWI; ++i)
#pragma unroll
                for (int j = 0; j < TILED_NWI; ++j)
                    acc[i][j] = mad(a[i], b[j], acc[i][j]);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }

    /* Write the register block; positions and channels past the end are skipped. */
    __global float *Ob = O + g * o_g + split * o_split + o_0;
#pragma unroll
    for (int j = 0; j < TILED_NWI; ++j) {
        const int p = p0 + (j / 4) * NDIM * 4 + tx * 4 + (j % 4);
        if (p >= P)
            continue;
        const int pa = p / (P1 * P2), pr = p - pa * (P1 * P2);
        const int pb = pr / P2, pc = pr - pb * P2;
        const long po = pa * o_pa + pb * o_pb + pc * o_pc;
#pragma unroll
        for (int i = 0; i < TILED_MWI; ++i) {
            const int m = m0 + (i / 4) * MDIM * 4 + ty * 4 + (i % 4);
            if (m < M)
                Ob[po + m * o_ms] = acc[i][j];
        }
    }
}
