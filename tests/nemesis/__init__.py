"""A nemesis on loopback (issue #42): links that delay, black-hole or reset connections, a cluster whose
routes go through them, a seeded schedule of faults (with pauses, kills and leader step-downs), workloads
that record every call, and the checkers their histories go through.

test_nemesis.py runs one schedule: short by default (``make test``), long with ``NEMESIS_SOAK=1``
(``make soak``); ``NEMESIS_SEED`` and ``NEMESIS_STEPS`` replay or resize it.
"""
