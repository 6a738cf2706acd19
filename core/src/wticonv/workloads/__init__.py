"""Layer 2, workloads: networks as lists of convolution layers.

- :mod:`~wticonv.workloads.networks`: the built-in and corpus networks and :func:`load_network`;
- :mod:`~wticonv.workloads.generator`: random realistic problems;
- :mod:`~wticonv.workloads.driver`: MIOpenDriver ``conv`` command lines;
- :mod:`~wticonv.workloads.onnx`: the Conv nodes of ONNX models.

Imports only the problem model below it.
"""
