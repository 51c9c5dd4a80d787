"""`--optimizer sgd|adamw`: the one place that says what each optimizer is, with the same hyper-parameters in every
framework (torch.optim for the PyTorch and PyTorch/XLA modes, optax for JAX and torchax).

SGD: learning rate 0.01, no momentum, no weight decay (no state). AdamW: learning rate 0.01 and torch.optim.AdamW's
defaults, written out for optax, whose own defaults differ (weight decay 1e-4): betas (0.9, 0.999), eps 1e-8, weight
decay 0.01. Its state is two moments per parameter (exp_avg and exp_avg_sq; optax's mu and nu), in the parameters'
dtype, and a step count: one scalar per parameter tensor in torch.optim, one int32 for the whole tree in optax.
Importing this module imports no framework.
"""

from __future__ import annotations

from hloscope.errors import UsageError

OPTIMIZERS = ("sgd", "adamw")
LEARNING_RATE = 0.01
ADAMW_BETAS = (0.9, 0.999)
ADAMW_EPS = 1e-8
ADAMW_WEIGHT_DECAY = 0.01  # torch.optim.AdamW's default
# State tensors the optimizer keeps per parameter, each the parameter's size (the step count aside)
MOMENTS_PER_PARAMETER = {"sgd": 0, "adamw": 2}


def check(name: str) -> str:
    if name not in OPTIMIZERS:
        raise UsageError(f"unknown optimizer {name!r}; choose one of {', '.join(OPTIMIZERS)}")
    return name


def describe(name: str) -> str:
    """The optimizer and its hyper-parameters, in words (run.json environment.optimizer)."""
    if check(name) == "sgd":
        return f"SGD, learning rate {LEARNING_RATE:g}, no momentum, no weight decay"
    return (f"AdamW, learning rate {LEARNING_RATE:g}, betas {ADAMW_BETAS}, eps {ADAMW_EPS:g}, "
            f"weight decay {ADAMW_WEIGHT_DECAY:g}")


def optax_optimizer(name: str):
    """The optax GradientTransformation for `name`."""
    import optax

    if check(name) == "sgd":
        return optax.sgd(LEARNING_RATE)
    return optax.adamw(LEARNING_RATE, b1=ADAMW_BETAS[0], b2=ADAMW_BETAS[1], eps=ADAMW_EPS,
                       weight_decay=ADAMW_WEIGHT_DECAY)


def torch_optimizer(name: str, parameters):
    """The torch.optim optimizer for `name` over `parameters`."""
    import torch

    if check(name) == "sgd":
        return torch.optim.SGD(parameters, lr=LEARNING_RATE)
    return torch.optim.AdamW(parameters, lr=LEARNING_RATE, betas=ADAMW_BETAS, eps=ADAMW_EPS,
                             weight_decay=ADAMW_WEIGHT_DECAY)
