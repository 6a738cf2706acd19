"""System databases for wticonv: database files (``*.jsonl``, the ``wticonv-db`` format
of :mod:`wticonv.db.transfer`) in this package, read through the entry point
``wticonv.system_db: sysdb = wticonv_sysdb``. Nothing here runs: wticonv reads the files.

Each file was written by ``tools/make_system_db.py DEVICE`` of the wticonv repository
(``wticonv calibrate`` on the device, then ``wticonv db export --kind calibration --kind
correction``); its header's ``comment`` names the commands.
"""
