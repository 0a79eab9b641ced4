#!/usr/bin/env bash
# The CUDA half of the test suite, as run on the GPU machine (docs/gpu.md records the results):
# the GPU test files whole, then the files whose tests take a device parameter, on CUDA only.
# Usage: benchmarks/gpu_tests.sh OUT_DIR   (no package registry there: installed without deps)
set -uo pipefail
out=${1:?OUT_DIR}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 TORCH2XLA_PERSISTENT_CACHE=0
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/env.txt"
python3 -c "import torch, jax, transformers; print('torch', torch.__version__, '| jax', jax.__version__, '| transformers', transformers.__version__)" 2>&1 | tee -a "$out/env.txt"
python3 -m pip install -q --no-deps --no-build-isolation -e . >"$out/install.log" 2>&1 || tail -5 "$out/install.log"
xdist=$(python3 -c "import xdist" 2>/dev/null && echo "-n ${GPU_TEST_WORKERS:-4}")
timeout "${GPU_TEST_TIMEOUT:-420}" python3 -m pytest -q -p no:cacheprovider $xdist -rfE \
  tests/test_gpu.py tests/test_hot_path.py tests/test_sdpa.py tests/test_split_backward.py \
  tests/test_devices.py tests/test_eager_errors.py tests/test_threads.py tests/test_release.py \
  tests/test_output_layout.py tests/test_aliases.py tests/test_data_dependent.py \
  tests/test_transforms.py tests/test_grad_connectivity.py tests/test_persistent_cache.py \
  tests/test_generate.py "$@" 2>&1 | tee "$out/tests.log" | tail -40
