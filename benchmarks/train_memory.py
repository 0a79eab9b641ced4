"""What a training step keeps from forward to backward, eager against xla, without a GPU.

    python benchmarks/train_memory.py [--case gpt] [--top 12] [--json PATH]
    python benchmarks/train_memory.py --device cuda --case gpt2 [--dtype bf16]

For one case of ``benchmarks/models.py`` it reports:

- eager: the bytes autograd saves for the backward (``saved_tensors_hooks``; each storage
  counted once, parameters and inputs left out: they exist anyway);
- xla: the residuals the forward program hands to the backward (the leaves of the vjp closure,
  each buffer counted once, those that alias an input left out), and which JAX primitive made
  the largest of them (from the forward's jaxpr);
- XLA's own memory analysis of the compiled forward and backward programs (arguments,
  temporaries, outputs, and the bytes donated inputs give back to outputs), for the backward
  as a retained graph runs it (nothing donated) and as a freed graph does (residuals donated).

On CUDA it also measures a step's peak (SGD with momentum, as the suite's step) in eager and
in xla, the latter split into torch's allocator and JAX's pool, each peak taken above what was
allocated before the step, so that XLA's programs can be set against the whole step.

Run it before and after a change to see what the change saves.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import _common  # noqa: I001  (configures torch and XLA for one thread before they load)
import torch

import models
from torch2xla.runtime._jax_scope import x64

MiB = 2**20


DEVICE = "cpu"
AUTOCAST = contextlib.nullcontext


def _build(case: str):
    """A case of ``benchmarks/models.py`` on ``DEVICE``, or a 2-layer cut of a GPU case
    (``gpt2-2l``, ``bert-2l``: the GPU case's width and sequence length, batch 2, two layers;
    ``gpt2lm-2l``: ``gpt2-lm``, likewise cut)."""
    if case == "gpt2lm-2l":  # as users train it: default dropout, transformers' own loss
        from transformers import GPT2Config, GPT2LMHeadModel

        torch.manual_seed(0)
        model = GPT2LMHeadModel(GPT2Config(n_layer=2, use_cache=False)).to(DEVICE)
        ids = models._tokens(50257, (2, 512), DEVICE)
        return model, (ids,), models.OwnLoss(labels=ids)
    if case in ("gpt2-2l", "bert-2l"):
        from transformers import BertConfig, BertModel, GPT2Config, GPT2LMHeadModel

        torch.manual_seed(0)
        if case == "gpt2-2l":
            config = GPT2Config(
                n_layer=2, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False
            )
            model, shape = GPT2LMHeadModel(config), (2, 512)
            loss_fn = models._lm(config.vocab_size, shape, DEVICE)
        else:
            config = BertConfig(
                num_hidden_layers=2, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0
            )
            model, shape = BertModel(config, add_pooling_layer=False), (8, 128)
            loss_fn = models._mean_square
        model = model.to(DEVICE)
        return model, (models._tokens(config.vocab_size, shape, DEVICE),), loss_fn
    return models.build(case, DEVICE)


def _kw(loss_fn) -> dict:
    """The training call's keyword arguments (a model's own loss takes its labels)."""
    return getattr(loss_fn, "kwargs", {})


def eager_saved(case: str) -> dict:
    """Bytes eager autograd saves for the backward of one forward and loss."""
    model, inputs, loss_fn = _build(case)
    model.train()
    exclude = {p.untyped_storage().data_ptr() for p in model.parameters()}
    exclude |= {x.untyped_storage().data_ptr() for x in inputs}
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        if storage.data_ptr() not in exclude:
            seen[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), AUTOCAST():
        loss = loss_fn(model(*inputs, **_kw(loss_fn)))
    del loss
    return {"saved_MiB": sum(seen.values()) / MiB, "tensors": len(seen)}


def xla_residuals(case: str, top: int) -> dict:
    """The residuals of the xla forward program, and XLA's memory analysis of both programs."""
    import jax

    model, inputs, loss_fn = _build(case)
    model.train()
    compiled = torch.compile(model, backend="xla", options={"strict": True})
    with AUTOCAST():
        loss_fn(compiled(*inputs, **_kw(loss_fn))).backward()  # compile forward and backward
        recorded: list = []
        node = _xla_node(compiled(*inputs, **_kw(loss_fn)))
    fns = node.fns
    original = fns.fwd

    def recording(*a):
        recorded.append(a)
        return original(*a)

    fns.fwd = recording
    with AUTOCAST():
        out = compiled(*inputs, **_kw(loss_fn))
    fns.fwd = original
    node = _xla_node(out)
    _seed, diff, rest = recorded[0]
    input_ptrs = {_ptr(x) for x in (*diff, *rest) if hasattr(x, "unsafe_buffer_pointer")}
    input_ptrs |= {x.ctypes.data for x in (*diff, *rest) if hasattr(x, "ctypes")}
    forward = getattr(original, "jitted", original)  # unwrapped from the program's AOT caller
    res = node.vjp_fn
    if hasattr(res, "kept"):  # torch2xla.autodiff._residuals: computed arrays + inputs (not copies)
        leaves, jitted = res.kept, forward._jitted
        aliased_inputs = sum(x.nbytes for x in res.inputs if hasattr(x, "nbytes"))
    else:
        leaves, jitted = jax.tree_util.tree_leaves(res), forward
        aliased_inputs = 0
    own: dict[int, int] = {}
    aliased = aliased_inputs
    for leaf in leaves:
        p = _ptr(leaf)
        if p in input_ptrs:
            aliased += leaf.nbytes
        else:
            own[p] = leaf.nbytes
    census = _census(jitted, recorded[0], leaves, input_ptrs, top)
    cts = [jax.ShapeDtypeStruct(shape, dtype) for shape, dtype in node.diff_meta]
    with x64():
        fwd_mem = forward.trace(*recorded[0]).lower().compile().memory_analysis()
        programs = {"forward": _analysis(fwd_mem)}
        for name, donate in (("backward (retained)", False), ("backward (freed)", True)):
            lowered = _lower_backward(fns, node.vjp_fn, cts, donate)
            if lowered is not None:
                programs[name] = _analysis(lowered.compile().memory_analysis())
    return {
        "residual_MiB": sum(own.values()) / MiB,
        "residual_buffers": len(own),
        "aliasing_inputs_MiB": aliased / MiB,
        "programs": programs,
        "largest": census,
    }


