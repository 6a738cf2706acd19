/* Tensor-core SGEMM for NVIDIA GPUs of compute capability 8.0 or newer, through inline
 * PTX (mma.sync.m16n8k8 with TF32 operands and FP32 accumulators). Only NVIDIA's OpenCL
 * builds it, hence its folder: kernels/nv/ holds the kernels that need that driver; the
 * CPU kernel-file checks (Oclgrind: every kernels/*.cl builds and runs) leave the folder
 * out, and tests/test_gpu.py builds and checks these on the GPU.
 *
 *     C (M x N) = A (M x K) . B (K x N),   all row-major float32
 *
 * Two numerical classes (TC_SPLIT):
 *   0  tf32:   each operand rounded to TF32 (cvt.rna: 10-bit mantissa), one product;
 *   1  3xtf32: each operand split into a TF32 high part and the TF32 rounding of the
 *              remainder, x = hi + lo; three products summed, lo.hi + hi.lo + hi.hi
 *              (the small terms first), which is FP32-accurate: the dropped lo.lo term
 *              is about 2^-22 of a product.
 * The split is done once per element when a tile is staged in local memory, not per
 * product. The tensor cores add their products with truncation, not rounding (Ootomo and
 * Yokota, "Recovering single precision accuracy from Tensor Cores while surpassing the
 * FP32 theoretical peak performance", IJHPCA 2022), which over a long K biases the sum
 * by about K/8 x 2^-23 of it, more than an FP32 sum's error; so in 3xTF32 each staged
 * tile's products go to a fresh accumulator of 4 registers, added to the running sum in
 * FP32 with rounding.
 *
 * Local memory holds each staged tile row-major with padded rows (A: TC_BK + 4 words, B:
 * TC_BN + 8), so that a warp's fragment loads hit 32 distinct banks. (A fragment-ordered
 * layout, one 16-byte load per lane and mma tile, ran 1.5x slower on the H200: its
 * staging stores collide in 8 banks.)
 *
 * Work-group: TC_BM x TC_BN outputs, (TC_BM / TC_WM) x (TC_BN / TC_WN) warps, each warp
 * TC_WM x TC_WN outputs as (TC_WM / 16) x (TC_WN / 8) mma tiles. K advances TC_BK at a
 * time: the next tile's global loads go to registers while the current tile is
 * multiplied out of local memory.
 *
 * Requires (the host checks): M % TC_BM == 0, N % TC_BN == 0, K % TC_BK == 0, and A, B, C
 * 16-byte aligned (float4 loads). Launch: local size (THREADS, 1), global size
 * (THREADS * N / TC_BN, M / TC_BM).
 *
 * Fragment layouts are those of the PTX ISA for mma.m16n8k8 .tf32 (g = lane / 4,
 * t = lane % 4): A a0 (g, t), a1 (g + 8, t), a2 (g, t + 4), a3 (g + 8, t + 4); B b0 (t, g),
 * b1 (t + 4, g); C c0 (g, 2t), c1 (g, 2t + 1), c2 (g + 8, 2t), c3 (g + 8, 2t + 1).
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
#ifndef TC_SPLIT
#define TC_SPLIT 1      /* 1: 3xTF32 (FP32-accurate), 0: TF32 */
#endif

#ifndef TC_BK
#define TC_BK 16        /* K per staged tile (multiple of 8: TC_BK / 8 mma k-steps) */
#endif
#define KS (TC_BK / 8)
#define WARPS_M (TC_BM / TC_WM)
#define WARPS_N (TC_BN / TC_WN)
#define THREADS (32 * WARPS_M * WARPS_N)
#define MT (TC_WM / 16)                           /* mma tiles per warp, rows */
#define NT (TC_WN / 8)                            /* mma tiles per warp, columns */
#define A_VEC (TC_BM * TC_BK / 4 / THREADS)       /* float4 loads per thread, A tile */
#define B_VEC (TC_BK * TC_BN / 4 / THREADS)
#define AS_LD (TC_BK + 4)                         /* padded row lengths, words */
#define BS_LD (TC_BN + 8)

inline uint to_tf32(float x)
{
    uint r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return r;
}

#define MMA(d, a, b)                                                                     \
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "                  \
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"                 \
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                        \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]))

/* Word offsets of element (r, c) of a staged A tile and (k, n) of a staged B tile. */
#define A_WORD(r, c) ((r) * AS_LD + (c))
#define B_WORD(k, n) ((k) * BS_LD + (n))

