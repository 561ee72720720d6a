"""Probe files: each technology's own part of its probe family's questions, one file a
technology, named by its row's `probe_file` (benchmarks/technologies.json). A family module
(benchmarks/probing/ask_<family>.py) asks every technology of its family the same questions
and names none of them; what it asks of a probe file is in its docstring. A new technology of
an existing family is its row and, where its family asks for one, this file (tox -e
new-binding proves it with a copy of the ctypes one).
"""
