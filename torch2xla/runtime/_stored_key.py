"""The key of a stored signature (``_stored.py``): everything the export and the lowering read.

NOTE: a key collision would be a silent wrong answer, so the key holds every input of the
export and of the lowering: the Dynamo graph (its code, every node's target and the metadata
the lowering reads, a user function among them with the globals its code reads, its submodules, the values of its constant tensors, the metadata of its
parameters), the call's inputs (dtype, shape, strides, storage offset, requires_grad, device,
aliasing, the values of Python scalars the export specializes), the backend options, torch's
global state (grad mode, autocast, default dtype, matmul precision, deterministic mode, sdpa
and oneDNN switches, functorch's configuration, the thread count and CPU capability eager's
kernels follow), the environment (versions, XLA flags, JAX's
configuration, torch2xla's environment variables), a digest of torch2xla's source and of any
lowering registered outside it, and the device. Graphs whose behaviour the key cannot
describe (user graph passes, custom ops of other namespaces, tensor subclasses, opaque
attributes, user functions reading user objects) are not recorded; their executables still come from the cache.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import marshal
import pathlib
import sys
import types
from collections.abc import Sequence
from typing import Any

import jax
import torch

from torch2xla.capture._lower import scalar_placeholders
from torch2xla.guards import _persistent
from torch2xla.runtime import _build_state
from torch2xla.runtime._interop import TORCH_TO_JAX_DTYPE, host_view, jax_device, program_device

# Namespaces whose ops behave as the torch version (in the key) and torch2xla's source say.
_KNOWN_NAMESPACES = frozenset(
    {
        "aten",
        "prims",
        "torch2xla",
        "higher_order",
        "_c10d_functional",
        "c10d_functional",
        "_dtensor",
        "rngprims",
    }
)
# Modules whose functions are fixed by the Python and torch versions in the key.
_KNOWN_MODULES = ("torch", "builtins", "_operator", "operator", "math")


# -- the key ------------------------------------------------------------------------------------
def graph_key(gm: torch.fx.GraphModule, args: Sequence, options) -> str | None:
    """The key of the signature ``args`` of ``gm`` compiled with ``options``, or None where the
    key cannot describe what the compile depends on (see the module's note)."""
    if options.passes:  # user callables: their behaviour is not in any key
        return None
    graph = _describe_graph(gm)
    inputs = _describe_args(gm, args)
    lowerings = _lowerings_digest()
    device = device_of(gm, args)
    if graph is None or inputs is None or lowerings is None or device is None:
        return None
    return _persistent.key_of(
        "graph",
        _persistent.environment(),
        _source_digest(),
        lowerings,
        _build_state.describe(),
        _describe_options(options),
        graph,
        inputs,
        _persistent.device_tag(device),
    )


@functools.cache
def _source_digest() -> str:
    """blake2b of every source file of the torch2xla package (relative path and contents)."""
    root = pathlib.Path(__file__).resolve().parents[1]  # (this module is in runtime/)
    h = hashlib.blake2b(digest_size=32)
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode() + b"\0")
        h.update(path.read_bytes())
    return h.hexdigest()


def _lowerings_digest() -> str | None:
    """The lowerings registered from outside torch2xla (their code is in no source digest);
    None where one cannot be described (a callable object, a function reading a user
    object): every such lowering's digest was ``None``, one key for any behaviour."""
    from torch2xla.ops import LOWERINGS

    h = hashlib.blake2b(digest_size=32)
    for op, fn in LOWERINGS.items():
        if not getattr(fn, "__module__", "").startswith("torch2xla"):
            digest = _function_digest(getattr(fn, "_torch2xla_user_fn", fn))
            if digest is None:
                return None
            h.update(f"{op}:{digest}".encode())
    return h.hexdigest()


