/* Fused Winograd F(MH x MW, 3x3) convolution, forward-like (fwd, and bwd with the filter
 * flipped and transposed), NCHW float32, for the winograd.fused_f2x3 solver. No workspace:
 * each work-group transforms its own input tiles and filters into local memory, multiplies
 * them position by position, and applies the output transform in registers.
 *
 * A work-group computes FT tiles (of one group g's tile list: image, tile row, tile column)
 * for FK output channels; each work-item FUSED_TT tiles x FUSED_KK channels, all AH x AW
 * transformed positions, in AH*AW*TT*KK accumulators. The input channels are taken
 * FUSED_CB at a time:
 *   1. stage V[cb][xi][ft] = (BT_h d BT_w^T)[xi] of the FT input tiles of FUSED_CB channels,
 *      and U[cb][xi][fk] = (G_h g G_w^T)[xi] of FK x FUSED_CB filters, in local memory;
 *   2. acc[xi][kk][tt] += U[cb][xi][k] * V[cb][xi][t].
 * Then y tile = AT_h acc AT_w^T, written inside Ho x Wo only; input pixels and filter taps
 * outside their tensors read as zero, so tile tails need no padding.
 *
 * Filter tap (fr, fc) of output o, input i is w[wbase + g*wgs + o*so + i*si + fr*sr + fc*ss]
 * (negative sr, ss: the flipped filter of backward data). Input tile rows start at
 * ty*MH + offh (offh = -pad); rows from HL and columns from WL on reach no output and read
 * as zero. Sizes are kernel arguments; one build per tile shape.
 * Global size (ceil(T/FT)*FWG, ceil(O/FK), G) with T = N*th*tw; local size (FWG, 1, 1).
 */
#include "winograd_common.h"

#ifndef FUSED_TT
#define FUSED_TT 2    /* tiles per work-item */
#endif
#ifndef FUSED_KK
#define FUSED_KK 2    /* output channels per work-item */
#endif
#ifndef FUSED_LT
#define FUSED_LT 16   /* work-items along the tiles (adjacent work-items: adjacent tiles) */
#endif
#ifndef FUSED_LK
#define FUSED_LK 8    /* work-items along the output channels */
#endif
#ifndef FUSED_CB
#define FUSED_CB 8    /* input channels staged in local memory per step */
#endif

#define FT (FUSED_TT * FUSED_LT)   /* tiles per work-group */
#define FK (FUSED_KK * FUSED_LK)   /* output channels per work-group */
#define FWG (FUSED_LT * FUSED_LK)  /* work-group size */
#define FXI (AH * AW)              /* transformed positions */

