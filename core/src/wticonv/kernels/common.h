/* Kernel macros shared by the solver plugins' .cl files (wticonv.runtime.kit splices this
 * header in place of a file's line `#include "wticonv/common.h"`; no include path is
 * needed).
 *
 * WTICONV_CAT(a, b): a and b pasted into one token after both are expanded, e.g.
 *   WTICONV_CAT(float, 8) -> float8 (a plain a##b would paste the macro's name, not its
 *   value, when b is itself a macro such as a vector width).
 * WTICONV_FLOATN(n), WTICONV_INTN(n): the OpenCL vector types of n floats or ints.
 * WTICONV_VLOADN(n), WTICONV_VSTOREN(n): the vloadn / vstoren built-ins of width n.
 * WTICONV_LANE_INDEX: the lane numbers 0 to 15 as an initializer, for a __constant table
 *   that vector kernels index to build masks (lanes past a row's end).
 * WTICONV_MAD(a, b, c): a * b + c, as one fused multiply-add instruction where the device
 *   has one. PoCL 3.1 compiles the mad() built-in to a separate multiply and add on CPUs
 *   that have FMA units (measured on a 2-core Xeon with AVX-512: 172 GFLOP/s with mad(),
 *   441 with fma(), the same float16 chains), so CPU kernels halve their arithmetic rate
 *   with mad(). Clang defines __FMA__ (x86) or __ARM_FEATURE_FMA (Arm) for a target CPU
 *   with FMA units: there fma() is one instruction; elsewhere, where fma() would be a slow
 *   software routine, mad() stays. GPU compilers define neither and fuse mad() already.
 */
#ifndef WTICONV_COMMON_H
#define WTICONV_COMMON_H

#define WTICONV_CAT_(a, b) a##b
#define WTICONV_CAT(a, b) WTICONV_CAT_(a, b)

#define WTICONV_FLOATN(n) WTICONV_CAT(float, n)
#define WTICONV_INTN(n) WTICONV_CAT(int, n)
#define WTICONV_VLOADN(n) WTICONV_CAT(vload, n)
#define WTICONV_VSTOREN(n) WTICONV_CAT(vstore, n)

#define WTICONV_LANE_INDEX {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}

#if defined(__FMA__) || defined(__ARM_FEATURE_FMA)
#define WTICONV_MAD(a, b, c) fma((a), (b), (c))
#else
#define WTICONV_MAD(a, b, c) mad((a), (b), (c))
#endif

#endif /* WTICONV_COMMON_H */
