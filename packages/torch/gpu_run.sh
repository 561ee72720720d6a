#!/usr/bin/env bash
# kvbridge-torch's CUDA kernels on a GPU machine, in one command: build the package against that
# machine's own torch with its nvcc, run the torch tests there, then gpu_check.py. What it wrote
# lands in $OUT (the device tool's folder) or build/gpu: gpu_check.json (commit it as
# docs/gpu_check.json, then `python benchmarks/page/cuda.py` renders docs/cuda.md from it), and
# the build's, the tests' and the check's logs.
#
#     bash packages/torch/gpu_run.sh prepare   # here, first: Python's headers, in case it lacks them
#     bash packages/torch/gpu_run.sh           # there (carry build/gpu-carry)
#
# The machine has torch, nvcc, CMake and scikit-build-core but no network: nothing is installed
# but this package (--no-index --no-deps --no-build-isolation).
set -euo pipefail
cd "$(dirname "$0")/../.."
python=${PYTHON:-python3}
carry=build/gpu-carry

if [[ ${1:-} == prepare ]]; then
  # A Python without its development headers cannot build an extension; CPython's headers of one
  # minor version serve every patch release of it, so those of this machine's 3.12 travel along.
  # So does the build backend this package asks for (pyproject.toml: scikit-build-core>=1.1),
  # pure Python, with what it imports, in case the machine's is older or missing.
  include=$(python3.12 -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
  rm -rf "$carry" && mkdir -p "$carry/wheels" && cp -r "$include" "$carry/include"
  python3.12 -m pip download --quiet --no-deps --only-binary=:all: -d "$carry/wheels" \
    "scikit-build-core>=1.1" pathspec packaging
  echo "in $carry: $include as include/, $(ls "$carry/wheels"); carry $carry"
  exit 0
fi

out=${OUT:-build/gpu}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
nvidia-smi >"$out/nvidia-smi.txt" 2>&1 || true
"$python" -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda)'

include=$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
if [[ ! -f $include/Python.h && -f $carry/include/Python.h ]]; then
  echo "no Python.h in $include: building with the carried headers"
  export CMAKE_ARGS="-DPython_INCLUDE_DIR=$PWD/$carry/include"
fi
# The carried build backend, for the build alone (the tests and the check use the machine's own).
backend=${PYTHONPATH:-}
if ls "$carry"/wheels/*.whl >/dev/null 2>&1; then
  rm -rf /tmp/kvbridge-build-backend
  "$python" -m pip install --quiet --no-index --no-deps --target /tmp/kvbridge-build-backend \
    "$carry"/wheels/*.whl
  backend=/tmp/kvbridge-build-backend${backend:+:$backend}
fi
PYTHONPATH=$backend "$python" -c 'import scikit_build_core as s; print("scikit-build-core", s.__version__)'
cmake --version | head -1 || true
start=$SECONDS
if ! PYTHONPATH=$backend "$python" -m pip install --no-index --no-deps --no-build-isolation \
  --force-reinstall -v ./packages/torch >"$out/build.log" 2>&1; then
  tail -60 "$out/build.log"
  exit 1
fi
echo "built in $((SECONDS - start)) s:"
grep -E "kvbridge-torch: CUDA|nvcc" "$out/build.log" || true
"$python" -c 'from kvbridge_torch import _build_info as b; print({k: v for k, v in vars(b).items() if k.isupper()})'

# The torch tests with a GPU present (their CUDA test runs), under this repository's rules where
# the machine's pytest can read them, else its own defaults; bounded, and never the end of the run.
KVBRIDGE_PACKAGE=torch KVBRIDGE_EXPECT_CUDA_KERNELS=1 timeout 300 "$python" -m pytest -q \
  -p no:cacheprovider -c /dev/null --rootdir . packages/torch/tests 2>&1 |
  tee "$out/pytest.log" | tail -15 || true

timeout 420 "$python" packages/torch/gpu_check.py --json "$out/gpu_check.json" 2>&1 |
  tee "$out/gpu_check.log"
