/* direct.tiled for CPUs (PoCL): direct convolution in vectorised register blocks, one
 * work-item per block, no local memory and no barriers (PoCL turns barriers into loops
 * over the work-items, which costs more than the cache saves).
 *
 * The kernels take the same arguments as tiled_gpu.cl's tiled_conv (the host describes
 * every direction by the same affine index maps; see that file), plus the lengths of the
 * two input buffers, which bound every vector load:
 *
 *     out(m, p) = sum over q of A(m, q) * B(q, p)
 *
 * - tiled_conv (fwd, and bwd one stride phase at a time): a work-item computes TILED_MR
 *   channels x TILED_VW positions, the positions as the lanes of one vector. Per
 *   reduction index it broadcasts TILED_MR values of A and loads one vector of B: one
 *   vload when the lanes' source elements are consecutive in memory, two vloads and an
 *   .even swizzle when they are every second element (stride 2), element by element
 *   otherwise;
 *   a select zeroes the lanes that fall into the padding (only on blocks that touch it).
 *   For groups of fewer channels than TILED_MR the host builds it with TILED_GT > 1: a
 *   row tile then holds TILED_GT whole groups (one source vector per group and reduction
 *   index), and a work-item runs several such tiles over its block of positions, so that
 *   a group's short reduction (C/G x R x S) does not pay the lanes' set-up alone.
 * - tiled_dot (wrw): a work-item computes TILED_DOT_MR x TILED_DOT_NR dot products over q
 *   with the q indices as the lanes (dy and x are both contiguous along the picture),
 *   summed across lanes at the end. The reduction is long (N x Ho x Wo), so the operands
 *   are staged TILED_DOT_CHUNK vectors at a time for all rows and columns (L1-resident),
 *   then multiplied in 4 x 4 register blocks whose accumulators live in cache between
 *   chunks: every loaded vector serves 32 multiply-adds. Splits of q (whole images) go to partial slices that
 *   tiled_reduce.cl adds in a fixed order.
 *
 * Lanes map to positions either flat (VW consecutive positions, crossing picture rows:
 * best when the source rows follow each other with no gap, i.e. stride 1 and "same"
 * padding) or row by row (row_blocks blocks per row, the last one partly empty: keeps
 * strided and cropped rows loadable as vectors). The host picks (tiled_plan.py).
 *
 * Padding positions contribute exact zeros (select, never a multiplication by a loaded
 * neighbour), so NaN/Inf in real data propagate as in the definition.
 */
#ifndef TILED_VW
#define TILED_VW 16      /* floats per vector: 16 (AVX-512), 8 (AVX2), 4 (SSE, NEON) */
#endif
#ifndef TILED_MR
#define TILED_MR 12      /* channels per tiled_conv work-item: TILED_MR accumulator vectors
                            plus 3 must fit the vector registers (32 with AVX-512) */
#endif
#ifndef TILED_A_PACKED
#define TILED_A_PACKED 0 /* 1: tiled_conv's A was packed by tiled_pack_a (blocks of
                            TILED_MR channels, zeros past M) */
#endif
#ifndef TILED_GT
#define TILED_GT 1       /* groups per tiled_conv row tile: 1, the tile's TILED_MR rows are
                            channels m0.. of one group (grid dimension 2); more, for groups
                            of few channels, the tile holds TILED_GT whole groups of
                            TILED_MR / TILED_GT channels each (group t's channel j is row
                            t * (TILED_MR / TILED_GT) + j), one source vector per group and
                            reduction index, and a work-item runs its share of the G /
                            TILED_GT tiles over one block of positions (grid dimension 0
                            counts the shares; dimension 2 is 1), setting its lanes up once */
#endif
#ifndef TILED_DOT_MR
#define TILED_DOT_MR 32  /* rows (channels k) per tiled_dot work-item; a multiple of 4 */
#endif
#ifndef TILED_DOT_NR
#define TILED_DOT_NR 32  /* columns (c, r, s) per tiled_dot work-item; a multiple of 4 */
#endif
#ifndef TILED_DOT_CHUNK
#define TILED_DOT_CHUNK 4 /* vectors of q staged per row and column before they are
                             multiplied: MR x NR accumulators and (MR + NR) x CHUNK staged
                             vectors should fit the L1 and L2 caches (64 + 16 KiB with
                             AVX-512) */
#endif