def _function_digest(fn: Any, seen: frozenset = frozenset()) -> str | None:
    """A digest of what a Python function computes, as far as Python can say it: its code
    (nested functions' included), defaults, closure cells and the globals its code names,
    each described by ``_python_value`` (functions in turn by their digest); None where any of
    them cannot be described (a user module, class or object: no key holds their behaviour).

    NOTE: the export runs the function, so a global it reads is a constant of the program:
    ``x * K`` with ``K = 2.0`` in one process and ``3.0`` in the next had one key (the code
    alone), and the second process was served the first one's program."""
    fn = getattr(fn, "__wrapped__", fn)
    if isinstance(fn, functools.partial):
        inner = _function_digest(fn.func, seen)
        rest = _python_value((fn.args, fn.keywords), seen)
        return None if inner is None or rest is None else f"{inner}{rest}"
    if isinstance(fn, types.MethodType):  # (its object's state is read too)
        inner = _function_digest(fn.__func__, seen)
        this = _python_value(fn.__self__, seen)
        return None if inner is None or this is None else f"{inner}{this}"
    code = getattr(fn, "__code__", None)
    if not isinstance(code, types.CodeType):
        return None
    if id(fn) in seen:  # (recursion: the function's own digest is being computed)
        return f"recursive:{code.co_qualname}"
    seen = seen | {id(fn)}
    cells = tuple(c.cell_contents for c in (fn.__closure__ or ()))
    names = getattr(fn, "__globals__", {})
    read = {n: names[n] for n in sorted(_names(code)) if n in names}
    described = _python_value((fn.__defaults__, fn.__kwdefaults__, cells, read), seen)
    if described is None:
        return None
    h = hashlib.blake2b(marshal.dumps(code), digest_size=16)
    h.update(described.encode())
    return h.hexdigest()


