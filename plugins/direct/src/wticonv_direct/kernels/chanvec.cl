/* direct.chanvec for CPUs (PoCL): forward convolution with output channels in the
 * vector lanes, one work-item per block, no local memory.
 *
 * A forward work-item computes CHANVEC_SUB blocks of CHANVEC_FPB output positions
 * (consecutive in (n, oh, ow) order, so they may cross rows and images) x 16*CHANVEC_KV
 * output channels of one group, one block after the other. Per reduction step (c, r, s)
 * it loads CHANVEC_KV vectors of 16 filters and broadcasts one input element per
 * position: FPB * KV multiply-adds per FPB scalar loads and KV vector loads, whatever the
 * picture's width or the stride (the oneDNN-like layout of channels in lanes;
 * direct.tiled puts positions in the lanes instead, so a 7-wide picture row fills 7 of
 * its 16).
 *
 * - chanvec_pack: the filters w[k][c/g][r][s] into the workspace as
 *   wp[block][c/g][r][s][16*KV], each block's 16*KV output channels contiguous (K is a
 *   multiple of 16*KV); for backward weights dy[n][k][oh][ow] the same way, image by
 *   image: dyp[n][block][oh][ow][16*KV];
 * - chanvec_fwd: the convolution, reading x, wp and writing y (NCHW); backward data at
 *   stride 1 is chanvec_fwd on dy with the filters flipped and transposed
 *   (chanvec_pack_bwd_taps for 2 to 16 taps, chanvec_pack_bwd for the others), written
 *   into dx;
 * - chanvec_wrw: backward weights, reading x and dyp and writing dw: a work-item
 *   computes 16*KV output channels x PB input channels of one filter tap (r, s),
 *   summing over every position (n, oh, ow) whose tap falls inside the picture;
 *   chanvec_wrw_slots the same for groups of fewer than PB input channels, its PB slots
 *   spread over several filter columns.
 *
 * Padding: per (r, s) the positions whose tap falls outside the picture are found once;
 * where none does, the loop over c runs without a select. A padding tap contributes an
 * exact zero (a select, never a multiplication by a loaded neighbour), so NaN and Inf in
 * real data propagate as in the definition.
 */
#ifndef CHANVEC_PB
#define CHANVEC_PB 6    /* backward weights' input-channel slots per work-item (and the
                           forward's positions unless CHANVEC_FPB is given): PB * KV
                           accumulator vectors, KV filter vectors and one broadcast must
                           fit the 32 registers of AVX-512 */
#endif
#ifndef CHANVEC_KV
#define CHANVEC_KV 4    /* vectors of 16 output channels per work-item (K/G a multiple of
                           16 * CHANVEC_KV) */
#endif
#ifndef CHANVEC_ROWS_CG
#define CHANVEC_ROWS_CG 8  /* groups of at most this many input channels (where each tap's
                              set-up weighs on few multiply-adds) run a filter row whose
                              taps are all inside the picture for every position of the
                              block as one loop over (c, s), its offsets found once; 0: every
                              tap finds its own */
#endif
#ifndef CHANVEC_FPB
#define CHANVEC_FPB CHANVEC_PB  /* chanvec_fwd's output positions per block: FPB * KV
                                   accumulator vectors (CHANVEC_PB is backward weights'
                                   slots) */
#endif
#ifndef CHANVEC_SUB
#define CHANVEC_SUB 1   /* chanvec_fwd's position blocks per work-item, run one after the
                           other. Where FPB x SUB is 16, the work-item keeps its blocks'
                           sums in a private tile and writes each output channel's 16
                           positions as one vector, whole cache lines, instead of FPB
                           scalars per channel a block. On a 2-core Zen 4 (PoCL 3.1) the
                           stores were a third of ResNet-50's stem (7x7 stride 2, 64
                           channels, N=8: 13.7 ms, 9.7 without them); 4 x 4 blocks went
                           from 15.4 ms (one block of 6) to 10.8 ms */
#endif
#define PB CHANVEC_PB
#define FPB CHANVEC_FPB
#if CHANVEC_SUB > 1 && CHANVEC_FPB * CHANVEC_SUB != 16
#error "CHANVEC_FPB x CHANVEC_SUB must be 16 where CHANVEC_SUB > 1"
#endif
#define KV CHANVEC_KV
#define KB (16 * KV)

