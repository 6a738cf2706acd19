// Tiled FFT convolution (overlap-save): transforms of the input tiles and of the filters
// into the half spectrum of a T x T real 2-D DFT, and the inverse transforms that write
// output tiles and filter gradients. The per-bin complex multiply-accumulate over the
// channels runs between them as one real batched GEMM per bin (wticonv-gemm's SGEMM, on
// block matrices: see plan.py).
//
// A tile's spectrum has T x HB bins (HB = T/2 + 1: a real signal's DFT is Hermitian, so
// the columns v > T/2 are the conjugates of others). Bin (u, v) is number u * HB + v.
// Correlation, not convolution, is what a conv layer computes: y = IDFT(X . conj(W)) for
// a filter zero-padded to T x T, exact (no wrap-around) for the T - R + 1 first outputs
// of each axis (overlap-save). Every 1-D transform is an iterative radix-2 FFT of length
// T in private memory; T is a build option, so its loops unroll with constant twiddles.

#ifndef FFT_T
#define FFT_T 16        // tile side: 8, 16 or 32 (a power of two)
#endif
#ifndef FFT_LOG2T
#define FFT_LOG2T 4     // log2(FFT_T)
#endif
#ifndef FFT_PAIRS
#define FFT_PAIRS 16    // tiles per work-group of the tile transforms (work-group FFT_PAIRS x FFT_T)
#endif
#define HB (FFT_T / 2 + 1)

