/* im2col and col2im for the GEMM solvers (NCHW, float32).
 *
 * The column buffer of a chunk of Nc images starting at image n0 holds, for every group g,
 * a (C/G * R * S) x (Nc * Ho * Wo) row-major matrix (J = Nc * Ho * Wo columns):
 *
 *   col[g][(c, r, s)][(n, ho, wo)] = x[n0 + n][g*C/G + c][ho*u - p + r*l][wo*v - q + s*j]
 *
 * (zero where the input position falls in the padding). All sizes are kernel arguments,
 * so one build serves every problem. Offsets into x, dx and the column buffer are 64-bit;
 * the indices inside one image plane and J are 32-bit (the planner keeps J < 2^31).
 *
 * Two forms of each kernel:
 *  - GPU (im2col, col2im): one work-item per element, neighbouring work-items on
 *    neighbouring pixels (coalesced). col2im gathers: every dx element sums the column
 *    entries it contributed to.
 *  - CPU (im2col_cpu, col2im_cpu, im2row_cpu): one work-item per (image, channel[, tap])
 *    plane (im2row_cpu: per output row of an image), looping
 *    over the pixels in order, so integer divisions happen once per plane rather than per
 *    element. col2im_cpu clears its dx plane, then adds the taps in a fixed order: each
 *    dx element is written by one work-item only, so no atomics, and the result is
 *    deterministic.
 */

#define CONV_ARGS                                                                         \
    const int C, const int H, const int W, const int R, const int S, const int Ho,        \
    const int Wo, const int pad_h, const int pad_w, const int stride_h,                   \
    const int stride_w, const int dil_h, const int dil_w, const int G

/* Global size (Ho*Wo padded, Nc, C): one work-item per output pixel and input channel
 * writes that pixel's R*S column entries (neighbouring work-items write neighbouring
 * columns of each row: coalesced). */
__kernel void im2col(__global const float *restrict x, __global float *restrict col,
                     const int n0, const int Nc, CONV_ARGS)
{
    const int P = Ho * Wo;
    const int p = get_global_id(0);
    if (p >= P)
        return;
    const int n = get_global_id(1);
    const int c = get_global_id(2);              /* g * Cg + channel in group */
    const int ho = p / Wo, wo = p - ho * Wo;
    const __global float *xc = x + ((long)(n0 + n) * C + c) * H * (long)W;
    const long J = (long)Nc * P;
    __global float *out = col + (long)c * R * S * J + (long)n * P + p;
    for (int r = 0; r < R; ++r) {
        const int ih = ho * stride_h - pad_h + r * dil_h;
        const bool row_ok = ih >= 0 && ih < H;
        for (int s = 0; s < S; ++s) {
            const int iw = wo * stride_w - pad_w + s * dil_w;
            out[(long)(r * S + s) * J] = (row_ok && iw >= 0 && iw < W)
                                             ? xc[(long)ih * W + iw] : 0.0f;
        }
    }
}

/* The output columns wo whose input column iw = w0 + wo * stride_w lies in [0, W):
 * [*wlo, *whi), clamped to [0, Wo). */
inline void inside_columns(const int w0, const int W, const int Wo, const int stride_w,
                           int *wlo, int *whi)
{
    const int lo = w0 >= 0 ? 0 : (-w0 + stride_w - 1) / stride_w;
    const int hi = W - 1 - w0 < 0 ? 0 : (W - 1 - w0) / stride_w + 1;
    *wlo = min(lo, Wo);
    *whi = clamp(hi, *wlo, Wo);
}

/* Global size (Nc, G*Cg*R*S): one work-item writes one image's row of the column buffer. */
__kernel void im2col_cpu(__global const float *restrict x, __global float *restrict col,
                         const int n0, const int Nc, const long ld, CONV_ARGS)
{
    const int n = get_global_id(0);
    const int row = get_global_id(1);
    const int Cg = C / G, RS = R * S;
    const int g = row / (Cg * RS), crs = row - g * Cg * RS;
    const int c = crs / RS, rs = crs - c * RS, r = rs / S, s = rs - r * S;
    const int P = Ho * Wo;
    const __global float *xp = x + ((long)(n0 + n) * C + g * Cg + c) * H * (long)W;
    __global float *out = col + (long)row * ld + (long)n * P;
    /* Output columns wo in [wlo, whi) read inside the picture; the rest are padding. */
    const int w0 = s * dil_w - pad_w;
    int wlo, whi;
    inside_columns(w0, W, Wo, stride_w, &wlo, &whi);
    for (int ho = 0; ho < Ho; ++ho) {
        __global float *o = out + ho * Wo;
        const int ih = ho * stride_h - pad_h + r * dil_h;
        if (ih < 0 || ih >= H) {
            for (int wo = 0; wo < Wo; ++wo)
                o[wo] = 0.0f;
            continue;
        }
        const __global float *xr = xp + (long)ih * W + w0;
        for (int wo = 0; wo < wlo; ++wo)
            o[wo] = 0.0f;
        if (stride_w == 1) {
            for (int wo = wlo; wo < whi; ++wo)
                o[wo] = xr[wo];
        } else if (stride_w == 2) {
            /* 8 outputs from one 16-wide load (its even lanes) while the load stays inside
             * the row: the element-by-element gather ran at half the stride-1 copy's rate */
            int wo = wlo;
            for (; wo + 8 <= whi && w0 + 2 * wo + 16 <= W; wo += 8)
                vstore8(vload16(0, xr + 2 * wo).even, 0, o + wo);
            for (; wo < whi; ++wo)
                o[wo] = xr[2 * wo];
        } else {
            for (int wo = wlo; wo < whi; ++wo)
                o[wo] = xr[wo * stride_w];
        }
        for (int wo = whi; wo < Wo; ++wo)
            o[wo] = 0.0f;
    }
}