/* One reduction step of chanvec_fwd: the KV filter vectors at WP and, per position i,
 * the input element LOAD broadcast to a vector, FPB x KV multiply-adds. */
#define TAP_STEP(WP, LOAD) {                                                              \
        float16 wv[KV];                                                                   \
        _Pragma("unroll") for (int v = 0; v < KV; ++v)                                    \
            wv[v] = vload16(v, (WP));                                                     \
        _Pragma("unroll") for (int i = 0; i < FPB; ++i) {                                 \
            const float16 xv = (float16)(LOAD);                                           \
            _Pragma("unroll") for (int v = 0; v < KV; ++v)                                \
                acc[v][i] = fma(xv, wv[v], acc[v][i]);                                    \
        }                                                                                 \
    }

/* The reduction over the group's channels c for one tap (r, s): LOAD reads position i's
 * input of channel c (of xc, off[i]). */
#define CHANNEL_LOOP(LOAD)                                                                \
    for (int c = 0; c < Cg; ++c) {                                                        \
        const __global float *xc = x + (long)c * HW;                                      \
        TAP_STEP(wrs + (long)c * R * S * KB, LOAD)                                        \
    }

/* One pass of a 16 x 16 transpose held as 16 row vectors: the 256 elements in row-major
 * order are split into the even-indexed ones followed by the odd-indexed ones (an
 * element's 8-bit index rotates right by one bit). Four passes rotate it by four: row
 * and column swap. Each new vector is one two-source shuffle of two old ones. */
#define UNZIP16(T, U) {                                                                   \
        _Pragma("unroll") for (int m = 0; m < 8; ++m) {                                   \
            U[m].lo = T[2 * m].even;                                                      \
            U[m].hi = T[2 * m + 1].even;                                                  \
            U[m + 8].lo = T[2 * m].odd;                                                   \
            U[m + 8].hi = T[2 * m + 1].odd;                                               \
        }                                                                                 \
    }

/* The 16 x 16 transpose of T (U: scratch): four UNZIP16 passes, the result back in T. */
#define TRANSPOSE16(T, U) { UNZIP16(T, U) UNZIP16(U, T) UNZIP16(T, U) UNZIP16(U, T) }

/* wp[b][q][j] = w[b * KB + j][q] (q = (c, r, s)): a work-item packs a block of KB output
 * channels x 16 reduction indices, 16 channels at a time, reading 16 runs of 16
 * contiguous filters and writing 16 vectors of 16 channels, so that it writes KB x 16
 * contiguous floats (a transpose element by element reads one cache line per element).
 * Full runs are loaded as 16 vectors and transposed in registers (four shuffle passes,
 * TRANSPOSE16); the last run of a row, cut short by CRS, goes element by element. On a 2-core
 * Zen 4 (PoCL 3.1), best of 15: K x CRS = 2048 x 512 0.46 -> 0.18 ms, 512 x 2048 1.02 ->
 * 0.21 ms, 1024 x 512 0.48 -> 0.09 ms against element by element (a copy of as many
 * bytes: 0.05-0.10 ms); 512 x 4608 (9.4 MB) 1.70 -> 0.39-0.73 ms (1.1-1.7 ms within the
 * solver's runs on a network's layer, the filters cold). */
__kernel __attribute__((reqd_work_group_size(1, 1, 1)))
void chanvec_pack(__global const float *restrict w, __global float *restrict wp,
                  const int K, const int CRS)
{
    const int q0 = get_global_id(0) * 16;
    const int b = get_global_id(1);
    /* grid dimension 2: independent matrices one after the other (dy's images) */
    w += (long)get_global_id(2) * K * CRS + (long)b * KB * CRS + q0;
    __global float *out = wp + (long)get_global_id(2) * K * CRS + ((long)b * CRS + q0) * KB;
    const int qn = min(16, CRS - q0);
    for (int jb = 0; jb < KB; jb += 16) {
        const __global float *src = w + (long)jb * CRS;
        if (qn == 16) {
            float16 t[16], u[16];
            _Pragma("unroll") for (int j = 0; j < 16; ++j)
                t[j] = vload16(0, src + (long)j * CRS);
            TRANSPOSE16(t, u)
            _Pragma("unroll") for (int q = 0; q < 16; ++q)
                vstore16(t[q], 0, out + (long)q * KB + jb);
        } else {
            for (int q = 0; q < qn; ++q) {
                float col[16];
                for (int j = 0; j < 16; ++j)
                    col[j] = src[(long)j * CRS + q];
                vstore16(vload16(0, col), 0, out + (long)q * KB + jb);
            }
        }
    }
}

