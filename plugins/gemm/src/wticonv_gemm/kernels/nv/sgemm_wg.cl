/* Tensor-core SGEMM for NVIDIA GPUs of compute capability 9.0 (Hopper) through the
 * warpgroup instructions wgmma.mma_async (TF32 operands, FP32 accumulators), with
 * cp.async copies from global to local memory. It computes what sgemm_tc.cl computes,
 * with the same arguments (GEMM_GPU_PARAMS, gemm_common.h), in the same two numerical
 * classes (TC_SPLIT: 0 tf32, 1 3xtf32; see sgemm_tc.cl for the split and for why each
 * batch of products goes to a fresh accumulator).
 *
 * Building: NVIDIA's OpenCL compiler targets sm_90, and ptxas refuses wgmma there (it
 * needs sm_90a). So every wgmma and async-proxy instruction is written behind WG_DEFER,
 * "//@", which makes it a PTX comment (inline asm substitutes the operands' registers in
 * comments too); the program cache (wticonv.runtime.ptx) finds the marker in the PTX the
 * compiler returns, removes it, retargets the PTX to sm_90a and builds that. On the H200:
 * 482 TFLOP/s of raw wgmma TF32 throughput against 321 for mma.sync
 * (benchmarks/results/wgmma-probe-h200.txt).
 *
 * Roles: wgmma multiplies D (64 x WN) = Aw (64 x 8) . Bw (8 x WN), Aw in registers and
 * Bw in local memory, which for TF32 must be K-major (k contiguous). Here Aw is B^T (64 of
 * our columns n, loaded into registers from a row-major k x n tile, any layout will do)
 * and Bw is A^T (WG_BM of our rows m, k contiguous in local memory): D = C^T. So each
 * warpgroup owns 64 columns x WG_BM rows of C, and the work-group WG_NWG warpgroups side
 * by side along n: BN = 64 x WG_NWG columns.
 *
 * Local tiles: A in wgmma's no-swizzle K-major layout, 8 x 4 "core matrices" of 16-byte
 * rows, element (m, k) at float (m / 8) * TC_BK * 8 + (k / 4) * 32 + (m % 8) * 4 + k % 4:
 * core matrices next along k 128 bytes apart (the descriptor's leading byte offset),
 * next along m TC_BK * 32 bytes apart (its stride byte offset); checked on the H200 with a
 * 64x64x8 product (benchmarks/wgmma_probe.py, wgmma-probe-h200.txt). B row-major, rows
 * padded to BN + 8 words so that a warp's fragment loads hit 32 distinct banks. In 3xTF32
 * each thread splits the A elements it copied, once they land: the tile keeps the high
 * parts and one of two low-part tiles (by step parity) the low parts; the B fragments are
 * split in registers. In TF32 the A elements are rounded in place (WG_ROUND), as cvt.rna
 * rounds the register operand.
 *
 * Fragment layouts (PTX ISA, wgmma .m64nNk8 with .tf32, warp w of the warpgroup holding
 * rows 16w to 16w + 15; gr = lane / 4, tq = lane % 4): A a0 (gr, tq), a1 (gr + 8, tq),
 * a2 (gr, tq + 4), a3 (gr + 8, tq + 4); D d[4j + 2h + e] at row gr + 8h, column
 * 8j + 2tq + e.
 *
 * Launch: local size (THREADS, 1, 1), THREADS = 128 x WG_NWG; global size
 * (THREADS * ceil(N / BN), ceil(M / WG_BM), G * S).
 */

#ifndef WG_BM
#define WG_BM 128       /* work-group rows of C = wgmma's N: 64, 128 or 256 */
#endif
#ifndef WG_NWG
#define WG_NWG 2        /* warpgroups, side by side along n (64 columns each): 1 or 2 */
#endif
#ifndef TC_BK
#define TC_BK 32        /* k per local tile (multiple of 8); in 3xTF32 one fresh
                           accumulator each */
#endif
#ifndef TC_STAGES
#define TC_STAGES 3     /* local tiles in flight (cp.async pipeline depth), at least 2 */
#endif
#ifndef TC_SPLIT
#define TC_SPLIT 1      /* 1: 3xTF32 (FP32-accurate), 0: TF32 */
#endif
#ifndef WG_ROUND
#define WG_ROUND 1      /* TF32 only: 1 rounds the A tile to TF32 (cvt.rna) in place;
                           0 leaves the tensor cores to drop its low bits */