#include "wticonv/common.h"
#define VW TILED_VW
#define floatv WTICONV_FLOATN(VW)
#define intv WTICONV_INTN(VW)
#define VLOAD WTICONV_VLOADN(VW)
#define VSTORE WTICONV_VSTOREN(VW)

__constant int LANES[16] = WTICONV_LANE_INDEX;

#define TILED_ARGS                                                                        \
    __global const float *restrict A, __global const float *restrict S,                  \
    __global float *restrict O,                                                           \
    const int M, const int P, const int P1, const int P2,                                 \
    const int Q, const int Q1, const int Q2, const int QS, const int G,                   \
    const long a_g, const long a_0, const long a_ms, const long a_qa, const long a_qb,    \
    const long a_qc,                                                                      \
    const int SH, const int SW, const long s_g, const long s_pa, const long s_qa,         \
    const int hp, const int h0, const int hq, const int wp, const int w0, const int wq,   \
    const long o_g, const long o_split, const long o_ms, const long o_pa, const long o_pb,\
    const long o_pc, const long o_0, const long a_len, const long s_len,                 \
    const int row_blocks

/* How the lanes' source elements lie in memory: base + l (CONTIG), base + 2*l (STEP2), or
 * anywhere (GATHER: one element per lane). */
#define CONTIG 1
#define STEP2 2
#define GATHER 0

/* VW elements at base[off[l]] where mask[l], zeros elsewhere. */
inline floatv gather(const __global float *base, const long *off, const int *mask)
{
    float t[VW];
    for (int l = 0; l < VW; ++l)
        t[l] = mask[l] ? base[off[l]] : 0.0f;
    return VLOAD(0, t);
}

/* VW elements at base[off[l]] where the lane of `ok` is set (all lanes when all_ok), zeros
 * elsewhere. 64-bit offsets: lanes may cross images, which can be 2^31 elements apart. */
inline floatv gather_lanes(const __global float *base, const long *off, const intv ok,
                           const bool all_ok)
{
    float t[VW];
    if (all_ok) {
        for (int l = 0; l < VW; ++l)
            t[l] = base[off[l]];
    } else {
        int mk[VW];
        VSTORE(ok, 0, mk);
        for (int l = 0; l < VW; ++l)
            t[l] = mk[l] ? base[off[l]] : 0.0f;
    }
    return VLOAD(0, t);
}

/* The sum of a vector's lanes, by halving (log2(VW) vector additions). */
inline float hsum(const floatv v)
{
#if VW == 16
    const float8 h8 = v.lo + v.hi;
    const float4 h4 = h8.lo + h8.hi;
#elif VW == 8
    const float4 h4 = v.lo + v.hi;
#else
    const float4 h4 = v;
#endif
    const float2 h2 = h4.lo + h4.hi;
    return h2.x + h2.y;
}

/* Lanes of a vector at S + first + l*step for the CONTIG and STEP2 modes (the caller has
 * checked that every element read lies in [0, s_len)). */
inline floatv strided(const __global float *S, const long first, const int mode)
{
    if (mode == CONTIG)
        return VLOAD(0, S + first);
    /* Every second element: swizzles with constant indices (.even), which compile to
     * vector permutes; OpenCL's shuffle2 goes element by element under PoCL. */
#if VW == 16
    return (float16)(vload16(0, S + first).even, vload16(0, S + first + 16).even);
#elif VW == 8
    return vload16(0, S + first).even;
#else
    return vload8(0, S + first).even;
#endif
}

/* The reach (in elements past `first`) of a strided load. */
#define REACH(mode) ((mode) == STEP2 ? 2 * VW : VW)

/* Lane mapping of a block of positions: flat (row_blocks == 0: VW consecutive positions,
 * crossing picture rows) or row-aligned (row_blocks blocks per row of P2 positions, the
 * last one partly empty), chosen by the host. Sets the first position and the number of
 * real lanes. */
inline void block_lanes(const int blk, const int P, const int P2, const int row_blocks,
                        int *p0, int *nvalid)
{
    if (row_blocks > 0) {
        const int row = blk / row_blocks, pc0 = (blk - row * row_blocks) * VW;
        *p0 = row * P2 + pc0;
        *nvalid = min(VW, P2 - pc0);
    } else {
        *p0 = blk * VW;
        *nvalid = min(VW, P - *p0);
    }
}

/* The source vector of one reduction index: the lanes' elements at S + boff[l] + shift
 * (first = boff[0] + shift), zeros in the padding and past the block's end (row mode). */