/* Backward data at stride 1 runs chanvec_fwd on dy with these filters: the flipped,
 * transposed w'[c][k/g][r][s] = w[g Kg + k/g][c - g Cg][R-1-r][S-1-s] (c's group g),
 * packed as chanvec_pack packs w: wp[b][q][j] = w'[b KB + j][q], q = (k/g, r, s) of
 * Kg R S. Same 16 x 16 work-items as chanvec_pack: 16 channels c x 16 indices q each
 * (RS = R x S). */
__kernel __attribute__((reqd_work_group_size(1, 1, 1)))
void chanvec_pack_bwd(__global const float *restrict w, __global float *restrict wp,
                      const int Cg, const int Kg, const int RS)
{
    const int q0 = get_global_id(0) * 16;
    const int c0 = get_global_id(1) * 16;
    const int b = c0 / KB, jb = c0 % KB;
    const int Q = Kg * RS;
    /* the block's 16 channels lie in one group (Cg is a multiple of 16):
     * w'[c0 + j][q] = w0[kk Cg RS - tap + j RS] with q = kk RS + tap; a work-item writes
     * its 16 indices q as vectors of the 16 channels (reads RS floats apart) */
    const int g = c0 / Cg;
    const __global float *w0 = w + ((long)g * Kg * Cg + c0 % Cg) * RS + RS - 1;
    int kk = q0 / RS, tap = q0 % RS;        /* stepped below without a division */
    for (int q = q0; q < min(q0 + 16, Q); ++q) {
        const __global float *src = w0 + (long)kk * Cg * RS - tap;
        __global float *dst = wp + ((long)b * Q + q) * KB + jb;
        if (RS == 1) {      /* 1x1 filters: the 16 channels are contiguous */
            vstore16(vload16(0, src), 0, dst);
            ++kk;
            continue;
        }
        float col[16];
        for (int j = 0; j < 16; ++j)
            col[j] = src[(long)j * RS];
        vstore16(vload16(0, col), 0, dst);
        if (++tap == RS) {
            tap = 0;
            ++kk;
        }
    }
}

/* chanvec_pack_bwd's packing for filters of 2 to 16 taps (RS <= 16): work-item (kk,
 * c0 / 16) writes the RS vectors q = kk RS + tap of channels c0 .. c0 + 15, whose source
 * w[g Kg + kk][c0 % Cg + j][RS - 1 - tap] is the contiguous block of 16 x RS floats from
 * blk: its 16 channels' runs are loaded as 16 vectors (the RS taps of a channel and what
 * follows), transposed in registers (TRANSPOSE16) so that vector t holds every channel's tap
 * t, and written in reverse tap order. A block whose last load would pass the end of w
 * (W_LEN floats) goes element by element. */
__kernel __attribute__((reqd_work_group_size(1, 1, 1)))
void chanvec_pack_bwd_taps(__global const float *restrict w, __global float *restrict wp,
                           const int Cg, const int Kg, const int RS, const long W_LEN)
{
    const int kk = get_global_id(0);
    const int c0 = get_global_id(1) * 16;
    const int b = c0 / KB, jb = c0 % KB, g = c0 / Cg;
    const long blk = ((long)(g * Kg + kk) * Cg + c0 % Cg) * RS;
    __global float *out = wp + ((long)b * Kg * RS + (long)kk * RS) * KB + jb;
    if (blk + 15L * RS + 16 <= W_LEN) {
        float16 t[16], u[16];
        _Pragma("unroll") for (int j = 0; j < 16; ++j)
            t[j] = vload16(0, w + blk + (long)j * RS);
        TRANSPOSE16(t, u)
        for (int tap = 0; tap < RS; ++tap)
            vstore16(t[RS - 1 - tap], 0, out + (long)tap * KB);
        return;
    }
    for (int tap = 0; tap < RS; ++tap) {
        float col[16];
        for (int j = 0; j < 16; ++j)
            col[j] = w[blk + (long)j * RS + RS - 1 - tap];
        vstore16(vload16(0, col), 0, out + (long)tap * KB);
    }
}

