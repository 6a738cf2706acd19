/* The Winograd transform F(MH x MW, RH x RW) shared by winograd.cl and fused.cl: tile and
 * filter-piece sizes, the transform matrices (build options, row by row; transforms.py
 * derives them) and the pieces-table layout. Spliced in where a file includes it by the
 * core's kernel library (wticonv.runtime.kit.KernelLibrary.source).
 * Defaults: F(2x2, 3x3) with the points 0, 1, -1.
 */
#ifndef WINO_COMMON_H
#define WINO_COMMON_H
#include "wticonv/common.h"
#ifndef WINO_MH
#define WINO_MH 2   /* output tile rows */
#endif
#ifndef WINO_MW
#define WINO_MW 2   /* output tile columns */
#endif
#ifndef WINO_RH
#define WINO_RH 3   /* filter piece rows */
#endif
#ifndef WINO_RW
#define WINO_RW 3   /* filter piece columns */
#endif
#ifndef WINO_BTH    /* BT_h, AH x AH */
#define WINO_BTH -1.0f, 0.0f, 1.0f, 0.0f, 0.0f, 1.0f, 1.0f, 0.0f, 0.0f, -1.0f, 1.0f, 0.0f, \
                 0.0f, -1.0f, 0.0f, 1.0f
#endif
#ifndef WINO_GH     /* G_h, AH x RH */
#define WINO_GH -1.0f, 0.0f, 0.0f, 0.5f, 0.5f, 0.5f, 0.5f, -0.5f, 0.5f, 0.0f, 0.0f, 1.0f
#endif
#ifndef WINO_ATH    /* AT_h, MH x AH */
#define WINO_ATH 1.0f, 1.0f, 1.0f, 0.0f, 0.0f, 1.0f, -1.0f, 1.0f
#endif
#ifndef WINO_BTW
#define WINO_BTW WINO_BTH
#endif
#ifndef WINO_GW
#define WINO_GW WINO_GH
#endif
#ifndef WINO_ATW
#define WINO_ATW WINO_ATH
#endif

#define AH (WINO_MH + WINO_RH - 1)
#define AW (WINO_MW + WINO_RW - 1)

/* The matrices are private constant arrays, declared in each kernel: after the loops are
 * unrolled the compiler folds their entries into the arithmetic. */
#define WINO_MATRICES                                                                     \
    const float BTH[AH * AH] = {WINO_BTH};                                               \
    const float GH[AH * WINO_RH] = {WINO_GH};                                            \
    const float ATH[WINO_MH * AH] = {WINO_ATH};                                          \
    const float BTW[AW * AW] = {WINO_BTW};                                               \
    const float GW[AW * WINO_RW] = {WINO_GW};                                            \
    const float ATW[WINO_MW * AW] = {WINO_ATW};                                          \
    (void)BTH; (void)GH; (void)ATH; (void)BTW; (void)GW; (void)ATW

/* Pieces table: 6 ints per piece. */
#define PC_FR0 0
#define PC_FC0 1
#define PC_FSH 2
#define PC_FSW 3
#define PC_OFFH 4
#define PC_OFFW 5

/* Every tap (a, b) of the piece whose table row is PC: STEP(k, fr, fc, in) with k its
 * index in the RH x RW piece, (fr, fc) the filter tap it takes and in whether that tap is
 * inside the R x S filter (a piece past the filter's edge is zero there). */
#define WINO_PIECE_TAPS(PC, R, S, STEP)                                                   \
    _Pragma("unroll") for (int a_ = 0; a_ < WINO_RH; ++a_) {                              \
        const int fr_ = (PC)[PC_FR0] + (PC)[PC_FSH] * a_;                                 \
        _Pragma("unroll") for (int b_ = 0; b_ < WINO_RW; ++b_) {                          \
            const int fc_ = (PC)[PC_FC0] + (PC)[PC_FSW] * b_;                             \
            STEP(a_ * WINO_RW + b_, fr_, fc_, (fr_ < (R) && fc_ < (S)))                   \
        }                                                                                 \
    }


/* out (rows x cols, row-major) = A . B, a small matrix product of the transforms, with
 * A's entry (r, a) at A[r*ar + a*ak] and B's entry (a, c) at B[a*bk + c*bc]: the strides
 * say whether an operand is used as stored or transposed. Sizes and strides are
 * compile-time constants at every call, so after inlining the loops unroll and the
 * transform matrices' entries (WINO_MATRICES) fold into the arithmetic. */
static inline void wino_mm(float *out, const float *A, const int ar, const int ak,
                           const float *B, const int bk, const int bc, const int rows,
                           const int k, const int cols)
{
    #pragma unroll
    for (int r = 0; r < rows; ++r)
        #pragma unroll
        for (int c = 0; c < cols; ++c) {
            float s = 0.0f;
            #pragma unroll
            for (int a = 0; a < k; ++a)
                s = WTICONV_MAD(A[r * ar + a * ak], B[a * bk + c * bc], s);
            out[r * cols + c] = s;
        }
}

/* The five transforms of one tile; arrays row-major.
 *   filter      u (AH x AW) = G_h g G_w^T          g: RH x RW filter piece
 *   input       v (AH x AW) = BT_h d BT_w^T        d: AH x AW input patch
 *   output      y (MH x MW) = AT_h m AT_w^T        m: AH x AW products
 *   grad        z (AH x AW) = AT_h^T e AT_w        e: MH x MW output-gradient tile
 *   filter_grad g (RH x RW) = G_h^T u G_w          u: AH x AW filter-gradient products */
static inline void wino_filter_tile(float *u, const float *g)
{
    WINO_MATRICES;
    float tmp[AH * WINO_RW];
    wino_mm(tmp, GH, WINO_RH, 1, g, WINO_RW, 1, AH, WINO_RH, WINO_RW);       /* G_h g */
    wino_mm(u, tmp, WINO_RW, 1, GW, 1, WINO_RW, AH, WINO_RW, AW);          /* . G_w^T */
}

static inline void wino_input_tile(float *v, const float *d)
{
    WINO_MATRICES;
    float tmp[AH * AW];
    wino_mm(tmp, BTH, AH, 1, d, AW, 1, AH, AH, AW);                        /* BT_h d */
    wino_mm(v, tmp, AW, 1, BTW, 1, AW, AH, AW, AW);                        /* . BT_w^T */
}

static inline void wino_output_tile(float *y, const float *m)
{
    WINO_MATRICES;
    float tmp[WINO_MH * AW];
    wino_mm(tmp, ATH, AH, 1, m, AW, 1, WINO_MH, AH, AW);                   /* AT_h m */
    wino_mm(y, tmp, AW, 1, ATW, 1, AW, WINO_MH, AW, WINO_MW);              /* . AT_w^T */
}

static inline void wino_grad_tile(float *z, const float *e)
{
    WINO_MATRICES;
    float tmp[AH * WINO_MW];
    wino_mm(tmp, ATH, 1, AH, e, WINO_MW, 1, AH, WINO_MH, WINO_MW);         /* AT_h^T e */
    wino_mm(z, tmp, WINO_MW, 1, ATW, AW, 1, AH, WINO_MW, AW);              /* . AT_w */
}

static inline void wino_filter_grad_tile(float *g, const float *u)
{
    WINO_MATRICES;
    float tmp[WINO_RH * AW];
    wino_mm(tmp, GH, 1, WINO_RH, u, AW, 1, WINO_RH, AH, AW);               /* G_h^T u */
    wino_mm(g, tmp, AW, 1, GW, WINO_RW, 1, WINO_RH, AW, WINO_RW);          /* . G_w */
}

#endif
