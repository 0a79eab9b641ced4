"""Worker for tests/test_distributed.py: runs in each of the spawned gloo processes."""

from __future__ import annotations

import copy
import datetime
import os
import warnings

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as fc
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

# "cpu" (gloo) by default; tests/test_distributed.py sets "cuda" (NCCL) on a 2-GPU machine.
DEVICE = torch.device("cpu")


def _max_diff(a, b) -> float:
    return max((x - y).abs().max().item() for x, y in zip(a, b))


def _train(model, ref, steps, rank, compile_outer, optim=torch.optim.AdamW):
    # AdamW turns float-rounding differences of near-zero gradients into +-lr steps; tests of
    # wide layers use SGD so parameters can be compared tightly.
    opt = optim(model.parameters(), lr=1e-2)
    ref_opt = optim(ref.parameters(), lr=1e-2)
    run = torch.compile(model, backend="xla") if compile_outer else model
    gen = torch.Generator().manual_seed(100 + rank)
    losses = []
    for _ in range(steps):
        x, y = torch.randn(8, 64, generator=gen), torch.randn(8, 8, generator=gen)
        x, y = x.to(DEVICE), y.to(DEVICE)
        loss = nn.functional.mse_loss(run(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        ref_loss = nn.functional.mse_loss(ref(x), y)
        ref_loss.backward()
        ref_opt.step()
        ref_opt.zero_grad()
        losses.append((loss.item(), ref_loss.item()))
    return losses, _max_diff(model.parameters(), ref.parameters())


class _Net(nn.Module):
    # A user-defined module: Dynamo compiles its forward frame under DDP (a bare nn.Sequential
    # frame lives in torch's own files, which Dynamo skips when DDP calls it).
    def __init__(self, width: int) -> None:
        super().__init__()
        self.fc1, self.fc2, self.fc3 = (
            nn.Linear(64, width),
            nn.Linear(width, width),
            nn.Linear(width, 8),
        )

    def forward(self, x):
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


def _net(width=64):
    return _Net(width).to(DEVICE)


def scenario_ddp(rank):
    torch.manual_seed(0)
    base = _net()
    out = {}
    # torch.compile(DDP(model))
    ref = DDP(copy.deepcopy(base))
    out["compile_ddp"] = _train(DDP(copy.deepcopy(base)), ref, 3, rank, compile_outer=True)
    # DDP(torch.compile(model))
    ref = DDP(copy.deepcopy(base))
    inner = torch.compile(copy.deepcopy(base), backend="xla")
    out["ddp_compile"] = _train(DDP(inner), ref, 3, rank, compile_outer=False)
    return out


def scenario_buckets(rank):
    """Big enough for several DDP buckets: Dynamo splits the graph at bucket boundaries."""
    from torch2xla.runtime import _program

    built = []
    original = _program.XlaProgram.__init__

    def counting(self, *a, **k):
        built.append(1)
        original(self, *a, **k)

    _program.XlaProgram.__init__ = counting
    try:
        torch.manual_seed(0)
        base = _net(width=640)  # ~1.6 MB per hidden layer, buckets of 1 MB
        ref = DDP(copy.deepcopy(base), bucket_cap_mb=1)
        model = DDP(copy.deepcopy(base), bucket_cap_mb=1)
        losses, diff = _train(model, ref, 2, rank, compile_outer=True, optim=torch.optim.SGD)
    finally:
        _program.XlaProgram.__init__ = original
    return losses, diff, len(built)


class _Deep(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList(
            [nn.Linear(64, 256), nn.Linear(256, 256), nn.Linear(256, 256), nn.Linear(256, 8)]
        )

    def forward(self, x):
        for layer in self.layers[:-1]:
            x = torch.tanh(layer(x))
        return self.layers[-1](x)


def scenario_overlap(rank):
    """DDP(torch.compile(model)) with a split backward: DDP's buckets are all-reduced as the
    segments computing their gradients end, before the backward's last segment runs (issue
    28.2); the losses and parameters those of eager DDP. Dynamo's DDP optimizer is off: the
    model is one graph (it would split it at the buckets, each graph a backward of its own)."""
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

    from torch2xla.autodiff import _split

    ran: list[int] = []
    original = _split._Program.__call__

    def counting(self, args):
        out = original(self, args)
        ran.append(1)
        return out

    _split._Program.__call__ = counting
    optimize_ddp = torch._dynamo.config.optimize_ddp
    torch._dynamo.config.optimize_ddp = False
    try:
        torch.manual_seed(0)
        base = _Deep().to(DEVICE)  # ~260 KB per hidden layer, buckets of 0.25 MB
        ref = DDP(copy.deepcopy(base), bucket_cap_mb=0.25)
        inner = torch.compile(copy.deepcopy(base), backend="xla", options={"split_backward": 0.002})
        model = DDP(inner, bucket_cap_mb=0.25)
        at_bucket: list[int] = []

        def hook(state, bucket):
            at_bucket.append(len(ran))
            return allreduce_hook(state, bucket)

        model.register_comm_hook(None, hook)
        steps = []
        opt, ref_opt = (torch.optim.SGD(m.parameters(), lr=1e-2) for m in (model, ref))
        gen = torch.Generator().manual_seed(100 + rank)
        losses = []
        for _ in range(4):
            x, y = torch.randn(8, 64, generator=gen), torch.randn(8, 8, generator=gen)
            x, y = x.to(DEVICE), y.to(DEVICE)
            ran.clear()
            at_bucket.clear()
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            steps.append((list(at_bucket), len(ran)))
            ref_loss = nn.functional.mse_loss(ref(x), y)
            ref_loss.backward()
            for o in (opt, ref_opt):
                o.step()
                o.zero_grad()
            losses.append((loss.item(), ref_loss.item()))
    finally:
        _split._Program.__call__ = original
        torch._dynamo.config.optimize_ddp = optimize_ddp
    return losses, _max_diff(model.parameters(), ref.parameters()), steps


def scenario_collectives(rank):
    def f(x):
        y = fc.all_reduce(x * 2, "sum", dist.group.WORLD)
        z = fc.all_gather_tensor(y + 1, 0, dist.group.WORLD)
        return z.sin() + fc.all_reduce(z, "max", dist.group.WORLD)

    x = (torch.arange(4.0) + rank).to(DEVICE)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # collectives run in eager by design: no fallback warning
        out = torch.compile(f, backend="xla", options={"strict": True})(x)
    return _max_diff([out], [f(x)])


def scenario_fsdp2(rank):
    from torch.distributed.fsdp import fully_shard

    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 8)
    )
    model = model.to(DEVICE)
    ref = copy.deepcopy(model)
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer)
            layer.compile(backend="xla")
    fully_shard(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    diffs = []
    for step in range(2):
        # Every rank sees the same batch here, so the eager single-process reference matches.
        x = torch.randn(4, 8, generator=torch.Generator().manual_seed(step)).to(DEVICE)
        out = model(x)
        out.square().mean().backward()
        opt.step()
        opt.zero_grad()
        r = ref(x)
        r.square().mean().backward()
        ref_opt.step()
        ref_opt.zero_grad()
        diffs.append((out - r).abs().max().item())
    full = [p.full_tensor() for p in model.parameters()]
    diffs.append(_max_diff(full, list(ref.parameters())))
    return diffs


def _gpt2_config():
    """GPT-2 124M (transformers' config) on CUDA; a 1-layer model of the same architecture on
    the CPU (a second layer doubled the compiles' ~60 s on CI's 2 cores and checked nothing
    more: scenario_fsdp2 shards and compiles several blocks). Dropout off, so every mode draws
    nothing and losses can be compared step by step."""
    from transformers import GPT2Config

    small = (
        {}
        if DEVICE.type == "cuda"
        else {"n_layer": 1, "n_embd": 64, "n_head": 4, "vocab_size": 512}
    )
    return GPT2Config(resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False, **small)


def _gpt2_losses(rank, how: str, steps: int, dtype) -> list[float]:
    """Trains GPT-2 with its own ``labels=`` loss and AdamW for ``steps`` steps on rank-specific
    data, wrapped as ``how`` says: eager DDP, ``torch.compile(DDP(m))``, ``DDP(torch.compile(m))``
    or FSDP2 (``fully_shard`` per block, each block compiled). Returns the losses."""
    from transformers import GPT2LMHeadModel

    torch.manual_seed(0)
    model = GPT2LMHeadModel(_gpt2_config()).to(DEVICE)
    ids_on = [DEVICE.index] if DEVICE.type == "cuda" else None
    if how == "eager_ddp":
        run = DDP(model, device_ids=ids_on)
    elif how == "compile_ddp":
        run = torch.compile(DDP(model, device_ids=ids_on), backend="xla")
    elif how == "ddp_compile":
        run = DDP(torch.compile(model, backend="xla"), device_ids=ids_on)
    elif how == "fsdp2":
        from torch.distributed.fsdp import fully_shard

        for block in model.transformer.h:
            fully_shard(block)
            block.compile(backend="xla")
        run = fully_shard(model)
    else:
        raise ValueError(how)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator().manual_seed(100 + rank)
    batch, length = (4, 256) if DEVICE.type == "cuda" else (2, 32)
    vocab = model.config.vocab_size
    losses = []
    for _ in range(steps):
        ids = torch.randint(0, vocab, (batch, length), generator=gen).to(DEVICE)
        with torch.autocast(DEVICE.type, dtype=dtype, enabled=dtype != torch.float32):
            loss = run(ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
    return losses


def scenario_gpt2(rank):
    """Issue 28.1: GPT-2 trained under DDP (both ways of compiling) and FSDP2 with compiled
    blocks, against eager DDP. On CUDA: GPT-2 124M, bf16 autocast, 20 steps; eager DDP in
    float32 too, which measures how far bf16 itself moves the losses (the tolerance)."""
    cuda = DEVICE.type == "cuda"
    steps, dtype = (20, torch.bfloat16) if cuda else (3, torch.float32)
    out = {"dtype": str(dtype)}
    for how in ("eager_ddp", "compile_ddp", "ddp_compile", "fsdp2"):
        torch._dynamo.reset()
        out[how] = _gpt2_losses(rank, how, steps, dtype)
    if cuda:
        out["eager_ddp_fp32"] = _gpt2_losses(rank, "eager_ddp", steps, torch.float32)
    return out


SCENARIOS = {
    "ddp": scenario_ddp,
    "buckets": scenario_buckets,
    "overlap": scenario_overlap,
    "collectives": scenario_collectives,
    "fsdp2": scenario_fsdp2,
    "gpt2": scenario_gpt2,
}


def worker(rank: int, world: int, port: int, names: list[str], queue, device: str = "cpu") -> None:
    global DEVICE
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    if device == "cuda":
        torch.cuda.set_device(rank)
        DEVICE = torch.device("cuda", rank)
    # A timeout turns a rank stuck in a collective (its peer failed) into an error, not a hang.
    dist.init_process_group(
        "nccl" if device == "cuda" else "gloo",
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=120),
    )
    try:
        for name in names:
            torch._dynamo.reset()
            try:
                queue.put((rank, name, "ok", SCENARIOS[name](rank)))
            except Exception as e:  # reported to the test, which fails with the message
                import traceback

                queue.put(
                    (rank, name, "error", f"{type(e).__name__}: {e}\n{traceback.format_exc()}")
                )
    finally:
        dist.destroy_process_group()