inline floatv fetch_source(const __global float *S, const long s_len, const long first,
                           const int mode, const bool inside, const long *loff,
                           const intv lanes_ok, const intv bhv, const intv bwv,
                           const int dh, const int dw, const int SH, const int SW,
                           const bool full)
{
    if (mode != GATHER && first >= 0 && first + REACH(mode) <= s_len) {
        const floatv v = strided(S, first, mode);
        if (inside)
            return v;
        const intv ih = bhv + (intv)dh, iw = bwv + (intv)dw;
        return select((floatv)(0.0f), v,
                      lanes_ok & (ih >= (intv)0) & (ih < (intv)SH) & (iw >= (intv)0) &
                      (iw < (intv)SW));
    }
    const intv ih = bhv + (intv)dh, iw = bwv + (intv)dw;
    return gather_lanes(S + first, loff,
                        lanes_ok & (ih >= (intv)0) & (ih < (intv)SH) & (iw >= (intv)0) &
                        (iw < (intv)SW),
                        inside && full);
}

/* The output offsets of the block's nvalid lanes (positions p0, p0 + 1, ...) from `base`;
 * returns whether they are VW consecutive elements (one vstore per channel). */
inline bool out_offsets(const int p0, const int nvalid, const int P1, const int P2,
                        const long base, const long o_pa, const long o_pb, const long o_pc,
                        long *ooff)
{
    bool contig = nvalid == VW;
    for (int l = 0; l < nvalid; ++l) {
        const int p = p0 + l;
        const int pa = p / (P1 * P2), pr = p - pa * (P1 * P2);
        const int pb = pr / P2, pc = pr - pb * P2;
        ooff[l] = base + pa * o_pa + pb * o_pb + pc * o_pc;
        contig = contig && ooff[l] == ooff[0] + l;
    }
    return contig;
}

/* The reduction of a tiled_conv block: q = (qa, qb, qc) = (channel, filter row, filter
 * column), skipping the rows and columns of taps where every lane is in the padding. The
 * body between the two sees qa, qb, qc, the source shifts dh and dw, and `inside` (no lane
 * in the padding: lanes past the block's end, in row mode, compute values that are never
 * stored, so they need no mask, only reads that stay in the buffer). */
#define TAP_LOOPS_BEGIN                                                                   \
    for (int qa = 0; qa < Qa; ++qa) {                                                     \
        for (int qb = 0; qb < Q1; ++qb) {                                                 \
            const int dh = qb * hq;                                                       \
            if (bh_hi + dh < 0 || bh_lo + dh >= SH)                                       \
                continue;                                                                 \
            const bool rows_in = bh_lo + dh >= 0 && bh_hi + dh < SH;                      \
            for (int qc = 0; qc < Q2; ++qc) {                                             \
                const int dw = qc * wq;                                                   \
                if (bw_hi + dw < 0 || bw_lo + dw >= SW)                                   \
                    continue;                                                             \
                const bool inside = rows_in && bw_lo + dw >= 0 && bw_hi + dw < SW;
#define TAP_LOOPS_END                                                                     \
            }                                                                             \
        }                                                                                 \
    }

