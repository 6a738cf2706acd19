/* direct.tiled's second backward-weights pass: dw = the sum of `splits` partial slices
 * (each `count` floats, `stride` floats apart), added in slice order, so every run gives
 * the same bits (deterministic, no atomics). One work-item per dw element.
 */
__kernel void tiled_reduce(__global const float *restrict part, __global float *restrict dw,
                           const long count, const int splits, const long stride)
{
    const long e = get_global_id(0);
    if (e >= count)
        return;
    float s = 0.0f;
    for (int i = 0; i < splits; ++i)
        s += part[e + i * stride];
    dw[e] = s;
}
