/* What the tensor-core kernels share (nv/sgemm_tc.cl, nv/sgemm_wg.cl): TF32 rounding and
 * splitting, cp.async copies, and the staging of A and B tiles from global to local
 * memory, TC_STAGES tiles in flight.
 *
 * The including kernel defines first: TC_BM x TC_BN (its work-group tile of C), TC_BK,
 * TC_STAGES, TC_SPLIT, TC_VEC, TC_A_KFAST and TC_B_KFAST (their meanings in either kernel),
 * THREADS, A_TILE and B_TILE (floats per local tile), BS_LD (the padded row length of B's
 * row-major tile), A_DST(m, k) (where A's element (m, k) goes in its tile, floats), and
 * the thread's A slots: with TC_VEC, TC_A_VEC_SLOT declares a_k and a_m, its first 16-byte
 * chunk (4 values of k from a_k, row a_m; its v-th chunk is A_STEP rows further); without,
 * TC_A_ELEMENT_SLOT declares what A_M(v) and A_K(v), the row and k of its v-th element,
 * read. In the kernel body, after gemm_common.h's arguments and the names m0, n0, Ag, Bg,
 * b_lo, ktiles and steps (see either kernel), TC_LOAD_SLOTS declares the thread's load
 * slots, and ISSUE(t) issues the copies of step t into local tile t % TC_STAGES.
 *
 * Loads: element by element (4-byte cp.async with zero-fill past the edges), in the order
 * the operand is contiguous (TC_A_KFAST, TC_B_KFAST), or with TC_VEC 16 bytes at a time:
 * A along k, B along n. The host sets TC_VEC only when A is contiguous along k, B's
 * columns come in contiguous aligned runs of 4, and every stride and offset is a multiple
 * of 4 elements.
 */
#ifndef WTICONV_TC_COMMON_H
#define WTICONV_TC_COMMON_H

#if TC_VEC
#define A_LOADS (TC_BM * TC_BK / 4 / THREADS)     /* 16-byte loads per thread and tile */
#define B_LOADS (TC_BK * TC_BN / 4 / THREADS)
#define A_STEP (4 * THREADS / TC_BK)              /* rows between one thread's A loads */
#define B_STEP (4 * THREADS / TC_BN)              /* k between one thread's B loads */
#else
#define A_LOADS (TC_BM * TC_BK / THREADS)         /* element loads per thread and tile */
#define B_LOADS (TC_BK * TC_BN / THREADS)
#endif
#define STR_(x) #x
#define STR(x) STR_(x)

#if A_LOADS < 1 || B_LOADS < 1 || (TC_BM * TC_BK) % THREADS || (TC_BK * TC_BN) % THREADS
#error "tensor-core SGEMM: each thread must load a whole number of each tile's elements"
#endif
#if TC_VEC && ((4 * THREADS) % TC_BK || (4 * THREADS) % TC_BN)
#error "tensor-core SGEMM: with TC_VEC, 4 x THREADS must divide by TC_BK and TC_BN"
#endif
#if !TC_VEC && (THREADS % TC_BK || THREADS % TC_BM || THREADS % TC_BN)
#error "tensor-core SGEMM: THREADS must be a multiple of TC_BK, TC_BM and TC_BN"
#endif

inline uint to_tf32(float x)
{
    uint r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return r;
}

/* The shared-window address of a local pointer, as cp.async takes it. */
inline uint smem(__local const float *p) { return (uint)(size_t)p; }

/* dst <- 4 bytes at src, or zeros when !ok (a source size of 0 reads nothing). */
#define CP4(dst, src, ok)                                                                \
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;"                          \
                 :: "r"(smem(dst)), "l"(src), "r"((ok) ? 4 : 0))
/* dst <- the first `bytes` (0 to 16) of 16 at src, the rest zeros. */
#define CP16(dst, src, bytes)                                                            \
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;"                         \
                 :: "r"(smem(dst)), "l"(src), "r"(bytes))

/* x = hi + lo: 3xTF32 splits (TC_SPLIT), TF32 only rounds */
#if TC_SPLIT
#define SPLIT(hi, lo, x) { hi = to_tf32(x); lo = to_tf32((x) - as_float(hi)); }
#else
#define SPLIT(hi, lo, x) { hi = to_tf32(x); }
#endif

/* Each thread's load slots keep their rows (A) and columns (B) along k: their offsets are
 * computed once. */
#if TC_VEC
#define TC_LOAD_SLOTS                                                                    \
    TC_A_VEC_SLOT                                                                        \
    const int b_n = 4 * (tid % (TC_BN / 4)), b_k = tid / (TC_BN / 4);                    \
    long a_pos[A_LOADS];                                                                 \
    _Pragma("unroll")                                                                    \
    for (int v = 0; v < A_LOADS; ++v)                                                    \
        a_pos[v] = (long)min(m0 + a_m + v * A_STEP, M - 1) * a_ms + a_k;                 \
    const int b_cols = 4 * clamp(N - (n0 + b_n), 0, 4);        /* bytes of a full row */ \
    const long b_pos = gemm_col(min(n0 + b_n, N - 1), bP, bWo, bns, bhs, bws);
