"""Issue 9: DDP, functional collectives and FSDP2 over gloo, 2 processes spawned by the test."""

import os
import socket

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from tests._dist_worker import SCENARIOS, worker

pytestmark = [
    pytest.mark.skipif(not dist.is_available(), reason="torch.distributed unavailable"),
    # (one xdist worker runs the module: its fixture spawns and compiles every scenario, ~60 s,
    # once instead of once per worker; README's command distributes with --dist loadgroup)
    pytest.mark.xdist_group("distributed"),
]

# T2X_DIST_DEVICE=cuda runs the same scenarios with NCCL on 2 GPUs (see docs/gpu.md).
DEVICE = os.environ.get("T2X_DIST_DEVICE", "cpu")
if DEVICE == "cuda" and torch.cuda.device_count() < 2:
    pytest.skip("T2X_DIST_DEVICE=cuda needs 2 GPUs", allow_module_level=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def results():
    """Runs every scenario once in 2 spawned processes (one startup for all tests)."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    port = _free_port()
    procs = [
        ctx.Process(target=worker, args=(r, 2, port, list(SCENARIOS), queue, DEVICE))
        for r in range(2)
    ]
    for p in procs:
        p.start()
    out = {}
    for _ in range(2 * len(SCENARIOS)):
        rank, name, status, value = queue.get(timeout=400)
        out[(rank, name)] = (status, value)
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    return out


def _get(results, rank, name):
    status, value = results[(rank, name)]
    assert status == "ok", value
    return value


@pytest.mark.parametrize("rank", [0, 1])
@pytest.mark.parametrize("variant", ["compile_ddp", "ddp_compile"])
def test_ddp_matches_eager_ddp(results, rank, variant):
    losses, param_diff = _get(results, rank, "ddp")[variant]
    for loss, ref in losses:
        assert abs(loss - ref) <= 1e-5 * max(1.0, abs(ref))
    assert param_diff < 1e-5


def test_ddp_ranks_agree(results):
    # After all-reduced steps the losses differ per rank (different data) but the replicas agree.
    l0, d0 = _get(results, 0, "ddp")["compile_ddp"]
    l1, d1 = _get(results, 1, "ddp")["compile_ddp"]
    assert l0 != l1 and d0 < 1e-5 and d1 < 1e-5


@pytest.mark.parametrize("rank", [0, 1])
def test_ddp_buckets_split_graph_and_match(results, rank):
    losses, param_diff, programs = _get(results, rank, "buckets")
    assert programs >= 2, "Dynamo's DDP optimizer should split the graph at bucket boundaries"
    for loss, ref in losses:
        assert abs(loss - ref) <= 1e-5 * max(1.0, abs(ref))
    assert param_diff < 1e-5


@pytest.mark.parametrize("rank", [0, 1])
def test_ddp_buckets_ready_before_the_backward_ends(results, rank):
    losses, param_diff, steps = _get(results, rank, "overlap")
    for loss, ref in losses:
        assert abs(loss - ref) <= 1e-5 * max(1.0, abs(ref))
    assert param_diff < 1e-5
    # a bucket is all-reduced while segments of the backward are still to run (from the
    # second step: DDP's first puts this model in one bucket of 1 MB, then rebuilds them in
    # the order that step's gradients came in)
    for at_bucket, total in steps[1:]:
        assert len(at_bucket) >= 2 and total >= 3, steps
        assert min(at_bucket) < total, steps


@pytest.mark.parametrize("rank", [0, 1])
def test_functional_collectives_in_graph(results, rank):
    assert _get(results, rank, "collectives") == 0.0


@pytest.mark.parametrize("rank", [0, 1])
def test_fsdp2_blocks_compiled_with_xla(results, rank):
    diffs = _get(results, rank, "fsdp2")
    assert max(diffs) < 1e-5, diffs


@pytest.mark.parametrize("rank", [0, 1])
@pytest.mark.parametrize("how", ["compile_ddp", "ddp_compile", "fsdp2"])
def test_gpt2_matches_eager_ddp(results, rank, how):
    """Issue 28.1: GPT-2 (124M with bf16 autocast over 20 steps on 2 GPUs; a 1-layer one in
    float32 on CPU/gloo) gives eager DDP's losses at every step."""
    out = _get(results, rank, "gpt2")
    ref, got = out["eager_ddp"], out[how]
    assert len(got) == len(ref)
    if out["dtype"] == "torch.bfloat16":
        # bf16's tolerance is measured, not chosen: the largest step-wise distance between eager
        # DDP in bf16 and in float32 (what rounding to bf16 alone does to these losses)
        bf16_noise = max(abs(a - b) for a, b in zip(ref, out["eager_ddp_fp32"]))
        bound = 2 * bf16_noise + 1e-3
    else:
        bound = 1e-4
    diffs = [abs(a - b) for a, b in zip(got, ref)]
    assert max(diffs) <= bound, (how, diffs, bound, got, ref)
