"""Training: the vjp bridge to torch.autograd, residuals, the split backward, activation checkpointing, gradient connectivity (None or zeros, as eager)."""