#ifndef TILED_ONE_ITEM_GROUPS
#define TILED_ONE_ITEM_GROUPS 1 /* 1: work-groups of one work-item (PoCL runs each one's
                                   vector code as is); 0: any work-group size (GPUs run
                                   tiled_conv this way for 4 channels or fewer, where
                                   tiled_gpu.cl's blocks would be mostly empty) */
#endif
#if TILED_ONE_ITEM_GROUPS
#define ONE_ITEM __attribute__((reqd_work_group_size(1, 1, 1)))
#else
#define ONE_ITEM
#endif

__kernel ONE_ITEM
void tiled_conv(TILED_ARGS)
{
#if TILED_GT > 1
    const int m0 = 0;
    const long g = 0;           /* each row's group is added where it is read and written */
#else
    const int m0 = get_global_id(0) * TILED_MR;
    const long g = get_global_id(2) % G;
#endif
    const int Qa = Q1 * Q2 > 0 ? Q / (Q1 * Q2) : 0;
    int p0, nvalid;
    block_lanes(get_global_id(1), P, P2, row_blocks, &p0, &nvalid);
    if (p0 >= P)
        return;                 /* grids rounded up to a work-group multiple (GPUs) */

    /* Lanes: position -> (pa, pb, pc) -> source row/column base and offset. Lanes past
     * the block's end continue the last row (row mode) and are masked out. */
    int bh[VW], bw[VW];
    long boff[VW];
    int bh_lo = INT_MAX, bh_hi = INT_MIN, bw_lo = INT_MAX, bw_hi = INT_MIN;
    const int pa0 = p0 / (P1 * P2), pb0 = (p0 - pa0 * (P1 * P2)) / P2;
    const int pc0 = p0 - pa0 * (P1 * P2) - pb0 * P2;
    for (int l = 0; l < VW; ++l) {
        int pa = pa0, pb = pb0, pc = pc0 + l;
        if (row_blocks == 0) {
            const int p = min(p0 + l, P - 1);
            pa = p / (P1 * P2);
            const int pr = p - pa * (P1 * P2);
            pb = pr / P2;
            pc = pr - pb * P2;
        }
        bh[l] = pb * hp + h0;
        bw[l] = pc * wp + w0;
        boff[l] = g * s_g + pa * s_pa + (long)bh[l] * SW + bw[l];
        if (l < nvalid) {
            bh_lo = min(bh_lo, bh[l]);
            bh_hi = max(bh_hi, bh[l]);
            bw_lo = min(bw_lo, bw[l]);
            bw_hi = max(bw_hi, bw[l]);
        }
    }
    int mode = boff[1] - boff[0] == 1 ? CONTIG : (boff[1] - boff[0] == 2 ? STEP2 : GATHER);
    for (int l = 2; l < VW; ++l)
        if (boff[l] - boff[l - 1] != boff[1] - boff[0])
            mode = GATHER;
    const intv bhv = VLOAD(0, bh), bwv = VLOAD(0, bw);
    const intv lanes_ok = VLOAD(0, LANES) < (intv)nvalid;
    long loff[VW];             /* lane offsets from lane 0 (lanes may cross images) */
    for (int l = 0; l < VW; ++l)
        loff[l] = boff[l] - boff[0];

#if TILED_GT > 1
#define GM (TILED_MR / TILED_GT)
    const int tiles = (G + TILED_GT - 1) / TILED_GT;
    const int share = (tiles + (int)get_global_size(0) - 1) / (int)get_global_size(0);
    const int t_lo = get_global_id(0) * share, t_hi = min(tiles, t_lo + share);
    long ooff[VW];
    const bool ocontig = out_offsets(p0, nvalid, P1, P2, o_0, o_pa, o_pb, o_pc, ooff);
    for (int tile = t_lo; tile < t_hi; ++tile) {
        long arow[TILED_MR], sg[TILED_GT];
        for (int t = 0; t < TILED_GT; ++t) {
            const long gt = min(tile * TILED_GT + t, G - 1);   /* past G: computed, not stored */
            sg[t] = gt * s_g;
            for (int j = 0; j < GM; ++j)
                arow[t * GM + j] = gt * a_g + a_0 + (long)min(j, M - 1) * a_ms;
        }
        floatv acc[TILED_MR];
        for (int i = 0; i < TILED_MR; ++i)
            acc[i] = (floatv)(0.0f);
        TAP_LOOPS_BEGIN
            const long first = boff[0] + qa * s_qa + (long)dh * SW + dw;
            const long aq = qa * a_qa + qb * a_qb + qc * a_qc;
#pragma unroll
            for (int t = 0; t < TILED_GT; ++t) {
                const floatv v = fetch_source(S, s_len, first + sg[t], mode, inside, loff,
                                              lanes_ok, bhv, bwv, dh, dw, SH, SW,
                                              nvalid == VW);
#pragma unroll
                for (int j = 0; j < GM; ++j)
                    acc[t * GM + j] = WTICONV_MAD((floatv)(A[arow[t * GM + j] + aq]), v,
                                                  acc[t * GM + j]);
            }
        TAP_LOOPS_END
        for (int t = 0; t < TILED_GT; ++t) {
            const long gt = tile * TILED_GT + t;
            if (gt >= G)
                break;
            for (int j = 0; j < min(GM, M); ++j) {
                __global float *o = O + gt * o_g + (long)j * o_ms;
                if (ocontig) {
                    VSTORE(acc[t * GM + j], 0, o + ooff[0]);
                } else {
                    float r[VW];
                    VSTORE(acc[t * GM + j], 0, r);
                    for (int l = 0; l < nvalid; ++l)
                        o[ooff[l]] = r[l];
                }
            }
        }
    }
#undef GM
}
#else
#if TILED_A_PACKED
    /* A packed by tiled_pack_a: this block's A is one sequential run, and the TILED_MR
     * values of one q are consecutive, so every broadcast is a load at a constant
     * displacement from one pointer (a_ms = Q and m0 a multiple of TILED_MR). */
    const __global float *Am = A + g * a_g + a_0 + (long)m0 * a_ms;
#else
    long arow[TILED_MR];
    for (int i = 0; i < TILED_MR; ++i)
        arow[i] = g * a_g + a_0 + (long)min(m0 + i, M - 1) * a_ms;
#endif
    floatv acc[TILED_MR];
    for (int i = 0; i < TILED_MR; ++i)
        acc[i] = (floatv)(0.0f);

    TAP_LOOPS_BEGIN
        const floatv v = fetch_source(S, s_len, boff[0] + qa * s_qa + (long)dh * SW + dw, mode,
                                      inside, loff, lanes_ok, bhv, bwv, dh, dw, SH, SW,
                                      nvalid == VW);
        const long aq = qa * a_qa + qb * a_qb + qc * a_qc;
#if TILED_A_PACKED
        const __global float *ap = Am + aq;
#pragma unroll
        for (int i = 0; i < TILED_MR; ++i)
            acc[i] = WTICONV_MAD((floatv)(ap[i]), v, acc[i]);
#else
#pragma unroll
        for (int i = 0; i < TILED_MR; ++i)
            acc[i] = WTICONV_MAD((floatv)(A[arow[i] + aq]), v, acc[i]);
#endif
    TAP_LOOPS_END

    /* Store: one vstore per channel when the lanes' outputs are consecutive. */
    long ooff[VW];
    const bool ocontig = out_offsets(p0, nvalid, P1, P2, g * o_g + o_0, o_pa, o_pb, o_pc,
                                     ooff);
    for (int i = 0; i < TILED_MR; ++i) {
        if (m0 + i >= M)
            break;
        const long mo = (long)(m0 + i) * o_ms;
        if (ocontig) {
            VSTORE(acc[i], 0, O + ooff[0] + mo);
        } else {
            float t[VW];
            VSTORE(acc[i], 0, t);
            for (int l = 0; l < nvalid; ++l)
                O[ooff[l] + mo] = t[l];
        }
    }
}
#endif

