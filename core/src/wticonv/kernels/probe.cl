/* The probe: a driver's first test, run in a child process by wticonv.probe before the
 * device is used for anything else.
 *
 * One kernel exercises the vector types and built-ins the solvers' kernels use (float2 to
 * float16, int4, vload/vstore of 4, 8 and 16 floats, mad and fma on float16 and float8,
 * dot, clamp, fmin/fmax, min, select, shuffle2, conversions, local memory and a barrier).
 * wticonv.probe computes the same values in float64 with NumPy and compares: a driver that
 * builds but computes wrongly is set aside too. Its LLVM code generator sees float16 mad
 * here first, which is where PyPI's PoCL 3.0 aborts on Zen 4 ("Cannot select ... fadd",
 * in _cl_mad(float16, float16, float16)).
 *
 * WTICONV_PROBE_LOCAL: work-items per work-group (the probe passes min(64, the device's
 *   largest work-group)); each work-item reads 16 floats and writes WTICONV_PROBE_OUT.
 */
#ifndef WTICONV_PROBE_LOCAL
#define WTICONV_PROBE_LOCAL 64  /* work-group size; the probe sets it */
#endif
#define WTICONV_PROBE_OUT 48    /* floats written per work-item (see probe.py) */

__kernel __attribute__((reqd_work_group_size(WTICONV_PROBE_LOCAL, 1, 1)))
void probe_builtins(__global const float *restrict x, __global float *restrict y)
{
    __local float part[WTICONV_PROBE_LOCAL];
    const int gid = (int)get_global_id(0);
    const int lid = (int)get_local_id(0);
    const float16 a = vload16(gid, x);
    __global float *out = y + (size_t)gid * WTICONV_PROBE_OUT;

    const float16 m = mad(a, (float16)(0.5f), (float16)(1.0f));             /* 0..15  */
    vstore16(m, 0, out);
    const float8 f = fma(a.lo, a.hi, (float8)(0.25f));                       /* 16..23 */
    vstore8(f, 2, out);
    const float4 c = clamp(a.s89ab, 0.1f, 0.9f);                             /* 24..27 */
    vstore4(c, 6, out);
    const int4 gt = isgreater(a.scdef, (float4)(0.5f));
    const float4 s = select(a.scdef, -a.scdef, gt);                          /* 28..31 */
    vstore4(s, 7, out);
    const float4 mm = fmax(min(a.s0123, a.s4567), (float4)(0.2f));           /* 32..35 */
    vstore4(mm, 8, out);
    const float4 cv = convert_float4(convert_int4(a.s0123 * 100.0f));         /* 36..39 */
    vstore4(cv, 9, out);
    const float2 sh = shuffle2(a.s01, a.s23, (uint2)(3, 0));                 /* 40..41 */
    vstore2(sh, 20, out);
    const float dp = dot(a.s0123, a.s4567);
    part[lid] = dp;
    barrier(CLK_LOCAL_MEM_FENCE);
    out[42] = dp;
    out[43] = part[(lid + 1) % WTICONV_PROBE_LOCAL];  /* a neighbour's, through local memory */
    out[44] = (float)lid;
    out[45] = (float)get_group_id(0);
    out[46] = fmin(a.s0, a.sf);
    out[47] = 1.0f;
}
