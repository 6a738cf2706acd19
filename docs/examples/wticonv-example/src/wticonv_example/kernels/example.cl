/* example.direct: forward convolution, NCHW float32, one work-item per output element.
 *
 * y[n][k][ho][wo] = sum over c, r, s of x[n][g*C/groups + c][hi][wi] * w[k][c][r][s],
 * hi = ho*stride_h - pad_h + r*dil_h, wi likewise; taps in the padding are skipped.
 * Every size is an argument: one build serves every problem.
 */
__kernel void conv_fwd(__global const float *x, __global const float *w, __global float *y,
                       int N, int C, int H, int W, int K, int R, int S, int Ho, int Wo,
                       int pad_h, int pad_w, int stride_h, int stride_w, int dil_h,
                       int dil_w, int groups)
{
    const long i = get_global_id(0);
    if (i >= (long)N * K * Ho * Wo)
        return;
    const int wo = (int)(i % Wo);
    const int ho = (int)((i / Wo) % Ho);
    const int k = (int)((i / ((long)Wo * Ho)) % K);
    const int n = (int)(i / ((long)Wo * Ho * K));
    const int cg = C / groups, g = k / (K / groups);
    float acc = 0.0f;
    for (int c = 0; c < cg; ++c) {
        for (int r = 0; r < R; ++r) {
            const int hi = ho * stride_h - pad_h + r * dil_h;
            if (hi < 0 || hi >= H)
                continue;
            for (int s = 0; s < S; ++s) {
                const int wi = wo * stride_w - pad_w + s * dil_w;
                if (wi < 0 || wi >= W)
                    continue;
                acc += x[(((long)n * C + g * cg + c) * H + hi) * W + wi]
                     * w[(((long)k * cg + c) * R + r) * S + s];
            }
        }
    }
    y[i] = acc;
}
