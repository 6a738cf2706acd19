/* direct.naive: every output element computed straight from the definition of a 2-D
 * convolution (NCHW, float32), in all three directions.
 *
 * Dynamic: every size (N, C, H, W, K, R, S, Ho, Wo), padding, stride, dilation and group
 * count is a run-time kernel argument, so one build serves every problem. Element indices
 * and offsets are 64-bit (long): tensors past 2^31 elements are addressed correctly.
 * Positions that fall in the zero padding are skipped (never read), so no access leaves
 * the tensors and NaN/Inf in real data propagate.
 *
 * Launch planning (global and local sizes, which wrw kernel) is in launch.py.
 */
#include "wticonv/common.h"

#ifndef DIRECT_NAIVE_WRW_LOCAL
#define DIRECT_NAIVE_WRW_LOCAL 64  /* work-items sharing one dw element in naive_wrw_split;
                                      a power of two */
#endif

#define CONV_ARGS                                                                         \
    const int N, const int C, const int H, const int W, const int K, const int R,         \
    const int S, const int Ho, const int Wo, const int pad_h, const int pad_w,            \
    const int stride_h, const int stride_w, const int dil_h, const int dil_w, const int G

/* Forward: one work-item per y[n][k][ho][wo]. */
__kernel void naive_fwd(__global const float *restrict x, __global const float *restrict wei,
                        __global float *restrict y, CONV_ARGS)
{
    const long total = (long)N * K * Ho * Wo;
    const long gid = get_global_id(0);
    if (gid >= total)
        return;
    long t = gid;
    const int wo = (int)(t % Wo); t /= Wo;
    const int ho = (int)(t % Ho); t /= Ho;
    const int k = (int)(t % K);
    const long n = t / K;
    const int Cg = C / G, Kg = K / G, g = k / Kg;
    const long h0 = (long)ho * stride_h - pad_h;
    const long w0 = (long)wo * stride_w - pad_w;
    float acc = 0.0f;
    for (int c = 0; c < Cg; ++c) {
        const __global float *xc = x + ((n * C + (long)g * Cg + c) * H) * (long)W;
        const __global float *wc = wei + ((long)k * Cg + c) * R * (long)S;
        for (int r = 0; r < R; ++r) {
            const long ih = h0 + (long)r * dil_h;
            if (ih < 0 || ih >= H)
                continue;
            for (int s = 0; s < S; ++s) {
                const long iw = w0 + (long)s * dil_w;
                if (iw < 0 || iw >= W)
                    continue;
                acc = WTICONV_MAD(xc[ih * W + iw], wc[(long)r * S + s], acc);
            }
        }
    }
    y[gid] = acc;
}

/* Backward data: one work-item per dx[n][c][h][w], gathering every dy that the input
 * pixel contributed to (no atomics). */
__kernel void naive_bwd(__global float *restrict dx, __global const float *restrict wei,
                        __global const float *restrict dy, CONV_ARGS)
{
    const long total = (long)N * C * H * W;
    const long gid = get_global_id(0);
    if (gid >= total)
        return;
    long t = gid;
    const int iw = (int)(t % W); t /= W;
    const int ih = (int)(t % H); t /= H;
    const int c = (int)(t % C);
    const long n = t / C;
    const int Cg = C / G, Kg = K / G, g = c / Cg, cl = c % Cg;
    float acc = 0.0f;
    for (int kk = 0; kk < Kg; ++kk) {
        const long k = (long)g * Kg + kk;
        const __global float *dyk = dy + (n * K + k) * Ho * (long)Wo;
        const __global float *wk = wei + (k * Cg + cl) * R * (long)S;
        for (int r = 0; r < R; ++r) {
            const long th = (long)ih + pad_h - (long)r * dil_h;
            if (th < 0 || th % stride_h)
                continue;
            const long oh = th / stride_h;
            if (oh >= Ho)
                continue;
            for (int s = 0; s < S; ++s) {
                const long tw = (long)iw + pad_w - (long)s * dil_w;
                if (tw < 0 || tw % stride_w)
                    continue;
                const long ow = tw / stride_w;
                if (ow >= Wo)
                    continue;
                acc = WTICONV_MAD(dyk[oh * Wo + ow], wk[(long)r * S + s], acc);
            }
        }
    }
    dx[gid] = acc;
}

