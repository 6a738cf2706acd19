/* Winograd transforms F(MH x MW, RH x RW) for the wticonv-winograd solvers (NCHW, float32).
 *
 *   Y = AT_h [ (G_h g G_w^T) * (BT_h d BT_w^T) ] AT_w^T           (Lavin & Gray 2016)
 *
 * The element-wise products of all tiles and channels form AH*AW independent GEMMs (one per
 * transformed position xi), run by wticonv-gemm's SGEMM; these kernels do the transforms:
 *
 *   filter_transform   U[xi][g][o][p*I + i]   = (G_h g_p G_w^T)[xi]   (filter pieces p)
 *   input_transform    V[xi][g][p*I + i][t]   = (BT_h d_{t,p} BT_w^T)[xi]
 *   output_transform   y tile t of channel o  = AT_h M[.][g][o][t] AT_w^T
 *   grad_transform     Z[xi][g][o][t]         = (AT_h^T dy_t AT_w)[xi]   (backward weights)
 *   filter_grad_transform  dw taps of piece p = G_h^T dU[.][g][o][p*I + i] G_w
 *
 * A "piece" p is a part of the filter served by one RH x RW transform: a 3x3 block of a
 * larger filter (RxS decomposition), or the taps of one stride-2 phase. Its row in the
 * pieces table holds: first filter row and column, filter row and column step, and where
 * its input patch starts relative to the output tile: input row = sh * (tile row) + offh.
 * Tiles t enumerate (image, tile row, tile column) of a chunk of images; every output
 * element, input element and filter tap outside its tensor is skipped or read as zero, so
 * tile tails need no padding of the tensors.
 *
 * Sizes are kernel arguments (one build per transform, for every problem); tensor offsets
 * are 64-bit. The transform matrices are build options (winograd_common.h lists them).
 */
#include "winograd_common.h"

/* U[((xi*G + g)*O + o)*PI + p*I + i] for every filter (o, i) of group g and piece p.
 * Filter tap (fr, fc) of (o, i) is w[wbase + g*wgs + o*so + i*si + fr*sr + fc*ss]; a flipped
 * filter (backward data) has negative sr, ss. Global size (O*I padded, P, G). */
__kernel void filter_transform(__global const float *restrict w, __global float *restrict U,
                               const long u_off, const int O, const int I, const int G,
                               const int P, const int R, const int S, const long wbase,
                               const long wgs, const long so, const long si, const long sr,
                               const long ss, __global const int *restrict pieces)
{
    const int oi = get_global_id(0);
    if (oi >= O * I)
        return;
    const int p = get_global_id(1), g = get_global_id(2);
    const int o = oi / I, i = oi - o * I;
    __global const int *pc = pieces + 6 * p;
    float gp[WINO_RH * WINO_RW];
#define TAP(k, fr, fc, in) \
    gp[k] = (in) ? w[wbase + g * wgs + o * so + i * si + fr * sr + fc * ss] : 0.0f;
    WINO_PIECE_TAPS(pc, R, S, TAP)
#undef TAP
    float ut[AH * AW];
    wino_filter_tile(ut, gp);
    const long PI = (long)P * I;
    __global float *u = U + u_off + ((long)g * O + o) * PI + (long)p * I + i;
    const long xstride = (long)G * O * PI;
    #pragma unroll
    for (int xi = 0; xi < AH * AW; ++xi)
        u[xi * xstride] = ut[xi];
}

/* V[((xi*G + g)*PI + p*I + i)*T + t] for the tiles t of images [n0, n0 + Nc) of the input
 * (channels G*I, H x W): input rows sh*(ty*MH + a) + offh of piece p, likewise columns.
 * Rows from HL and columns from WL on (which no output reads) count as zero, as the
 * padding does, so that a NaN there does not reach the outputs of its tile.
 * Global size (T padded, P*I, G), T = Nc * th * tw. */
__kernel void input_transform(__global const float *restrict x, __global float *restrict V,
                              const long v_off, const int n0, const int Nc, const int I,
                              const int G, const int H, const int W, const int HL,
                              const int WL, const int th,
                              const int tw, const int P, const int sh, const int sw,
                              __global const int *restrict pieces)
{
    const int T = Nc * th * tw;
    const int t = get_global_id(0);
    if (t >= T)
        return;
    const int pi = get_global_id(1), g = get_global_id(2);
    const int p = pi / I, i = pi - p * I;
    const int n = t / (th * tw), tt = t - n * th * tw, ty = tt / tw, tx = tt - ty * tw;
    __global const int *pc = pieces + 6 * p;
    const int h0 = sh * ty * WINO_MH + pc[PC_OFFH], w0 = sw * tx * WINO_MW + pc[PC_OFFW];
    const __global float *xc = x + (((long)(n0 + n) * G + g) * I + i) * H * (long)W;
    float d[AH * AW];
    #pragma unroll
    for (int a = 0; a < AH; ++a) {
        const int ih = h0 + sh * a;
        const bool row_ok = ih >= 0 && ih < HL;
        #pragma unroll
        for (int b = 0; b < AW; ++b) {
            const int iw = w0 + sw * b;
            d[a * AW + b] = (row_ok && iw >= 0 && iw < WL) ? xc[(long)ih * W + iw] : 0.0f;
        }
    }
    float vt[AH * AW];
    wino_input_tile(vt, d);
    const long PI = (long)P * I;
    __global float *v = V + v_off + ((long)g * PI + pi) * T + t;
    const long xstride = (long)G * PI * T;
    #pragma unroll
    for (int xi = 0; xi < AH * AW; ++xi)
        v[xi * xstride] = vt[xi];
}