#endif
#ifndef TC_VEC
#define TC_VEC 0        /* 1: 16-byte loads (A along k, B along n), as TC_VEC in sgemm_tc */
#endif
#ifndef TC_A_KFAST
#define TC_A_KFAST 1    /* element loads: 1 when A is contiguous along k, 0 along m */
#endif
#ifndef TC_B_KFAST
#define TC_B_KFAST 0    /* element loads: 1 when B is contiguous along k, 0 along n */
#endif
#ifndef WG_PIPE
#define WG_PIPE 0       /* 1: keep one step's wgmma group in flight while the next tile
                           is split and staged (needs TC_STAGES >= 3; loads are issued
                           TC_STAGES - 2 tiles ahead, one fewer than without); 0: each
                           step waits for its products before staging the next */
#endif
#ifndef WG_DEFER
#define WG_DEFER "//@"  /* see above: the host uncomments these lines */
#endif

#include "gemm_common.h"
#include "wgmma_ops.h"

#define BN (64 * WG_NWG)
#define THREADS (128 * WG_NWG)
#define KSTEPS (TC_BK / 8)
#define ND (WG_BM / 2)                            /* accumulators per thread */
#define A_TILE (WG_BM * TC_BK)                    /* floats, no padding */
#define BS_LD (BN + 8)
#define B_TILE (TC_BK * BS_LD)
#define SBO_BYTES (TC_BK * 32)

#if WG_BM == 64
#define WG_MMA WG_MMA_64
#elif WG_BM == 128
#define WG_MMA WG_MMA_128
#elif WG_BM == 256
#define WG_MMA WG_MMA_256
#else
#error "sgemm_wg: WG_BM must be 64, 128 or 256"
#endif
#if TC_BK % 8 || (WG_NWG != 1 && WG_NWG != 2) || TC_STAGES < 2
#error "sgemm_wg: TC_BK must be a multiple of 8, WG_NWG 1 or 2, TC_STAGES at least 2"
#endif
#if WG_PIPE && TC_STAGES < 3
#error "sgemm_wg: WG_PIPE needs TC_STAGES of at least 3"
#endif
#if TC_VEC && (THREADS / 8) % (TC_BK / 4)
#error "sgemm_wg: with TC_VEC, THREADS / 8 must be a multiple of TC_BK / 4"
#endif

/* Local float index of A's element (m, k) in the core-matrix layout above. */
#define A_AT(m, k) (((m) >> 3) * (TC_BK * 8) + ((k) >> 2) * 32 + ((m) & 7) * 4 + ((k) & 3))

/* The staging of tc_common.h into that layout. A 16-byte chunk c of the A tile is row
 * 8 (c / 8 / KC) + c % 8, k 4 ((c / 8) % KC), KC = TC_BK / 4, so that 8 neighbouring
 * threads fill the 8 rows of one core matrix: 32 distinct banks. With element loads along
 * k, element e is k 4 ((e / 32) % KC) + e % 4, row 8 (e / 32 / KC) + (e / 4) % 8: a warp's
 * 32 copies land in 32 distinct banks too. */
#define TC_BM WG_BM
#define TC_BN BN
#define A_DST(m, k) A_AT(m, k)
#define TC_A_VEC_SLOT                                                                    \
    const int a_k = 4 * ((tid >> 3) % (TC_BK / 4));                                      \
    const int a_m = 8 * ((tid >> 3) / (TC_BK / 4)) + (tid & 7);
#if TC_VEC
#define A_M(v) (a_m + (v) * A_STEP)
#define A_K(v) a_k
#elif TC_A_KFAST
#define TC_A_ELEMENT_SLOT
#define A_E(v) (tid + (v) * THREADS)
#define A_M(v) (8 * ((A_E(v) >> 5) / (TC_BK / 4)) + ((A_E(v) >> 2) & 7))
#define A_K(v) (4 * ((A_E(v) >> 5) % (TC_BK / 4)) + (A_E(v) & 3))
#else
#define TC_A_ELEMENT_SLOT const int a_m = tid % WG_BM, a_k = tid / WG_BM;
#define A_M(v) a_m
#define A_K(v) (a_k + (v) * (THREADS / WG_BM))
#endif
#include "tc_common.h"

/* wgmma's shared-memory matrix descriptor (PTX ISA, "matrix descriptor"): start address,
 * leading and stride byte offsets, each in 16-byte units; no swizzle. */
