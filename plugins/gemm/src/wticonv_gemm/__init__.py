"""wticonv-gemm: convolutions as matrix products, with our own SGEMM kernels.

Solvers: ``gemm.im2col`` (every problem, all directions, workspace = column buffer,
chunked over the batch) and ``gemm.1x1`` (1x1 filters, stride 1 or 2, no workspace).
"""

__version__ = "0.2.3"
