"""Session 23: inputs that share memory, called in changing patterns (scripts/probe_aliasing.py).

- A graph with ``as_strided`` whose written inputs overlap (``f(base[2:10], base[3:7])``): the
  explicit storage offset counts from the storage's start in eager; the program counted it
  from the first input's first element (the overlapping inputs' base started there).
- Inputs that share a storage share eager's version counter: the write-back counted each
  input's writes as Dynamo's example inputs shared them, not as the call's do.
"""

import pytest
import torch

from tests._util import assert_same


def _write_then_read_as_strided(a, b):
    b.add_(1)
    return a.as_strided((2, 2), (1, 2), 1) * 1, a.as_strided((3,), (1,), 2) + 0


@pytest.mark.parametrize(
    "views",
    [
        lambda t: (t[2:10], t[3:7]),  # the group starts at 2: offset 1 reads before it
        lambda t: (t[4:12], t[5:9]),  # another start, the same layout within the group
        lambda t: (t[2:10], t[0:4]),  # the group starts before the first input
        lambda t: (t[1:9], t[1:9]),  # the same slice twice
    ],
    ids=["before", "moved", "second-first", "same"],
)
def test_as_strided_offset_of_overlapping_written_inputs(views):
    f = torch.compile(_write_then_read_as_strided, backend="xla")
    for _ in range(2):  # (the second call: the cached program)
        base = torch.arange(12.0)
        ref_base = base.clone()
        out = f(*views(base))
        ref = _write_then_read_as_strided(*views(ref_base))
        assert_same(out, ref)
        assert_same(base, ref_base)


def test_as_strided_offset_one_program_per_offset_sequence():
    # one compiled function fed overlapping groups at several storage offsets, then distinct
    # inputs, then overlapping ones again: each call reads what eager reads
    f = torch.compile(_write_then_read_as_strided, backend="xla")
    for make in (
        lambda t: (t[2:10], t[3:7]),
        lambda t: (t[3:11], torch.zeros(4)),
        lambda t: (t[3:11], t[4:8]),
        lambda t: (t[2:10], t[3:7]),
    ):
        base = torch.arange(12.0) * 0.5
        ref_base = base.clone()
        assert_same(f(*make(base)), _write_then_read_as_strided(*make(ref_base)))
        assert_same(base, ref_base)


def test_as_strided_past_the_overlapping_inputs_reads_the_storage():
    # (an offset past the group's end: read from the caller's storage as eager)
    def g(a, b):
        b.mul_(2)
        return a.as_strided((3,), (2,), 9) + 0

    f = torch.compile(g, backend="xla")
    base, ref_base = torch.arange(20.0), torch.arange(20.0)
    assert_same(f(base[2:10], base[3:7]), g(ref_base[2:10], ref_base[3:7]))
    assert_same(base, ref_base)


def _two_writes(a, b):
    a.add_(1)
    a.mul_(2)
    b.mul_(3)
    return a.sum() + b.sum()


def _disjoint_views():
    y = torch.zeros(3, 4)
    return y, (y[:, :2], y[:, 2:])


def _distinct():
    a, b = torch.zeros(3, 2), torch.zeros(3, 2)
    return a, (a, b)


def _overlapping():
    y = torch.zeros(8)
    return y, (y[0:4], y[2:6])


def _same():
    y = torch.zeros(4)
    return y, (y, y)


_MAKES = {"views": _disjoint_views, "distinct": _distinct, "overlap": _overlapping, "same": _same}


@pytest.mark.parametrize(
    "order",
    [
        ("distinct", "views", "distinct", "views"),
        ("views", "distinct", "views", "distinct"),
        ("overlap", "distinct", "views", "overlap"),
        ("distinct", "overlap", "same", "views"),
        ("same", "views", "distinct", "same"),
    ],
)
def test_versions_follow_the_calls_sharing_of_storage(order):
    # eager bumps a shared counter once per write into any view of it: with views of one
    # tensor each input's version is every write's count, with distinct tensors its own
    f = torch.compile(_two_writes, backend="xla")
    for name in order:
        base, args = _MAKES[name]()
        ref_base, ref_args = _MAKES[name]()
        assert_same(f(*args), _two_writes(*ref_args))
        assert_same(base, ref_base)
        assert [t._version for t in (base, *args)] == [t._version for t in (ref_base, *ref_args)]


