"""wticonv-direct: direct-convolution solvers for wticonv.

Solvers: ``direct.naive`` (every valid problem, all directions; the last resort).
"""

__version__ = "0.2.5"