inline ulong wg_desc(__local const float *p)
{
    return (ulong)((smem(p) >> 4) & 0x3FFF) | ((ulong)(128 >> 4) << 16)
         | ((ulong)((SBO_BYTES >> 4) & 0x3FFF) << 32);
}

/* Step staging, shared by both loop orders (WG_PIPE). WG_STAGE(t): wait for this thread's
 * copies of tile t, split (3xTF32) or round (TF32) its A elements in place, the low parts
 * into low-part tile t % WG_LOW_TILES, make them visible to wgmma (the async proxy) and to
 * every thread, then issue the copies of tile t + WG_AHEAD. WG_FRAGS(t): this thread's
 * B^T fragments of tile t into fh (and fl), split in registers. */
#if WG_PIPE
#define WG_WAIT_LOADS STR(TC_STAGES - 3)
#define WG_AHEAD (TC_STAGES - 2)
#define WG_LOW_TILES 3
#else
#define WG_WAIT_LOADS STR(TC_STAGES - 2)
#define WG_AHEAD (TC_STAGES - 1)
#define WG_LOW_TILES 2
#endif
#if TC_SPLIT
#define WG_LO(x) x
#else
#define WG_LO(x)
#endif
#if !(TC_SPLIT || WG_ROUND)
#define WG_SPLIT_A(at_, lt_)
#elif TC_VEC
#define WG_SPLIT_A(at_, lt_)                                                             \
    _Pragma("unroll") for (int v = 0; v < A_LOADS; ++v) {                                \
        const int i_ = A_AT(A_M(v), a_k);                                                \
        _Pragma("unroll") for (int e = 0; e < 4; ++e) {                                  \
            uint hi, lo;                                                                 \
            SPLIT(hi, lo, (at_)[i_ + e])                                                 \
            (at_)[i_ + e] = as_float(hi);                                                \
            WG_LO((lt_)[i_ + e] = as_float(lo);)                                         \
        }                                                                                \
    }
#else
#define WG_SPLIT_A(at_, lt_)                                                             \
    _Pragma("unroll") for (int v = 0; v < A_LOADS; ++v) {                                \
        const int i_ = A_AT(A_M(v), A_K(v));                                             \
        uint hi, lo;                                                                     \
        SPLIT(hi, lo, (at_)[i_])                                                         \
        (at_)[i_] = as_float(hi);                                                        \
        WG_LO((lt_)[i_] = as_float(lo);)                                                 \
    }
#endif
#define WG_STAGE(t) {                                                                    \
        asm volatile("cp.async.wait_group " WG_WAIT_LOADS ";");                          \
        __local float *st_ = as + ((t) % TC_STAGES) * A_TILE;                            \
        __local float *sl_ = WG_LOW_AT(t);                                               \
        WG_SPLIT_A(st_, sl_)                                                             \
        asm volatile(WG_DEFER "fence.proxy.async.shared::cta;\n" ::: "memory");          \
        barrier(CLK_LOCAL_MEM_FENCE);                                                    \
        ISSUE((t) + WG_AHEAD)                                                            \
    }
#if TC_SPLIT
#define WG_LOW_AT(t) (al + ((t) % WG_LOW_TILES) * A_TILE)
#define WG_FRAG(ks, r, x) SPLIT(fh[ks][r], fl[ks][r], x)
#else
#define WG_LOW_AT(t) ((__local float *)0)
#define WG_FRAG(ks, r, x) SPLIT(fh[ks][r], fh[ks][r], x)
#endif
#define WG_FRAGS(t) {                                                                    \
        __local const float *bt_ = bs + ((t) % TC_STAGES) * B_TILE;                      \
        _Pragma("unroll") for (int ks = 0; ks < KSTEPS; ++ks) {                          \
            const int c_ = (8 * ks + tq) * BS_LD + wn + gr;                              \
            WG_FRAG(ks, 0, bt_[c_])                                                      \
            WG_FRAG(ks, 1, bt_[c_ + 8])                                                  \
            WG_FRAG(ks, 2, bt_[c_ + 4 * BS_LD])                                          \
            WG_FRAG(ks, 3, bt_[c_ + 4 * BS_LD + 8])                                      \
        }                                                                                \
    }

