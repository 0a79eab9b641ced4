#!/usr/bin/env bash
# Suite rows on the GPU machine within one device call: each row (CASE:TASK:DTYPE) in a suite
# process of its own, merged into OUT_DIR/cuda.json as it finishes, so a call cut short keeps
# the rows done. Rows that would not finish within BUDGET_S seconds (a row takes 60-130 s on
# an H100) are skipped and listed. Usage:
#   benchmarks/gpu_rows.sh OUT_DIR BUDGET_S gpt2:infer:fp32 bert:train:fp32 ...
# (DEVICE=cpu runs the same on the CPU, to try the script.)
set -uo pipefail
out=${1:?OUT_DIR}; budget=${2:?BUDGET_S}; shift 2
mkdir -p "$out"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >"$out/install.log" 2>&1 || tail -5 "$out/install.log"
for row in "$@"; do
  IFS=: read -r case task dtype <<<"$row"
  left=$((budget - SECONDS))
  if ((left < 130)); then echo "skipped (budget): $row"; continue; fi
  timeout "$left" python3 benchmarks/suite.py --device "${DEVICE:-cuda}" --cases "$case" --tasks "$task" \
    --dtypes "$dtype" --rounds 5 --timeout "$left" --out "$out/cuda.json" --merge --no-report \
    2>&1 | grep -v "cuda_timer\|^W[0-9]" | tail -2
  echo "t=${SECONDS}s"
done
