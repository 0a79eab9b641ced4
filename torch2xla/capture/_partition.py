"""Find ATen nodes XLA cannot run, and split a graph so they run in eager PyTorch."""

from __future__ import annotations

import operator
from collections.abc import Sequence

import torch
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase

from torch2xla._errors import Unsupported, is_custom_op, op_name, source_line
from torch2xla.ops import (
    DATA_DEPENDENT,
    LOWERINGS,
    dtype_without_xla,
    no_jax_gradient,
    quantized_reason,
)

# Collectives (DDP/FSDP/DTensor code) run in the eager partition, in graph order, through
# torch's own process group: XLA never drops or reorders them.
_COLLECTIVE_NAMESPACES = frozenset(
    {"_c10d_functional", "c10d_functional", "_c10d_functional_autograd"}
)


def has_collectives(gm: torch.fx.GraphModule) -> bool:
    """Whether ``gm`` calls a collective (which runs in eager, through the process group)."""
    return any(
        getattr(n.target, "namespace", None) in _COLLECTIVE_NAMESPACES
        for n in gm.graph.nodes
        if n.op == "call_function"
    )


_NO_LOWERING = {
    False: "no lowering",
    True: "no lowering (your op: torch2xla.register_lowering gives it a JAX implementation)",
}


def find_unsupported(
    gm: torch.fx.GraphModule, grad_inputs: Sequence[bool] | None = None
) -> list[Unsupported]:
    """Every call node of ``gm`` that XLA cannot run, each with its reason. ``grad_inputs``
    (per placeholder: does a gradient flow from it; None: no backward) adds the nodes a
    gradient reaches whose lowering JAX cannot differentiate."""
    found = []
    graded = _reached(gm, grad_inputs) if grad_inputs is not None else set()
    for node in gm.graph.nodes:
        if node.op != "call_function" or node.target is operator.getitem:
            continue
        if isinstance(node.target, torch._ops.HigherOrderOperator) and node.target in LOWERINGS:
            why = _inside(node, node in graded)
            if why is not None:
                found.append(Unsupported(node, why))
            continue
        namespace = getattr(node.target, "namespace", None)
        if namespace in _COLLECTIVE_NAMESPACES:
            found.append(Unsupported(node, "collective: runs through torch's process group", True))
        elif node.target in DATA_DEPENDENT:
            found.append(Unsupported(node, DATA_DEPENDENT[node.target]))
        elif (why := quantized_reason(node.target)) is not None:
            found.append(Unsupported(node, why))
        elif (dtype := dtype_without_xla(node)) is not None:
            found.append(Unsupported(node, f"{dtype} has no XLA type"))
        elif node.target not in LOWERINGS:
            found.append(Unsupported(node, _NO_LOWERING[is_custom_op(node.target)]))
        elif node in graded and (why := no_jax_gradient(node)) is not None:
            found.append(Unsupported(node, f"its gradient: {why}"))
        elif (why := _uint8_resampling_on_cuda(node)) is not None:
            found.append(Unsupported(node, why))
        elif _sparse(node):
            found.append(Unsupported(node, "sparse=True: eager's gradient is a sparse tensor"))
        elif node.target in _SPARSE_GRAD and node in graded and _sparse_grad(node):
            found.append(Unsupported(node, "sparse_grad=True: eager's gradient is a sparse tensor"))
        elif node.target in _FREQ_SCALED and _arg(
            node, _FREQ_SCALED[node.target], "scale_grad_by_freq"
        ):
            # (eager's CPU kernel divides each row's gradient by another index's count)
            found.append(Unsupported(node, "scale_grad_by_freq=True: eager's gradient is kept"))
    found += _upstream_of_sparse(found, graded)
    return found


def _upstream_of_sparse(found: list[Unsupported], graded: set) -> list[Unsupported]:
    """The nodes a gradient reaches (``graded``) that compute the weight a ``sparse=True``
    embedding in ``found`` reads (``F.embedding(i, w * 2, sparse=True)``, ``max_norm=``'s
    ``embedding_renorm``): they run in eager beside it, so that its sparse gradient goes
    back through eager's autograd to the weight, as in eager (no XLA backward takes a sparse
    cotangent; a dense one would make eager's sparse gradient dense)."""
    upstream: dict[torch.fx.Node, None] = {}
    todo = [u.node.args[0] for u in found if _sparse(u.node) or _sparse_grad(u.node)]
    while todo:
        node = todo.pop()
        if not isinstance(node, torch.fx.Node) or node.op != "call_function":
            continue
        if node in upstream or node not in graded:
            continue
        upstream[node] = None
        todo += node.all_input_nodes
    taken = {u.node for u in found}
    return [
        Unsupported(n, "computes the weight of a sparse=True embedding, whose gradient is sparse")
        for n in upstream
        if n not in taken
    ]


def _eager_renorm(weight, indices, max_norm, norm_type):
    """``aten.embedding_renorm`` as eager runs ``F.embedding(max_norm=)``'s: in place under
    no_grad, the weight's gradient passing through unchanged (the functional op has no
    derivative formula)."""
    out = weight.clone()
    with torch.no_grad():
        torch.embedding_renorm_(out, indices, max_norm, norm_type)
    return out