/* The row buffer (CPU backward weights): the column buffer transposed, one row per output
 * pixel of each image of the chunk, ld >= C*R*S elements apart, holding that pixel's
 * C*R*S inputs (groups one after the other, as in the filter):
 *
 *   row[(n * Ho + ho) * Wo + wo][(c * R + r) * S + s] = x[n0 + n][c][ih][iw]
 *
 * so that dw = sum over n of dy_n (Kg x P) . row_n (P x Cg*R*S) is a GEMM whose operands
 * are both contiguous along its output (sgemm_nn), not along its reduction.
 * Global size (Nc, Ho): one work-item writes the rows of one output row of one image. */
__kernel void im2row_cpu(__global const float *restrict x, __global float *restrict row,
                         const int n0, const int Nc, const long ld, CONV_ARGS)
{
    const int n = get_global_id(0), ho = get_global_id(1);
    const __global float *xn = x + (long)(n0 + n) * C * H * (long)W;
    /* One filter tap (c, r, s) at a time, across the output row's pixels: x is read
     * along its rows, and the Wo rows of the buffer are written one column at a time, each
     * line of them filled over 16 taps while it stays in the L1 cache. (The tap inside
     * each pixel's row, reading x across its channels, ran 3-6x slower on 1x1 filters: a
     * line of x a read.) */
    __global float *out = row + (long)(n * Ho + ho) * Wo * ld;
    for (int c = 0; c < C; ++c) {
        const __global float *xc = xn + (long)c * H * W;
        for (int r = 0; r < R; ++r) {
            const int ih = ho * stride_h - pad_h + r * dil_h;
            const bool row_ok = ih >= 0 && ih < H;
            const __global float *xr = xc + (long)ih * W;
            for (int s = 0; s < S; ++s) {
                __global float *o = out + (c * R + r) * S + s;
                const int w0 = s * dil_w - pad_w;
                int wlo = Wo, whi = Wo;
                if (row_ok)
                    inside_columns(w0, W, Wo, stride_w, &wlo, &whi);
                for (int wo = 0; wo < wlo; ++wo)
                    o[wo * ld] = 0.0f;
                for (int wo = wlo; wo < whi; ++wo)
                    o[wo * ld] = xr[w0 + wo * stride_w];
                for (int wo = whi; wo < Wo; ++wo)
                    o[wo * ld] = 0.0f;
            }
        }
    }
}

/* Global size (H*W padded, Nc, C): dx[n0 + n][c][h][w] gathered from the column buffer. */
__kernel void col2im(__global const float *restrict col, __global float *restrict dx,
                     const int n0, const int Nc, CONV_ARGS)
{
    const int hw = get_global_id(0);
    if (hw >= H * W)
        return;
    const int n = get_global_id(1), c = get_global_id(2);
    const int h = hw / W, w = hw - h * W;
    const int Cg = C / G, g = c / Cg, cl = c - g * Cg;
    const int P = Ho * Wo;
    const long J = (long)Nc * P;
    const __global float *cg = col + ((long)g * Cg + cl) * R * S * J + (long)n * P;
    float acc = 0.0f;
    for (int r = 0; r < R; ++r) {
        const int th = h + pad_h - r * dil_h;
        if (th < 0 || th % stride_h)
            continue;
        const int ho = th / stride_h;
        if (ho >= Ho)
            continue;
        for (int s = 0; s < S; ++s) {
            const int tw = w + pad_w - s * dil_w;
            if (tw < 0 || tw % stride_w)
                continue;
            const int wo = tw / stride_w;
            if (wo >= Wo)
                continue;
            acc += cg[(long)(r * S + s) * J + ho * Wo + wo];
        }
    }
    dx[((long)(n0 + n) * C + c) * H * (long)W + hw] = acc;
}

/* Global size (Nc, C): one work-item owns the plane dx[n0 + n][c]; it clears it, then adds
 * every tap's column row in (r, s, ho, wo) order. */
__kernel void col2im_cpu(__global const float *restrict col, __global float *restrict dx,
                         const int n0, const int Nc, const long ld, CONV_ARGS)
{
    const int n = get_global_id(0), c = get_global_id(1);
    const int Cg = C / G, g = c / Cg, cl = c - g * Cg;
    const int P = Ho * Wo;
    const long J = ld;
    __global float *plane = dx + ((long)(n0 + n) * C + c) * H * (long)W;
    for (int i = 0; i < H * W; ++i)
        plane[i] = 0.0f;
    const __global float *cg = col + ((long)g * Cg + cl) * R * S * J + (long)n * P;
    for (int r = 0; r < R; ++r) {
        for (int s = 0; s < S; ++s) {
            const __global float *src = cg + (long)(r * S + s) * J;
            const int w0 = s * dil_w - pad_w;
            int wlo, whi;
            inside_columns(w0, W, Wo, stride_w, &wlo, &whi);
            for (int ho = 0; ho < Ho; ++ho) {
                const int ih = ho * stride_h - pad_h + r * dil_h;
                if (ih < 0 || ih >= H)
                    continue;
                __global float *dr = plane + (long)ih * W + w0;
                const __global float *sr = src + ho * Wo;
                for (int wo = wlo; wo < whi; ++wo)
                    dr[wo * stride_w] += sr[wo];
            }
        }
    }
}

/* buf[0 .. count) = 0 (the untouched pixels of dx in a strided 1x1 backward pass). */
__kernel void zero_fill(__global float *restrict buf, const long count)
{
    const long i = get_global_id(0);
    if (i < count)
        buf[i] = 0.0f;
}
