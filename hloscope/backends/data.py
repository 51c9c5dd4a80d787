"""Synthetic inputs shared by every mode, so all frameworks see the same images and labels for the same seed.

`--data device` uses a small fixed pool of batches created once and placed on the device (the timed step is the step
alone). `--data loader` reproduces the benchmark's input pipeline: a torch DataLoader over a dataset of random tensors,
drawn anew every step, so the loader's cost is part of the step.
"""

from __future__ import annotations

import numpy as np

from hloscope.errors import MissingDependency, UsageError
from hloscope.models.presets import Preset, ResNetPreset, TextPreset, VitPreset

POOL_SIZE = 4  # batches in the --data device pool: a few distinct batches, cycled; the loss still falls


def synthetic_pool(preset: Preset, batch_size: int, seed: int,
                   pool_size: int = POOL_SIZE) -> list[tuple[np.ndarray, np.ndarray]]:
    """`pool_size` batches of (images NCHW float32 in N(0,1), labels int32), deterministic in `seed`."""
    rng = np.random.default_rng(seed)
    if isinstance(preset, TextPreset):  # uniform token ids; a causal LM predicts its own input, shifted (labels = ids)
        pool = []
        for _ in range(pool_size):
            ids = rng.integers(0, preset.vocab_size, (batch_size, int(preset.seq_len or 0)), dtype=np.int32)
            labels = ids if preset.task == "causal_lm" else rng.integers(0, preset.num_labels, batch_size,
                                                                          dtype=np.int32)
            pool.append((ids, labels))
        return pool
    shape = (batch_size, preset.num_channels, preset.image_size, preset.image_size)
    return [(rng.standard_normal(shape, dtype=np.float32),
             rng.integers(0, preset.num_labels, batch_size, dtype=np.int32)) for _ in range(pool_size)]


PARITY_BATCH = "the first batch of the synthetic pool of --seed (images N(0, 1), uniform labels)"


def parity_batch(preset: Preset, batch_size: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """--check-parity's batch: the first batch of the pool of `seed` (NCHW float32, int32 labels), whatever --data says."""
    return synthetic_pool(preset, batch_size, seed, pool_size=1)[0]


def torch_loader(preset: Preset, batch_size: int, n_batches: int, seed: int):
    """The benchmark's pipeline: DataLoader(batch_size) over a dataset that makes a random image and label per item."""
    try:
        import torch
        from torch.utils.data import DataLoader, Dataset
    except ImportError:
        raise MissingDependency("torch", "--data loader uses torch's DataLoader") from None
    if isinstance(preset, TextPreset):
        raise UsageError(f"--data loader: the benchmark's DataLoader makes random images; {preset.name} takes token "
                         "ids (use --data device)")
    images: VitPreset | ResNetPreset = preset  # narrowed here: the class body below does not see the isinstance check

    class RandomImages(Dataset):
        def __len__(self) -> int:
            return n_batches * batch_size

        def __getitem__(self, index: int):
            image = torch.randn(images.num_channels, images.image_size, images.image_size)
            label = torch.randint(0, images.num_labels, ())
            return image, label

    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    return DataLoader(RandomImages(), batch_size=batch_size, shuffle=True, generator=generator, drop_last=True)
