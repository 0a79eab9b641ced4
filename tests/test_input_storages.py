"""A compiled call leaves its inputs' storages as eager leaves them: resizable.

torch marks a storage non-resizable for good once it is handed to numpy (``Tensor.numpy``).
Inputs reach JAX zero-copy, so a numpy view made that way would leave every input, parameter
and buffer of a compiled call unable to ``resize_`` afterwards, where eager can: FSDP2 frees
and re-allocates its unsharded parameters so, and raised "Trying to resize storage that is not
resizable" after the first compiled block.
"""

import torch
from torch import nn


def _resizable(*tensors):
    return [t.untyped_storage().resizable() for t in tensors]


def test_inputs_parameters_and_buffers_stay_resizable():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.BatchNorm1d(8), nn.ReLU())
    compiled = torch.compile(model, backend="xla")
    x = torch.randn(4, 8)
    xb = torch.randn(8, 4, dtype=torch.bfloat16).t()  # strided, bf16
    compiled(x).sum().backward()  # training: residuals, gradients, the stats' write-back
    compiled(x).sum().backward()
    with torch.no_grad():
        compiled.eval()
        compiled(x)
        compiled(x)
    f = torch.compile(lambda a: a * 2 + 1, backend="xla")
    f(xb)
    tensors = [x, xb, *model.parameters(), *model.buffers()]
    assert _resizable(*tensors) == [True] * len(tensors)


def test_storage_freed_and_reallocated_between_calls():
    # FSDP2's pattern: free a parameter's storage after the forward, allocate it again and
    # copy the data back before the next one; results as eager's.
    torch.manual_seed(0)
    model = nn.Linear(8, 3)
    compiled = torch.compile(model, backend="xla")
    x = torch.randn(5, 8)
    torch.testing.assert_close(compiled(x), model(x))
    saved = model.weight.detach().clone()
    storage = model.weight.untyped_storage()
    nbytes = storage.nbytes()
    storage.resize_(0)
    storage.resize_(nbytes)
    with torch.no_grad():
        model.weight.copy_(saved * 2)
    torch.testing.assert_close(compiled(x), model(x))
