"""LeNet-5 for 28x28 grey-scale digits, in plain torch."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class LeNet5Config:
    num_classes: int = 10
    image_size: int = 28
    dropout: float = 0.1


class LeNet5(nn.Module):
    """LeCun et al. (1998): two 5x5 convolutions with pooling, then three dense layers.

    ReLU and max-pooling replace the original tanh and average pooling (a standard modern
    variant); the first convolution pads by 2 so that 28x28 inputs follow the 32x32 design.
    Input ``(B, 1, H, W)`` or ``(B, H*W)``; output logits ``(B, num_classes)``.
    """

    def __init__(self, config: LeNet5Config = LeNet5Config()):
        super().__init__()
        self.config = config
        # Small images (8x8 digits) pad the second convolution too, so that a 2x2 map is left.
        pad2 = 0 if config.image_size >= 16 else 2
        side = (config.image_size // 2 + 2 * pad2 - 4) // 2  # after conv(pad 2)/pool/conv/pool
        self.features = nn.Sequential(
            nn.Conv2d(1, 6, kernel_size=5, padding=2),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(6, 16, kernel_size=5, padding=pad2),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.classifier = nn.Sequential(
            nn.Flatten(),
            nn.Linear(16 * side * side, 120),
            nn.ReLU(),
            nn.Dropout(config.dropout),
            nn.Linear(120, 84),
            nn.ReLU(),
            nn.Linear(84, config.num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        side = self.config.image_size
        return self.classifier(self.features(x.reshape(-1, 1, side, side)))
