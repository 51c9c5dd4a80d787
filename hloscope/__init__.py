"""hloscope: time a training step under PyTorch, torch.compile, PyTorch/XLA and JAX, and explain the difference."""

__version__ = "0.1.0"
