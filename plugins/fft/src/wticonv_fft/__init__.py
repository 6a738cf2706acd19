"""wticonv-fft: a tiled FFT convolution solver for wticonv.

Solvers: ``fft.tiled`` (overlap-save on 8, 16 or 32-point tiles, every direction, stride
1, dilation 1, one group, filters up to 31 x 31) and, on NVIDIA GPUs with tensor cores,
``fft.tiled_3xtf32`` (its per-bin GEMMs in 3xTF32). Transforms in kernels/fft.cl; the
per-bin multiply is wticonv-gemm's SGEMM on block matrices (plan.py).
"""

__version__ = "0.2.1"
