"""Probe (session 28): ops along a dimension whose size changes between calls (Dynamo makes it
dynamic, torch2xla pads it to buckets), each call compared with eager: values, dtypes, shapes.
Prints the mismatches; exit status 1 if any. Usage: python scripts/probe_buckets28.py [name ...]
"""

from __future__ import annotations

import sys
import warnings

import torch
import torch.nn.functional as F

import torch2xla

SIZES = (3, 5, 6, 7, 9, 12, 17, 33)

FNS = {
    "sum": lambda x: x.sum(0),
    "mean": lambda x: x.mean(0),
    "var": lambda x: x.var(0),
    "std1": lambda x: x.std(1, correction=0),
    "prod": lambda x: x.prod(0),
    "amax": lambda x: x.amax(0),
    "amin_neg": lambda x: (-x.abs()).amin(0),
    "argmax": lambda x: x.argmax(0),
    "argmin": lambda x: x.argmin(0),
    "logsumexp": lambda x: x.logsumexp(0),
    "softmax": lambda x: x.softmax(0),
    "log_softmax": lambda x: x.log_softmax(0),
    "cumsum": lambda x: x.cumsum(0),
    "cumprod": lambda x: x.cumprod(0),
    "cummax": lambda x: x.cummax(0).values,
    "sort": lambda x: x.sort(0).values,
    "argsort": lambda x: x.argsort(0, stable=True),
    "topk": lambda x: x.topk(2, 0).values,
    "flip": lambda x: x.flip(0),
    "roll": lambda x: x.roll(1, 0),
    "median": lambda x: x.median(0).values,
    "norm": lambda x: x.norm(dim=0),
    "layer_norm_T": lambda x: F.layer_norm(x.T, (x.shape[0],)),
    "normalize": lambda x: F.normalize(x, dim=0),
    "last_row": lambda x: x[-1] * 2,
    "middle_row": lambda x: x[x.shape[0] // 2] + 1,
    "diff": lambda x: x.diff(dim=0),
    "gram": lambda x: x @ x.T,
    "cov": lambda x: x.T @ x / x.shape[0],
    "tril": lambda x: (x @ x.T).tril(),
    "causal_softmax": lambda x: (
        (x @ x.T)
        .masked_fill(torch.ones(x.shape[0], x.shape[0], dtype=torch.bool).triu(1), float("-inf"))
        .softmax(-1)
    ),
    "attention": lambda x: F.scaled_dot_product_attention(
        x[None, None], x[None, None], x[None, None]
    )[0, 0],
    "attention_causal": lambda x: F.scaled_dot_product_attention(
        x[None, None], x[None, None], x[None, None], is_causal=True
    )[0, 0],
    "conv1d": lambda x: F.conv1d(x.T[None], torch.ones(2, 4, 3) / 7, padding=1)[0],
    "max_pool1d": lambda x: F.max_pool1d(x.T[None], 2, ceil_mode=True)[0],
    "avg_pool1d": lambda x: F.avg_pool1d(
        x.T[None], 3, stride=2, padding=1, count_include_pad=False
    )[0],
    "adaptive_avg": lambda x: F.adaptive_avg_pool1d(x.T[None], 3)[0],
    "interpolate": lambda x: F.interpolate(x.T[None], scale_factor=2, mode="linear")[0],
    "pad_reflect": lambda x: F.pad(x.T[None], (2, 2), mode="reflect")[0],
    "any": lambda x: (x > 1.5).any(0),
    "all": lambda x: (x > -3).all(0),
    "count_nonzero": lambda x: (x > 0).count_nonzero(0),
    "cat_self": lambda x: torch.cat([x, x.flip(0)]).cumsum(0),
    "arange_len": lambda x: x * torch.arange(x.shape[0])[:, None],
    "linspace_len": lambda x: x * torch.linspace(0, 1, x.shape[0])[:, None],
    "cross_entropy_classes": lambda x: F.cross_entropy(x.T, torch.zeros(4, dtype=torch.long)),
    "nll_rows": lambda x: F.cross_entropy(x, torch.arange(x.shape[0]) % 4),
    "mean_int": lambda x: (x * 10).long().sum(0) // x.shape[0],
    "std_mean": lambda x: torch.std_mean(x, 0)[0],
    "max_with_index": lambda x: x.max(0).indices,
    "min_reduce_all": lambda x: x.min(),
    "unbind_sum": lambda x: sum(x.unbind(1)),
    "cdist": lambda x: torch.cdist(x, x),
    "einsum": lambda x: torch.einsum("ij,ik->jk", x, x),
    "kthvalue": lambda x: x.kthvalue(1, 0).values,
    "embedding_bag_mean": lambda x: F.embedding_bag(
        torch.arange(x.shape[0]) % 4, x.T.contiguous(), torch.tensor([0]), mode="mean"
    ),
    "scatter_add": lambda x: torch.zeros(4, 4).scatter_add(
        0, (torch.arange(x.shape[0]) % 4)[:, None].expand(-1, 4), x
    ),
    "index_add": lambda x: torch.zeros(5, 4).index_add(0, torch.arange(x.shape[0]) % 5, x),
    "gather_last": lambda x: x.gather(0, torch.full((1, 4), x.shape[0] - 1)),
    "bincount": lambda x: torch.bincount(torch.arange(x.shape[0]) % 3, minlength=3),
    "histc": lambda x: torch.histc(x, bins=5, min=-2, max=2),
    "quantile": lambda x: torch.quantile(x, 0.3, dim=0),
    "nanmean": lambda x: x.masked_fill(x > 1, float("nan")).nanmean(0),
    "nansum": lambda x: x.masked_fill(x > 1, float("nan")).nansum(0),
    "logcumsumexp": lambda x: x.logcumsumexp(0),
    "var_unbiased_rows": lambda x: x.T.var(1),
    "mse_loss": lambda x: F.mse_loss(x, torch.zeros_like(x)),
    "batch_norm_train": lambda x: F.batch_norm(x, None, None, training=True),
    "instance_norm": lambda x: F.instance_norm(x.T[None]),
    "group_norm": lambda x: F.group_norm(x.T[None], 2),
    "repeat_interleave": lambda x: x.repeat_interleave(2, 0).sum(0),
    "unfold": lambda x: x.unfold(0, 2, 1).sum(-1),
    "stft_like_frames": lambda x: x[:, 0].unfold(0, 3, 2).mean(-1),
}


def _same(a, b) -> str | None:
    if isinstance(a, tuple | list):
        for i, (p, q) in enumerate(zip(a, b)):
            r = _same(p, q)
            if r:
                return f"[{i}] {r}"
        return None
    if a.dtype != b.dtype or a.shape != b.shape:
        return f"{a.dtype}{tuple(a.shape)} vs eager {b.dtype}{tuple(b.shape)}"
    if a.is_floating_point():
        if not torch.allclose(a, b, rtol=1e-4, atol=1e-5, equal_nan=True):
            return f"max diff {(a - b).abs().nan_to_num(0).max().item():.3g}"
        return None
    if not torch.equal(a, b):
        return f"values differ: {a.flatten()[:6].tolist()} vs {b.flatten()[:6].tolist()}"
    return None


def main() -> int:
    names = sys.argv[1:] or list(FNS)
    bad = 0
    for name in names:
        fn = FNS[name]
        torch._dynamo.reset()
        compiled = torch.compile(fn, backend="xla")
        problems = []
        for n in SIZES:
            x = torch.randn(n, 4, generator=torch.Generator().manual_seed(n))
            try:
                want = fn(x.clone())
            except Exception as e:  # noqa: BLE001 (eager's error is the expected outcome)
                want = e
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", torch2xla.FallbackWarning)
                    got = compiled(x.clone())
            except Exception as e:  # noqa: BLE001 (compared with eager's outcome)
                got = e
            if isinstance(want, Exception) or isinstance(got, Exception):
                if type(want) is not type(got):
                    problems.append(f"n={n}: eager {want!r:.80} / ours {got!r:.80}")
                continue
            r = _same(got, want)
            if r:
                problems.append(f"n={n}: {r}")
        bad += bool(problems)
        print(
            ("FAIL " if problems else "ok   ") + name + "".join("\n     " + p for p in problems),
            flush=True,
        )
    print(f"{bad} mismatching function(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
