/* direct.depthwise: depthwise convolution (groups == C, K == m * C), NCHW float32, in all
 * three directions. Output channel k reads input channel k / m; w is K x 1 x R x S.
 *
 *   fwd   y[n][k][ho][wo]  = sum_{r,s} x[n][k/m][ho*sh - ph + r*dh][wo*sw - pw + s*dw] w[k][r][s]
 *   bwd   dx[n][c][ih][iw] = sum_{q<m, r, s} dy[n][c*m+q][oh][ow] w[c*m+q][r][s]
 *                            over oh = (ih + ph - r*dh) / sh, ow likewise, where exact
 *   wrw   dw[k][r][s]      = sum_{n, ho, wo} dy[n][k][ho][wo] x[n][k/m][ih][iw]
 *
 * Positions in the zero padding are never used: their lanes are masked out of the sums
 * with select() (never multiplied by zero), so NaN/Inf in real data, weights included,
 * propagate exactly as in the definition. A vector load may cover elements of the
 * neighbouring row or plane of the same buffer, never outside it (the first and last
 * vectors of a buffer are read lane by lane, inside the picture only); such lanes are
 * masked. Tensor offsets are 64-bit (long); pixel coordinates are int.
 *
 * Dynamic: every size is a kernel argument. Build options (the macros below) depend only
 * on the device kind. Kernels:
 *
 *   dw_fwd_any, dw_fwd_3x3s1, dw_fwd_3x3s2   "plane" kernels: out plane from in planes;
 *       fwd (bwd = 0): in = x, out = y; backward data at stride 1 (bwd = 1): in = dy,
 *       out = dx, taps flipped, pads (R-1)*dh - ph and (S-1)*dw - pw, sum over m.
 *   dw_bwd_any      backward data at any stride: column phases, contiguous dy loads
 *   dw_bwd_3x3s2    the same for 3x3 filters at stride 2, dilation 1 (CPU builds only)
 *   dw_wrw          backward weights, pass 1: one part of the (n, ho) rows per work-item
 *                   (CPU) or work-group (GPU) -> partial sums dst[part][k][r][s]
 *   dw_wrw_3x3s1, dw_wrw_3x3s2   the same for 3x3 filters, dilation 1 (CPU builds only)
 *   dw_wrw_sum      pass 2: dw[e] = sum over parts, in part order (deterministic)
 *
 * CPU (DIRECT_DW_GPU 0): a work-item computes DIRECT_DW_TH output rows of one plane, the
 * whole row width, DIRECT_DW_VW adjacent outputs (one vector) at a time; PoCL runs the
 * work-items of a group as a loop, so explicit vectors give the SIMD width.
 * GPU (DIRECT_DW_GPU 1, DIRECT_DW_VW 1): a work-item computes DIRECT_DW_TH rows of one
 * column; consecutive work-items take consecutive columns (coalesced loads).
 * Launch planning is in depthwise_plan.py.
 */

#ifndef DIRECT_DW_GPU
#define DIRECT_DW_GPU 0        /* 1: one column per work-item (GPUs); 0: whole rows (CPUs) */
#endif
#ifndef DIRECT_DW_VW
#define DIRECT_DW_VW 8         /* outputs per vector along a row: 1 (GPU), 4, 8 or 16 */
#endif
#ifndef DIRECT_DW_TH
#define DIRECT_DW_TH 7         /* output rows per work-item (accumulators in registers) */
#endif
#ifndef DIRECT_DW_WRW_TAPS
#define DIRECT_DW_WRW_TAPS 9   /* filter taps accumulated per pass over the data in dw_wrw */
#endif
#ifndef DIRECT_DW_WRW_LOCAL
#define DIRECT_DW_WRW_LOCAL 64 /* work-items per group in the GPU dw_wrw; a power of two */
#endif

#define VW DIRECT_DW_VW
#define TH DIRECT_DW_TH
#define WT DIRECT_DW_WRW_TAPS
#include "wticonv/common.h"

