/* Device figures for the WTI models: peak FP32 rate and memory bandwidth.
 *
 * Built once per device by wticonv.peak; the results are cached in the store.
 *
 * WTICONV_PEAK_CHAINS: independent multiply-add chains per work-item. Each chain is a
 *   float8, so one loop iteration does WTICONV_PEAK_CHAINS * 8 * 2 FLOPs. Eight chains hide
 *   the 4-cycle FMA latency of two FMA pipes on current CPUs and keep GPU lanes busy.
 */
#ifndef WTICONV_PEAK_CHAINS
#define WTICONV_PEAK_CHAINS 8   /* independent float8 chains per work-item */
#endif

__kernel void peak_fma(__global float *out, const int iters, const float a, const float b)
{
    const size_t gid = get_global_id(0);
    float8 acc[WTICONV_PEAK_CHAINS];
    for (int c = 0; c < WTICONV_PEAK_CHAINS; ++c)
        acc[c] = (float8)((float)(gid & 7) * 0.001f + (float)c);
    for (int i = 0; i < iters; ++i) {
#pragma unroll
        for (int c = 0; c < WTICONV_PEAK_CHAINS; ++c)
            acc[c] = mad(acc[c], (float8)a, (float8)b);
    }
    float8 sum = acc[0];
    for (int c = 1; c < WTICONV_PEAK_CHAINS; ++c)
        sum += acc[c];
    /* One store per work-item, so the chains cannot be optimised away. */
    out[gid] = sum.s0 + sum.s1 + sum.s2 + sum.s3 + sum.s4 + sum.s5 + sum.s6 + sum.s7;
}

/* Streaming copy: bandwidth = 2 * bytes / time (one read and one write per element). */
__kernel void stream_copy(__global const float4 *restrict src, __global float4 *restrict dst)
{
    const size_t i = get_global_id(0);
    dst[i] = src[i];
}