def step_peaks(case: str, options: dict | None = None) -> dict:
    """CUDA: the peak of one training step (zero_grad, forward, loss, backward, SGD with
    momentum) above what was allocated before it, eager's and xla's (torch's allocator and
    JAX's pool apart). JAX's peak cannot be reset, so xla runs first; its compilations' scratch
    may be in JAX's peak (an upper bound: run with a warm ``JAX_COMPILATION_CACHE_DIR`` to leave
    it out). ``options`` go to xla."""
    out = {}
    for mode in ("xla", "eager"):
        out[mode] = _step_peak(case, mode, options)
        torch._dynamo.reset()
        torch.cuda.empty_cache()
    return out


def _step_peak(case: str, mode: str, options: dict | None) -> dict:
    import jax

    model, inputs, loss_fn = _build(case)
    model.train()
    fn = torch.compile(model, backend="xla", options=options) if mode == "xla" else model
    opt = torch.optim.SGD(model.parameters(), lr=1e-4, momentum=0.9)

    def step():
        opt.zero_grad(set_to_none=True)
        with AUTOCAST():
            loss = loss_fn(fn(*inputs, **_kw(loss_fn)))
        loss.backward()
        opt.step()

    step(), step()
    torch.cuda.synchronize()
    stats = jax.devices()[0].memory_stats() or {}
    jax_before, jax_peak_before = stats.get("bytes_in_use", 0), stats.get("peak_bytes_in_use", 0)
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    step()
    torch.cuda.synchronize()
    stats = jax.devices()[0].memory_stats() or {}
    entry = {
        "torch_before_MiB": before / MiB,
        "torch_step_peak_MiB": (torch.cuda.max_memory_allocated() - before) / MiB,
    }
    if mode == "xla":
        entry["jax_before_MiB"] = jax_before / MiB
        entry["jax_step_peak_MiB"] = (stats.get("peak_bytes_in_use", 0) - jax_before) / MiB
        entry["jax_peak_set_before_step"] = stats.get("peak_bytes_in_use", 0) == jax_peak_before
    return entry


def split_profile(case: str, options: dict | None = None) -> list[dict]:
    """The split backward of a case (``torch2xla/autodiff/_split.py``), segment by segment
    (``SplitBackward.profile``); empty where the backward runs as one program."""
    model, inputs, loss_fn = _build(case)
    model.train()
    compiled = torch.compile(model, backend="xla", options=options)
    for _ in range(2):
        with AUTOCAST():
            out = compiled(*inputs)
            loss = loss_fn(out)
        node = _xla_node(out)
        loss.backward()
    split = node.fns.bwd._split
    return split.profile() if split else []


def _lower_backward(fns, vjp_fn, cts, donate: bool):
    """The backward program lowered as a retained (donate False) or freed graph runs it."""
    if hasattr(vjp_fn, "kept"):  # torch2xla.autodiff._residuals.Backward
        return fns.bwd.lower(vjp_fn, cts, donate)
    return None if donate else fns.bwd.lower(vjp_fn, cts)


def _xla_node(out: torch.Tensor):
    node = models._logits(out).grad_fn
    while node is not None and type(node).__name__ != "XlaFunctionBackward":
        node = node.next_functions[0][0]
    if node is None:
        raise RuntimeError("the output was not produced by a differentiable XLA program")
    return node


def _ptr(x) -> int:
    return x.unsafe_buffer_pointer() if hasattr(x, "unsafe_buffer_pointer") else id(x)