#else
#if TC_B_KFAST
#define TC_B_ELEMENT_SLOT                                                                \
    const int b_k = tid % TC_BK, b_n = tid / TC_BK;                                      \
    long b_pos[B_LOADS];                                                                 \
    _Pragma("unroll")                                                                    \
    for (int v = 0; v < B_LOADS; ++v)                                                    \
        b_pos[v] = gemm_col(min(n0 + B_N(v), N - 1), bP, bWo, bns, bhs, bws);
#define B_N(v) (b_n + (v) * (THREADS / TC_BK))
#define B_K(v) b_k
#define B_POS(v) b_pos[v]
#else
#define TC_B_ELEMENT_SLOT                                                                \
    const int b_n = tid % TC_BN, b_k = tid / TC_BN;                                      \
    const long b_col = gemm_col(min(n0 + b_n, N - 1), bP, bWo, bns, bhs, bws);
#define B_N(v) b_n
#define B_K(v) (b_k + (v) * (THREADS / TC_BN))
#define B_POS(v) b_col
#endif
#define TC_LOAD_SLOTS TC_A_ELEMENT_SLOT TC_B_ELEMENT_SLOT
#endif

/* Issues the copies of step t (batch term b, k0) into local tile t % TC_STAGES, and
 * closes a cp.async group (empty past the last step, so the wait counts stay right). */
#if TC_VEC
#define ISSUE(t)                                                                         \
    if ((t) < steps) {                                                                   \
        const int b_ = b_lo + (t) / ktiles, k0_ = ((t) % ktiles) * TC_BK;                \
        const long b1_ = b_ / NB2, b2_ = b_ - b1_ * NB2;                                 \
        const __global float *Ab_ = Ag + b1_ * a_bs + b2_ * a_bs2 + k0_;                 \
        const __global float *Bb_ = Bg + b1_ * b_bs + b2_ * b_bs2;                       \
        __local float *as_ = as + ((t) % TC_STAGES) * A_TILE;                            \
        __local float *bs_ = bs + ((t) % TC_STAGES) * B_TILE;                            \
        const int a_bytes = 4 * clamp(K - (k0_ + a_k), 0, 4);                            \
        _Pragma("unroll") for (int v = 0; v < A_LOADS; ++v) {                            \
            const int m_ = a_m + v * A_STEP;                                             \
            CP16(as_ + A_DST(m_, a_k), Ab_ + a_pos[v], m0 + m_ < M ? a_bytes : 0);       \
        }                                                                                \
        _Pragma("unroll") for (int v = 0; v < B_LOADS; ++v) {                            \
            const int k_ = b_k + v * B_STEP;                                             \
            const int kk_ = min(k0_ + k_, K - 1);                                        \
            CP16(bs_ + k_ * BS_LD + b_n, Bb_ + kk_ * b_ks + b_pos,                       \
                 k0_ + k_ < K ? b_cols : 0);                                             \
        }                                                                                \
    }                                                                                    \
    asm volatile("cp.async.commit_group;");
#else
#define ISSUE(t)                                                                         \
    if ((t) < steps) {                                                                   \
        const int b_ = b_lo + (t) / ktiles, k0_ = ((t) % ktiles) * TC_BK;                \
        const long b1_ = b_ / NB2, b2_ = b_ - b1_ * NB2;                                 \
        const __global float *Ab_ = Ag + b1_ * a_bs + b2_ * a_bs2;                       \
        const __global float *Bb_ = Bg + b1_ * b_bs + b2_ * b_bs2;                       \
        __local float *as_ = as + ((t) % TC_STAGES) * A_TILE;                            \
        __local float *bs_ = bs + ((t) % TC_STAGES) * B_TILE;                            \
        _Pragma("unroll") for (int v = 0; v < A_LOADS; ++v) {                            \
            const int m_ = m0 + A_M(v), k_ = k0_ + A_K(v);                               \
            CP4(as_ + A_DST(A_M(v), A_K(v)),                                             \
                Ab_ + (long)min(m_, M - 1) * a_ms + (long)min(k_, K - 1) * a_ks,         \
                m_ < M && k_ < K);                                                       \
        }                                                                                \
        _Pragma("unroll") for (int v = 0; v < B_LOADS; ++v) {                            \
            const int n_ = n0 + B_N(v), k_ = k0_ + B_K(v);                               \
            CP4(bs_ + B_K(v) * BS_LD + B_N(v),                                           \
                Bb_ + (long)min(k_, K - 1) * b_ks + B_POS(v), n_ < N && k_ < K);         \
        }                                                                                \
    }                                                                                    \
    asm volatile("cp.async.commit_group;");
#endif

#endif