/* One row of the backward-weights reduction: sum over ow of dy[.., oh, ow] * x[.., ih, iw]
 * for the filter column s, where iw = ow * stride_w - pad_w + s * dil_w (padding skipped). */
inline float wrw_row(const __global float *restrict dyrow, const __global float *restrict xrow,
                     const int Wo, const int W, const int stride_w, const int pad_w,
                     const int s, const int dil_w, float acc)
{
    for (int ow = 0; ow < Wo; ++ow) {
        const long iw = (long)ow * stride_w - pad_w + (long)s * dil_w;
        if (iw >= 0 && iw < W)
            acc = WTICONV_MAD(dyrow[ow], xrow[iw], acc);
    }
    return acc;
}

/* Backward weights, one work-item per dw[k][c][r][s], reducing over N, Ho, Wo serially.
 * Used when dw has enough elements to fill the device. */
__kernel void naive_wrw(__global const float *restrict x, __global float *restrict dw,
                        __global const float *restrict dy, CONV_ARGS)
{
    const int Cg = C / G, Kg = K / G;
    const long total = (long)K * Cg * R * S;
    const long gid = get_global_id(0);
    if (gid >= total)
        return;
    long t = gid;
    const int s = (int)(t % S); t /= S;
    const int r = (int)(t % R); t /= R;
    const int cl = (int)(t % Cg);
    const long k = t / Cg;
    const long c = (k / Kg) * Cg + cl;
    float acc = 0.0f;
    for (long n = 0; n < N; ++n) {
        for (int oh = 0; oh < Ho; ++oh) {
            const long ih = (long)oh * stride_h - pad_h + (long)r * dil_h;
            if (ih < 0 || ih >= H)
                continue;
            acc = wrw_row(dy + ((n * K + k) * Ho + oh) * (long)Wo,
                          x + ((n * C + c) * H + ih) * (long)W, Wo, W, stride_w, pad_w, s,
                          dil_w, acc);
        }
    }
    dw[gid] = acc;
}

/* Backward weights, one work-group per dw element: the work-items split the N x Ho rows,
 * then a fixed-order tree reduction in local memory (deterministic, no atomics). Used
 * when dw is too small to fill the device with naive_wrw. */
__kernel __attribute__((reqd_work_group_size(DIRECT_NAIVE_WRW_LOCAL, 1, 1)))
void naive_wrw_split(__global const float *restrict x, __global float *restrict dw,
                     __global const float *restrict dy, CONV_ARGS)
{
    __local float partial[DIRECT_NAIVE_WRW_LOCAL];
    const int Cg = C / G, Kg = K / G;
    const long e = get_group_id(0);
    const int lid = (int)get_local_id(0);
    long t = e;
    const int s = (int)(t % S); t /= S;
    const int r = (int)(t % R); t /= R;
    const int cl = (int)(t % Cg);
    const long k = t / Cg;
    const long c = (k / Kg) * Cg + cl;
    float acc = 0.0f;
    const long rows = (long)N * Ho;
    for (long row = lid; row < rows; row += DIRECT_NAIVE_WRW_LOCAL) {
        const long n = row / Ho;
        const int oh = (int)(row % Ho);
        const long ih = (long)oh * stride_h - pad_h + (long)r * dil_h;
        if (ih < 0 || ih >= H)
            continue;
        acc = wrw_row(dy + ((n * K + k) * Ho + oh) * (long)Wo,
                      x + ((n * C + c) * H + ih) * (long)W, Wo, W, stride_w, pad_w, s, dil_w,
                      acc);
    }
    partial[lid] = acc;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int step = DIRECT_NAIVE_WRW_LOCAL / 2; step > 0; step >>= 1) {
        if (lid < step)
            partial[lid] += partial[lid + step];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0)
        dw[e] = partial[0];
}
