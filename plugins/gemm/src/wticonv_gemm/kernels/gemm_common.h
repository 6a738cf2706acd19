/* What the SGEMM kernels share (sgemm_cpu.cl, sgemm_gpu.cl, nv/sgemm_tc.cl, nv/sgemm_wg.cl).
 *
 * Column addressing: column n of a B or C operand lies at
 *
 *     gemm_col(n) = q*ns + ho*hs + wo*ws,   q = n / P, p = n % P, ho = p / Wo, wo = p % Wo
 *
 * elements from the operand's start, so that a GEMM's columns can be the pixels of NCHW
 * pictures (q the image, ho and wo the pixel's row and column, their strides ns, hs, ws)
 * as well as a plain matrix's columns (P = Wo = N, ns = hs = 0, ws = the row length).
 * The host's ColMap (sgemm.py) is the same map. */
#ifndef WTICONV_GEMM_COMMON_H
#define WTICONV_GEMM_COMMON_H

inline long gemm_col(const int n, const int P, const int Wo, const long ns, const long hs,
                     const long ws)
{
    const int q = n / P, p = n - q * P;
    const int ho = p / Wo, wo = p - ho * Wo;
    return q * ns + ho * hs + wo * ws;
}

/* The arguments of the GPU kernels sgemm, sgemm_tc and sgemm_wg, in the order the host passes them
 * (sgemm.py, _gpu_args): sizes; A, B and C with their offsets and strides (elements) and
 * B's and C's column maps; beta, the group count G, the batch terms per split-K layer
 * NBS and the distance c_ss between the layers' partial sums. */
#define GEMM_GPU_PARAMS                                                                  \
    const int M, const int N, const int K, const int NB, const int NB2,                  \
    __global const float *restrict A, const long a_off, const long a_gs,                 \
    const long a_bs, const long a_bs2, const long a_ms, const long a_ks,                 \
    __global const float *restrict B, const long b_off, const long b_gs,                 \
    const long b_bs, const long b_bs2, const long b_ks,                                  \
    const int bP, const int bWo, const long bns, const long bhs, const long bws,         \
    __global float *restrict C, const long c_off, const long c_gs, const long c_ms,      \
    const int cP, const int cWo, const long cns, const long chs, const long cws,         \
    const int beta, const int G, const int NBS, const long c_ss

/* A work-group's share of those arguments: grid dimension 2 runs G groups x S split-K
 * layers, so the work-group computes group grp's layer split, which sums the batch terms
 * [b_lo, b_hi) into its own slice of C (c_ss apart; a reduction kernel adds the slices in
 * order); Ag and Bg are A and B at group grp. */
#define GEMM_GPU_GROUP                                                                   \
    const int gz = get_group_id(2);                                                      \
    const long grp = gz % G;                                                             \
    const int split = gz / G;                                                            \
    const int b_lo = split * NBS, b_hi = min(NB, b_lo + NBS);                            \
    const __global float *Ag = A + a_off + grp * a_gs;                                   \
    const __global float *Bg = B + b_off + grp * b_gs;

#endif