__kernel ONE_ITEM
void tiled_dot(TILED_ARGS)
{
    /* q = (qa, qb, qc) = (image, row, column); splits are whole images (QS a multiple of
     * Q1*Q2). Lanes walk each image's picture positions VW at a time: along each row
     * (row_blocks > 0, the last block of a row partly empty) or flat across rows. */
    const int m0 = get_global_id(0) * TILED_DOT_MR;
    const int p0 = get_global_id(1) * TILED_DOT_NR;
    const int gz = get_global_id(2);
    const long g = gz % G;
    const int split = gz / G;
    const int plane = Q1 * Q2;
    const int qa_lo = split * (QS / plane), qa_hi = min(Q / plane, qa_lo + QS / plane);

    long arow[TILED_DOT_MR];
    for (int i = 0; i < TILED_DOT_MR; ++i)
        arow[i] = g * a_g + a_0 + (long)min(m0 + i, M - 1) * a_ms;
    int ch[TILED_DOT_NR], cw[TILED_DOT_NR];
    long cbase[TILED_DOT_NR];
    for (int j = 0; j < TILED_DOT_NR; ++j) {
        const int p = min(p0 + j, P - 1);
        const int pa = p / (P1 * P2), pr = p - pa * (P1 * P2);
        const int pb = pr / P2, pc = pr - pb * P2;
        ch[j] = pb * hp + h0;
        cw[j] = pc * wp + w0;
        cbase[j] = g * s_g + pa * s_pa;
    }
    /* Flat blocks crossing rows are still consecutive in memory when the rows follow each
     * other with no gap: A when a_qb == Q2 (dy), B when wq == 1 and hq * SW == Q2. */
    const int b_mode1 = wq == 1 ? CONTIG : (wq == 2 ? STEP2 : GATHER);
    const bool a_rows = a_qc == 1 && a_qb == Q2;
    const bool b_rows = wq == 1 && (long)hq * SW == Q2;
    const intv lane = VLOAD(0, LANES);

    floatv acc[TILED_DOT_MR][TILED_DOT_NR];
    floatv abuf[TILED_DOT_MR][TILED_DOT_CHUNK], bbuf[TILED_DOT_NR][TILED_DOT_CHUNK];
    for (int i = 0; i < TILED_DOT_MR; ++i)
        for (int j = 0; j < TILED_DOT_NR; ++j)
            acc[i][j] = (floatv)(0.0f);

    for (int qa = qa_lo; qa < qa_hi; ++qa) {
        /* Lane (row, column) of the current block, advanced block by block (flat mode). */
        intv qbv = lane / (intv)Q2, qcv = lane - qbv * (intv)Q2;
        int qb0 = 0, qc0 = 0;       /* row and column of lane 0, kept without divisions */
        int staged = 0;
        for (int r0 = 0; r0 < plane; r0 = qb0 * Q2 + qc0) {
            const int nv = min(VW, row_blocks > 0 ? Q2 - qc0 : plane - r0);
            const bool one_row = qc0 + nv <= Q2;
            int qb1 = qb0;                              /* row of the last real lane */
            for (int t = qc0 + nv - 1; t >= Q2; t -= Q2)
                ++qb1;
            if (row_blocks > 0) {
                qbv = (intv)qb0;
                qcv = (intv)qc0 + lane;
            }
            const intv in_blk = lane < (intv)nv;
            /* Lane offsets within a source picture, for blocks loaded element by element. */
            int loff32[VW];
            VSTORE(qbv * (intv)(hq * SW) + qcv * (intv)wq, 0, loff32);
            long loff[VW];
            for (int l = 0; l < VW; ++l)
                loff[l] = loff32[l];
            for (int i = 0; i < TILED_DOT_MR; ++i) {
                const long base = arow[i] + qa * a_qa;
                const long first = base + qb0 * a_qb + qc0 * a_qc;
                floatv a;
                if (a_qc == 1 && (one_row || a_rows) && first + VW <= a_len) {
                    a = VLOAD(0, A + first);
                    if (nv < VW)
                        a = select((floatv)(0.0f), a, in_blk);
                } else {
                    long off[VW];
                    int qbs[VW], qcs[VW], mk[VW];
                    VSTORE(qbv, 0, qbs);
                    VSTORE(qcv, 0, qcs);
                    for (int l = 0; l < VW; ++l) {
                        mk[l] = l < nv;
                        off[l] = base + qbs[l] * a_qb + qcs[l] * a_qc;
                    }
                    a = gather(A, off, mk);
                }
                abuf[i][staged] = a;
            }
            for (int j = 0; j < TILED_DOT_NR; ++j) {
                const long base = cbase[j] + qa * s_qa;
                /* Scalar bounds of the lanes' source rows and columns. */
                const int ih0 = ch[j] + qb0 * hq, ih1 = ch[j] + qb1 * hq;
                const int iw0 = cw[j] + (one_row ? qc0 : 0) * wq;
                const int iw1 = cw[j] + (one_row ? qc0 + nv - 1 : Q2 - 1) * wq;
                const bool none = ih1 < 0 || ih0 >= SH || iw1 < 0 || iw0 >= SW;
                const bool inside = ih0 >= 0 && ih1 < SH && iw0 >= 0 && iw1 < SW && nv == VW;
                const long first = base + (long)ih0 * SW + cw[j] + qc0 * wq;
                const int mode = one_row ? b_mode1 : (b_rows ? CONTIG : GATHER);
                floatv b = (floatv)(0.0f);
                if (!none) {
                    if (mode != GATHER && first >= 0 && first + REACH(mode) <= s_len) {
                        b = strided(S, first, mode);
                        if (!inside) {
                            const intv ih = (intv)ch[j] + qbv * (intv)hq;
                            const intv iw = (intv)cw[j] + qcv * (intv)wq;
                            b = select((floatv)(0.0f), b,
                                       in_blk & (ih >= (intv)0) & (ih < (intv)SH) &
                                       (iw >= (intv)0) & (iw < (intv)SW));
                        }
                    } else {
                        const intv ih = (intv)ch[j] + qbv * (intv)hq;
                        const intv iw = (intv)cw[j] + qcv * (intv)wq;
                        b = gather_lanes(S + base + (long)ch[j] * SW + cw[j], loff,
                                         in_blk & (ih >= (intv)0) & (ih < (intv)SH) &
                                         (iw >= (intv)0) & (iw < (intv)SW), inside);
                    }
                }
                bbuf[j][staged] = b;
            }
            ++staged;
            qc0 += VW;
            if (row_blocks > 0 && qc0 >= Q2) {
                qc0 = 0;
                ++qb0;
            }
            for (; qc0 >= Q2; qc0 -= Q2)
                ++qb0;
            if (row_blocks == 0) {
                /* Advance every lane by VW positions: carry columns into rows. */
                qcv += (intv)VW;
                for (int carry = 0; carry <= VW / max(Q2, 1); ++carry) {
                    const intv over = qcv >= (intv)Q2;
                    if (!any(over))
                        break;
                    qcv = select(qcv, qcv - (intv)Q2, over);
                    qbv = select(qbv, qbv + (intv)1, over);
                }
            }
            if (staged == TILED_DOT_CHUNK || qb0 * Q2 + qc0 >= plane) {
                /* Multiply the staged vectors in 4 x 4 register blocks. */
                for (int ib = 0; ib < TILED_DOT_MR; ib += 4) {
                    for (int jb = 0; jb < TILED_DOT_NR; jb += 4) {
                        floatv c[4][4];
#pragma unroll
                        for (int i = 0; i < 4; ++i)
#pragma unroll
                            for (int j = 0; j < 4; ++j)
                                c[i][j] = acc[ib + i][jb + j];
                        for (int t = 0; t < staged; ++t) {
                            floatv a4[4], b4[4];
#pragma unroll
                            for (int i = 0; i < 4; ++i) {
                                a4[i] = abuf[ib + i][t];
                                b4[i] = bbuf[jb + i][t];
                            }
#pragma unroll
                            for (int i = 0; i < 4; ++i)
#pragma unroll
                                for (int j = 0; j < 4; ++j)
                                    c[i][j] = WTICONV_MAD(a4[i], b4[j], c[i][j]);
                        }
#pragma unroll
                        for (int i = 0; i < 4; ++i)
#pragma unroll
                            for (int j = 0; j < 4; ++j)
                                acc[ib + i][jb + j] = c[i][j];
                    }
                }
                staged = 0;
            }
        }
    }

    __global float *Ob = O + g * o_g + split * o_split + o_0;
    long ocol[TILED_DOT_NR];        /* column offsets, decoded once (not once per row) */
    for (int j = 0; j < TILED_DOT_NR; ++j) {
        const int p = min(p0 + j, P - 1);
        const int pa = p / (P1 * P2), pr = p - pa * (P1 * P2);
        const int pb = pr / P2, pc = pr - pb * P2;
        ocol[j] = pa * o_pa + pb * o_pb + pc * o_pc;
    }
    const int ncol = min(TILED_DOT_NR, P - p0);
    for (int i = 0; i < TILED_DOT_MR; ++i) {
        if (m0 + i >= M)
            break;
        __global float *orow = Ob + (long)(m0 + i) * o_ms;
        for (int j = 0; j < ncol; ++j)
            orow[ocol[j]] = hsum(acc[i][j]);
    }
}