__kernel __attribute__((reqd_work_group_size(1, 1, 1)))
void chanvec_fwd(__global const float *restrict x, __global const float *restrict wp,
                 __global float *restrict y,
                 const int N, const int C, const int H, const int W, const int K,
                 const int R, const int S, const int Ho, const int Wo,
                 const int SH, const int SW, const int PH, const int PW, const int G,
                 const int KB_FAST)
{
    /* the grid is (position blocks, channel blocks), or the other way round where
     * KB_FAST is 1: a core then runs every channel block of a position block in turn */
    const int kb = get_global_id(KB_FAST ? 0 : 1);  /* block of KB output channels */
    const int pbo = get_global_id(KB_FAST ? 1 : 0); /* block of SUB x FPB positions */
    const int P = N * Ho * Wo, HW = H * W, Cg = C / G, Kg = K / G;
    const int g = kb * KB / Kg;                 /* the block's group */
#if CHANVEC_SUB > 1
    float tile[16 * KB];                        /* [position][channel] */
#endif
    /* not unrolled: unrolled 4 times, the stem's 4 x 4 blocks ran 1.8x slower */
    _Pragma("nounroll") for (int sub = 0; sub < CHANVEC_SUB; ++sub) {
        const int pb = pbo * CHANVEC_SUB + sub;     /* block of FPB positions */
        long base[FPB];
        int ih0[FPB], iw0[FPB];
        for (int i = 0; i < FPB; ++i) {
            const int p = min(pb * FPB + i, P - 1);
            const int n = p / (Ho * Wo), rem = p % (Ho * Wo);
            base[i] = ((long)n * C + g * Cg) * HW;
            ih0[i] = (rem / Wo) * SH - PH;
            iw0[i] = (rem % Wo) * SW - PW;
        }
        float16 acc[KV][FPB];
        for (int v = 0; v < KV; ++v)
            for (int i = 0; i < FPB; ++i)
                acc[v][i] = (float16)0.0f;
        const __global float *w = wp + (long)kb * Cg * R * S * KB;
        for (int r = 0; r < R; ++r) {
#if CHANVEC_ROWS_CG > 0
            /* Where the group has few channels and the whole filter row r is inside the
             * picture for every position, the row's offsets are found once and its taps run
             * with no test: a loop over (c, s) (a 3-channel stem's 7 taps a row run as 21
             * steps instead of 7 set-ups of 3: 21 -> 15 ms at N=8). With many channels a tap's
             * set-up weighs little, and the row test cost ResNeXt's 7x7 grouped layer 1.4x. */
            long roff[FPB];
            bool full = Cg <= CHANVEC_ROWS_CG;
            for (int i = 0; i < FPB && full; ++i) {
                const int ih = ih0[i] + r;
                roff[i] = base[i] + (long)ih * W + iw0[i];
                full = full && ih >= 0 && ih < H && iw0[i] >= 0 && iw0[i] + S <= W;
            }
            if (full) {
                for (int c = 0; c < Cg; ++c) {
                    const __global float *xc = x + (long)c * HW;
                    const __global float *wc = w + ((long)c * R + r) * S * KB;
                    for (int s = 0; s < S; ++s)
                        TAP_STEP(wc + s * KB, xc[roff[i] + s])
                }
                continue;
            }
#endif
            for (int s = 0; s < S; ++s) {
                long off[FPB];
                bool all = true;
                for (int i = 0; i < FPB; ++i) {
                    const int ih = ih0[i] + r, iw = iw0[i] + s;
                    const bool in = ih >= 0 && ih < H && iw >= 0 && iw < W;
                    off[i] = in ? base[i] + ih * W + iw : -1;
                    all = all && in;
                }
                const __global float *wrs = w + (r * S + s) * KB;
                if (all) {
                    CHANNEL_LOOP(xc[off[i]])
                } else {    /* a padding tap is an exact zero, never a loaded neighbour */
                    CHANNEL_LOOP(off[i] >= 0 ? xc[max(off[i], 0L)] : 0.0f)
                }
            }
        }
#if CHANVEC_SUB > 1
        for (int i = 0; i < FPB; ++i)
            for (int v = 0; v < KV; ++v)
                vstore16(acc[v][i], v, tile + (sub * FPB + i) * KB);
    }   /* sub */
    const int p0 = pbo * CHANVEC_SUB * FPB, rem0 = p0 % (Ho * Wo);
    if (p0 + 16 <= P && rem0 + 16 <= Ho * Wo) {
        /* one image's 16 consecutive positions: per 16 channels, a 16 x 16 transpose in
         * registers, then one 16-float run per channel */
        __global float *yo = y + ((long)(p0 / (Ho * Wo)) * K + kb * KB) * Ho * Wo + rem0;
        for (int v = 0; v < KV; ++v) {
            float16 t[16], u[16];
            _Pragma("unroll") for (int i = 0; i < 16; ++i)
                t[i] = vload16(v, tile + i * KB);
            TRANSPOSE16(t, u)
            _Pragma("unroll") for (int j = 0; j < 16; ++j)
                vstore16(t[j], 0, yo + (long)(v * 16 + j) * Ho * Wo);
        }
        return;
    }
    for (int i = 0; i < 16; ++i) {
        const int p = p0 + i;
        if (p >= P)
            break;
        const int n = p / (Ho * Wo), rem = p % (Ho * Wo);
        __global float *yo = y + ((long)n * K + kb * KB) * Ho * Wo + rem;
        for (int j = 0; j < KB; ++j)
            yo[(long)j * Ho * Wo] = tile[i * KB + j];
    }
#else
        for (int i = 0; i < FPB; ++i) {
            const int p = pb * FPB + i;
            if (p >= P)
                break;
            const int n = p / (Ho * Wo), rem = p % (Ho * Wo);
            __global float *yo = y + ((long)n * K + kb * KB) * Ho * Wo + rem;
            float t[KB];
            for (int v = 0; v < KV; ++v)
                vstore16(acc[v][i], v, t);
            for (int j = 0; j < KB; ++j)
                yo[(long)j * Ho * Wo] = t[j];
        }
    }   /* sub */