def _analysis(m) -> dict:
    fields = {
        "arguments_MiB": m.argument_size_in_bytes,
        "temporaries_MiB": m.temp_size_in_bytes,
        "outputs_MiB": m.output_size_in_bytes,
        "aliased_MiB": m.alias_size_in_bytes,
    }
    out = {k: v / MiB for k, v in fields.items()}
    total = m.argument_size_in_bytes + m.temp_size_in_bytes + m.output_size_in_bytes
    out["live_MiB"] = (total - m.alias_size_in_bytes) / MiB
    return out


def _census(jitted, args, leaves, input_ptrs, top: int) -> list[dict]:
    """The largest residuals with the primitive that produced each (the forward's jaxpr)."""
    import jax
    import jax.extend.core as jcore

    with x64():
        closed = jax.make_jaxpr(jitted)(*args)
    jaxpr = closed.jaxpr
    while len(jaxpr.eqns) == 1 and "jaxpr" in jaxpr.eqns[0].params:  # the jit wrapper
        jaxpr = jaxpr.eqns[0].params["jaxpr"].jaxpr
    producer = {}
    for eqn in jaxpr.eqns:
        for v in eqn.outvars:
            producer[v] = eqn.primitive.name
    for v in jaxpr.invars:
        producer[v] = "input"
    res_vars = jaxpr.outvars[len(jaxpr.outvars) - len(leaves) :]
    groups: dict[tuple, list] = collections.defaultdict(lambda: [0, 0])
    for var, leaf in zip(res_vars, leaves):
        if _ptr(leaf) in input_ptrs:
            continue
        name = "literal" if isinstance(var, jcore.Literal) else producer.get(var, "?")
        key = (name, tuple(leaf.shape), str(leaf.dtype))
        groups[key][0] += 1
        groups[key][1] += leaf.nbytes
    ranked = sorted(groups.items(), key=lambda kv: -kv[1][1])[:top]
    return [
        {"primitive": p, "shape": list(s), "dtype": d, "count": c, "MiB": b / MiB}
        for (p, s, d), (c, b) in ranked
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", default="gpt")
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--json", type=pathlib.Path, default=None)
    parser.add_argument("--device", default="cpu")
    parser.add_argument(
        "--options",
        type=json.loads,
        default=None,
        help="xla backend options (JSON) for the step peak",
    )
    parser.add_argument(
        "--step-only",
        action="store_true",
        help="CUDA: only the step peaks, not the residual census",
    )
    parser.add_argument(
        "--split-profile",
        action="store_true",
        help="only the split backward's segments (with --options)",
    )
    parser.add_argument(
        "--dtype",
        choices=("fp32", "bf16"),
        default="fp32",
        help="bf16: torch.autocast(bfloat16) around forward and loss",
    )
    args = parser.parse_args()
    global DEVICE, AUTOCAST
    DEVICE = args.device
    cuda = DEVICE.startswith("cuda")
    if args.dtype == "bf16":
        AUTOCAST = lambda: torch.autocast(DEVICE.split(":")[0], dtype=torch.bfloat16)
    if cuda:
        _common.allow_tf32()  # as the suite
    else:
        _common.one_thread()
    report = {"case": args.case, "device": DEVICE, "dtype": args.dtype}
    if args.split_profile:
        rows = split_profile(args.case, args.options)
        for r in rows:
            print(
                " ".join(
                    f"{k} {v:.0f}" if isinstance(v, float) else f"{k} {v}" for k, v in r.items()
                )
            )
        if args.json:
            args.json.write_text(json.dumps(rows, indent=1))
        return
    if cuda:
        report["step"] = step_peaks(args.case, args.options)
        if args.step_only:
            print(json.dumps(report))
            return
    report["eager"] = eager_saved(args.case)
    report["xla"] = xla_residuals(args.case, args.top)
    e, x = report["eager"], report["xla"]
    for mode, m in report.get("step", {}).items():
        print(
            f"{args.case} {args.dtype} step {mode}: "
            + ", ".join(
                f"{k} {v:.1f}" if isinstance(v, float) else f"{k} {v}" for k, v in m.items()
            )
        )
    print(
        f"{args.case}: eager saves {e['saved_MiB']:.1f} MiB ({e['tensors']} tensors); "
        f"xla keeps {x['residual_MiB']:.1f} MiB ({x['residual_buffers']} buffers; "
        f"{x['aliasing_inputs_MiB']:.1f} MiB more alias inputs)"
    )
    for name, m in x["programs"].items():
        print(f"  {name:20s} " + ", ".join(f"{k} {v:.1f}" for k, v in m.items()))
    print("  largest residuals:")
    for r in x["largest"]:
        print(
            f"    {r['MiB']:7.2f} MiB  {r['count']:3d} x {r['primitive']:22s} "
            f"{r['dtype']}{r['shape']}"
        )
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
