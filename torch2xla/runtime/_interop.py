"""torch <-> jax: dtypes, devices, zero-copy array conversion (inside the JAX scope of
``_jax_scope.x64``)."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import itertools
import math
import operator
import os
import threading
import weakref
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import torch
from jax.experimental.layout import Layout, with_layout_constraint

from torch2xla.runtime._exported import array_of, note
from torch2xla.runtime._jax_scope import x64
from torch2xla.runtime._swap import CACHES

TORCH_TO_JAX_DTYPE: dict[torch.dtype, np.dtype] = {
    torch.float64: np.dtype(np.float64),
    torch.float32: np.dtype(np.float32),
    torch.float16: np.dtype(np.float16),
    torch.bfloat16: np.dtype(ml_dtypes.bfloat16),
    torch.int64: np.dtype(np.int64),
    torch.int32: np.dtype(np.int32),
    torch.int16: np.dtype(np.int16),
    torch.int8: np.dtype(np.int8),
    torch.uint8: np.dtype(np.uint8),
    torch.uint16: np.dtype(np.uint16),
    torch.uint32: np.dtype(np.uint32),
    torch.uint64: np.dtype(np.uint64),
    torch.bool: np.dtype(np.bool_),
    torch.complex64: np.dtype(np.complex64),
    torch.complex128: np.dtype(np.complex128),
    torch.float8_e4m3fn: np.dtype(ml_dtypes.float8_e4m3fn),
    torch.float8_e5m2: np.dtype(ml_dtypes.float8_e5m2),
}
JAX_TO_TORCH_DTYPE: dict[np.dtype, torch.dtype] = {v: k for k, v in TORCH_TO_JAX_DTYPE.items()}


def jax_dtype(dtype: torch.dtype) -> np.dtype:
    try:
        return TORCH_TO_JAX_DTYPE[dtype]
    except KeyError:
        raise TypeError(f"torch2xla: dtype {dtype} has no JAX equivalent") from None


def torch_dtype(dtype: np.dtype) -> torch.dtype:
    return JAX_TO_TORCH_DTYPE[np.dtype(dtype)]


# The one table of dtype names: short (signatures, ``f32[8, 32]``), eager's (its messages,
# ``Float``) and C++ (some of eager's messages, ``float``). Others go by torch's name.
_DTYPE_NAMES: dict[torch.dtype, tuple[str, str, str]] = {
    torch.float64: ("f64", "Double", "double"),
    torch.float32: ("f32", "Float", "float"),
    torch.float16: ("f16", "Half", "c10::Half"),
    torch.bfloat16: ("bf16", "BFloat16", "c10::BFloat16"),
    torch.complex64: ("c64", "ComplexFloat", "c10::complex<float>"),
    torch.complex128: ("c128", "ComplexDouble", "c10::complex<double>"),
    torch.int64: ("i64", "Long", "long int"),
    torch.int32: ("i32", "Int", "int"),
    torch.int16: ("i16", "Short", "short int"),
    torch.int8: ("i8", "Char", "signed char"),
    torch.uint8: ("u8", "Byte", "unsigned char"),
    torch.bool: ("bool", "Bool", "bool"),
}
_NAME_STYLES = {"short": 0, "eager": 1, "c": 2}


def dtype_name(dtype: torch.dtype, style: str = "torch") -> str:
    """``dtype``'s name: ``float32`` (``style="torch"``), ``f32`` (``"short"``), ``Float``
    (``"eager"``, as eager's messages) or ``float`` (``"c"``, its C++ name)."""
    names = _DTYPE_NAMES.get(dtype) if style != "torch" else None
    return names[_NAME_STYLES[style]] if names else str(dtype).removeprefix("torch.")


# --- stack capture while compiling --------------------------------------------------------------
# NOTE: jaxlib records the Python stack (code objects, held from C++ and invisible to the garbage
# collector) in what it traces (jaxpr source info, kept in JAX's caches), in every executable it
# compiles and in every array it creates. Our first call of a graph runs inside the code object
# Dynamo generated for the user's frame, and Dynamo removes its compiled function from the
# frame's globals only when that code object dies: so the executable kept the code alive, the
# code kept the function, the function kept the executable, and nothing was ever freed after
# torch._dynamo.reset() (every CompiledGraph with its programs leaked). Compiles therefore run
# inside a jaxlib ``TracebackScope``: a stack recorded inside it stops at the scope, so it holds
# only our frames and JAX's. The scope is per thread and capture stays on, so other threads are
# unaffected. (Capture used to be turned off with jaxlib's ``set_tracebacks_enabled``, a
# process-wide switch: an array another thread computed while it was off has no "user context",
# and jaxlib raises when such an array is wrapped while capture is on: at the end of that
# thread's execution, when the compile ended meanwhile, or in a DLPack export.)
try:
    from jaxlib import _jax as _jaxlib_ext  # jaxlib's C++ module (0.10, 0.11)
except ImportError:  # a jaxlib laid out otherwise
    _jaxlib_ext = None
_TracebackScope = getattr(_jaxlib_ext, "TracebackScope", None)


def no_stack_capture():
    """A scope in which jaxlib records no frame of the caller's stack (see above): what the
    graph's first call traces, compiles and creates inside it refers to no user code. Nests,
    and is per thread."""
    if _TracebackScope is None:  # a jaxlib without the scope (none of 0.10-0.11)
        return contextlib.nullcontext()
    return _TracebackScope()


def direct_call(exe):
    """What runs the ahead-of-time executable ``exe`` (a ``jax.stages.Compiled`` called once
    already) without ``Compiled.__call__``'s Python frame (~0.8 us a call): the C++ callable
    that frame creates at the first call and hands every call to, unchanged (rejected
    arguments raise the same errors). ``exe`` itself where there is none (another object,
    or a jax that keeps no such callable)."""
    call = getattr(exe, "_call", None) if isinstance(exe, jax.stages.Compiled) else None
    return call if callable(call) else exe


# --- GPU memory split ----------------------------------------------------------------------
# NOTE: by default JAX's GPU client grabs 75% of device memory when it starts, leaving PyTorch's
# caching allocator starved. Our programs share the GPU with PyTorch, so unless the user chose
# an allocator policy, JAX allocates on demand. This only works before JAX starts its GPU
# client, which happens lazily on the first jax.devices()/jit call, never at import; torch2xla
# itself makes no such call before this line runs.
_JAX_MEMORY_VARS = (
    "XLA_PYTHON_CLIENT_PREALLOCATE",
    "XLA_PYTHON_CLIENT_MEM_FRACTION",
    "XLA_PYTHON_CLIENT_ALLOCATOR",
)
if not any(v in os.environ for v in _JAX_MEMORY_VARS):
    os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"


@functools.cache
def cpu_device() -> jax.Device:
    return jax.devices("cpu")[0]


def program_device(
    inputs: Sequence[torch.device], outputs: Sequence[torch.device] = ()
) -> torch.device:
    """The device a program runs on, from the devices of its tensor inputs and outputs.

    An accelerator wins over the CPU: eager lets a CUDA op take CPU 0-d tensors (a step
    counter, a Python scalar Dynamo passes as a tensor) and a graph may move CPU tensors to
    the GPU itself (``x.cuda()``), but one XLA program runs on one device. So the program runs
    on the first accelerator among the inputs, else among the outputs (a graph that creates
    CUDA tensors from CPU ones), else on the CPU; inputs and outputs elsewhere move (see
    ``XlaProgram``).
    """
    for devices in (inputs, outputs):
        for d in devices:
            if d.type != "cpu":
                return d
    return torch.device("cpu")


def same_device(a: torch.device, b: torch.device) -> bool:
    """``a`` and ``b`` are one device (an index of None is the current device, read as 0)."""
    return a.type == b.type and (a.index or 0) == (b.index or 0)


def host_copy(t: torch.Tensor) -> np.ndarray:
    """A numpy copy of the CPU tensor ``t``, for a program on another device: JAX transfers
    it (a 0-d tensor as a host scalar) and may read it after the call has returned, when
    torch may have changed ``t`` already (a step counter ``n += 1``)."""
    return np.array(to_jax(t), copy=True)


@functools.cache
def jax_device(device: torch.device) -> jax.Device:
    """The JAX device that holds the data of a torch tensor on ``device``.

    CPU tensors map to JAX's CPU device even where JAX's default backend is a GPU.
    """
    if device.type == "cpu":
        return cpu_device()
    if device.type == "cuda":
        index = torch.cuda.current_device() if device.index is None else device.index
        # Starting JAX's GPU client can leave another device current for this thread, after
        # which torch refuses to export tensors of its own current device: restore it.
        with torch.cuda.device(torch.cuda.current_device()):
            return jax.devices("gpu")[index]
    raise ValueError(f"torch2xla: tensors on {device} are not supported (cpu and cuda are)")


def host_view(t: torch.Tensor) -> np.ndarray:
    """A numpy array over the memory of the CPU tensor ``t`` (its strides kept), which keeps
    ``t`` alive.

    NOTE: not ``t.numpy()``: torch marks a storage it hands to numpy non-resizable for good, so
    a later ``resize_`` of a compiled call's input (FSDP2 frees its unsharded parameters so)
    would raise where eager runs. Built over ctypes memory as ``to_torch_cpu``, ~1 us. A tensor
    with a conjugate or negative bit, which numpy knows nothing of, is viewed resolved (a copy):
    ``to_jax`` of a CPU tensor.
    """
    if t.is_conj() or t.is_neg():
        t = t.resolve_conj().resolve_neg()
    dtype = TORCH_TO_JAX_DTYPE[t.dtype]
    n = t.numel()
    if not n:
        return np.empty(t.shape, dtype)
    itemsize = dtype.itemsize
    if t.is_contiguous():
        memory = (_BYTE * (n * itemsize)).from_address(t.data_ptr())
        memory.tensor = t
        return np.ndarray(t.shape, dtype, memory)
    # (a cotangent of ``.sum()`` is expanded, stride 0, on every backward: the span and the
    # byte strides in C, no generator frames)
    shape, stride = t.shape, t.stride()
    span = 1 + sum(map(operator.mul, shape, stride)) - sum(stride)  # (sum of (size - 1) * step)
    memory = (_BYTE * (span * itemsize)).from_address(t.data_ptr())
    memory.tensor = t
    return np.ndarray(shape, dtype, memory, 0, tuple(map(itemsize.__mul__, stride)))


def to_jax(t: torch.Tensor, ordered: bool = True):
    """A zero-copy view of ``t`` that JAX accepts as a jitted-function argument.

    On CPU that is a numpy view (~1 us, against ~20-50 us for ``jax.dlpack``); on CUDA a DLPack
    import, which makes the consuming JAX computation wait for the work queued so far on torch's
    current stream (no host sync); with ``ordered`` False it does not (``_CudaLink.to_jax``).
    Call it inside ``x64()``: outside it, JAX truncates 64-bit DLPack imports to 32 bits.
    """
    if t.requires_grad:
        t = t.detach()
    if t.is_cpu:  # (its bits resolved there)
        return host_view(t)
    if t.is_conj() or t.is_neg():  # (DLPack refuses these bits)
        t = t.resolve_conj().resolve_neg()
    if not t.is_contiguous():
        t = t.contiguous()
    strides = _row_major(t.shape)
    if t.stride() != strides and t.numel():  # see ViewCache._import
        t = t.as_strided(t.shape, strides)
    link = _links.get(t.device.index) or _cuda_link(t.device.index)
    if link is not None:
        return link.to_jax(t, ordered)
    # (no stream of JAX's to hand the import to: JAX's own path)
    if t.device.index != torch.cuda.current_device():
        # torch exports only tensors of the current CUDA device.
        with torch.cuda.device(t.device):
            return jax.dlpack.from_dlpack(t)
    return jax.dlpack.from_dlpack(t)


def to_torch(a: jax.Array) -> torch.Tensor:
    """A zero-copy torch tensor over the buffer of the JAX array ``a``.

    On CUDA, torch's current stream is made to wait for the computation that produces ``a``.
    """
    return torch.from_dlpack(a)


def cuda_to_torch(device: jax.Device):
    """``to_torch`` for arrays on JAX's GPU ``device`` (a program's outputs): what
    ``torch.from_dlpack`` does (torch's current stream waits, on the GPU, for the array's
    computation), without its Python (~5 us an output against ~20). ``to_torch`` itself where
    jaxlib lacks the export."""
    export = getattr(_jaxlib_ext, "buffer_to_dlpack_managed_tensor", None)
    if export is None:
        return to_torch
    index = device.local_hardware_id
    current_stream, from_dlpack = torch._C._cuda_getCurrentRawStream, torch._C._from_dlpack

    def to_torch_cuda(a: jax.Array) -> torch.Tensor:
        if not a.size:  # (resizable, as eager's: see ``to_torch_cpu``)
            return torch.empty(
                a.shape, dtype=torch_dtype(a.dtype), device=torch.device("cuda", index)
            )
        # (DLPack names the legacy default stream 1, as torch.from_dlpack passes it)
        return note(from_dlpack(export(a, stream=current_stream(index) or 1)), a)

    return to_torch_cuda


class _CudaLink:
    """The DLPack import of torch's tensors on one CUDA device into JAX, without the Python of
    ``jax.dlpack.from_dlpack`` and ``Tensor.__dlpack__`` (~50 us a tensor, ~8 here).

    The ordering is theirs: JAX's stream for external arrays waits (on the GPU) for the work
    queued so far on torch's current stream, and the imported buffer is defined on that
    stream, so the JAX computation that reads it runs after torch's writes. Event and stream
    objects are made once (per thread: torch's current stream is per thread)."""

    def __init__(self, index: int, device: jax.Device, stream: int) -> None:
        self.index, self.device, self.stream = index, device, stream
        with torch.cuda.device(index):
            self.waiter = torch.cuda.ExternalStream(stream)
        self.local = threading.local()

    def to_jax(self, t: torch.Tensor, ordered: bool = True):
        """The import of ``t``; with ``ordered`` False, without the wait on torch's stream:
        for a call's imports but its last (``ViewCache``: the fence). NOTE: JAX lets only
        ~20-30 imports wait at once: measured on an H200, the optimizer step after a Llama
        backward (146 fresh gradients, torch's stream behind the backward) blocked the host
        ~110 ms in the imports past those, until the backward had finished on the GPU."""
        if not ordered:
            if t.device.index != torch.cuda.current_device():
                with torch.cuda.device(t.device):
                    capsule = torch._C._to_dlpack(t)
            else:
                capsule = torch._C._to_dlpack(t)
            return _jaxlib_ext.dlpack_managed_tensor_to_buffer(capsule, self.device, None)
        local = self.local
        streams = getattr(local, "streams", None)
        if streams is None:
            streams = local.streams = {}
            with torch.cuda.device(self.index):
                local.event = torch.cuda.Event()
        raw = torch._C._cuda_getCurrentRawStream(self.index)
        current = streams.get(raw)
        if current is None:
            if len(streams) > 64:  # (streams a user made and dropped)
                streams.clear()
            current = streams[raw] = torch.cuda.current_stream(self.index)
        if t.device.index != torch.cuda.current_device():
            with torch.cuda.device(t.device):
                capsule = torch._C._to_dlpack(t)
        else:
            capsule = torch._C._to_dlpack(t)
        event = local.event
        event.record(current)
        self.waiter.wait_event(event)
        return _jaxlib_ext.dlpack_managed_tensor_to_buffer(capsule, self.device, self.stream)


_links: dict[int, _CudaLink | None] = {}


def _cuda_link(index: int) -> _CudaLink | None:
    """The ``_CudaLink`` of CUDA device ``index``, or None where JAX offers no stream for
    external arrays (then ``jax.dlpack`` runs the import)."""
    if index in _links:
        return _links[index]
    link = None
    if _jaxlib_ext is not None and hasattr(_jaxlib_ext, "dlpack_managed_tensor_to_buffer"):
        device = jax_device(torch.device("cuda", index))
        try:
            stream = device.get_stream_for_external_ready_events()
        except jax.errors.JaxRuntimeError:  # UNIMPLEMENTED on this platform
            stream = None
        if stream:
            link = _CudaLink(index, device, stream)
    _links[index] = link
    return link


def _host_types() -> dict[np.dtype, tuple[np.dtype, torch.dtype | None]]:
    """numpy dtype to view each JAX dtype's memory as, and the torch dtype to view that tensor
    as where torch reads the memory as another type (bfloat16, float8)."""
    out: dict[np.dtype, tuple[np.dtype, torch.dtype | None]] = {}
    for tdtype, ndtype in TORCH_TO_JAX_DTYPE.items():
        if ndtype.kind in "biufc" and ndtype.type.__module__ == "numpy":
            out[ndtype] = (ndtype, None)
        else:  # ml_dtypes' types, which torch.from_numpy does not know: same-size integers
            out[ndtype] = (np.dtype({2: "<i2", 1: "|u1"}[ndtype.itemsize]), tdtype)
    return out


_HOST_TYPES = _host_types()
_BYTE = ctypes.c_char


def to_torch_cpu(a: jax.Array) -> torch.Tensor:
    """``to_torch`` for arrays on JAX's CPU device, zero-copy.

    NOTE: ``torch.from_dlpack`` costs ~6 us per fresh JAX array (JAX's export runs in Python),
    ``np.asarray`` ~1.3 us but yields a read-only array (torch warns on those). The array's
    own buffer, presented to numpy as writable ctypes memory, costs ~1.2 us (~0.5 less than
    numpy's array interface, whose dict numpy parses): the program has finished writing it
    (``block_until_ready``), JAX never hands it to anyone else (outputs alias no input), and
    the tensor keeps the array alive (tensor -> numpy array -> ctypes memory -> array), and no
    longer: through jaxlib's C++ DLPack export (~0.7 us) the array outlived the tensor until
    Python's next garbage collection (an LM's logits held past their last use;
    ``tests/test_train_memory.py``). Empty outputs are torch's own tensors: a storage over
    foreign memory cannot grow, and users grow empty tensors (``o = torch.empty(0)`` then
    ``torch.add(x, 1, out=o)``, where Dynamo breaks the graph between the two, so ``o`` is a
    compiled output).
    """
    a.block_until_ready()
    aval = a.aval  # (its shape and dtype: ``a.shape`` and ``a.dtype`` are Python frames)
    shape = aval.shape
    view, tdtype = _HOST_TYPES[aval.dtype]
    nbytes = math.prod(shape) * view.itemsize
    if not nbytes:
        return torch.empty(shape, dtype=torch_dtype(aval.dtype), device="cpu")
    memory = (_BYTE * nbytes).from_address(a.unsafe_buffer_pointer())
    memory.array = a
    t = torch.from_numpy(np.ndarray(shape, view, memory))
    return t if tdtype is None else t.view(tdtype)


def cut_cpu(a: jax.Array, group) -> list:
    """Torch tensors over consecutive pieces of the flat array ``a`` on JAX's CPU device (a
    packed buffer, ``_pack``): ``group``'s piece ``j`` has ``group.sizes[j]`` elements, viewed
    as ``group.shapes[j]``.

    NOTE: zero-copy as ``to_torch_cpu``, without torch ops: converting the buffer and cutting
    it with torch's ``split`` and a ``view`` per piece cost ~3x as much. Each piece is a tensor
    of its own (not a view), as eager's gradients are.
    """
    memory, view, tdtype = _host_memory_of(a)
    out, offset, itemsize = [], 0, view.itemsize
    for shape, size in zip(group.shapes, group.sizes):
        if not size:
            out.append(torch.empty(shape, dtype=torch_dtype(a.aval.dtype), device="cpu"))
            continue
        t = torch.from_numpy(np.ndarray(shape, view, memory, offset))
        out.append(t if tdtype is None else t.view(tdtype))
        offset += size * itemsize
    return out


def cut_cpu_views(a: jax.Array, group) -> list:
    """``cut_cpu``'s pieces as views of one tensor over the buffer, for pieces that only torch2xla
    reads (the new values of mutated inputs, copied into them): one ``unbind`` per run of
    pieces of one shape (``_pack._Group.runs``, ~0.35 us a piece) where ``cut_cpu`` makes a
    numpy array and a tensor of each (~0.85 us): 584 pieces in an AdamW step of 146
    parameters. (Packed pieces are never empty: ``_pack.plan``.)"""
    memory, view, tdtype = _host_memory_of(a)
    flat = torch.from_numpy(np.ndarray((len(memory) // view.itemsize,), view, memory))
    if tdtype is not None:
        flat = flat.view(tdtype)
    out: list = []
    for shape, strides, offset, count in group.runs:
        run = flat.as_strided(shape, strides, offset)
        if count == 1:
            out.append(run)
        else:
            out += run.unbind(0)
    return out


def _host_memory_of(a: jax.Array) -> tuple[Any, np.dtype, torch.dtype | None]:
    """The buffer of the array ``a`` on JAX's CPU device, once the program wrote it, as
    writable ctypes memory that keeps ``a`` alive (as in ``to_torch_cpu``); the numpy dtype to
    view it as, and the torch dtype to view that tensor as (None: the same)."""
    a.block_until_ready()
    aval = a.aval  # (as in ``to_torch_cpu``)
    view, tdtype = _HOST_TYPES[aval.dtype]
    memory = (_BYTE * (math.prod(aval.shape) * view.itemsize)).from_address(
        a.unsafe_buffer_pointer()
    )
    memory.array = a
    return memory, view, tdtype


# A call's CUDA imports that wait for torch's stream themselves; past them, one fence does.
_ORDERED_IMPORTS = 8
_ORDERED, _UNORDERED = 1, 2


class ViewCache:
    """Zero-copy JAX views of the tensors that come back call after call at the same position
    (parameters and buffers), so that each is imported once rather than on every call.

    A position's view is reused while the same tensor object arrives there with the same data
    pointer. The view aliases the tensor's memory, so in-place updates (optimizer steps,
    BatchNorm statistics) are seen without a new import; a view is kept only where JAX really
    aliased the memory (it copies misaligned data). A tensor is cached the second time it is
    seen at a position, so inputs that change every call pin no memory; a cached view is
    dropped when its tensor dies.

    NOTE: on CUDA a cached view carries no ordering against torch's stream, while a DLPack
    import makes the program wait for all work queued on torch's current stream so far; but
    JAX lets only ~20-30 such imports wait at once (``_CudaLink.to_jax``), so a call's imports
    past its first ``_ORDERED_IMPORTS`` are unordered. A call that made unordered imports, or
    that imported nothing afresh after torch wrote to a cached tensor (its version counter
    moved), imports one tensor again last, ordered, as a fence (the program waits for all its
    inputs, so for all torch's work queued before the fence): ``__call__`` says when.
    """

    __slots__ = (
        "__weakref__",
        "_donated",
        "_fast",
        "_lock",
        "_ordered_left",
        "_ptrs",
        "_refs",
        "_versions",
        "_views",
        "_writes",
    )

    def __init__(
        self, n: int, fresh: Sequence[int] = (), writes: bool = True, donated: Sequence[int] = ()
    ) -> None:
        """A cache for ``n`` positions; those in ``fresh`` are converted afresh on every call.
        With ``writes`` False (CPU programs, which need no fence), torch's writes to cached
        tensors are not tracked and no call asks for a fence. With ``writes`` True, a tensor
        our programs exported arrives at a position outside ``donated`` (the positions the
        program writes in place) as the array it was exported from (``_exported``)."""
        self._donated = frozenset(donated) if writes else None
        self._ordered_left = _ORDERED_IMPORTS
        self._refs: list = [None] * n
        self._ptrs: list[int] = [0] * n
        self._versions: list[int] = [0] * n
        self._views: list = [None] * n
        self._writes = writes
        self._fast: _Fast | None = None
        # One call at a time: the positions' records (reference, pointer, view) are read and
        # written in several steps, so concurrent calls of one program with other tensors
        # (two replicas of a model in two threads) read another call's half-made record: a
        # None view, or the other call's tensor (~0.1 us a call when no other thread waits)
        self._lock = threading.Lock()
        for i in fresh:
            self._refs[i] = _NEVER
        CACHES.add(self)  # (``forget``: before torch.utils.swap_tensors, ``_swap``)

    def __call__(self, tensors: Sequence[torch.Tensor], whole: bool = False) -> tuple[list, bool]:
        """JAX views of ``tensors`` (call inside ``x64()``), and whether a fence is needed (on
        CUDA: an unordered import was made, or torch wrote to a cached tensor since the last
        call and nothing was imported). ``whole``: where every view is the cached one and no
        fence is due, the cached tuple itself (``_Fast.views``, for a caller that changes
        nothing in it: ``XlaProgram``'s steady call recognizes it), not a list."""
        with self._lock:
            self._ordered_left = _ORDERED_IMPORTS
            fast = self._fast
            if fast is not None:
                # (``_Fast``'s check, inlined: a frame less on every call)
                cached = fast.pick(tensors)
                if list(map(id, cached)) == fast.ids and list(map(_data_ptr, cached)) == fast.ptrs:
                    if not fast.volatile and not self._writes:
                        return (fast.views if whole else list(fast.views)), False
                    out = list(fast.views)
                    if not fast.volatile:
                        return out, fast.written(cached)
                    fresh, settled = 0, False
                    for i in fast.volatile:
                        out[i], imported, _ = self._one(i, tensors[i])
                        fresh = max(fresh, imported)
                        # (cached now: seen again after it changed, as after ``p.data = t``)
                        settled = settled or (imported and self._views[i] is not None)
                    if settled:  # (else it would stay volatile, checked one by one, for good)
                        self._fast = _Fast.of(self, tensors)
                    if not self._writes:
                        return out, False
                    written = fast.written(cached)
                    return out, fresh == _UNORDERED or (written and not fresh)
            out = []
            fresh, written = 0, False
            for i, t in enumerate(tensors):
                view, imported, wrote = self._one(i, t)
                out.append(view)
                fresh = max(fresh, imported)
                written = written or wrote
            # (where no view is cached, every position is new each call: no check to make)
            cached = any(map(operator.is_not, self._views, _NONES))
            self._fast = _Fast.of(self, tensors) if cached else None
            return out, self._writes and (fresh == _UNORDERED or (written and not fresh))

    def adopt(self, pairs: Sequence[tuple[int, int]], views: Sequence, outs: Sequence) -> None:
        """After a call that donated the views at some positions (``pairs``: output, position;
        ``_in_place``): where the donated view was the cached one, the output written into
        the same memory becomes the cached view (the donated one is deleted); where XLA put
        the output elsewhere, the position is imported again next time."""
        with self._lock:
            fast, cached, moved = self._fast, self._views, False
            fast_views = None if fast is None else list(fast.views)
            for o, k in pairs:
                if cached[k] is not views[k]:
                    continue  # (imported afresh: nothing cached was donated)
                new = outs[o]
                if new.unsafe_buffer_pointer() != self._ptrs[k]:
                    new, moved = None, True
                cached[k] = new
                if fast_views is not None:
                    fast_views[k] = new
            if moved:
                self._fast = None  # (the position-by-position path imports it again)
            elif fast is not None:
                fast.views = tuple(fast_views)

    def forget(self, t: torch.Tensor) -> None:
        """Drop the records of ``t`` and the weak references to it (``_swap``)."""
        with self._lock:
            for i, ref in enumerate(self._refs):
                if ref is not None and ref() is t:
                    self._refs[i] = self._views[i] = self._fast = None

    def _one(self, i: int, t: torch.Tensor) -> tuple[Any, int, bool]:
        """The view at position ``i`` of ``t``; whether it was imported afresh (0: no,
        ``_ORDERED``, ``_UNORDERED``: see ``_ordered``); whether torch wrote to the cached
        tensor since the last call."""
        ref = self._refs[i]
        if ref is not None:
            if ref() is t and t.data_ptr() == self._ptrs[i]:
                view = self._views[i]
                if view is None:
                    ordered = not self._writes or self._ordered()
                    view = self._views[i] = self._import(i, t, ordered)
                    return view, _ORDERED if ordered else _UNORDERED, False
                if self._writes and t._version != self._versions[i]:
                    self._versions[i] = t._version
                    return view, 0, True
                return view, 0, False
            if ref is _NEVER:
                return to_jax(t), _ORDERED, False
        # (an array of ours already ordered on JAX's stream: no import, so no fence either)
        view = None if self._donated is None or i in self._donated else array_of(t)
        imported = 0
        if view is None:
            ordered = not self._writes or self._ordered()  # (CPU: no frame)
            view = to_jax(t, ordered)
            imported = _ORDERED if ordered else _UNORDERED
        if not t.is_inference():  # (no version counter to see torch's writes by: never cached)
            self._refs[i], self._ptrs[i], self._versions[i] = (
                weakref.ref(t),
                t.data_ptr(),
                t._version,
            )
            self._views[i] = None
        return view, imported, False

    def _ordered(self) -> bool:
        """Whether this call's next CUDA import waits for torch's stream itself: its first
        ``_ORDERED_IMPORTS`` do, the rest (``_UNORDERED``) are ordered by a fence after them
        (``_CudaLink.to_jax``: JAX lets only ~20-30 ordered imports wait at once)."""
        self._ordered_left -= 1
        return self._ordered_left >= 0

    def _import(self, i: int, t: torch.Tensor, ordered: bool = True):
        """The view of ``t`` to cache at position ``i``, where it was seen twice in a row."""
        d = t.detach()
        view = None
        if (
            d.dtype in _DLPACK_DTYPES
            and d.numel()
            and d.is_contiguous()
            and not (d.is_conj() or d.is_neg())
        ):
            # A jax.Array, on CPU too: JAX dispatches an array argument in ~0.3 us and a numpy
            # one in ~3 us (it wraps the numpy memory in a new buffer on every call); the
            # import (~35 us on CPU) is paid once. NOTE: jax.jit would compile again when a
            # position switches from numpy (first calls) to jax.Array; programs are called
            # through their ahead-of-time ``Compiled`` executables, which accept both.
            strides = _row_major(d.shape)
            if d.stride() != strides:
                # NOTE: strides of size-1 dims are arbitrary in a contiguous torch tensor, and
                # JAX reads them as a layout of the imported array, which an executable
                # compiled for the default layout rejects. Same memory, canonical strides:
                d = d.as_strided(d.shape, strides)
            view = jax.dlpack.from_dlpack(d) if d.device.type == "cpu" else to_jax(d, ordered)
            if view.unsafe_buffer_pointer() != d.data_ptr():
                view = None  # JAX copied (misaligned data): a copy would go stale
        if view is None and d.device.type == "cpu" and not (d.is_conj() or d.is_neg()):
            # a numpy view: JAX aliases aligned numpy memory, copies the rest (not of a tensor
            # with a conjugate or negative bit: ``to_jax`` resolves those into a copy, which
            # would go stale when torch writes the tensor)
            view = to_jax(d)
        if view is None:
            self._refs[i] = _NEVER  # convert this position afresh on every call
            return to_jax(t)
        this = weakref.ref(self)
        # drop=_drop: at interpreter exit module globals may already be None.
        self._refs[i] = weakref.ref(t, lambda _, i=i, drop=_drop: drop(this, i))
        return view


def pin_row_major(x):
    """(traced) ``x`` constrained to the row-major layout: an output torch reads, next to
    outputs whose layouts XLA chooses (``Layout.AUTO``), where JAX would let XLA choose its
    layout too."""
    return with_layout_constraint(x, Layout(major_to_minor=tuple(range(np.ndim(x)))))


def _row_major(shape: Sequence[int]) -> tuple[int, ...]:
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


# Dtypes both torch and JAX exchange through DLPack.
_DLPACK_DTYPES = frozenset(
    {
        torch.float16,
        torch.bfloat16,
        torch.float32,
        torch.float64,
        torch.complex64,
        torch.complex128,
        torch.int8,
        torch.int16,
        torch.int32,
        torch.int64,
        torch.uint8,
        torch.bool,
    }
)


def _drop(cache_ref: weakref.ref, i: int) -> None:
    cache = cache_ref()
    if cache is not None:
        cache._refs[i] = cache._views[i] = cache._fast = None


class _Fast:
    """``ViewCache``'s check of the positions whose cached view the last call reused: the same
    tensor objects (ids: while the cache holds them, no death has been reported, so no id was
    reused) with the same data pointers, two comparisons of lists made in C (``map``), in one
    pass each (~0.2 us a tensor against ~2 for the position-by-position check). Other
    positions ("volatile": a new tensor every call) still go through that check."""

    __slots__ = ("ids", "pick", "ptrs", "trusted", "versions", "views", "volatile", "writes")

    def __init__(self, pick, ids, ptrs, versions, views, volatile) -> None:
        # ``pick(tensors)``: the tensors at the cached positions, in order
        self.pick, self.ids, self.ptrs = pick, ids, ptrs
        self.versions, self.views, self.volatile = versions, views, volatile
        # the executable's unchecked call (``_steady.SteadyCall``) once its checked call
        # accepted ``views`` (set by ``XlaProgram``, whose cache this is)
        self.trusted = None
        # the program's packed writes into these tensors (``_host_writes.HostWrites``; None:
        # not planned yet, False: none), likewise
        self.writes = None

    @staticmethod
    def of(cache: ViewCache, tensors: Sequence[torch.Tensor]) -> _Fast | None:
        """The check for the positions ``cache`` holds a view of now (None if none)."""
        views, refs = cache._views, cache._refs
        cached = tuple(
            i
            for i, v in enumerate(views)
            if v is not None and refs[i] is not None and refs[i]() is tensors[i]
        )
        if not cached:
            return None
        held = set(cached)
        volatile = tuple(i for i in range(len(views)) if i not in held)
        if not volatile:
            pick = tuple  # (every position: the tensors as they come, as a tuple)
        elif len(cached) == 1:
            pick = functools.partial(_one_of, cached[0])
        else:
            pick = operator.itemgetter(*cached)
        return _Fast(
            pick,
            [id(tensors[i]) for i in cached],
            [cache._ptrs[i] for i in cached],
            [cache._versions[i] for i in cached] if cache._writes else None,
            tuple(views),
            volatile,
        )

    def written(self, cached: Sequence[torch.Tensor]) -> bool:
        """Whether torch wrote to a cached tensor (``cached``: ``pick`` of the call's tensors)
        since this was last asked (a fence is due)."""
        versions = list(map(_version_of, cached))
        if versions == self.versions:
            return False
        self.versions = versions
        return True


_data_ptr = torch.Tensor.data_ptr
_NONES = itertools.repeat(None)
_version_of = operator.attrgetter("_version")


def _one_of(i: int, tensors: Sequence) -> tuple:
    return (tensors[i],)


def _never() -> None:
    return None


# A position marked with this is never cached (its weakref "target" is always None).
_NEVER = _never


def jnp_array(value, dtype: torch.dtype | None = None) -> jax.Array:
    """A JAX constant from a torch tensor or Python value (used at trace time only)."""
    with x64():
        if isinstance(value, torch.Tensor):
            value = value.detach().cpu().resolve_conj().resolve_neg()
            return jnp.asarray(host_view(value))
        return jnp.asarray(value, dtype=None if dtype is None else jax_dtype(dtype))