/* y[n0 + n][g*O + o][ty*MH + i][tx*MW + j] = (AT_h M_t AT_w^T)[i][j] for the rows and
 * columns inside Ho x Wo. Global size (T padded, O, G). */
__kernel void output_transform(__global const float *restrict M, const long m_off,
                               __global float *restrict y, const int n0, const int Nc,
                               const int O, const int G, const int Ho, const int Wo,
                               const int th, const int tw)
{
    const int T = Nc * th * tw;
    const int t = get_global_id(0);
    if (t >= T)
        return;
    const int o = get_global_id(1), g = get_global_id(2);
    const int n = t / (th * tw), tt = t - n * th * tw, ty = tt / tw, tx = tt - ty * tw;
    const __global float *mt = M + m_off + ((long)g * O + o) * T + t;
    const long xstride = (long)G * O * T;
    float m[AH * AW], yt[WINO_MH * WINO_MW];
    #pragma unroll
    for (int xi = 0; xi < AH * AW; ++xi)
        m[xi] = mt[xi * xstride];
    wino_output_tile(yt, m);
    __global float *yc = y + (((long)(n0 + n) * G + g) * O + o) * Ho * (long)Wo;
    #pragma unroll
    for (int r = 0; r < WINO_MH; ++r) {
        const int oh = ty * WINO_MH + r;
        if (oh >= Ho)
            break;
        #pragma unroll
        for (int c = 0; c < WINO_MW; ++c) {
            const int ow = tx * WINO_MW + c;
            if (ow >= Wo)
                break;
            yc[(long)oh * Wo + ow] = yt[r * WINO_MW + c];
        }
    }
}

/* Z[((xi*G + g)*O + o)*T + t] = (AT_h^T dy_t AT_w)[xi], dy_t the MH x MW output-gradient
 * tile (zero outside Ho x Wo). Global size (T padded, O, G). */
__kernel void grad_transform(__global const float *restrict dy, __global float *restrict Z,
                             const long z_off, const int n0, const int Nc, const int O,
                             const int G, const int Ho, const int Wo, const int th,
                             const int tw)
{
    const int T = Nc * th * tw;
    const int t = get_global_id(0);
    if (t >= T)
        return;
    const int o = get_global_id(1), g = get_global_id(2);
    const int n = t / (th * tw), tt = t - n * th * tw, ty = tt / tw, tx = tt - ty * tw;
    const __global float *dc = dy + (((long)(n0 + n) * G + g) * O + o) * Ho * (long)Wo;
    float e[WINO_MH * WINO_MW];
    #pragma unroll
    for (int r = 0; r < WINO_MH; ++r) {
        const int oh = ty * WINO_MH + r;
        #pragma unroll
        for (int c = 0; c < WINO_MW; ++c) {
            const int ow = tx * WINO_MW + c;
            e[r * WINO_MW + c] = (oh < Ho && ow < Wo) ? dc[(long)oh * Wo + ow] : 0.0f;
        }
    }
    float zt[AH * AW];
    wino_grad_tile(zt, e);
    __global float *z = Z + z_off + ((long)g * O + o) * T + t;
    const long xstride = (long)G * O * T;
    #pragma unroll
    for (int xi = 0; xi < AH * AW; ++xi)
        z[xi * xstride] = zt[xi];
}

/* dw taps of piece p: (G_h^T dU G_w)[a][b] -> dw[g][o][i][fr0 + fsh*a][fc0 + fsw*b] for the
 * taps inside R x S (pieces partition the filter, so every tap is written once).
 * dU[((xi*G + g)*O + o)*PI + p*I + i]. Global size (O*I padded, P, G). */
__kernel void filter_grad_transform(__global const float *restrict dU, const long du_off,
                                    __global float *restrict dw, const int O, const int I,
                                    const int G, const int P, const int R, const int S,
                                    __global const int *restrict pieces)
{
    const int oi = get_global_id(0);
    if (oi >= O * I)
        return;
    const int p = get_global_id(1), g = get_global_id(2);
    const int o = oi / I, i = oi - o * I;
    const long PI = (long)P * I;
    const __global float *du = dU + du_off + ((long)g * O + o) * PI + (long)p * I + i;
    const long xstride = (long)G * O * PI;
    float u[AH * AW], gt[WINO_RH * WINO_RW];
    #pragma unroll
    for (int xi = 0; xi < AH * AW; ++xi)
        u[xi] = du[xi * xstride];
    wino_filter_grad_tile(gt, u);
    __global const int *pc = pieces + 6 * p;
    __global float *wc = dw + (((long)g * O + o) * I + i) * R * (long)S;
    #pragma unroll
    for (int r = 0; r < WINO_RH; ++r) {
        const int fr = pc[PC_FR0] + pc[PC_FSH] * r;
        if (fr >= R)
            break;
        #pragma unroll
        for (int c = 0; c < WINO_RW; ++c) {
            const int fc = pc[PC_FC0] + pc[PC_FSW] * c;
            if (fc >= S)
                break;
            wc[(long)fr * S + fc] = gt[r * WINO_RW + c];
        }
    }
}
