/* The launch overhead of the WTI models: wticonv.peak.measure_launch_overhead times
 * launches of this kernel, which does nothing (one work-item), queued to end. Kept apart
 * from peak.cl, whose text is part of the probe's verdict key (wticonv.probe). */
__kernel void launch_empty(void)
{
}