#endif
}

/* What the two backward-weights kernels share: their arguments, their first names, the
 * loop over a row's columns where every slot's tap is inside the picture (x[XR + xoff[j]
 * + ow SW] is slot j's tap at column ow; dr the row's packed dy), and the store of slot
 * j's KB sums from O on, KB channels apart in dw. */
#define WRW_PARAMS                                                                        \
    __global const float *restrict x, __global const float *restrict dyp,                \
    __global float *restrict dw,                                                          \
    const int N, const int C, const int H, const int W, const int K,                      \
    const int R, const int S, const int Ho, const int Wo,                                 \
    const int SH, const int SW, const int PH, const int PW, const int G,                 \
    const int ROWS, const long DW_OFF, const long DW_CHUNK
#define WRW_NAMES                                                                         \
    const int qb = get_global_id(0), kb = get_global_id(1);                               \
    const int Cg = C / G, Kg = K / G, HW = H * W, HWo = Ho * Wo, RS = R * S;              \
    const int g = kb * KB / Kg, nkb = K / KB;                                             \
    const int row0 = get_global_id(2) * ROWS, row1 = min(N * Ho, row0 + ROWS);            \
    dw += DW_OFF + get_global_id(2) * DW_CHUNK;                                           \
    float16 acc[KV][PB];                                                                  \
    for (int v = 0; v < KV; ++v)                                                          \
        for (int j = 0; j < PB; ++j)                                                      \
            acc[v][j] = (float16)0.0f;
#define WRW_COLUMNS(FROM, TO, XR)                                                         \
    for (int ow = (FROM); ow < (TO); ++ow) {                                              \
        float16 dv[KV];                                                                   \
        _Pragma("unroll") for (int v = 0; v < KV; ++v)                                    \
            dv[v] = vload16(v, dr + ow * KB);                                             \
        const int iw = ow * SW;                                                           \
        _Pragma("unroll") for (int j = 0; j < PB; ++j) {                                  \
            const float16 xv = (float16)(x[(XR) + xoff[j] + iw]);                         \
            _Pragma("unroll") for (int v = 0; v < KV; ++v)                                \
                acc[v][j] = fma(xv, dv[v], acc[v][j]);                                    \
        }                                                                                 \
    }
