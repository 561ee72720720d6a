"""Measuring: harness.py times groups of cases in interleaved rounds, each bench_<feature>.py
makes one feature's groups, and free_threading.py measures (and probes) on a free-threaded
Python. report.py runs them; nothing here renders."""
