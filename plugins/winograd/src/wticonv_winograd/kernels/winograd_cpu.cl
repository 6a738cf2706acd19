/* Winograd transforms for CPUs (PoCL): explicit vectors across filters, one work-item each.
 *
 *   filter_transform_vec   U[xi][g][o][p*I + i] = (G_h g_p G_w^T)[xi]  for WINO_VW
 *                          consecutive input channels i of one output channel o
 *
 * The same result, bit for bit, as winograd.cl's filter_transform (same products in the
 * same order), with the same arguments and U layout. There, one work-item transforms one
 * filter and PoCL vectorizes across the work-group: its private arrays of taps and
 * transformed values then lived in memory. Here each work-item holds WINO_VW filters' taps
 * in vector registers and stores each transformed position as one vector along i, the
 * way U is laid out. The work-group size is 1, so PoCL runs the vector code as written.
 * docs/performance.md ("seventh session") has the measured times.
 */
#include "winograd_common.h"

#ifndef WINO_VW
#define WINO_VW 16   /* filters (input channels) per work-item: the CPU's float vector width */
#endif

#define floatv WTICONV_FLOATN(WINO_VW)
#define VLOAD WTICONV_VLOADN(WINO_VW)
#define VSTORE WTICONV_VSTOREN(WINO_VW)

/* out (rows x cols) = sum over a < k of A_ENTRY x B_ENTRY, in wino_mm's order: the
 * expressions name r, c and a; one side a vector, the other a matrix entry broadcast. */
#define WINO_MM_V(out, rows, k, cols, A_ENTRY, B_ENTRY)                                 \
    _Pragma("unroll") for (int r = 0; r < (rows); ++r)                                   \
        _Pragma("unroll") for (int c = 0; c < (cols); ++c) {                             \
            floatv s_ = (floatv)(0.0f);                                                  \
            _Pragma("unroll") for (int a = 0; a < (k); ++a)                              \
                s_ = WTICONV_MAD((A_ENTRY), (B_ENTRY), s_);                              \
            (out)[r * (cols) + c] = s_;                                                  \
        }

/* u (AH x AW) = G_h g G_w^T on vectors of filters. */
static inline void wino_filter_tile_v(floatv *u, const floatv *g)
{
    WINO_MATRICES;
    floatv tmp[AH * WINO_RW];
    WINO_MM_V(tmp, AH, WINO_RH, WINO_RW, (floatv)(GH[r * WINO_RH + a]), g[a * WINO_RW + c]);
    WINO_MM_V(u, AH, WINO_RW, AW, tmp[r * WINO_RW + a], (floatv)(GW[c * WINO_RW + a]));
}

/* Arguments as filter_transform's. Global size (O * ceil(I / WINO_VW), P, G), work-groups
 * of one: work-item (o * blocks + b, p, g) transforms filters (o, i) of group g and piece
 * p for i in [b * WINO_VW, (b + 1) * WINO_VW) within I. */
__kernel __attribute__((reqd_work_group_size(1, 1, 1)))
void filter_transform_vec(__global const float *restrict w, __global float *restrict U,
                          const long u_off, const int O, const int I, const int G,
                          const int P, const int R, const int S, const long wbase,
                          const long wgs, const long so, const long si, const long sr,
                          const long ss, __global const int *restrict pieces)
{
    const int blocks = (I + WINO_VW - 1) / WINO_VW;
    const int ob = get_global_id(0);
    if (ob >= O * blocks)
        return;
    const int p = get_global_id(1), g = get_global_id(2);
    const int o = ob / blocks, i0 = (ob - o * blocks) * WINO_VW;
    const int valid = min(WINO_VW, I - i0);
    __global const int *pc = pieces + 6 * p;
    __global const float *wo = w + wbase + g * wgs + o * so + (long)i0 * si;
    floatv gp[WINO_RH * WINO_RW];
#define TAP(k, fr, fc, in) {                                                            \
        float t[WINO_VW];                                                               \
        for (int j = 0; j < WINO_VW; ++j)                                               \
            t[j] = ((in) && j < valid) ? wo[j * si + fr * sr + fc * ss] : 0.0f;         \
        gp[k] = VLOAD(0, t);                                                            \
    }
    WINO_PIECE_TAPS(pc, R, S, TAP)
#undef TAP
    floatv ut[AH * AW];
    wino_filter_tile_v(ut, gp);
    const long PI = (long)P * I;
    __global float *u = U + u_off + ((long)g * O + o) * PI + (long)p * I + i0;
    const long xstride = (long)G * O * PI;
    if (valid == WINO_VW) {
        #pragma unroll
        for (int xi = 0; xi < AH * AW; ++xi)
            VSTORE(ut[xi], 0, u + xi * xstride);
    } else {
        for (int xi = 0; xi < AH * AW; ++xi) {
            float t[WINO_VW];
            VSTORE(ut[xi], 0, t);
            for (int j = 0; j < valid; ++j)
                u[xi * xstride + j] = t[j];
        }
    }
}