#define WRW_STORE(j, O) {                                                                 \
        __global float *o_ = (O);                                                         \
        float t_[KB];                                                                     \
        for (int v = 0; v < KV; ++v)                                                      \
            vstore16(acc[v][j], v, t_);                                                   \
        for (int k = 0; k < KB; ++k)                                                      \
            o_[(long)k * Cg * RS] = t_[k];                                                \
    }

/* Backward weights: dw[k][c][r][s] = sum over (n, oh, ow) of dy[n][k][oh][ow] x
 * x[n][g Cg + c][oh SH - PH + r][ow SW - PW + s], the positions whose tap is padding left
 * out (an exact zero, as in chanvec_fwd). Work-item (qb, kb): output channels kb KB to
 * kb KB + KB - 1, input channels c0 to c0 + PB - 1 of its group at tap (r, s), where
 * qb = (c0 / PB) R S + r S + s. Per position: KV vectors of dyp and PB broadcast inputs,
 * PB x KV multiply-adds. A row's valid columns are found once, so the loop over them
 * has no test; a block past the group's last channel repeats that channel, and stores
 * only its own. Groups of fewer channels than PB take chanvec_wrw_slots below (kept apart:
 * its column bookkeeping slowed this kernel's 7x7 layers by about 10 %). */
__kernel __attribute__((reqd_work_group_size(1, 1, 1)))
void chanvec_wrw(WRW_PARAMS)
{
    WRW_NAMES
    const int c0 = (qb / RS) * PB, rs = qb % RS, r = rs / S, s = rs % S;
    const int qn = min(PB, Cg - c0);
    long xoff[PB];
    for (int j = 0; j < PB; ++j)
        xoff[j] = (long)min(j, qn - 1) * HW;
    /* columns whose tap iw = ow SW - PW + s lies in [0, W) */
    const int ow_lo = PW > s ? (PW - s + SW - 1) / SW : 0;
    const int ow_hi = W - 1 + PW - s < 0 ? 0 : min(Wo, (W - 1 + PW - s) / SW + 1);
    for (int row = row0; row < row1; ++row) {          /* the chunk's rows (n, oh) */
        const int n = row / Ho, oh = row % Ho;
        const long xn = ((long)n * C + g * Cg + c0) * HW;
        const __global float *dn = dyp + ((long)n * nkb + kb) * HWo * KB;
        const int ih = oh * SH - PH + r;
        if (ih < 0 || ih >= H)
            continue;
        /* x[xr + ow SW] is column ow's tap (inside the picture: ow_lo <= ow < ow_hi) */
        const long xr = xn + ih * W - PW + s;
        const __global float *dr = dn + (long)oh * Wo * KB;
        WRW_COLUMNS(ow_lo, ow_hi, xr)
    }
    for (int j = 0; j < qn; ++j)
        WRW_STORE(j, dw + ((long)kb * KB * Cg + c0 + j) * RS + rs)
}

/* Backward weights of groups of fewer input channels than PB (the 3-channel stem), the
 * sum of chanvec_wrw. Work-item (qb, kb): output channels kb KB to kb KB + KB - 1 times
 * PB slots of one filter row r: CB = min(Cg, PB) input channels from
 * c0 at QS = PB / CB neighbouring filter columns from s0 (QS is 1 unless the group has
 * fewer channels than slots: the 3-channel stem fills its 6 slots with 3 channels x 2
 * columns), qb = (c0 / CB) R NS + r NS + s0 / QS, NS = ceil(S / QS). Per position: KV
 * vectors of dyp and PB broadcast inputs, PB x KV multiply-adds. A row's columns where
 * every slot's tap is inside the picture are found once and run with no test; the few
 * columns where only some are inside, with one. A slot past the group's channels or the
 * filter's columns repeats slot 0, and only the real ones are stored. */