#if VW == 1
#define floatV float
#define intV int
#define LANES 0
#define VLOAD(p) ((p)[0])
#define VLOAD_S2(p) ((p)[0])
#define HSUM(v) (v)
#else
#define floatV WTICONV_FLOATN(VW)
#define intV WTICONV_INTN(VW)
#define VLOAD(p) WTICONV_VLOADN(VW)(0, p)
#if VW == 4
#define LANES ((int4)(0, 1, 2, 3))
#define VLOAD_S2(p) (vload8(0, p).even)
#define HSUM(v) (((v).x + (v).y) + ((v).z + (v).w))
#elif VW == 8
#define LANES ((int8)(0, 1, 2, 3, 4, 5, 6, 7))
#define VLOAD_S2(p) (vload16(0, p).even)
#define HSUM(v) hsum8(v)
#elif VW == 16
#define LANES ((int16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15))
#define VLOAD_S2(p) ((float16)(vload16(0, p).even, vload16(1, p).even))
#define HSUM(v) hsum8((v).lo + (v).hi)
#else
#error "DIRECT_DW_VW must be 1, 4, 8 or 16"
#endif
#endif

#if VW == 8 || VW == 16
inline float hsum8(const float8 v)
{
    const float4 a = v.lo + v.hi;
    return (a.x + a.y) + (a.z + a.w);
}
#endif

/* Lanes i of row `row` at columns c0 + i*sw, read only where the column is in [0, W). */
inline floatV load_safe(const __global float *restrict row, const int c0, const int W,
                        const int sw)
{
#if VW == 1
    return (c0 >= 0 && c0 < W) ? row[c0] : 0.0f;
#else
    float t[VW];
    for (int i = 0; i < VW; ++i) {
        const int c = c0 + i * sw;
        t[i] = (c >= 0 && c < W) ? row[c] : 0.0f;
    }
    return VLOAD(t);
#endif
}

/* Lanes i = p[rowoff + c0 + i*sw]: one vector load where it stays inside the buffer
 * [0, total), else load_safe. Lanes outside [0, W) hold unspecified values. */
inline floatV load_any(const __global float *restrict p, const long rowoff, const int c0,
                       const int W, const int sw, const long total)
{
#if VW == 1
    return load_safe(p + rowoff, c0, W, sw);
#else
    const long a = rowoff + c0;
    if (a >= 0 && a + (long)VW * sw <= total) {
        if (sw == 1)
            return VLOAD(p + a);
        if (sw == 2)
            return VLOAD_S2(p + a);
        float t[VW];
        for (int i = 0; i < VW; ++i)
            t[i] = p[a + (long)i * sw];
        return VLOAD(t);
    }
    return load_safe(p + rowoff, c0, W, sw);
#endif
}

/* The first n lanes of v to row[0 .. n), n >= 0, without a trip through memory. */
inline void store_part4(__global float *restrict row, const float4 v, const int n)
{
    if (n >= 4) {
        vstore4(v, 0, row);
        return;
    }
    float2 b = v.lo;
    int i = 0;
    if (n & 2) {
        vstore2(b, 0, row);
        b = v.hi;
        i = 2;
    }
    if (n & 1)
        row[i] = b.x;
}

#if VW >= 8
inline void store_part8(__global float *restrict row, const float8 v, const int n)
{
    if (n >= 8) {
        vstore8(v, 0, row);
    } else if (n >= 4) {
        vstore4(v.lo, 0, row);
        store_part4(row + 4, v.hi, n - 4);
    } else {
        store_part4(row, v.lo, n);
    }
}
#endif

/* The first n (>= 1) lanes of v to row[0 .. n). */
inline void store_row(__global float *restrict row, const floatV v, const int n)
{
#if VW == 1
    row[0] = v;
#elif VW == 4
    store_part4(row, v, n);
#elif VW == 8
    store_part8(row, v, n);
#else
    if (n >= 16) {
        vstore16(v, 0, row);
    } else if (n >= 8) {
        vstore8(v.lo, 0, row);
        store_part8(row + 8, v.hi, n - 8);
    } else {
        store_part8(row, v.lo, n);
    }
#endif
}

#define ACC(a, v, wv, ok) (a) = select((a), fma((v), (floatV)(wv), (a)), (ok))

#define PLANE_ARGS                                                                        \
    __global const float *restrict in, __global const float *restrict wei,              \
    __global float *restrict out, const int N, const int Cin, const int Hin,             \
    const int Win, const int Cout, const int Hout, const int Wout, const int R,          \
    const int S, const int ph, const int pw, const int sh, const int sw, const int dh,   \
    const int dw, const int m, const int bwd
#define PLANE_PASS in, wei, out, N, Cin, Hin, Win, Cout, Hout, Wout, R, S, ph, pw, sh, sw, \
    dh, dw, m, bwd

