"""cffi's API mode, out of line: emit the C source of a compiled module over probe_c_abi.h, as a
build step (CMake compiles and links it). Users do the same with `cffi_modules` in setup.py;
the generated C is identical either way.

    python probe_cffi_api_build.py <output.c>
"""

import sys
from pathlib import Path

from cffi import FFI

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the source tree's package
from kvbridge_probes import c_abi_declarations  # noqa: E402

ffi = FFI()
ffi.cdef(c_abi_declarations())
ffi.set_source("kvbridge_probes.probe_cffi_api", '#include "probe_c_abi.h"')
ffi.emit_c_code(sys.argv[1])