def _names(code: types.CodeType) -> set[str]:
    """The global (and attribute) names a code object and the code nested in it read."""
    out = set(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            out |= _names(c)
    return out


_SCALARS = (type(None), bool, int, float, complex, str, bytes, type(Ellipsis))
_TORCH_VALUES = (torch.dtype, torch.device, torch.layout, torch.memory_format, torch.Size)


def _python_value(v: Any, seen: frozenset) -> str | None:
    """A Python value a user function reads, in words that change with what the function
    computes from it; None where no key can hold it."""
    if isinstance(v, _SCALARS + _TORCH_VALUES):
        return f"{type(v).__name__}:{v!r}"
    if isinstance(v, list | tuple | set | frozenset):
        items = [_python_value(x, seen) for x in v]
        if None in items:
            return None
        items = sorted(items) if isinstance(v, set | frozenset) else items
        return f"{type(v).__name__}:[{','.join(items)}]"
    if isinstance(v, dict):
        pairs = [(_python_value(k, seen), _python_value(x, seen)) for k, x in v.items()]
        if any(k is None or x is None for k, x in pairs):
            return None
        return f"dict:[{','.join(f'{k}={x}' for k, x in pairs)}]"
    if isinstance(v, torch.Tensor):
        if type(v) not in (torch.Tensor, torch.nn.Parameter, torch.nn.Buffer):
            return None
        return f"tensor:{_tensor_meta(v)}:{_tensor_digest(v)}"
    if isinstance(v, types.ModuleType):
        return f"module:{v.__name__}" if _known(v.__name__) else None
    if isinstance(v, torch._ops.OpOverload | torch._ops.OpOverloadPacket):
        return _target(v)
    if isinstance(v, types.FunctionType | functools.partial):
        module = getattr(v, "__module__", None) or ""
        if _known(module):
            return f"function:{module}.{v.__qualname__}"
        digest = _function_digest(v, seen)
        return None if digest is None else f"function:{digest}"
    if isinstance(v, type | types.BuiltinFunctionType):
        module = getattr(v, "__module__", None) or ""
        return f"{module}.{v.__qualname__}" if _known(module) else None
    return None


def _known(module: str) -> bool:
    """Whether ``module`` is one whose functions are fixed by the versions in the key (torch,
    JAX, Python's standard library)."""
    top = module.split(".")[0]
    return top in _KNOWN_MODULES or top in ("jax", "jaxlib") or top in sys.stdlib_module_names


# Options that do not change a compiled program (cache_size: how many are kept; dump_dir: where
# they are written); passes make the signature unrecordable (``graph_key``).
_OPTIONS_IGNORED = frozenset({"cache_size", "dump_dir", "passes"})


def _describe_options(options) -> str:
    """Every backend option but those of ``_OPTIONS_IGNORED`` (options added later included)."""
    parts = []
    for field in dataclasses.fields(options):
        if field.name in _OPTIONS_IGNORED:
            continue
        value = getattr(options, field.name)
        if isinstance(value, set | frozenset):
            value = sorted(map(str, value))
        parts.append((field.name, repr(value)))
    return repr(parts)


def _tensor_meta(t: torch.Tensor) -> tuple:
    return (
        type(t).__name__,
        str(t.dtype),
        tuple(map(str, t.shape)),
        tuple(map(str, t.stride())),
        str(t.storage_offset()) if not t.is_sparse else "sparse",
        t.requires_grad,
        str(t.device),
        str(t.layout),
        t.is_conj(),
        t.is_neg(),
    )


def _value_meta(v: Any) -> Any:
    if isinstance(v, torch.Tensor):
        return _tensor_meta(v)
    if isinstance(v, list | tuple):
        return type(v).__name__, tuple(_value_meta(x) for x in v)
    if isinstance(v, dict):
        return tuple((k, _value_meta(x)) for k, x in v.items())
    if v is None or isinstance(
        v,
        bool
        | int
        | float
        | str
        | torch.SymInt
        | torch.SymFloat
        | torch.SymBool
        | torch.dtype
        | torch.device,
    ):
        return type(v).__name__, str(v)
    return type(v).__qualname__  # (metadata Dynamo attaches to other values: their kind)


def _target(t: Any) -> str | None:
    """A node's target (or a callable among its arguments) in words; None: a behaviour no key
    holds."""
    if isinstance(t, str):  # call_method, get_attr, call_module, placeholder, output
        return t
    if isinstance(t, torch._ops.OpOverload | torch._ops.OpOverloadPacket):
        # (ops of other namespaces are user code whose behaviour no key holds)
        return str(t) if str(t).split(".")[0] in _KNOWN_NAMESPACES else None
    if isinstance(t, torch._ops.HigherOrderOperator):
        return f"hop:{t.name()}"
    module = getattr(t, "__module__", None) or ""
    name = getattr(t, "__qualname__", None) or getattr(t, "__name__", None) or repr(t)
    if module.split(".")[0] in _KNOWN_MODULES:
        return f"{module}.{name}"
    digest = _function_digest(t)  # a user function Dynamo put in the graph (allow_in_graph)
    return None if digest is None else f"{module}.{name}:{digest}"


_PLAIN = (
    bool,
    int,
    float,
    complex,
    str,
    torch.dtype,
    torch.device,
    torch.layout,
    torch.memory_format,
    torch.SymInt,
    torch.SymFloat,
    torch.SymBool,
)


def _leaf(a: Any) -> str | None:
    """A node argument in words (FX's code names some objects only by a generated global)."""
    if a is None or a is Ellipsis or isinstance(a, _PLAIN):
        return f"{type(a).__name__}:{a!r}"
    if isinstance(a, torch.fx.Node):
        return f"%{a.name}"
    if isinstance(a, slice):
        return f"slice:{a.start!r}:{a.stop!r}:{a.step!r}"
    if isinstance(a, torch.Tensor):
        if type(a) not in (torch.Tensor, torch.nn.Parameter):
            return None
        return f"tensor:{_tensor_meta(a)}:{_tensor_digest(a)}"
    if callable(a):
        return _target(a)
    text = repr(a)
    return None if " at 0x" in text else f"{type(a).__qualname__}:{text}"


def _describe_args_of(node: torch.fx.Node) -> list | None:
    leaves: list = []
    torch.fx.node.map_aggregate((node.args, node.kwargs), lambda a: leaves.append(_leaf(a)))
    return None if None in leaves else leaves


def _describe_graph(gm: torch.nn.Module) -> str | None:
    """Everything of the Dynamo graph that the export and the lowering read, or None."""
    parts: list = []
    own = {
        **dict(gm.named_parameters(remove_duplicate=False)),
        **dict(gm.named_buffers(remove_duplicate=False)),
    }
    parts.append(sorted((name, _tensor_meta(t)) for name, t in own.items()))
    seen: set[str] = set()

    def visit(mod: torch.nn.Module, prefix: str) -> bool:
        if not isinstance(mod, torch.fx.GraphModule):
            return False
        # (without FX's comments: they name the user's files and lines)
        code = "\n".join(ln for ln in mod.code.splitlines() if not ln.lstrip().startswith("#"))
        parts.append((prefix, code))
        for node in mod.graph.nodes:
            target, arguments = _target(node.target), _describe_args_of(node)
            if target is None or arguments is None:
                return False
            parts.append(arguments)
            meta = node.meta
            stack = meta.get("nn_module_stack")
            parts.append(
                (
                    node.name,
                    node.op,
                    target,
                    _value_meta(meta.get("example_value", meta.get("val"))),
                    None
                    if stack is None
                    # (its keys are ids of module objects: left out)
                    else [
                        (str(v[0]), getattr(v[1], "__qualname__", str(v[1])))
                        for v in stack.values()
                    ],
                )
            )
            if node.op in ("get_attr", "call_module"):
                name = f"{prefix}{node.target}"
                if name in seen:
                    continue
                seen.add(name)
                obj = _resolve(mod, node.target)
                if not describe_attr(obj, name):
                    return False
        return True

    def describe_attr(obj: Any, name: str) -> bool:
        if isinstance(obj, torch.fx.GraphModule):
            return visit(obj, f"{name}.")
        if isinstance(obj, torch.Tensor):
            if name in own:  # a lifted parameter or buffer: an input, described above
                return True
            if type(obj) not in (torch.Tensor, torch.nn.Parameter, torch.nn.Buffer):
                return False
            parts.append((name, _tensor_meta(obj), _tensor_digest(obj)))  # a constant
            return True
        if isinstance(obj, torch.nn.Module):  # a torch module Dynamo did not inline
            described = _module_state(obj)
            if described is None:
                return False
            parts.append((name, described))
            return True
        if obj is None or isinstance(obj, bool | int | float | str):
            parts.append((name, repr(obj)))
            return True
        return False

    if not visit(gm, ""):
        return None
    return repr(parts)


def _resolve(mod: torch.nn.Module, target: str) -> Any:
    obj: Any = mod
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


def _module_state(mod: torch.nn.Module) -> str | None:
    """A torch module's type and plain attributes (eps, num_heads...), children included."""
    if not type(mod).__module__.startswith("torch."):
        return None
    items = []
    for k, v in sorted(vars(mod).items()):
        if k in ("_parameters", "_buffers", "_modules") or k.startswith("_forward") or "hook" in k:
            continue
        if v is None or isinstance(v, bool | int | float | str | tuple | torch.dtype):
            items.append((k, repr(v)))
    children = []
    for name, child in mod.named_children():
        state = _module_state(child)
        if state is None:
            return None
        children.append((name, state))
    return repr((type(mod).__qualname__, items, children))


def _tensor_digest(t: torch.Tensor) -> str:
    # bytes through a host view, not ``.numpy()``: that would leave the storage non-resizable
    data = t.detach().cpu().contiguous()
    if data.numel() and data.dtype in TORCH_TO_JAX_DTYPE:
        raw = host_view(data).tobytes()
    else:
        raw = repr((data.dtype, data.tolist())).encode() if data.numel() else b""
    return hashlib.blake2b(raw, digest_size=16).hexdigest()


def _describe_args(gm: torch.fx.GraphModule, args: Sequence) -> str | None:
    scalars = set(scalar_placeholders(gm))
    storages: dict[int, int] = {}
    parts = []
    for i, a in enumerate(args):
        if isinstance(a, torch.Tensor):
            if type(a) not in (torch.Tensor, torch.nn.Parameter, torch.nn.Buffer) or a.is_sparse:
                return None
            # which inputs share memory (aliasing changes the functionalized graph)
            alias = storages.setdefault(a.untyped_storage().data_ptr(), i) if a.numel() else None
            value = repr(a.item()) if i in scalars else None  # specialized by the export
            parts.append((_tensor_meta(a), a.is_leaf, alias, value))
        elif a is None or isinstance(a, bool | int | float | str | torch.dtype | torch.device):
            parts.append((type(a).__name__, repr(a)))
        else:
            return None
    return repr(parts)


def device_of(gm: torch.fx.GraphModule, args: Sequence) -> jax.Device | None:
    """The device the whole-graph program of ``gm`` runs on for ``args``, as ``XlaProgram``
    places it (``program_device``: the first accelerator among the tensors it takes, then
    among those it returns; a CPU 0-d tensor first beside CUDA ones runs on the GPU), or
    None where XLA runs no such device (a meta tensor: the graph runs in eager)."""
    held = [*gm.parameters(), *gm.buffers(), *args]
    out = gm.graph.find_nodes(op="output")[0].args[0]
    made: list = []
    torch.fx.node.map_arg(out, lambda n: made.append(n.meta.get("example_value")))
    device = program_device(
        [t.device for t in held if isinstance(t, torch.Tensor)],
        [t.device for t in made if isinstance(t, torch.Tensor)],
    )
    try:
        return jax_device(device)
    except ValueError:  # (a device XLA does not run)
        return None