/* Which work-item computes which block (TH rows x VW columns from (o0, w0)) of which
 * output plane (n, o). GPU: one column per work-item, 1-D grid over planes x row blocks x
 * columns, 32-bit arithmetic where the grid allows. CPU: grid (row blocks, Cout, N), each
 * work-item walks its rows' whole width. */
#if DIRECT_DW_GPU
#define FOR_EACH_BLOCK(BLOCK)                                                             \
    const int nb_ = (Hout + TH - 1) / TH;                                                 \
    const long tw_ = (long)nb_ * Wout, total_ = tw_ * Cout * N;                           \
    const long g_ = get_global_id(0);                                                     \
    if (g_ >= total_)                                                                     \
        return;                                                                           \
    long plane_, t_;                                                                      \
    if (total_ <= 0x7fffffffL) {                                                          \
        plane_ = (int)g_ / (int)tw_;                                                      \
        t_ = (int)g_ - (int)plane_ * (int)tw_;                                            \
    } else {                                                                              \
        plane_ = g_ / tw_;                                                                \
        t_ = g_ - plane_ * tw_;                                                           \
    }                                                                                     \
    const long n = plane_ / Cout;                                                         \
    const int o = (int)(plane_ - n * Cout);                                               \
    const int o0 = ((int)t_ / Wout) * TH, w0 = (int)t_ % Wout;                            \
    BLOCK;
#else
#define FOR_EACH_BLOCK(BLOCK)                                                             \
    const int o = get_global_id(1);                                                       \
    const long n = get_global_id(2);                                                      \
    if (o >= Cout)                                                                        \
        return;                                                                           \
    const int o0 = get_global_id(0) * TH;                                                 \
    for (int w0 = 0; w0 < Wout; w0 += VW) {                                              \
        BLOCK;                                                                            \
    }
#endif

inline void store_block(__global float *restrict out, const long ooff, const int Hout,
                        const int Wout, const int o0, const int w0, const floatV *acc)
{
    #pragma unroll
    for (int j = 0; j < TH; ++j)
        if (o0 + j < Hout)
            store_row(out + ooff + (long)(o0 + j) * Wout + w0, acc[j], Wout - w0);
}

/* One TH x VW block of a plane kernel, any R, S, stride, dilation. */
inline void fwd_block_any(PLANE_ARGS, const long n, const int o, const int o0, const int w0)
{
    const int nq = bwd ? m : 1, RS = R * S;
    const long intotal = (long)N * Cin * Hin * Win;
    const int iw0 = w0 * sw - pw;
    const intV col = iw0 + LANES * sw;
    floatV acc[TH];
    for (int j = 0; j < TH; ++j)
        acc[j] = (floatV)0.0f;
    for (int q = 0; q < nq; ++q) {
        const long ich = bwd ? (long)o * m + q : o / m;
        const __global float *wq = wei + (bwd ? (long)o * m + q : o) * RS;
        const long ioff = (n * Cin + ich) * Hin * (long)Win;
        for (int r = 0; r < R; ++r) {
            #pragma unroll
            for (int j = 0; j < TH; ++j) {
                const int ih = (o0 + j) * sh - ph + r * dh;
                if (ih < 0 || ih >= Hin)
                    continue;
                const long rowoff = ioff + (long)ih * Win;
                for (int s = 0; s < S; ++s) {
                    const int cs = s * dw;
                    const intV ok = col + cs >= 0 && col + cs < Win;
                    const float wv = wq[bwd ? RS - 1 - (r * S + s) : r * S + s];
                    ACC(acc[j], load_any(in, rowoff, iw0 + cs, Win, sw, intotal), wv, ok);
                }
            }
        }
    }
    store_block(out, (n * Cout + o) * Hout * (long)Wout, Hout, Wout, o0, w0, acc);
}

__kernel void dw_fwd_any(PLANE_ARGS)
{
    FOR_EACH_BLOCK(fwd_block_any(PLANE_PASS, n, o, o0, w0))
}

/* The rows of a specialised block: input row ihb + i feeds output rows j with
 * r = i - j*SH in [0, FR); LOADEXPR loads tap column s of row offset rowoff. */
