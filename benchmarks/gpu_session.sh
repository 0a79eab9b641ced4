#!/usr/bin/env bash
# What was run on the GPU machine (docs/gpu.md): environment, CUDA tests, per-call overhead and
# a slice of the suite. Usage: benchmarks/gpu_session.sh OUT_DIR [suite args...]
# The machine has no package registry: torch2xla is installed from this tree without deps.
set -uo pipefail
out=${1:?OUT_DIR}; shift
mkdir -p "$out"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/env.txt"
python3 -c "import torch, jax; print('torch', torch.__version__, 'cuda', torch.version.cuda, '| jax', jax.__version__, jax.devices())" 2>&1 | tee -a "$out/env.txt"
python3 -m pip install -q --no-deps --no-build-isolation -e . >"$out/install.log" 2>&1 || tail -5 "$out/install.log"
python3 -c "import torch._dynamo as d; assert 'xla' in d.list_backends(), d.list_backends()" || exit 1
if [[ "${SKIP_TESTS:-0}" != 1 ]]; then
  timeout 240 python3 -m pytest -q -p no:cacheprovider -W error::UserWarning:torch2xla tests/test_gpu.py tests/test_hot_path.py tests/test_sdpa.py 2>&1 | tee "$out/test_gpu.log" | tail -25
  timeout 60 python3 benchmarks/overhead.py --device cuda --rounds 9 --calls 300 --breakdown --json "$out/overhead_cuda.json" 2>&1 | tail -16
fi
if [[ $# -gt 0 ]]; then
  python3 benchmarks/suite.py --device cuda --out "$out/cuda.json" --no-report "$@" 2>&1 | tail -40
fi