__kernel __attribute__((reqd_work_group_size(FWG, 1, 1)))
void fused_forward(__global const float *restrict x, __global const float *restrict w,
                   __global float *restrict y, const int N, const int I, const int O,
                   const int G, const int H, const int W, const int HL, const int WL,
                   const int Ho, const int Wo,
                   const int th, const int tw, const int offh, const int offw,
                   const long wbase, const long wgs, const long so, const long si,
                   const long sr, const long ss)
{
    __local float Vs[FUSED_CB * FXI * FT];
    __local float Us[FUSED_CB * FXI * FK];
    const int lid = get_local_id(0);
    const int lt = lid % FUSED_LT, lk = lid / FUSED_LT;
    const int t0 = get_group_id(0) * FT, k0 = get_group_id(1) * FK, g = get_group_id(2);
    const int tpi = th * tw, T = N * tpi;
    const long HW = (long)H * W;

    float acc[FXI][FUSED_KK][FUSED_TT];
    #pragma unroll
    for (int xi = 0; xi < FXI; ++xi)
        #pragma unroll
        for (int a = 0; a < FUSED_KK; ++a)
            #pragma unroll
            for (int b = 0; b < FUSED_TT; ++b)
                acc[xi][a][b] = 0.0f;

    for (int c0 = 0; c0 < I; c0 += FUSED_CB) {
        /* 1a. input tiles of channels c0 .. c0+CB-1 */
        for (int j = lid; j < FUSED_CB * FT; j += FWG) {
            const int cb = j / FT, ft = j - cb * FT;
            const int t = t0 + ft, c = c0 + cb;
            float d[AH * AW];
            if (t < T && c < I) {
                const int n = t / tpi, tt = t - n * tpi, ty = tt / tw, tx = tt - ty * tw;
                const int h0 = ty * WINO_MH + offh, w0 = tx * WINO_MW + offw;
                const __global float *xc = x + (((long)n * G + g) * I + c) * HW;
                #pragma unroll
                for (int a = 0; a < AH; ++a) {
                    const int ih = h0 + a;
                    const bool row_ok = ih >= 0 && ih < HL;
                    #pragma unroll
                    for (int b = 0; b < AW; ++b) {
                        const int iw = w0 + b;
                        d[a * AW + b] =
                            (row_ok && iw >= 0 && iw < WL) ? xc[(long)ih * W + iw] : 0.0f;
                    }
                }
            } else {
                #pragma unroll
                for (int xi = 0; xi < FXI; ++xi)
                    d[xi] = 0.0f;
            }
            float v[FXI];
            wino_input_tile(v, d);
            #pragma unroll
            for (int xi = 0; xi < FXI; ++xi)
                Vs[(cb * FXI + xi) * FT + ft] = v[xi];
        }
        /* 1b. filters (k0 .. k0+FK-1) x (c0 .. c0+CB-1); adjacent work-items take
         * adjacent filters along whichever of o and i is closer in memory */
        for (int j = lid; j < FUSED_CB * FK; j += FWG) {
            int cb, fk;
            if (si < so) {
                fk = j / FUSED_CB;
                cb = j - fk * FUSED_CB;
            } else {
                cb = j / FK;
                fk = j - cb * FK;
            }
            const int o = k0 + fk, c = c0 + cb;
            float gp[WINO_RH * WINO_RW], u[FXI];
            const bool ok = o < O && c < I;
            const __global float *wc = w + wbase + g * wgs + (ok ? o * so + c * si : 0);
            #pragma unroll
            for (int a = 0; a < WINO_RH; ++a)
                #pragma unroll
                for (int b = 0; b < WINO_RW; ++b)
                    gp[a * WINO_RW + b] = ok ? wc[a * sr + b * ss] : 0.0f;
            wino_filter_tile(u, gp);
            #pragma unroll
            for (int xi = 0; xi < FXI; ++xi)
                Us[(cb * FXI + xi) * FK + fk] = u[xi];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        /* 2. the element-wise products, summed over the staged channels */
        for (int cb = 0; cb < FUSED_CB; ++cb) {
            #pragma unroll
            for (int xi = 0; xi < FXI; ++xi) {
                float u[FUSED_KK], v[FUSED_TT];
                #pragma unroll
                for (int a = 0; a < FUSED_KK; ++a)
                    u[a] = Us[(cb * FXI + xi) * FK + lk + a * FUSED_LK];
                #pragma unroll
                for (int b = 0; b < FUSED_TT; ++b)
                    v[b] = Vs[(cb * FXI + xi) * FT + lt + b * FUSED_LT];
                #pragma unroll
                for (int a = 0; a < FUSED_KK; ++a)
                    #pragma unroll
                    for (int b = 0; b < FUSED_TT; ++b)
                        acc[xi][a][b] = WTICONV_MAD(u[a], v[b], acc[xi][a][b]);
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }

    /* 3. output transform of each (channel, tile) the work-item holds */
    #pragma unroll
    for (int a = 0; a < FUSED_KK; ++a) {
        const int o = k0 + lk + a * FUSED_LK;
        #pragma unroll
        for (int b = 0; b < FUSED_TT; ++b) {
            const int t = t0 + lt + b * FUSED_LT;
            if (o >= O || t >= T)
                continue;
            const int n = t / tpi, tt = t - n * tpi, ty = tt / tw, tx = tt - ty * tw;
            float m[FXI], yt[WINO_MH * WINO_MW];
            #pragma unroll
            for (int xi = 0; xi < FXI; ++xi)
                m[xi] = acc[xi][a][b];
            wino_output_tile(yt, m);
            __global float *yc = y + (((long)n * G + g) * O + o) * Ho * (long)Wo;
            #pragma unroll
            for (int r = 0; r < WINO_MH; ++r) {
                const int oh = ty * WINO_MH + r;
                #pragma unroll
                for (int q = 0; q < WINO_MW; ++q) {
                    const int ow = tx * WINO_MW + q;
                    if (oh < Ho && ow < Wo)
                        yc[(long)oh * Wo + ow] = yt[r * WINO_MW + q];
                }
            }
        }
    }
}