def test_versions_of_shared_storage_with_dynamic_shapes():
    def views(n):
        y = torch.zeros(n, 4)
        return y, (y[:, :2], y[:, 2:])

    def distinct(n):
        a = torch.zeros(n, 2)
        return a, (a, torch.zeros(n, 2))

    f = torch.compile(_two_writes, backend="xla", dynamic=True)
    for n in (4, 6, 4, 5):
        for make in (views, distinct):
            base, args = make(n)
            ref_base, ref_args = make(n)
            assert_same(f(*args), _two_writes(*ref_args))
            assert_same(base, ref_base)
            got = [t._version for t in (base, *args)]
            assert got == [t._version for t in (ref_base, *ref_args)]


def test_versions_of_views_of_a_module_buffer():
    # a static-cache style buffer: keys and values are two views of one tensor
    class Cache(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("kv", torch.zeros(2, 3, 4))

        def forward(self, k, v, x):
            k.add_(x)
            v.sub_(x)
            v.mul_(2)
            return k.sum() + v.sum()

    m, ref_m = Cache(), Cache()
    f = torch.compile(m, backend="xla")
    x = torch.ones(3, 4)
    for step in range(3):
        if step == 1:  # then separate tensors, then views again
            k, v = torch.zeros(3, 4), torch.zeros(3, 4)
            rk, rv = torch.zeros(3, 4), torch.zeros(3, 4)
        else:
            k, v = m.kv[0], m.kv[1]
            rk, rv = ref_m.kv[0], ref_m.kv[1]
        assert_same(f(k, v, x), ref_m(rk, rv, x))
        assert_same(m.kv, ref_m.kv)
        assert (k._version, v._version, m.kv._version) == (
            rk._version,
            rv._version,
            ref_m.kv._version,
        )


def test_saved_tensor_check_after_writes_into_shared_views():
    # autograd's check reads the version: a backward through a product that saved the base
    # raises as eager once both views were written by the compiled call
    def g(a, b):
        a.add_(1)
        b.add_(1)
        return a.sum()

    f = torch.compile(g, backend="xla")
    for fn in (f, g):
        w = torch.ones(3, 4, requires_grad=True)
        y = w * 1
        z = (y * y).sum()  # saves y
        with torch.no_grad():
            fn(y[:, :2], y[:, 2:])
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            z.backward()


class _ReadsW(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.arange(4.0) + 1)

    def forward(self, x):
        x.mul_(2)
        return self.w * 3, x + self.w


@pytest.mark.parametrize(
    "alias",
    [
        lambda w: w.detach(),
        lambda w: w.detach()[:],
        lambda w: w.detach()[1:3].repeat(2),  # (a copy: no alias)
        lambda w: w.detach().view(2, 2)[0].repeat(2),
    ],
    ids=["detach", "slice", "copy", "copy2"],
)
def test_argument_aliasing_a_parameter_the_graph_reads(alias):
    # the parameter is not written by the graph, the argument is: the program built for
    # distinct tensors served a call whose argument was the parameter's memory
    m, ref = _ReadsW(), _ReadsW()
    f = torch.compile(m, backend="xla")
    with torch.no_grad():
        assert_same(f(torch.ones(4)), ref(torch.ones(4)))
        for _ in range(2):
            assert_same(f(alias(m.w)), ref(alias(ref.w)))
            assert_same(m.w, ref.w)
        assert_same(f(torch.ones(4)), ref(torch.ones(4)))


def test_argument_aliasing_a_buffer_of_a_sub_module():
    m = torch.nn.Sequential(torch.nn.BatchNorm1d(3)).eval()
    ref = torch.nn.Sequential(torch.nn.BatchNorm1d(3)).eval()

    def g(mod, x, s):
        s.add_(1.0)  # s is the running mean's memory in the second call
        return mod(x)

    f = torch.compile(g, backend="xla")
    x = torch.arange(6.0).reshape(2, 3)
    with torch.no_grad():
        assert_same(f(m, x, torch.zeros(3)), g(ref, x, torch.zeros(3)))
        for _ in range(2):
            out = f(m, x, m[0].running_mean.detach())
            assert_same(out, g(ref, x, ref[0].running_mean.detach()))
            assert_same(m[0].running_mean, ref[0].running_mean)
