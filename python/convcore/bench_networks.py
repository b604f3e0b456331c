"""The model benchmark's networks beyond torchvision's 2-D classifiers: the clients of convcore's
1-D, 3-D and transposed convolutions (``convcore bench --model r3d_18,unet3d,wav2vec2_fe``).

- r3d_18, mc3_18, r2plus1d_18: torchvision's video classifiers (Conv3d), on one clip of 16
  frames of 112x112;
- unet3d: a 3-D U-Net (Cicek et al., MICCAI 2016), 4 levels of 32-256 channels, two 3x3x3
  convolutions with batch norm and ReLU per level, max pooling down and ConvTranspose3d up, on a
  64^3 volume of one channel;
- wav2vec2_fe: wav2vec 2.0's convolutional feature extractor (Baevski et al., NeurIPS 2020,
  sec. 4.2): 7 Conv1d layers of 512 channels, kernels (10, 3, 3, 3, 3, 2, 2), strides
  (5, 2, 2, 2, 2, 2, 2), GELU, group norm after the first, on one second of 16 kHz audio.

torch is imported here; ``import convcore`` does not import this module."""

from typing import Any, Callable, Dict, List, Tuple

import torch
from torch import nn

# name -> (builder(models), the input's shape at batch 1, whether the output is a class score
# per example: cross-entropy in training; else the mean square of the output)
NETWORKS: Dict[str, Tuple[Callable[[Any], nn.Module], Tuple[int, ...], bool]] = {}


def _video(name):
    return lambda models: getattr(models.video, name)(weights=None)


for _name in ("r3d_18", "mc3_18", "r2plus1d_18"):
    NETWORKS[_name] = (_video(_name), (3, 16, 112, 112), True)


class UNet3d(nn.Module):
    """A 3-D U-Net: levels of (Conv3d 3x3x3, BatchNorm3d, ReLU) x 2, MaxPool3d(2) down,
    ConvTranspose3d(2, stride 2) up, skip connections by concatenation, a 1x1x1 Conv3d head."""

    def __init__(self, in_channels: int = 1, classes: int = 2,
                 widths: Tuple[int, ...] = (32, 64, 128, 256)) -> None:
        super().__init__()

        def block(cin, cout):
            return nn.Sequential(nn.Conv3d(cin, cout, 3, padding=1, bias=False),
                                 nn.BatchNorm3d(cout), nn.ReLU(inplace=True),
                                 nn.Conv3d(cout, cout, 3, padding=1, bias=False),
                                 nn.BatchNorm3d(cout), nn.ReLU(inplace=True))
        self.down = nn.ModuleList()
        cin = in_channels
        for width in widths:
            self.down.append(block(cin, width))
            cin = width
        self.pool = nn.MaxPool3d(2)
        self.up = nn.ModuleList()
        self.merge = nn.ModuleList()
        for width in reversed(widths[:-1]):
            self.up.append(nn.ConvTranspose3d(cin, width, 2, stride=2))
            self.merge.append(block(2 * width, width))
            cin = width
        self.head = nn.Conv3d(cin, classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skips = []
        for i, level in enumerate(self.down):
            x = level(x if i == 0 else self.pool(x))
            skips.append(x)
        for up, merge, skip in zip(self.up, self.merge, reversed(skips[:-1])):
            x = merge(torch.cat([up(x), skip], dim=1))
        return self.head(x)


class Wav2Vec2FeatureExtractor(nn.Module):
    """wav2vec 2.0's convolutional feature extractor (the "group norm" variant of the base model):
    raw audio N x 1 x L to features N x 512 x about L / 320."""

    LAYERS = ((10, 5), (3, 2), (3, 2), (3, 2), (3, 2), (2, 2), (2, 2))  # (kernel, stride)

    def __init__(self, channels: int = 512) -> None:
        super().__init__()
        layers: List[nn.Module] = []
        cin = 1
        for i, (kernel, stride) in enumerate(self.LAYERS):
            layers.append(nn.Conv1d(cin, channels, kernel, stride=stride, bias=False))
            if i == 0:
                layers.append(nn.GroupNorm(channels, channels))
            layers.append(nn.GELU())
            cin = channels
        self.layers = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


NETWORKS["unet3d"] = (lambda models: UNet3d(), (1, 64, 64, 64), False)
NETWORKS["wav2vec2_fe"] = (lambda models: Wav2Vec2FeatureExtractor(), (1, 16000), False)


def channels_last(x: torch.Tensor) -> torch.Tensor:
    """x in its rank's channels-last memory: channels_last (4-D), channels_last_3d (5-D), or
    N x L x C memory for a 1-D signal (PyTorch has no format for it; its convolutions take it)."""
    if x.dim() == 4:
        return x.contiguous(memory_format=torch.channels_last)
    if x.dim() == 5:
        return x.contiguous(memory_format=torch.channels_last_3d)
    return x.transpose(1, 2).contiguous().transpose(1, 2)


def model_channels_last(model: nn.Module, rank: int) -> nn.Module:
    """The model's weights in the channels-last memory of inputs of this rank (none for 1-D)."""
    if rank == 4:
        return model.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
    if rank == 5:
        return model.to(memory_format=torch.channels_last_3d)  # type: ignore[call-overload]
    return model
