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

#endif /* WTICONV_COMMON_H */
