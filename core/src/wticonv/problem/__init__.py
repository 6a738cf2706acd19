"""Layer 1, the problem model: what a convolution is, with no device and no solver.

- :mod:`~wticonv.problem.conv`: :class:`ConvProblem` (N C H W K R S, pads, strides,
  dilations, groups, direction) and its FLOPs;
- :mod:`~wticonv.problem.keys`: MIOpen's find-db key format, both ways;
- :mod:`~wticonv.problem.reference`: the float64 NumPy reference of all three directions
  and MIOpen's ``rms_range`` error;
- :mod:`~wticonv.problem.tensors`: argument checks for host arrays and the
  :class:`ConvTensors` triple of device buffers.

Imports only :mod:`wticonv.errors` (and NumPy).
"""

from wticonv.problem.conv import (
                                  DIRECTIONS,
                                  ConvProblem,
                                  normalize_direction,
                                  output_size,
                                  parse_key,
)
from wticonv.problem.keys import format_key
from wticonv.problem.tensors import OUTPUT_TENSOR, ConvTensors

__all__ = ["DIRECTIONS", "ConvProblem", "ConvTensors", "OUTPUT_TENSOR", "format_key",
           "normalize_direction", "output_size", "parse_key"]
