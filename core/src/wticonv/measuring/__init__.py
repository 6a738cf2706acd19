"""Layer 8, measuring: running solvers for time, and what is built on it.

- :mod:`~wticonv.measuring.inputs`: random inputs and host-memory checks;
- :mod:`~wticonv.measuring.timing`: timed runs, interleaved between solvers;
- :mod:`~wticonv.measuring.find`: find mode (the find-db);
- :mod:`~wticonv.measuring.tune`: tuning perf configs (the perf-db);
- :mod:`~wticonv.measuring.calibrate`: per-device corrections of the WTI models;
- :mod:`~wticonv.measuring.evaluate`: the fallback's choices against the best measured;
- :mod:`~wticonv.measuring.bench`: a whole network, verified.

Imports the handle and everything below it.
"""
