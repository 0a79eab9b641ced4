"""Shared by the benchmarks: the one-thread protocol, interleaved timing and statistics.

Import this module before torch or jax: it configures both for a single thread.
"""

from __future__ import annotations

import os
import platform
import random
import statistics
import subprocess
import time
from collections.abc import Callable, Sequence

# XLA reads its flags when its CPU client starts; torch2xla starts none at import.
os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=false"
).strip()

import torch

# Dynamo runs frames holding an nn.LSTM/GRU eagerly unless this is set; torch2xla sets it when
# its backend loads. Set here for every mode, so that inductor compiles the same frames.
torch._dynamo.config.allow_rnn = True

MODES = ("eager", "inductor", "xla")


def one_thread(cpu: int | None = None) -> None:
    """torch and XLA on one thread; with ``cpu``, the process is pinned to that core too."""
    torch.set_num_threads(1)
    if cpu is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {cpu})


def allow_tf32() -> None:
    """fp32 as the GPU benchmarks run it in every mode: TF32 allowed for matmuls and
    convolutions (torch's default is full float32 matmuls, which XLA also compiles far more
    slowly: ViT-B/16's first training step took 86 s on an H100)."""
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    torch.set_float32_matmul_precision("high")


def compile_fn(fn: Callable, backend: str, **kw) -> Callable:
    """``fn`` as the benchmark runs it with ``backend`` (eager, inductor or xla); ``kw`` go to
    ``torch.compile`` (its ``mode=``, ``options=``)."""
    if backend == "eager":
        return fn
    return torch.compile(fn, backend=backend, **kw)


def llama1b_config(tiny: bool = False):
    """transformers' ``LlamaConfig`` at Llama-3.2-1B's shapes (hidden 2048, 16 layers, MLP
    8192, 32 heads with 8 KV heads, vocabulary 128256, tied embeddings: 1.24B parameters), or
    with ``tiny`` a 2-layer one of the same structure for the CPU."""
    import transformers

    if tiny:
        return transformers.LlamaConfig(
            num_hidden_layers=2,
            hidden_size=64,
            intermediate_size=128,
            num_attention_heads=4,
            num_key_value_heads=2,
            vocab_size=128,
            max_position_embeddings=256,
            tie_word_embeddings=True,
        )
    return transformers.LlamaConfig(
        num_hidden_layers=16,
        hidden_size=2048,
        intermediate_size=8192,
        num_attention_heads=32,
        num_key_value_heads=8,
        vocab_size=128256,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        rope_theta=500000.0,
    )


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def time_calls(
    step: Callable[[], object], n: int, device: str = "cpu", clock=time.perf_counter
) -> float:
    """Seconds per call of ``step`` over ``n`` back-to-back calls (device work included);
    ``clock``: ``time.process_time`` counts the process's CPU time only, which other
    processes' load changes less than the wall clock (on a CPU device)."""
    sync(device)
    t0 = clock()
    out = None
    for _ in range(n):
        out = step()
    sync(device)
    if hasattr(out, "block_until_ready"):  # (a JAX step: torch's sync does not wait for JAX)
        out.block_until_ready()
    return (clock() - t0) / n


def interleaved(
    steps: dict[str, Callable[[], object]],
    rounds: int,
    n: int,
    device: str = "cpu",
    seed: int = 0,
    clock=time.perf_counter,
) -> dict[str, list[float]]:
    """Per-call seconds of each step, ``rounds`` times, the order shuffled every round so that
    load from other processes falls on all modes alike."""
    rng = random.Random(seed)
    names = list(steps)
    times: dict[str, list[float]] = {k: [] for k in names}
    for _ in range(rounds):
        rng.shuffle(names)
        for name in names:
            times[name].append(time_calls(steps[name], n, device, clock))
    return times


def summary(samples: Sequence[float]) -> dict[str, float]:
    """Median and spread (interquartile range, min, max) of per-call times."""
    s = sorted(samples)
    q = statistics.quantiles(s, n=4) if len(s) >= 2 else [s[0]] * 3
    return {"median": statistics.median(s), "q1": q[0], "q3": q[2], "min": s[0], "max": s[-1]}


def kernel_us(events) -> float:
    """The device's busy time (us) in a profile's ``key_averages()``: the rows of the device's
    own events (kernels, copies, sets) only. The rows of torch ops and of the runtime's launch
    calls (``cudaLaunchKernel``, ``cuGraphLaunch``) repeat the device time of what they
    launched, so summing every row's ``device_time_total`` counted it twice or more
    (ResNet-50's training step read 88 ms of kernels in a 21 ms step)."""
    cpu = torch.autograd.DeviceType.CPU
    return sum(e.self_device_time_total for e in events if e.device_type != cpu)


def machine() -> dict[str, str]:
    """What the numbers were measured on."""
    import jax

    info = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "jax": jax.__version__,
        "cpu": _cpu_name(),
        "cores": str(os.cpu_count()),
        "load_average": " ".join(f"{x:.2f}" for x in os.getloadavg()),
    }
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name()
    if "TORCH2XLA_COMMIT" in os.environ:  # where the tree travels without .git (GPU machine)
        info["torch2xla_commit"] = os.environ["TORCH2XLA_COMMIT"]
        return info
    try:
        info["torch2xla_commit"] = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        info["torch2xla_commit"] = "unknown"
    return info


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:  # no /proc (not Linux): fall back to what platform knows
        return platform.processor() or "unknown"
    return platform.processor() or "unknown"
