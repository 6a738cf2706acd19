/* Column addressing shared by the SGEMM kernels (sgemm_cpu.cl, sgemm_gpu.cl,
 * nv/sgemm_tc.cl): column n of a B or C operand lies at
 *
 *     gemm_col(n) = q*ns + ho*hs + wo*ws,   q = n / P, p = n % P, ho = p / Wo, wo = p % Wo
 *
 * elements from the operand's start, so that a GEMM's columns can be the pixels of NCHW
 * pictures (q the image, ho and wo the pixel's row and column, their strides ns, hs, ws)
 * as well as a plain matrix's columns (P = Wo = N, ns = hs = 0, ws = the row length).
 * The host's ColMap (sgemm.py) is the same map. */
#ifndef WTICONV_GEMM_COLS_H
#define WTICONV_GEMM_COLS_H

inline long gemm_col(const int n, const int P, const int Wo, const long ns, const long hs,
                     const long ws)
{
    const int q = n / P, p = n - q * P;
    const int ho = p / Wo, wo = p - ho * Wo;
    return q * ns + ho * hs + wo * ws;
}

#endif