#define DW_SPEC_ROWS(FR, FS, SH, LOADEXPR)                                                \
    _Pragma("unroll")                                                                     \
    for (int i = 0; i < (TH - 1) * SH + FR; ++i) {                                        \
        const int ih = ihb + i;                                                           \
        if (ih < 0 || ih >= Hin)                                                          \
            continue;                                                                     \
        const long rowoff = ioff + (long)ih * Win;                                        \
        _Pragma("unroll")                                                                 \
        for (int s = 0; s < FS; ++s) {                                                    \
            const floatV v = LOADEXPR;                                                    \
            _Pragma("unroll")                                                             \
            for (int j = 0; j < TH; ++j) {                                                \
                const int r = i - j * SH;                                                 \
                if (r >= 0 && r < FR)                                                     \
                    ACC(acc[j], v, wr[r * FS + s], ok[s]);                                \
            }                                                                             \
        }                                                                                 \
    }

/* Adds the taps of input plane q (of nq: 1 in fwd, m in bwd) to a specialised block. */
#define DW_SPEC_PLANE(FR, FS, SH, SW, LOADF, q)                                           \
    {                                                                                     \
        const long ich = bwd ? (long)o * m + (q) : o / m;                                 \
        const __global float *wq = wei + (bwd ? (long)o * m + (q) : o) * (FR * FS);       \
        const long ioff = (n * Cin + ich) * Hin * (long)Win;                              \
        float wr[FR * FS];                                                                \
        _Pragma("unroll")                                                                 \
        for (int t = 0; t < FR * FS; ++t)                                                 \
            wr[t] = wq[bwd ? FR * FS - 1 - t : t];                                        \
        if (ioff + iw0 >= 0 && ioff + (long)(Hin - 1) * Win + iw0 + (long)VW * SW + FS   \
            <= intotal) {                                                                 \
            DW_SPEC_ROWS(FR, FS, SH, LOADF(in + rowoff + iw0 + s))                        \
        } else {                                                                          \
            DW_SPEC_ROWS(FR, FS, SH, load_safe(in + rowoff, iw0 + s, Win, SW))            \
        }                                                                                 \
    }

/* The plane kernel specialised to FR x FS filters, stride SH x SW, dilation 1: every loop
 * is unrolled, each input row is loaded once per tap column and used by every output row
 * of the block that needs it. Requires R == FR, S == FS, sh == SH, sw == SW, dh == dw == 1
 * (the planner checks). */