inline float2 cmul(float2 a, float2 b) {
    return (float2)(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}

inline int bitrev(int i) {
    int r = 0;
#pragma unroll
    for (int b = 0; b < FFT_LOG2T; b++)
        r |= ((i >> b) & 1) << (FFT_LOG2T - 1 - b);
    return r;
}

// In-place length-T DFT of a: sign -1 forward (e^{-2 pi i k n / T}), +1 inverse (unscaled).
inline void fft_1d(float2 *a, float sign) {
#pragma unroll
    for (int i = 0; i < FFT_T; i++) {
        int r = bitrev(i);
        if (i < r) { float2 t = a[i]; a[i] = a[r]; a[r] = t; }
    }
#pragma unroll
    for (int len = 2; len <= FFT_T; len <<= 1) {
        int hl = len >> 1;
#pragma unroll
        for (int k = 0; k < hl; k++) {
            // twiddle e^{sign 2 pi i k / len}, in units of pi for cospi/sinpi
            float2 w = (float2)(cospi(2.0f * k / len), sign * sinpi(2.0f * k / len));
#pragma unroll
            for (int i = 0; i < FFT_T; i += len) {
                float2 u = a[i + k], v = cmul(a[i + k + hl], w);
                a[i + k] = u + v;
                a[i + k + hl] = u - v;
            }
        }
    }
}

// Forward transform of image tiles. Work-group (FFT_PAIRS, FFT_T): dimension 0 the tile
// (t, within the chunk of nc images starting at image n0), dimension 1 a row then a
// column of it; global dimension 2 the channel ch (of CH per image).
// Tile (n, th, tw) holds src rows th * step_h + org_h + [0, len_h) and columns likewise,
// zero outside them and outside the H x W picture. Bin b of channel ch and tile t is
// written at  dst_off + b * sb + ch * sc + (t / kt) * sj + t % kt  (real part) and that
// plus sp (imaginary part); with dup, also (-imaginary, real) at that plus sdup.
__kernel __attribute__((reqd_work_group_size(FFT_PAIRS, FFT_T, 1)))
void fft_tiles(__global const float *src, int n0, int nc, int CH, int H, int W,
               int tiles_h, int tiles_w, int step_h, int step_w, int org_h, int org_w,
               int len_h, int len_w, __global float *dst, long dst_off, long sb, long sc,
               long sp, long sj, int kt, int dup, long sdup) {
    __local float2 lb[FFT_T * HB * FFT_PAIRS];
    const int p = get_local_id(0), lx = get_local_id(1);
    const int t = get_global_id(0), ch = get_global_id(2);
    const int per_image = tiles_h * tiles_w;
    const bool live = t < nc * per_image;
    const int n = t / per_image, th = (t % per_image) / tiles_w, tw = t % tiles_w;
    float2 a[FFT_T];
    if (live) {
        const int ih = th * step_h + org_h + lx;
        const bool row_ok = lx < len_h && ih >= 0 && ih < H;
        const long base = ((long)(n0 + n) * CH + ch) * H * W + (long)ih * W;
#pragma unroll
        for (int s = 0; s < FFT_T; s++) {
            const int iw = tw * step_w + org_w + s;
            const bool ok = row_ok && s < len_w && iw >= 0 && iw < W;
            a[s] = (float2)(ok ? src[base + iw] : 0.0f, 0.0f);
        }
        fft_1d(a, -1.0f);
#pragma unroll
        for (int v = 0; v < HB; v++)
            lb[(lx * HB + v) * FFT_PAIRS + p] = a[v];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (live && lx < HB) {
#pragma unroll
        for (int u = 0; u < FFT_T; u++)
            a[u] = lb[(u * HB + lx) * FFT_PAIRS + p];
        fft_1d(a, -1.0f);
        const long base = dst_off + ch * sc + (long)(t / kt) * sj + t % kt;
#pragma unroll
        for (int u = 0; u < FFT_T; u++) {
            const long at = base + (long)(u * HB + lx) * sb;
            dst[at] = a[u].x;
            dst[at + sp] = a[u].y;
            if (dup) {
                dst[at + sdup] = -a[u].y;
                dst[at + sdup + sp] = a[u].x;
            }
        }
    }
}

// Filters to the GEMM's A operand of a forward-like pass, one (o, i) pair and one bin
// column v per work-item: W = DFT of the R x S filter zero-padded to T x T, tap (r, s) of
// pair (o, i) at w[wbase + o * so + i * si + r * sr + s * ss] (strides may be negative:
// the backward-data pass reads the filter flipped and transposed). Separable: first each
// filter row's bin v (q_r = sum_s w[r][s] e^{-2 pi i v s / T}), then the column's T bins
// (W(u, v) = sum_r q_r e^{-2 pi i u r / T}), R (S + T) products instead of T R S. Per bin,
// A is 2O x 2I: [[Re W, Im W], [-Im W, Re W]] (rows o and O + o, columns i and I + i),
// the product by conj(W) of [Re X; Im X] (correlation). Bin b's block starts at
// u_off + b * 4OI.
__kernel void fft_filter(__global const float *w, __global float *dst, long u_off, int O,
                         int I, int R, int S, long wbase, long so, long si, long sr, long ss) {
    const int oi = get_global_id(0), v = get_global_id(1);
    if (oi >= O * I) return;
    const int o = oi / I, i = oi % I;
    float2 tw[FFT_T];       // e^{-2 pi i m / T}
#pragma unroll
    for (int m = 0; m < FFT_T; m++)
        tw[m] = (float2)(cospi(2.0f * m / FFT_T), -sinpi(2.0f * m / FFT_T));
    const long base = wbase + o * so + i * si;
    float2 col[FFT_T];
#pragma unroll
    for (int u = 0; u < FFT_T; u++)
        col[u] = (float2)(0.0f, 0.0f);
    for (int r = 0; r < R; r++) {
        float2 q = (float2)(0.0f, 0.0f);
        for (int s = 0; s < S; s++)
            q += w[base + r * sr + s * ss] * tw[(v * s) & (FFT_T - 1)];
#pragma unroll
        for (int u = 0; u < FFT_T; u++)
            col[u] += cmul(q, tw[(u * r) & (FFT_T - 1)]);
    }
    const long ld = 2L * I, blk = 4L * O * I;
#pragma unroll
    for (int u = 0; u < FFT_T; u++) {
        const long at = u_off + (long)(u * HB + v) * blk;
        dst[at + (long)o * ld + i] = col[u].x;
        dst[at + (long)o * ld + I + i] = col[u].y;
        dst[at + (long)(O + o) * ld + i] = -col[u].y;
        dst[at + (long)(O + o) * ld + I + i] = col[u].x;
    }
}

// Inverse transform of output tiles: bin b of output channel o and tile t read at
// src_off + b * sb + o * so + t (real part) and that plus sp (imaginary); the first
// m_h x m_w values of the tile's inverse DFT (scaled by 1/T^2) written to dst rows
// th * m_h + [0, m_h) and columns tw * m_w + [0, m_w) of the Ho x Wo picture, clipped.
// Work-group (FFT_PAIRS, FFT_T) as for fft_tiles; global dimension 2 the channel.
__kernel __attribute__((reqd_work_group_size(FFT_PAIRS, FFT_T, 1)))
void ifft_tiles(__global const float *src, long src_off, long sb, long so, long sp,
                __global float *dst, int n0, int nc, int O, int Ho, int Wo, int tiles_h,
                int tiles_w, int m_h, int m_w) {
    __local float2 lb[FFT_T * HB * FFT_PAIRS];
    const int p = get_local_id(0), lx = get_local_id(1);
    const int t = get_global_id(0), o = get_global_id(2);
    const int per_image = tiles_h * tiles_w;
    const bool live = t < nc * per_image;
    float2 a[FFT_T];
    if (live && lx < HB) {       // columns v = lx: inverse along u
        const long base = src_off + o * so + t;
#pragma unroll
        for (int u = 0; u < FFT_T; u++) {
            const long at = base + (long)(u * HB + lx) * sb;
            a[u] = (float2)(src[at], src[at + sp]);
        }
        fft_1d(a, 1.0f);
#pragma unroll
        for (int u = 0; u < FFT_T; u++)
            lb[(u * HB + lx) * FFT_PAIRS + p] = a[u];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (live && lx < m_h) {      // row r = lx: the row's spectrum is Hermitian in v
        const int n = t / per_image, th = (t % per_image) / tiles_w, tw = t % tiles_w;
        const int oh = th * m_h + lx;
        if (oh < Ho) {
#pragma unroll
            for (int v = 0; v < FFT_T; v++) {
                const float2 z = lb[(lx * HB + (v < HB ? v : FFT_T - v)) * FFT_PAIRS + p];
                a[v] = v < HB ? z : (float2)(z.x, -z.y);
            }
            fft_1d(a, 1.0f);
            const float scale = 1.0f / (FFT_T * FFT_T);
            __global float *row = dst + ((long)(n0 + n) * O + o) * Ho * Wo + (long)oh * Wo;
#pragma unroll
            for (int s = 0; s < FFT_T; s++) {
                const int ow = tw * m_w + s;
                if (s < m_w && ow < Wo) row[ow] = a[s].x * scale;
            }
        }
    }
}

// Filter gradients from their spectra: per bin, the GEMM's C is 2O x I, Re(dW) in rows o
// and Im(dW) in rows O + o, bin b's block at src_off + b * 2OI. One (o, i) pair and one
// row r per work-item: dw[o][i][r][s] = (1/T^2) sum over the half spectrum of
// c_v Re(dW(u, v) e^{2 pi i (u r + v s) / T}), c_v = 1 for v = 0 and v = T/2, else 2
// (the other half holds the conjugates). Separable: the T bins of each column v are read
// once (p_v = sum_u dW(u, v) e^{2 pi i u r / T}), then the row's S taps from the HB p_v.
// Written at w[o * I * R * S + i * R * S + r * S + s].
__kernel void fft_filter_grad(__global const float *src, long src_off, __global float *w,
                              int O, int I, int R, int S) {
    const int oi = get_global_id(0), r = get_global_id(1);
    if (oi >= O * I) return;
    const int o = oi / I, i = oi % I;
    float2 tw[FFT_T];       // e^{+2 pi i m / T}
#pragma unroll
    for (int m = 0; m < FFT_T; m++)
        tw[m] = (float2)(cospi(2.0f * m / FFT_T), sinpi(2.0f * m / FFT_T));
    const long blk = 2L * O * I, base = src_off + (long)o * I + i;
    float2 pv[HB];
#pragma unroll
    for (int v = 0; v < HB; v++) {
        float2 acc = (float2)(0.0f, 0.0f);
#pragma unroll
        for (int u = 0; u < FFT_T; u++) {
            const long at = base + (long)(u * HB + v) * blk;
            acc += cmul((float2)(src[at], src[at + (long)O * I]), tw[(u * r) & (FFT_T - 1)]);
        }
        pv[v] = acc;
    }
    for (int s = 0; s < S; s++) {
        float acc = 0.0f;
#pragma unroll
        for (int v = 0; v < HB; v++) {
            const float2 e = tw[(v * s) & (FFT_T - 1)];
            const float c = (v == 0 || v == FFT_T / 2) ? 1.0f : 2.0f;
            acc += c * (pv[v].x * e.x - pv[v].y * e.y);
        }
        w[((long)o * I + i) * R * S + (long)r * S + s] = acc / (FFT_T * FFT_T);
    }
}