__kernel __attribute__((reqd_work_group_size(THREADS, 1, 1)))
void sgemm_wg(GEMM_GPU_PARAMS)
{
    __local float as[TC_STAGES * A_TILE] __attribute__((aligned(128)));
    __local float bs[TC_STAGES * B_TILE] __attribute__((aligned(16)));
#if TC_SPLIT
    /* low-part tiles, by step: without WG_PIPE two (a warpgroup may split tile t + 1
     * while the other still multiplies tile t; the barrier bounds them to one step
     * apart), with it three (see the loop) */
    __local float al[WG_LOW_TILES * A_TILE] __attribute__((aligned(128)));
#endif
    const int tid = get_local_id(0);
    const int lane = tid & 31, warp = (tid >> 5) & 3, wg = tid >> 7;
    const int gr = lane >> 2, tq = lane & 3;
    const int m0 = get_group_id(1) * WG_BM, n0 = get_group_id(0) * BN;
    const int wn = 64 * wg + 16 * warp;           /* this warp's first column in the tile */
    GEMM_GPU_GROUP
    const int ktiles = (K + TC_BK - 1) / TC_BK;
    const int steps = max(b_hi - b_lo, 0) * ktiles;

    TC_LOAD_SLOTS

    float acc[ND];
    #pragma unroll
    for (int i = 0; i < ND; ++i)
        acc[i] = 0.0f;
#if TC_SPLIT
    float p[ND];
    #pragma unroll
    for (int i = 0; i < ND; ++i)
        p[i] = 0.0f;
#endif

#if WG_PIPE
    /* Loads run TC_STAGES - 2 tiles ahead. While step t's products are in flight, tile
     * t + 1 is split and the copies of tile t + TC_STAGES - 1 are issued into the slot of
     * tile t - 1: every warpgroup has waited for its step t - 1 products before it
     * reaches that barrier. Three low-part tiles, since another warpgroup may still
     * multiply tiles t - 1 and t while this one splits t + 1. */
    #pragma unroll
    for (int s = 0; s < TC_STAGES - 2; ++s) {
        ISSUE(s)
    }
#else
    #pragma unroll
    for (int s = 0; s < TC_STAGES - 1; ++s) {
        ISSUE(s)
    }
#endif
    uint fh[KSTEPS][4];
#if TC_SPLIT
    uint fl[KSTEPS][4];
#endif
#if WG_PIPE
    if (steps > 0) {
        WG_STAGE(0)
        WG_FRAGS(0)
    }
#endif
    for (int t = 0; t < steps; ++t) {
#if !WG_PIPE
        WG_STAGE(t)
        WG_FRAGS(t)
#endif
        __local float *at = as + (t % TC_STAGES) * A_TILE;
        asm volatile(WG_DEFER "wgmma.fence.sync.aligned;\n" ::: "memory");
        #pragma unroll
        for (int ks = 0; ks < KSTEPS; ++ks) {
            /* core matrices of k 8ks to 8ks + 7: 2 x 128 bytes along k per step */
            const ulong dh = wg_desc(at + ks * 64);
#if TC_SPLIT
            const ulong dl = wg_desc(al + (t % WG_LOW_TILES) * A_TILE + ks * 64);
            WG_MMA(p, fl[ks], dh, ks > 0);        /* small terms first, fresh at ks 0 */
            WG_MMA(p, fh[ks], dl, 1);
            WG_MMA(p, fh[ks], dh, 1);
#else
            WG_MMA(acc, fh[ks], dh, 1);
#endif
        }
        asm volatile(WG_DEFER "wgmma.commit_group.sync.aligned;\n" ::: "memory");
#if WG_PIPE
        if (t + 1 < steps)
            WG_STAGE(t + 1)
#endif
        asm volatile(WG_DEFER "wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#if TC_SPLIT
        #pragma unroll
        for (int i = 0; i < ND; ++i)
            acc[i] += p[i];
#endif
#if WG_PIPE
        if (t + 1 < steps)
            WG_FRAGS(t + 1)
#endif
    }
    asm volatile("cp.async.wait_group 0;");

    __global float *Cg = C + c_off + split * c_ss + grp * c_gs;
    #pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int n = n0 + wn + gr + 8 * h;
        if (n >= N)
            continue;
        const long col = gemm_col(n, cP, cWo, cns, chs, cws);
        #pragma unroll
        for (int j = 0; j < WG_BM / 8; ++j)
            #pragma unroll
            for (int e = 0; e < 2; ++e) {
                const int m = m0 + 8 * j + 2 * tq + e;
                if (m >= M)
                    continue;
                __global float *c = Cg + m * c_ms + col;
                const float r = acc[4 * j + 2 * h + e];
                *c = beta ? *c + r : r;
            }
    }
}
