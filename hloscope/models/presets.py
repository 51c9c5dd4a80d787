"""Model presets: the one place that says what `--model NAME` means for every framework.

`vit-base` is the benchmark's model (HuggingFace's default ViTConfig with 1000 labels). The smaller presets keep the
same architecture so that CPU runs exercise the same graph structure in seconds.

Text presets (`TextPreset`) pair a PyTorch and a Flax class of the same transformers architecture (4.57.6), randomly
initialised from the config below (nothing is downloaded): GPT-2 and Llama causal LMs (next-token cross-entropy on the
input ids, shifted inside the model for PyTorch and in hloscope's loss for Flax) and BERT sequence classification
(cross-entropy on one label per sequence). They take `--seq-len` (default `seq_len`); inputs are uniform token ids.
Dropout is 0 in every preset, so the deterministic forward is the training one in every framework.

ResNet presets (`ResNetPreset`) pair ResNetForImageClassification and FlaxResNetForImageClassification; their
BatchNorm layers carry state the train step updates (PyTorch buffers, Flax `batch_stats`).

Every preset answers the same questions for the workloads: `input_name` (the model's keyword for its input), `task`,
`config_kwargs()` (recorded in run.json `config.model_config`), `torch_class` / `flax_class` (transformers names).
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass, field

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

    kind = "image"
    task = "classification"
    input_name = "pixel_values"
    torch_class = "ViTForImageClassification"
    flax_class = "FlaxViTForImageClassification"
    config_class = "ViTConfig"
    seq_len = None
    has_attention = True

    def config_kwargs(self) -> dict:
        return self.vit_config_kwargs()

    def transformers_config_kwargs(self) -> dict:
        return self.vit_config_kwargs()

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


@dataclass(frozen=True)
class ResNetPreset:
    """transformers' ResNetForImageClassification / FlaxResNetForImageClassification (NCHW images in both; the Flax
    wrapper transposes to NHWC, hloscope feeds its module NHWC as for the ViTs). BatchNorm in training mode: batch
    statistics in the forward, running statistics updated every step (PyTorch buffers; Flax `batch_stats`)."""
    name: str
    image_size: int
    embedding_size: int
    hidden_sizes: tuple[int, ...]
    depths: tuple[int, ...]
    num_labels: int
    layer_type: str = "bottleneck"
    num_channels: int = 3

    kind = "image"
    family = "resnet"
    task = "classification"
    input_name = "pixel_values"
    torch_class = "ResNetForImageClassification"
    flax_class = "FlaxResNetForImageClassification"
    config_class = "ResNetConfig"
    seq_len = None
    has_attention = False  # --attention sdpa|flash is refused (transformers' ResNet raises for any but eager)

    def config_kwargs(self) -> dict:
        return {**self.transformers_config_kwargs(), "image_size": self.image_size}

    def transformers_config_kwargs(self) -> dict:
        """Keyword arguments for transformers.ResNetConfig (shared by the PyTorch and Flax models)."""
        return {"num_channels": self.num_channels, "embedding_size": self.embedding_size,
                "hidden_sizes": list(self.hidden_sizes), "depths": list(self.depths), "layer_type": self.layer_type,
                "num_labels": self.num_labels}

    def describe(self) -> str:
        return (f"{self.name}: {self.image_size}x{self.image_size}, {self.layer_type} blocks {list(self.depths)}, "
                f"widths {list(self.hidden_sizes)}, stem {self.embedding_size}, {self.num_labels} labels")


RESNET_PRESETS: dict[str, ResNetPreset] = {
    # ResNet-50: transformers' default ResNetConfig (microsoft/resnet-50's shape), 1000 labels, 224x224
    "resnet-50": ResNetPreset("resnet-50", image_size=224, embedding_size=64, hidden_sizes=(256, 512, 1024, 2048),
                              depths=(3, 4, 6, 3), num_labels=1000),
    # CPU tests: the same bottleneck blocks (stem, downsampling shortcut, BatchNorm), two stages of one block each
    "resnet-tiny": ResNetPreset("resnet-tiny", image_size=32, embedding_size=16, hidden_sizes=(32, 64), depths=(1, 1),
                                num_labels=10),
}


@dataclass(frozen=True)
class TextPreset:
    name: str
    family: str                      # gpt2 | llama | bert
    task: str                        # causal_lm | classification
    config: dict = field(hash=False)  # keyword arguments of the transformers config class
    seq_len: int = 128               # default --seq-len
    num_labels: int = 2              # classification only

    kind = "text"
    has_attention = True
    input_name = "input_ids"

    @property
    def vocab_size(self) -> int:
        return self.config["vocab_size"]

    @property
    def config_class(self) -> str:
        return {"gpt2": "GPT2Config", "llama": "LlamaConfig", "bert": "BertConfig"}[self.family]

    @property
    def torch_class(self) -> str:
        return {"gpt2": "GPT2LMHeadModel", "llama": "LlamaForCausalLM",
                "bert": "BertForSequenceClassification"}[self.family]

    @property
    def flax_class(self) -> str:
        return "Flax" + self.torch_class

    def config_kwargs(self) -> dict:
        extra = {"num_labels": self.num_labels} if self.task == "classification" else {}
        return {**self.config, **extra, "seq_len": self.seq_len}

    def transformers_config_kwargs(self) -> dict:
        extra = {"num_labels": self.num_labels} if self.task == "classification" else {}
        return {**self.config, **extra}

    def describe(self) -> str:
        return (f"{self.name}: {self.torch_class} / {self.flax_class}, {self.task}, sequence {self.seq_len}, "
                + ", ".join(f"{k} {v}" for k, v in self.config.items() if not k.endswith(("pdrop", "prob"))))


_GPT2_NO_DROPOUT = {"resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0}
# pad_token_id None: no padding row in PyTorch's embedding (Flax has none: the same model in both) and no data-dependent
# padding check in BertModel's forward (torchax cannot trace `pad_token_id in input_ids`); the inputs have no padding
_BERT_NO_DROPOUT = {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0, "pad_token_id": None}

TEXT_PRESETS: dict[str, TextPreset] = {
    # GPT-2 small (124M): transformers' default GPT2Config
    "gpt2-small": TextPreset("gpt2-small", "gpt2", "causal_lm", {
        "vocab_size": 50257, "n_positions": 1024, "n_embd": 768, "n_layer": 12, "n_head": 12, **_GPT2_NO_DROPOUT},
        seq_len=1024),
    "gpt2-tiny": TextPreset("gpt2-tiny", "gpt2", "causal_lm", {
        "vocab_size": 256, "n_positions": 128, "n_embd": 64, "n_layer": 2, "n_head": 4, "n_inner": 128,
        **_GPT2_NO_DROPOUT}, seq_len=32),
    "llama-tiny": TextPreset("llama-tiny", "llama", "causal_lm", {
        "vocab_size": 256, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 128}, seq_len=32),
    # ~1.1B parameters (TinyLlama-1.1B's shape): for GPU boxes
    "llama-1b": TextPreset("llama-1b", "llama", "causal_lm", {
        "vocab_size": 32000, "hidden_size": 2048, "intermediate_size": 5632, "num_hidden_layers": 22,
        "num_attention_heads": 32, "num_key_value_heads": 4, "max_position_embeddings": 2048}, seq_len=2048),
    # BERT-base: transformers' default BertConfig, two labels
    "bert-base": TextPreset("bert-base", "bert", "classification", {
        "vocab_size": 30522, "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
        "intermediate_size": 3072, "max_position_embeddings": 512, **_BERT_NO_DROPOUT}, seq_len=128),
    "bert-tiny": TextPreset("bert-tiny", "bert", "classification", {
        "vocab_size": 256, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
        "intermediate_size": 128, "max_position_embeddings": 128, **_BERT_NO_DROPOUT}, seq_len=32),
}

# what --model names: an image (ViT, ResNet) or a text (causal LM, sequence classification) preset
Preset = VitPreset | ResNetPreset | TextPreset
ALL_PRESETS: dict[str, Preset] = {**PRESETS, **RESNET_PRESETS, **TEXT_PRESETS}


def get_preset(name: str, seq_len: int | None = None) -> Preset:
    try:
        preset = ALL_PRESETS[name]
    except KeyError:
        raise UsageError(f"unknown model preset '{name}'; choose one of: {', '.join(ALL_PRESETS)}") from None
    if seq_len is not None:
        if not isinstance(preset, TextPreset):
            raise UsageError(f"--seq-len {seq_len}: {name} takes images, not sequences (text presets: "
                             f"{', '.join(TEXT_PRESETS)})")
        limit = int(preset.config.get("n_positions") or preset.config.get("max_position_embeddings") or 0)
        if not 2 <= seq_len <= limit:
            raise UsageError(f"--seq-len {seq_len}: {name} takes sequences of 2 to {limit} tokens")
        preset = dataclasses.replace(preset, seq_len=seq_len)
    return preset