__kernel __attribute__((reqd_work_group_size(1, 1, 1)))
void chanvec_wrw_slots(WRW_PARAMS)
{
    WRW_NAMES
    const int CB = min(Cg, PB), QS = PB / CB, NS = (S + QS - 1) / QS;
    const int c0 = (qb / (R * NS)) * CB, rq = qb % (R * NS), r = rq / NS, s0 = (rq % NS) * QS;
    long xoff[PB];
    int lo[PB], hi[PB], sj[PB];
    bool real[PB];
    int lo_in = 0, hi_in = Wo, lo_all = Wo, hi_all = 0;
    for (int j = 0; j < PB; ++j) {
        const int cj = j % CB, s = s0 + j / CB;
        real[j] = j / CB < QS && c0 + cj < Cg && s < S;
        const int c = real[j] ? cj : 0, sr = real[j] ? s : s0;
        sj[j] = sr;
        xoff[j] = (long)c * HW + sr - PW;
        /* columns whose tap iw = ow SW - PW + s lies in [0, W) */
        lo[j] = PW > sr ? (PW - sr + SW - 1) / SW : 0;
        hi[j] = W - 1 + PW - sr < 0 ? 0 : min(Wo, (W - 1 + PW - sr) / SW + 1);
        if (real[j]) {
            lo_in = max(lo_in, lo[j]);
            hi_in = min(hi_in, hi[j]);
            lo_all = min(lo_all, lo[j]);
            hi_all = max(hi_all, hi[j]);
        }
    }
    hi_in = max(hi_in, lo_in);
    /* columns where only some slots' taps are inside (never with one filter column) */
    const bool edges = lo_all < lo_in || hi_in < hi_all;
    for (int row = row0; row < row1; ++row) {          /* the chunk's rows (n, oh) */
        const int n = row / Ho, oh = row % Ho;
        const long xn = ((long)n * C + g * Cg + c0) * HW;
        const __global float *dn = dyp + ((long)n * nkb + kb) * HWo * KB;
        const int ih = oh * SH - PH + r;
        if (ih < 0 || ih >= H)
            continue;
        /* x[xr + xoff[j] + ow SW] is slot j's tap at column ow (lo[j] <= ow < hi[j]) */
        const long xr = xn + ih * W;
        const __global float *dr = dn + (long)oh * Wo * KB;
        for (int ow = lo_all; edges && ow < hi_all; ++ow) {
            if (ow == lo_in && ow < hi_in)
                ow = hi_in;         /* the inner columns run in the loop below */
            if (ow >= hi_all)
                break;
            float16 dv[KV];
            _Pragma("unroll") for (int v = 0; v < KV; ++v)
                dv[v] = vload16(v, dr + ow * KB);
            _Pragma("unroll") for (int j = 0; j < PB; ++j) {
                const bool in = ow >= lo[j] && ow < hi[j];
                /* a padding tap adds nothing (not 0 x dy: an Inf in dy stays out);
                   the load reads a valid address either way */
                const float16 xv = (float16)(x[in ? xr + xoff[j] + ow * SW : xn]);
                _Pragma("unroll") for (int v = 0; v < KV; ++v)
                    acc[v][j] = in ? fma(xv, dv[v], acc[v][j]) : acc[v][j];
            }
        }
        WRW_COLUMNS(lo_in, hi_in, xr)
    }
    for (int j = 0; j < PB; ++j)
        if (real[j])
            WRW_STORE(j, dw + ((long)kb * KB * Cg + c0 + j % CB) * RS + r * S + sj[j])
}

/* Backward weights in chunks of rows (n, oh): each chunk's work-items wrote their partial
 * dw at ws + DW_OFF + chunk x TOTAL (a chunk's packed dy stays in cache while the
 * work-items of every tap and channel block read it, instead of each streaming all of
 * dy); dw is their sum. A work-item sums 16 consecutive elements over the chunks. */
__kernel __attribute__((reqd_work_group_size(1, 1, 1)))
void chanvec_wrw_sum(__global const float *restrict ws, __global float *restrict dw,
                     const long DW_OFF, const int CHUNKS, const long TOTAL)
{
    const long e0 = get_global_id(0) * 16L;
    const __global float *part = ws + DW_OFF + e0;
    const int m = (int)min(16L, TOTAL - e0);
    float sum[16];
    for (int e = 0; e < 16; ++e)
        sum[e] = 0.0f;
    for (int c = 0; c < CHUNKS; ++c)
        for (int e = 0; e < m; ++e)
            sum[e] += part[(long)c * TOTAL + e];
    for (int e = 0; e < m; ++e)
        dw[e0 + e] = sum[e];
}
