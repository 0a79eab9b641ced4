"""Data-parallel training with DDP on top of backend="xla".

    torchrun --nproc-per-node 2 examples/ddp_train.py          # CPU (gloo) or GPU (NCCL)
    torchrun --nproc-per-node 2 examples/ddp_train.py --steps 50
    python scripts/multinode_sim.py OUT_DIR      # two torchrun "nodes" of one process each

Each rank trains the same GPT-2-style model on its own synthetic batches; DDP all-reduces the
gradients that torch2xla's backward produces. Rank 0 prints loss and step time.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


class Block(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, -1).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(B, T, C))
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(
        self, vocab: int = 512, d: int = 128, heads: int = 4, layers: int = 2, seq: int = 64
    ) -> None:
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(seq, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument(
        "--backend", default="xla", help="torch.compile backend, or 'none' for eager"
    )
    parser.add_argument(
        "--record", default=None, help="rank 0 writes every loss and a parameter digest here"
    )
    args = parser.parse_args()

    use_cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if use_cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = (
        torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        if use_cuda
        else torch.device("cpu")
    )
    if use_cuda:
        torch.cuda.set_device(device)

    torch.manual_seed(0)  # same initial weights on every rank
    model = DDP(GPT().to(device), device_ids=[device.index] if use_cuda else None)
    step_fn = model if args.backend == "none" else torch.compile(model, backend=args.backend)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    gen = torch.Generator(device=device).manual_seed(1000 + rank)  # each rank its own data

    times, losses = [], []
    for step in range(args.steps):
        idx = torch.randint(0, 512, (args.batch, 64), device=device, generator=gen)
        start = time.perf_counter()
        logits = step_fn(idx[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), idx[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if use_cuda:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
        losses.append(loss.item())
        if rank == 0 and (step % 5 == 0 or step == args.steps - 1):
            print(f"step {step:3d}  loss {loss.item():.4f}  step time {times[-1] * 1e3:.1f} ms")
    if rank == 0:
        steady = sorted(times[len(times) // 2 :])
        print(
            f"world {world}, backend {args.backend}: median steady step "
            f"{steady[len(steady) // 2] * 1e3:.1f} ms (log(vocab) = {math.log(512):.2f})"
        )
        if args.record:
            with torch.no_grad():
                digest = [p.double().sum().item() for p in model.parameters()]
            with open(args.record, "w") as f:
                json.dump({"world": world, "losses": losses, "param_sums": digest}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