def _inside(node: torch.fx.Node, graded: bool) -> str | None:
    """Why a higher-order op with a lowering cannot run in XLA (None: it can): an op inside
    one of its subgraphs that cannot (a gradient reaching the op reaches all of them), or a
    ``while_loop`` a gradient reaches (JAX differentiates no while loop in reverse mode)."""
    if graded and node.target is torch.ops.higher_order.while_loop:
        return "its gradient: JAX cannot differentiate a while loop in reverse mode"
    for sub in subgraph_nodes(node):
        module = operator.attrgetter(sub.target)(node.graph.owning_module)
        n_in = len(module.graph.find_nodes(op="placeholder"))
        inner = find_unsupported(module, [True] * n_in if graded else None)
        if inner:
            u = inner[0]
            where = source_line(u.node)
            return f"{op_name(u.node)} inside it cannot run in XLA ({u.reason}; at {where})"
    return None


def subgraph_nodes(node: torch.fx.Node) -> list[torch.fx.Node]:
    """The ``get_attr`` arguments of ``node`` (nested in tuples too) that name graph modules:
    a higher-order op's subgraphs."""
    found: list[torch.fx.Node] = []

    def visit(a):
        module = getattr(node.graph, "owning_module", None)
        if (
            isinstance(a, torch.fx.Node)
            and a.op == "get_attr"
            and isinstance(operator.attrgetter(a.target)(module), torch.fx.GraphModule)
        ):
            found.append(a)
        return a

    torch.fx.node.map_aggregate((node.args, node.kwargs), visit)
    return found


def _reached(gm: torch.fx.GraphModule, grad_inputs: Sequence[bool]) -> set[torch.fx.Node]:
    """The nodes of ``gm`` that depend on a placeholder whose ``grad_inputs`` entry is True."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    reached = {p for p, g in zip(placeholders, grad_inputs, strict=True) if g}
    for node in gm.graph.nodes:
        if node.op == "call_function" and any(a in reached for a in node.all_input_nodes):
            reached.add(node)
    return reached


# uint8 resampling: the lowerings follow eager's CPU fixed-point kernels (``ops/_resize_uint8``);
# CUDA's kernels round otherwise, and run in eager.
_UINT8_RESAMPLING = frozenset(
    op
    for packet in (
        torch.ops.aten.upsample_bilinear2d,
        torch.ops.aten.upsample_bicubic2d,
        torch.ops.aten._upsample_bilinear2d_aa,
        torch.ops.aten._upsample_bicubic2d_aa,
    )
    for op in (packet.default, packet.vec)
)


def _uint8_resampling_on_cuda(node: torch.fx.Node) -> str | None:
    if node.target not in _UINT8_RESAMPLING or not node.args:
        return None
    x = node.args[0].meta.get("val") if isinstance(node.args[0], torch.fx.Node) else None
    if isinstance(x, torch.Tensor) and x.dtype == torch.uint8 and x.device.type == "cuda":
        return "uint8 resampling on CUDA: eager's CUDA kernels round otherwise than the lowering"
    return None


def _arg(node: torch.fx.Node, k: int, name: str):
    return node.args[k] if len(node.args) > k else node.kwargs.get(name)


# Ops whose ``sparse`` argument makes eager's gradient a sparse tensor: its position.
_SPARSE_GRADIENT = {
    torch.ops.aten.embedding.default: 4,
    torch.ops.aten._embedding_bag.default: 5,
    torch.ops.aten._embedding_bag_backward.default: 9,
}
# Embedding bags with ``scale_grad_by_freq``, forward and backward: its position.
_FREQ_SCALED = {
    torch.ops.aten._embedding_bag.default: 3,
    torch.ops.aten._embedding_bag_backward.default: 7,
}


# Ops whose ``sparse_grad`` argument (keyword-only) makes eager's gradient of ``self`` a
# sparse tensor where a gradient reaches them.
_SPARSE_GRAD = {torch.ops.aten.gather.default}


def _sparse_grad(node: torch.fx.Node) -> bool:
    return bool(node.kwargs.get("sparse_grad"))


def _sparse(node: torch.fx.Node) -> bool:
    k = _SPARSE_GRADIENT.get(node.target)
    return k is not None and bool(_arg(node, k, "sparse"))


class _Support(OperatorSupportBase):
    def __init__(self, unsupported: set[torch.fx.Node]) -> None:
        self.unsupported = unsupported

    def is_node_supported(self, submodules, node: torch.fx.Node) -> bool:
        if node.op == "get_attr":  # (a subgraph goes with the higher-order ops that call it)
            return bool(node.users) and all(
                u.op == "call_function" and u not in self.unsupported and node in subgraph_nodes(u)
                for u in node.users
            )
        return node.op == "call_function" and node not in self.unsupported


def split(
    gm: torch.fx.GraphModule, unsupported: list[Unsupported]
) -> tuple[torch.fx.GraphModule, list[str]]:
    """Fuse the supported nodes of ``gm`` into submodules; returns the split graph and their names.

    The unsupported nodes stay as ``call_function`` nodes of the returned graph, so running it
    executes them in eager PyTorch (with autograd) between the XLA submodules.
    """
    support = _Support({u.node for u in unsupported})
    partitioner = CapabilityBasedPartitioner(gm, support, allows_single_node_partition=True)
    partitions = partitioner.propose_partitions()
    # A partition made only of getitem nodes is pointless in XLA.
    partitions = [p for p in partitions if any(n.target is not operator.getitem for n in p.nodes)]
    fused = partitioner.fuse_partitions(partitions)
    for node in fused.graph.find_nodes(
        op="call_function", target=torch.ops.aten.embedding_renorm.default
    ):
        node.target = _eager_renorm
    fused.recompile()
    names = [n.target for n in fused.graph.nodes if n.op == "call_module"]
    return fused, names
