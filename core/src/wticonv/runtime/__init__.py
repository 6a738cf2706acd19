"""The runtime layer: OpenCL devices, their figures, program builds and the host kit for solver plugins."""