#define DW_SPEC(NAME, FR, FS, SH, SW, LOADF)                                              \
inline void NAME##_block(PLANE_ARGS, const long n, const int o, const int o0,            \
                         const int w0)                                                    \
{                                                                                         \
    const int nq = bwd ? m : 1;                                                           \
    const long intotal = (long)N * Cin * Hin * Win;                                       \
    const int iw0 = w0 * SW - pw, ihb = o0 * SH - ph;                                     \
    const intV col = iw0 + LANES * SW;                                                    \
    intV ok[FS];                                                                          \
    _Pragma("unroll")                                                                     \
    for (int s = 0; s < FS; ++s)                                                          \
        ok[s] = col + s >= 0 && col + s < Win;                                            \
    floatV acc[TH];                                                                       \
    _Pragma("unroll")                                                                     \
    for (int j = 0; j < TH; ++j)                                                          \
        acc[j] = (floatV)0.0f;                                                            \
    if (nq == 1) {                                                                        \
        DW_SPEC_PLANE(FR, FS, SH, SW, LOADF, 0)                                           \
    } else {                                                                              \
        for (int q = 0; q < nq; ++q) {                                                    \
            DW_SPEC_PLANE(FR, FS, SH, SW, LOADF, q)                                       \
        }                                                                                 \
    }                                                                                     \
    store_block(out, (n * Cout + o) * Hout * (long)Wout, Hout, Wout, o0, w0, acc);        \
}                                                                                         \
__kernel void NAME(PLANE_ARGS)                                                            \
{                                                                                         \
    FOR_EACH_BLOCK(NAME##_block(PLANE_PASS, n, o, o0, w0))                                \
}

DW_SPEC(dw_fwd_3x3s1, 3, 3, 1, 1, VLOAD)
DW_SPEC(dw_fwd_3x3s2, 3, 3, 2, 2, VLOAD_S2)

/* Backward data at any stride, one TH x VW block of dx: rows ih0 .. ih0+TH-1, columns
 * ib + sw*i (one column phase, so that the dy columns they read are contiguous). */
inline void bwd_block(PLANE_ARGS, const long n, const int c, const int ih0, const int ib)
{
    /* here in = dy (Cin = K, Hin = Ho, Win = Wo), out = dx (Cout = C, Hout = H, Wout = W) */
    const long intotal = (long)N * Cin * Hin * Win;
    const int RS = R * S;
    floatV acc[TH];
    for (int j = 0; j < TH; ++j)
        acc[j] = (floatV)0.0f;
    for (int q = 0; q < m; ++q) {
        const long kk = (long)c * m + q;
        const __global float *wq = wei + kk * RS;
        const long ioff = (n * Cin + kk) * Hin * (long)Win;
        #pragma unroll
        for (int j = 0; j < TH; ++j) {
            for (int r = 0; r < R; ++r) {
                const int th = ih0 + j + ph - r * dh;
                if (th < 0)
                    break;
                if (th % sh)
                    continue;
                const int oh = th / sh;
                if (oh >= Hin)
                    continue;
                const long rowoff = ioff + (long)oh * Win;
                for (int s = 0; s < S; ++s) {
                    const int tw = ib + pw - s * dw;
                    if (tw % sw)
                        continue;
                    const int ow0 = tw / sw;
                    const intV ok = ow0 + LANES >= 0 && ow0 + LANES < Win;
                    ACC(acc[j], load_any(in, rowoff, ow0, Win, 1, intotal), wq[r * S + s], ok);
                }
            }
        }
    }
    const long ooff = (n * Cout + c) * Hout * (long)Wout;
    if (sw == 1) {
        store_block(out, ooff, Hout, Wout, ih0, ib, acc);
        return;
    }
    for (int j = 0; j < TH && ih0 + j < Hout; ++j) {
#if VW == 1
        out[ooff + (long)(ih0 + j) * Wout + ib] = acc[j];
#else
        float t[VW];
        WTICONV_VSTOREN(VW)(acc[j], 0, t);
        for (int i = 0; i < VW && ib + i * sw < Wout; ++i)
            out[ooff + (long)(ih0 + j) * Wout + ib + i * sw] = t[i];
#endif
    }
}

__kernel void dw_bwd_any(PLANE_ARGS)
{
#if DIRECT_DW_GPU
    FOR_EACH_BLOCK(bwd_block(PLANE_PASS, n, o, o0, w0))
#else
    const int c = get_global_id(1);
    const long n = get_global_id(2);
    if (c >= Cout)
        return;
    const int ih0 = get_global_id(0) * TH;
    for (int i0 = 0; i0 < Wout; i0 += VW * sw)
        for (int b = 0; b < sw && i0 + b < Wout; ++b)
            bwd_block(PLANE_PASS, n, c, ih0, i0 + b);
#endif
}

#if !DIRECT_DW_GPU && VW == 8
/* Backward data, 3x3 filters, stride 2, dilation 1 (CPU, float8): a work-item computes TH
 * rows of dx, 16 columns (two column phases of 8) at a time. With t = ih + ph, an even t
 * takes filter rows 0 and 2 (dy rows t/2 and t/2 - 1), an odd t row 1 (dy row (t-1)/2);
 * likewise the columns: phase b0 = pw & 1 (columns iw0 + b0 + 2i) takes filter columns 0
 * and 2 (dy columns c0 + i, c0 - 1 + i), the other phase column 1 (dy columns c0 - b0 + i),
 * where c0 = (iw0 + b0 + pw) / 2. A holds phase b0, B the other. */
#define BWD3X3S2_ROW(j, OH, W0)                                                           \
    {                                                                                     \
        const int oh_ = (OH);                                                             \
        if (oh_ >= 0 && oh_ < Hin) {                                                      \
            const long rowoff = ioff + (long)oh_ * Win;                                   \
            float8 d0, dm, d1;                                                            \
            if (fast) {                                                                   \
                d0 = vload8(0, in + rowoff + c0);                                         \
                dm = vload8(0, in + rowoff + c0 - 1);                                     \
                d1 = vload8(0, in + rowoff + c1);                                         \
            } else {                                                                      \
                d0 = load_safe(in + rowoff, c0, Win, 1);                                  \
                dm = load_safe(in + rowoff, c0 - 1, Win, 1);                              \
                d1 = load_safe(in + rowoff, c1, Win, 1);                                  \
            }                                                                             \
            ACC(A[j], d0, wr[(W0)], m0);                                                  \
            ACC(A[j], dm, wr[(W0) + 2], mm);                                              \
            ACC(B[j], d1, wr[(W0) + 1], m1);                                              \
        }                                                                                 \
    }

inline void bwd3x3s2_block(PLANE_ARGS, const long n, const int c, const int ih0,
                           const int iw0)
{
    /* in = dy (Cin = K, Hin = Ho, Win = Wo), out = dx (Cout = C, Hout = H, Wout = W) */
    const long intotal = (long)N * Cin * Hin * Win;
    const int b0 = pw & 1, c0 = (iw0 + b0 + pw) / 2, c1 = c0 - b0;
    const int8 m0 = c0 + LANES >= 0 && c0 + LANES < Win;
    const int8 mm = c0 - 1 + LANES >= 0 && c0 - 1 + LANES < Win;
    const int8 m1 = c1 + LANES >= 0 && c1 + LANES < Win;
    float8 A[TH], B[TH];
    #pragma unroll
    for (int j = 0; j < TH; ++j)
        A[j] = B[j] = (float8)0.0f;
    for (int q = 0; q < m; ++q) {
        const long kk = (long)c * m + q;
        float wr[9];
        #pragma unroll
        for (int t = 0; t < 9; ++t)
            wr[t] = wei[kk * 9 + t];
        const long ioff = (n * Cin + kk) * Hin * (long)Win;
        const int fast = ioff + c0 - 1 >= 0 && ioff + (long)(Hin - 1) * Win + c0 + VW <= intotal;
        #pragma unroll
        for (int j = 0; j < TH; ++j) {
            const int t = ih0 + j + ph;
            if (t & 1) {
                BWD3X3S2_ROW(j, (t - 1) >> 1, 3)
            } else {
                BWD3X3S2_ROW(j, t >> 1, 0)
                BWD3X3S2_ROW(j, (t >> 1) - 1, 6)
            }
        }
    }
    const long ooff = (n * Cout + c) * Hout * (long)Wout;
    const int cnt = Wout - iw0;
    #pragma unroll
    for (int j = 0; j < TH; ++j) {
        if (ih0 + j >= Hout)
            break;
        const float8 ev = b0 ? B[j] : A[j], od = b0 ? A[j] : B[j];
        const float16 v = shuffle2(ev, od, (uint16)(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6,
                                                    14, 7, 15));
        __global float *row = out + ooff + (long)(ih0 + j) * Wout + iw0;
        if (cnt >= 16) {
            vstore16(v, 0, row);
        } else if (cnt >= 8) {
            vstore8(v.lo, 0, row);
            store_part8(row + 8, v.hi, cnt - 8);
        } else {
            store_part8(row, v.lo, cnt);
        }
    }
}

__kernel void dw_bwd_3x3s2(PLANE_ARGS)
{
    const int c = get_global_id(1);
    const long n = get_global_id(2);
    if (c >= Cout)
        return;
    const int ih0 = get_global_id(0) * TH;
    for (int iw0 = 0; iw0 < Wout; iw0 += 2 * VW)
        bwd3x3s2_block(PLANE_PASS, n, c, ih0, iw0);
}
#endif

/* First row (n*Ho + ho) of row block u of dy: each image's Ho rows form ceil(Ho/TH)
 * blocks of TH rows (the last may be shorter); blocks are numbered image by image. */
inline long block_row(const long u, const int Ho)
{
    const int nb = (Ho + TH - 1) / TH;
    const long n = u / nb;
    return n * Ho + min((int)(u - n * nb) * TH, Ho);
}

#define WRW_ARGS                                                                          \
    __global const float *restrict x, __global const float *restrict dy,                \
    __global float *restrict dst, const int N, const int C, const int H, const int W,    \
    const int K, const int Ho, const int Wo, const int R, const int S, const int ph,     \
    const int pw, const int sh, const int sw, const int dh, const int dw, const int m,   \
    const int parts, const long units_per_part

/* Backward weights, pass 1. Part p covers row blocks [p*units_per_part,
 * (p+1)*units_per_part) of dy (see block_row), a contiguous run of its N*Ho rows (n, ho);
 * dst[(p*K + k)*R*S + t] = the run's sum for tap t = r*S + s. With one part, dst is dw
 * itself. Any filter: taps are taken WT at a time, each dy vector feeding WT taps. */
__kernel void dw_wrw(WRW_ARGS)
{
#if DIRECT_DW_GPU
    const int k = get_group_id(0) / parts, lid = get_local_id(0);
    const int p = get_group_id(0) - k * parts;
    __local float red[WT][DIRECT_DW_WRW_LOCAL];
#else
    const int p = get_global_id(0), k = get_global_id(1);
    if (k >= K)
        return;
#endif
    const int RS = R * S;
    const long c = k / m, xtotal = (long)N * C * H * W, dytotal = (long)N * K * Ho * Wo;
    const long units = (long)N * ((Ho + TH - 1) / TH), u0 = p * units_per_part;
    const long row0 = block_row(u0, Ho);
    const long rows = block_row(min(u0 + units_per_part, units), Ho) - row0;
    for (int t0 = 0; t0 < RS; t0 += WT) {
        int tr[WT], ts[WT];
        floatV acc[WT];
        #pragma unroll
        for (int u = 0; u < WT; ++u) {
            tr[u] = t0 + u < RS ? (t0 + u) / S : -1;
            ts[u] = (t0 + u) % S * dw;
            acc[u] = (floatV)0.0f;
        }
#if DIRECT_DW_GPU
        /* (row, column) of element e of this part, advanced without divisions: the
         * work-items step through the part's rows x Wo elements LOCAL at a time. */
        long row = row0 + lid / Wo;
        int w0 = lid % Wo;
        const int drow = DIRECT_DW_WRW_LOCAL / Wo, dcol = DIRECT_DW_WRW_LOCAL % Wo;
        for (long e = lid; e < rows * Wo; e += DIRECT_DW_WRW_LOCAL) {
#else
        for (long row = row0; row < row0 + rows; ++row) {
#endif
            const long n = row / Ho;
            const int ho = (int)(row - n * Ho);
            const long dyoff = ((n * K + k) * Ho + ho) * (long)Wo;
            const long xoff = (n * C + c) * H * (long)W;
#if !DIRECT_DW_GPU
            for (int w0 = 0; w0 < Wo; w0 += VW) {
#endif
                const intV okw = w0 + LANES < Wo;
                const floatV g = load_any(dy, dyoff, w0, Wo, 1, dytotal);
                const int iw0 = w0 * sw - pw;
                const intV col = iw0 + LANES * sw;
                #pragma unroll
                for (int u = 0; u < WT; ++u) {
                    const int ih = ho * sh - ph + tr[u] * dh;
                    if (tr[u] < 0 || ih < 0 || ih >= H)
                        continue;
                    const intV ok = okw && col + ts[u] >= 0 && col + ts[u] < W;
                    const floatV v = load_any(x, xoff + (long)ih * W, iw0 + ts[u], W, sw, xtotal);
                    acc[u] = select(acc[u], fma(g, v, acc[u]), ok);
                }
#if !DIRECT_DW_GPU
            }
#else
            row += drow;
            w0 += dcol;
            if (w0 >= Wo) {
                w0 -= Wo;
                ++row;
            }
#endif
        }
        __global float *d = dst + ((long)p * K + k) * RS + t0;
#if DIRECT_DW_GPU
        #pragma unroll
        for (int u = 0; u < WT; ++u)
            red[u][lid] = acc[u];
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int step = DIRECT_DW_WRW_LOCAL / 2; step > 0; step >>= 1) {
            if (lid < step)
                for (int u = 0; u < WT; ++u)
                    red[u][lid] += red[u][lid + step];
            barrier(CLK_LOCAL_MEM_FENCE);
        }
        if (lid == 0)
            for (int u = 0; u < WT && t0 + u < RS; ++u)
                d[u] = red[u][0];
        barrier(CLK_LOCAL_MEM_FENCE);
#else
        for (int u = 0; u < WT && t0 + u < RS; ++u)
            d[u] = HSUM(acc[u]);
#endif
    }
}

#if !DIRECT_DW_GPU
/* Adds dy rows ho0 .. ho0+T-1 of image n (offsets dyoff, xoff of its planes) to the
 * FR x FS tap sums acc of a specialised dw_wrw: input row ihb + i pairs with dy row j for
 * tap row r = i - j*SH. */
#define DW_WRW_ROWS(T, FR, FS, SH, LOADEXPR)                                              \
    _Pragma("unroll")                                                                     \
    for (int i = 0; i < ((T) - 1) * SH + FR; ++i) {                                       \
        const int ih = ihb + i;                                                           \
        if (ih < 0 || ih >= H)                                                            \
            continue;                                                                     \
        const long rowoff = xoff + (long)ih * W;                                          \
        _Pragma("unroll")                                                                 \
        for (int s = 0; s < FS; ++s) {                                                    \
            const floatV v = LOADEXPR;                                                    \
            _Pragma("unroll")                                                             \
            for (int j = 0; j < (T); ++j) {                                               \
                const int r = i - j * SH;                                                 \
                if (r >= 0 && r < FR)                                                     \
                    acc[r * FS + s] = select(acc[r * FS + s],                             \
                                             fma(g[j], v, acc[r * FS + s]), ok[s]);       \
            }                                                                             \
        }                                                                                 \
    }

#define DW_WRW_BLOCK(T, FR, FS, SH, SW, LOADF)                                            \
    for (int w0 = 0; w0 < Wo; w0 += VW) {                                                 \
        const int iw0 = w0 * SW - pw, ihb = ho0 * SH - ph;                                \
        const intV col = iw0 + LANES * SW, okw = w0 + LANES < Wo;                         \
        intV ok[FS];                                                                      \
        _Pragma("unroll")                                                                 \
        for (int s = 0; s < FS; ++s)                                                      \
            ok[s] = okw && col + s >= 0 && col + s < W;                                   \
        floatV g[T];                                                                      \
        _Pragma("unroll")                                                                 \
        for (int j = 0; j < (T); ++j)                                                     \
            g[j] = load_any(dy, dyoff + (long)(ho0 + j) * Wo, w0, Wo, 1, dytotal);        \
        if (xoff + iw0 >= 0 && xoff + (long)(H - 1) * W + iw0 + (long)VW * SW + FS      \
            <= xtotal) {                                                                  \
            DW_WRW_ROWS(T, FR, FS, SH, LOADF(x + rowoff + iw0 + s))                       \
        } else {                                                                          \
            DW_WRW_ROWS(T, FR, FS, SH, load_safe(x + rowoff, iw0 + s, W, SW))             \
        }                                                                                 \
    }

/* dw_wrw specialised to FR x FS filters, stride SH x SW, dilation 1 (CPU only): a part's
 * row blocks are taken TH dy rows at a time, each x row loaded once per tap column. */
#define DW_WRW_SPEC(NAME, FR, FS, SH, SW, LOADF)                                          \
__kernel void NAME(WRW_ARGS)                                                              \
{                                                                                         \
    const int p = get_global_id(0), k = get_global_id(1);                                 \
    if (k >= K)                                                                           \
        return;                                                                           \
    const long c = k / m, xtotal = (long)N * C * H * W, dytotal = (long)N * K * Ho * Wo;  \
    const int nb = (Ho + TH - 1) / TH;                                                    \
    const long units = (long)N * nb, u0 = p * units_per_part;                             \
    const long u1 = min(u0 + units_per_part, units);                                      \
    floatV acc[FR * FS];                                                                  \
    _Pragma("unroll")                                                                     \
    for (int t = 0; t < FR * FS; ++t)                                                     \
        acc[t] = (floatV)0.0f;                                                            \
    long n = u0 / nb;                                                                     \
    int hb = (int)(u0 - n * nb);                                                          \
    for (long u = u0; u < u1; ++u, hb = hb + 1 == nb ? 0 : hb + 1, n += hb == 0) {        \
        const int len = min(TH, Ho - hb * TH);                                            \
        const long dyoff = (n * K + k) * Ho * (long)Wo, xoff = (n * C + c) * H * (long)W; \
        if (len == TH) {                                                                  \
            const int ho0 = hb * TH;                                                      \
            DW_WRW_BLOCK(TH, FR, FS, SH, SW, LOADF)                                       \
        } else {                                                                          \
            for (int ho0 = hb * TH; ho0 < hb * TH + len; ++ho0) {                         \
                DW_WRW_BLOCK(1, FR, FS, SH, SW, LOADF)                                    \
            }                                                                             \
        }                                                                                 \
    }                                                                                     \
    __global float *d = dst + ((long)p * K + k) * (FR * FS);                              \
    _Pragma("unroll")                                                                     \
    for (int t = 0; t < FR * FS; ++t)                                                     \
        d[t] = HSUM(acc[t]);                                                              \
}

DW_WRW_SPEC(dw_wrw_3x3s1, 3, 3, 1, 1, VLOAD)
DW_WRW_SPEC(dw_wrw_3x3s2, 3, 3, 2, 2, VLOAD_S2)
#endif

/* Backward weights, pass 2: dw[e] = partial[0][e] + partial[1][e] + ... in part order. */
__kernel void dw_wrw_sum(__global const float *restrict partial, __global float *restrict dw,
                         const int parts, const long krs)
{
    const long e = get_global_id(0);
    if (e >= krs)
        return;
    float s = 0.0f;
    for (int p = 0; p < parts; ++p)
        s += partial[p * krs + e];
    dw[e] = s;
}
