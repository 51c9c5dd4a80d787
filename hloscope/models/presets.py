"""Model presets: the one place that says what `--model NAME` means for every framework.

`vit-base` is the benchmark's model (HuggingFace's default ViTConfig with 1000 labels). The smaller presets keep the
same architecture so that CPU runs exercise the same graph structure in seconds.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from hloscope.errors import UsageError


@dataclass(frozen=True)
class VitPreset:
    name: str
    image_size: int
    patch_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int
    num_labels: int
    num_channels: int = 3

    def vit_config_kwargs(self) -> dict:
        """Keyword arguments for transformers.ViTConfig (shared by the PyTorch and Flax models)."""
        kwargs = asdict(self)
        kwargs.pop("name")
        return kwargs

    def describe(self) -> str:
        return (f"{self.name}: {self.image_size}x{self.image_size}, patch {self.patch_size}, hidden {self.hidden_size}, "
                f"{self.num_hidden_layers} layers, {self.num_attention_heads} heads, MLP {self.intermediate_size}, "
                f"{self.num_labels} labels")


PRESETS: dict[str, VitPreset] = {
    # The benchmark's model: transformers' default ViTConfig (ViT-B/16) with 1000 labels.
    "vit-base": VitPreset("vit-base", image_size=224, patch_size=16, hidden_size=768, num_hidden_layers=12,
                          num_attention_heads=12, intermediate_size=3072, num_labels=1000),
    # Between the two: the same 224x224 input and patching as vit-base, a quarter of the width and depth.
    "vit-small": VitPreset("vit-small", image_size=224, patch_size=16, hidden_size=192, num_hidden_layers=4,
                           num_attention_heads=3, intermediate_size=768, num_labels=1000),
    # CPU tests and the README's main job: seconds per mode.
    "vit-tiny": VitPreset("vit-tiny", image_size=32, patch_size=8, hidden_size=64, num_hidden_layers=2,
                          num_attention_heads=4, intermediate_size=128, num_labels=10),
}


def get_preset(name: str) -> VitPreset:
    try:
        return PRESETS[name]
    except KeyError:
        raise UsageError(f"unknown model preset '{name}'; choose one of: {', '.join(PRESETS)}") from None
