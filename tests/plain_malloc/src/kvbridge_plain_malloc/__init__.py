"""A pytest plugin (`pytest -p kvbridge_plain_malloc`) for `tox -e asan`: numpy allocates array
data with plain malloc and free from here on, so AddressSanitizer reports a read of a freed
array (numpy's own allocator would have handed that memory to the next array of its size).

numpy keeps its allocator in a context variable, and a thread starts in an empty context: the
suite's threads (common.run_threads) run in a copy of the main thread's context, so they use
this allocator too.
"""

from __future__ import annotations

import numpy as np

from ._handler import install

NAME = "kvbridge_plain_malloc"


def handler_name() -> str:
    """The allocator a new array gets in this thread's context."""
    try:
        from numpy._core.multiarray import get_handler_name
    except ImportError:  # numpy 1.x
        from numpy.core.multiarray import get_handler_name
    return get_handler_name(np.empty(1))


install()
if handler_name() != NAME:  # a plugin that silently did nothing would hide the bugs it is for
    raise RuntimeError(f"numpy's allocator is {handler_name()!r} after installing {NAME!r}")