/* Packs A for tiled_conv, as GEMM libraries pack panels: Pk[g][mb][q][i] = A(mb*MR + i, q)
 * of group g (zeros past M), q in the (qa, qb, qc) order, MR = TILED_MR channels per
 * block. A work-item then reads its whole A block sequentially, and the channels it
 * broadcasts for one q are consecutive. One work-item per element. */
__kernel void tiled_pack_a(__global const float *restrict A, __global float *restrict Pk,
                           const int M, const int nblk, const int Q, const int Q1,
                           const int Q2, const long a_g, const long a_0, const long a_ms,
                           const long a_qa, const long a_qb, const long a_qc, const long total)
{
    const long e = get_global_id(0);
    if (e >= total)
        return;
    const int i = (int)(e % TILED_MR);
    long t = e / TILED_MR;
    const int q = (int)(t % Q);
    t /= Q;
    const int m = (int)(t % nblk) * TILED_MR + i;
    const long g = t / nblk;
    const int qa = q / (Q1 * Q2), qr = q - qa * (Q1 * Q2);
    const int qb = qr / Q2, qc = qr - qb * Q2;
    Pk[e] = m < M ? A[g * a_g + a_0 + m * a_ms + qa * a_qa + qb * a_qb + qc * a_qc] : 0.0f;
}
