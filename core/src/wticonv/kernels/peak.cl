/* Device figures for the WTI models: peak FP32 rate and memory bandwidth.
 *
 * Built once per device by wticonv.peak; the results are cached in the store.
 *
 * WTICONV_PEAK_CHAINS: independent multiply-add chains per work-item. Each chain is a
 *   float16, so one loop iteration does WTICONV_PEAK_CHAINS * 16 * 2 FLOPs. float16 fills a
 *   512-bit AVX-512 register (a float8 chain measured half the peak of an AVX-512 CPU);
 *   GPUs run the lanes as scalars. Eight chains hide the 4-cycle FMA latency of two FMA
 *   pipes on current CPUs; peak.py passes 16 for CPUs and 4 for GPUs.
 *
 * PEAK_MAD: the multiply-add the solvers' kernels use (wticonv/common.h's WTICONV_MAD, which
 *   this file, read without the kernel library's splicing, repeats): one fused instruction
 *   on CPUs with FMA units, where PoCL's mad() is a multiply and an add (half the rate).
 */
#ifndef WTICONV_PEAK_CHAINS
#define WTICONV_PEAK_CHAINS 8   /* independent float16 chains per work-item (peak.py sets it) */
#endif

#if defined(__FMA__) || defined(__ARM_FEATURE_FMA)
#define PEAK_MAD(a, b, c) fma((a), (b), (c))
#else
#define PEAK_MAD(a, b, c) mad((a), (b), (c))
#endif

__kernel void peak_fma(__global float *out, const int iters, const float a, const float b)
{
    const size_t gid = get_global_id(0);
    float16 acc[WTICONV_PEAK_CHAINS];
    for (int c = 0; c < WTICONV_PEAK_CHAINS; ++c)
        acc[c] = (float16)((float)(gid & 7) * 0.001f + (float)c);
    for (int i = 0; i < iters; ++i) {
#pragma unroll
        for (int c = 0; c < WTICONV_PEAK_CHAINS; ++c)
            acc[c] = PEAK_MAD(acc[c], (float16)a, (float16)b);
    }
    float16 sum = acc[0];
    for (int c = 1; c < WTICONV_PEAK_CHAINS; ++c)
        sum += acc[c];
    /* One store per work-item, so the chains cannot be optimised away. */
    const float8 s8 = sum.lo + sum.hi;
    out[gid] = s8.s0 + s8.s1 + s8.s2 + s8.s3 + s8.s4 + s8.s5 + s8.s6 + s8.s7;
}

/* Streaming copy: bandwidth = 2 * bytes / time (one read and one write per element). */
__kernel void stream_copy(__global const float4 *restrict src, __global float4 *restrict dst)
{
    const size_t i = get_global_id(0);
    dst[i] = src[i];
}