__kernel __attribute__((reqd_work_group_size(THREADS, 1, 1)))
void sgemm_tc(const int M, const int N, const int K,
              __global const float *restrict A, __global const float *restrict B,
              __global float *restrict C)
{
    __local uint as_hi[TC_BM * AS_LD], bs_hi[TC_BK * BS_LD];
#if TC_SPLIT
    __local uint as_lo[TC_BM * AS_LD], bs_lo[TC_BK * BS_LD];
#endif
    const int tid = get_local_id(0);
    const int lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int wm = (warp / WARPS_N) * TC_WM, wn = (warp % WARPS_N) * TC_WN;
    const int m0 = get_group_id(1) * TC_BM, n0 = get_group_id(0) * TC_BN;

    float acc[MT][NT][4];
    #pragma unroll
    for (int i = 0; i < MT; ++i)
        #pragma unroll
        for (int j = 0; j < NT; ++j)
            acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.0f;

    /* thread tid loads float4s tid, tid + THREADS, ... of each tile (rows of 4 columns) */
    float4 ra[A_VEC], rb[B_VEC];
#define LOAD_TILE(k0)                                                                    \
    _Pragma("unroll") for (int v = 0; v < A_VEC; ++v) {                                  \
        const int idx = tid + v * THREADS, row = idx / (TC_BK / 4), c4 = idx % (TC_BK / 4); \
        ra[v] = vload4(0, A + (size_t)(m0 + row) * K + (k0) + 4 * c4);                   \
    }                                                                                    \
    _Pragma("unroll") for (int v = 0; v < B_VEC; ++v) {                                  \
        const int idx = tid + v * THREADS, row = idx / (TC_BN / 4), c4 = idx % (TC_BN / 4); \
        rb[v] = vload4(0, B + (size_t)((k0) + row) * N + n0 + 4 * c4);                   \
    }
#if TC_SPLIT
#define STAGE(hi, lo, word, x)                                                           \
    { const uint h_ = to_tf32(x);                                                        \
      hi[word] = h_;                                                                     \
      lo[word] = to_tf32((x) - as_float(h_)); }
#else
#define STAGE(hi, lo, word, x) hi[word] = to_tf32(x);
#endif
/* the four elements of float4 f at words at .. at + 3 (consecutive columns of a row) */
#define STAGE4(hi, lo, at, f)                                                            \
    STAGE(hi, lo, (at), (f).x) STAGE(hi, lo, (at) + 1, (f).y)                            \
    STAGE(hi, lo, (at) + 2, (f).z) STAGE(hi, lo, (at) + 3, (f).w)
#define STORE_TILE()                                                                     \
    _Pragma("unroll") for (int v = 0; v < A_VEC; ++v) {                                  \
        const int idx = tid + v * THREADS;                                               \
        STAGE4(as_hi, as_lo, A_WORD(idx / (TC_BK / 4), 4 * (idx % (TC_BK / 4))), ra[v])  \
    }                                                                                    \
    _Pragma("unroll") for (int v = 0; v < B_VEC; ++v) {                                  \
        const int idx = tid + v * THREADS;                                               \
        STAGE4(bs_hi, bs_lo, B_WORD(idx / (TC_BN / 4), 4 * (idx % (TC_BN / 4))), rb[v])  \
    }

    LOAD_TILE(0)
    STORE_TILE()
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int k0 = 0; k0 < K; k0 += TC_BK) {
        const int more = k0 + TC_BK < K;
        if (more) {
            LOAD_TILE(k0 + TC_BK)
        }
        uint ah[KS][MT][4], bh[KS][NT][2];
#if TC_SPLIT
        uint al[KS][MT][4], bl[KS][NT][2];
#endif
        #pragma unroll
        for (int ks = 0; ks < KS; ++ks) {
            #pragma unroll
            for (int i = 0; i < MT; ++i) {
                const int r = A_WORD(wm + 16 * i + g, 8 * ks + t);
                ah[ks][i][0] = as_hi[r];
                ah[ks][i][1] = as_hi[r + 8 * AS_LD];
                ah[ks][i][2] = as_hi[r + 4];
                ah[ks][i][3] = as_hi[r + 8 * AS_LD + 4];
#if TC_SPLIT
                al[ks][i][0] = as_lo[r];
                al[ks][i][1] = as_lo[r + 8 * AS_LD];
                al[ks][i][2] = as_lo[r + 4];
                al[ks][i][3] = as_lo[r + 8 * AS_LD + 4];
#endif
            }
            #pragma unroll
            for (int j = 0; j < NT; ++j) {
                const int c = B_WORD(8 * ks + t, wn + 8 * j + g);
                bh[ks][j][0] = bs_hi[c];
                bh[ks][j][1] = bs_hi[c + 4 * BS_LD];
#if TC_SPLIT
                bl[ks][j][0] = bs_lo[c];
                bl[ks][j][1] = bs_lo[c + 4 * BS_LD];
#endif
            }
        }
        #pragma unroll
        for (int i = 0; i < MT; ++i)
            #pragma unroll
            for (int j = 0; j < NT; ++j) {
#if TC_SPLIT
                /* this tile's products in a fresh accumulator, then a rounded FP32 sum */
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
        if (more) {
            barrier(CLK_LOCAL_MEM_FENCE);
            STORE_TILE()
            barrier(CLK_LOCAL_MEM_FENCE);
        }
    }
    #pragma unroll
    for (int i = 0; i < MT; ++i)
        #pragma unroll
        for (int j = 0; j < NT; ++j) {
            const int row = m0 + wm + 16 * i + g, col = n0 + wn + 8 * j + 2 * t;
            vstore2((float2)(acc[i][j][0], acc[i][j][1]), 0, C + (size_t)row * N + col);
            vstore2((float2)(acc[i][j][2], acc[i][j][3]), 0, C + (size_t)(row + 8) * N + col);
        }
}
