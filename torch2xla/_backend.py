"""The Dynamo backend ``xla``: options, per-signature compilation, fallback, wiring."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

import torch

from torch2xla._aliases import output_aliases
from torch2xla._errors import UnsupportedOpsError, warn
from torch2xla._lower import LoweredGraph, lower
from torch2xla._options import Options
from torch2xla._partition import find_unsupported, split
from torch2xla._program import XlaProgram
from torch2xla._stages import Build, RecordLog, input_names, wrapped_module
from torch2xla.guards import BucketSpec, GraphGuards

_graph_ids = itertools.count()

# Without this Dynamo runs any frame holding an nn.LSTM/GRU eagerly, silently.
torch._dynamo.config.allow_rnn = True


class FallbackWarning(UserWarning):
    """Some ops of a compiled graph run in eager PyTorch because XLA cannot run them."""


def xla_backend(
    gm: torch.fx.GraphModule,
    example_inputs: Sequence,
    *,
    mode: str | None = None,
    options: dict | None = None,
):
    """Dynamo backend: ``torch.compile(model, backend="xla", mode=..., options={...})``.

    Returns a callable that runs ``gm`` through JAX/XLA, compiling one XLA program per input
    signature on first use.
    """
    return CompiledGraph(gm, Options.parse(mode, options))


class CompiledGraph:
    """A Dynamo graph, compiled to XLA once per signature of its inputs."""

    def __init__(self, gm: torch.fx.GraphModule, options: Options) -> None:
        self.gm = gm
        self.options = options
        self.program_options = {  # what every XlaProgram of this graph is built with
            "remat": options.remat,
            "compiler_options": options.xla_compiler_options(),
            "auto_layouts": options.residual_layouts == "auto",
            "split_backward": options.split_backward,
        }
        self.name = f"graph_{next(_graph_ids)}"
        # for explain and dumps: x, self.fc1.weight
        self.input_names = input_names(gm, wrapped_module())
        # Key, cache, bucketing, compile records and logs: torch2xla/guards.
        self.guards = GraphGuards(
            gm, self.name, self._build, options.cache_size, BucketSpec.parse(options.buckets)
        )
        self.key, self.cache = self.guards.key, self.guards.cache
        self.recompile_reasons = self.guards.recompile_reasons
        out = gm.graph.find_nodes(op="output")[0].args[0]
        self.output_requires_grad = tuple(
            bool(getattr(o.meta.get("example_value"), "requires_grad", True))
            if isinstance(o, torch.fx.Node)
            else False
            for o in (out if isinstance(out, list | tuple) else (out,))
        )
        self.output_aliases = output_aliases(gm)
        self._warned = False
        self.records = RecordLog(options.cache_size)  # CompileRecords, for explain

    def __call__(self, *args):
        return self.guards.run(args)

    def __deepcopy__(self, memo: dict) -> CompiledGraph:
        # Like the function other backends return, a compiled graph is used as immutable: its
        # copy is itself (Dynamo's minifier deep-copies what the backend returns).
        return self

    # Dynamo's accuracy minifier reads parameters and buffers from what the backend returns,
    # as from a module: they are the Dynamo graph's own (usually none: Dynamo lifts them).
    def named_parameters(self, *args, **kwargs):
        return self.gm.named_parameters(*args, **kwargs)

    def named_buffers(self, *args, **kwargs):
        return self.gm.named_buffers(*args, **kwargs)

    @torch._disable_dynamo
    def _build(self, args: Sequence) -> _Entry:
        # Build times each stage, reports long compiles, names this graph in errors, records
        # the signature for explain and writes dumps (torch2xla/_stages.py).
        with Build(self, args) as b:
            lowered = b.run("lowering", lower, self.gm, args)
            lowered = b.passes(lowered)
            unsupported = find_unsupported(lowered.gm)
            unsupported += b.eager_ops(lowered.gm, unsupported)
            inputs = (*lowered.lifted, *args)
            requires_grad = (False,) * len(lowered.mutations) + self.output_requires_grad
            if not unsupported:
                program = XlaProgram(lowered.gm, inputs, requires_grad,
                                     packable=range(len(lowered.mutations)), **self.program_options)
                program = b.program(program, inputs)
                return b.done(_Entry(lowered, program, self.output_requires_grad, self.output_aliases))
            missing = [u for u in unsupported if not u.by_design]
            if missing and self.options.strict:
                raise UnsupportedOpsError(self.name, missing)
            if missing and not self._warned:
                self._warned = True
                listing = "\n".join(str(u) for u in missing)
                warn(
                    f"torch2xla: {len(missing)} op(s) of {self.name} run in eager PyTorch, "
                    f"the rest in XLA:\n{listing}",
                    FallbackWarning,
                    node=missing[0].node,
                )
            split_gm, names = split(lowered.gm, unsupported)
            for name in names:
                sub = getattr(split_gm, name)
                example = [n.meta.get("val") for n in sub.graph.find_nodes(op="placeholder")]
                program = XlaProgram(sub, example, None, **self.program_options)
                setattr(split_gm, name, _Submodule(program))
            b.split(split_gm, names)
            return b.done(_Entry(lowered, split_gm, self.output_requires_grad, self.output_aliases), unsupported)


class _Submodule(torch.nn.Module):
    """An XLA program standing in for a fused partition of a split graph."""

    def __init__(self, program: XlaProgram) -> None:
        super().__init__()
        self.program = program
        # Set by _stages.Build.split: compiles the program ahead of its first call, timed.
        self.first_call: Callable[[XlaProgram, tuple], None] | None = None

    def forward(self, *args):
        if self.first_call is not None:
            first_call, self.first_call = self.first_call, None
            first_call(self.program, args)
        outs = self.program(args)
        return outs[0] if self.program.single_output else tuple(outs)


class _Entry:
    """One compiled signature: runs the program, writes mutations back, returns user outputs."""

    def __init__(self, lowered: LoweredGraph, runner, output_requires_grad, aliases=()) -> None:
        self.lifted = lowered.lifted
        self.mutations = lowered.mutations
        self.runner = runner
        self.program = runner if isinstance(runner, XlaProgram) else None
        self.detach = tuple(i for i, rg in enumerate(output_requires_grad) if not rg)
        self.aliases = aliases  # OutputAlias: outputs eager returns as views of inputs
        # Some output requires grad in eager although the graph is called under no_grad: the
        # function enables grad itself (torch.enable_grad() inside), so we must differentiate.
        self.enables_grad = any(output_requires_grad)

    def __call__(self, args: Sequence):
        inputs = (*self.lifted, *args) if self.lifted else args
        if self.enables_grad and not torch.is_grad_enabled():
            with torch.enable_grad():
                outs = self._run(inputs)
        elif self.program is not None:  # (the hot path, inlined)
            outs = self.program(inputs)
        else:
            outs = self._run(inputs)
        n = len(self.mutations)
        if n:
            with torch.no_grad():  # one launch for all (159 BatchNorm buffers in ResNet-50)
                torch._foreach_copy_([inputs[idx] for idx in self.mutations], outs[:n])
            outs = outs[n:]
        for i in self.detach:
            if outs[i].requires_grad:
                outs[i] = outs[i].detach()
        for alias in self.aliases:
            outs[alias.output] = alias.regenerate(args)
        return outs

    def _run(self, inputs: Sequence) -> list:
        if self.program is not None:
            return self.program(inputs)
        return list(self.runner(*inputs))
