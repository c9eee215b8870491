"""A small Vision Transformer (Dosovitskiy et al., 2021) for grey-scale digits, in plain torch."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class ViTConfig:
    num_classes: int = 10
    image_size: int = 28
    patch_size: int = 4
    dim: int = 64
    depth: int = 4
    heads: int = 4
    mlp_dim: int = 128
    dropout: float = 0.1


class Block(nn.Module):
    """Pre-norm transformer block: self-attention and an MLP, each with a residual."""

    def __init__(self, config: ViTConfig):
        super().__init__()
        self.norm1 = nn.LayerNorm(config.dim)
        self.attention = nn.MultiheadAttention(
            config.dim, config.heads, dropout=config.dropout, batch_first=True
        )
        self.norm2 = nn.LayerNorm(config.dim)
        self.mlp = nn.Sequential(
            nn.Linear(config.dim, config.mlp_dim),
            nn.GELU(),
            nn.Dropout(config.dropout),
            nn.Linear(config.mlp_dim, config.dim),
            nn.Dropout(config.dropout),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm1(x)
        x = x + self.attention(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


class ViT(nn.Module):
    """Patches of ``patch_size`` pixels, a class token, learned position embeddings,
    ``depth`` pre-norm blocks, and a linear head on the class token.
    Input ``(B, 1, H, W)`` or ``(B, H*W)``; output logits ``(B, num_classes)``."""

    def __init__(self, config: ViTConfig = ViTConfig()):
        super().__init__()
        self.config = config
        num_patches = (config.image_size // config.patch_size) ** 2
        self.patch = nn.Conv2d(1, config.dim, kernel_size=config.patch_size, stride=config.patch_size)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, config.dim))
        self.position = nn.Parameter(torch.randn(1, num_patches + 1, config.dim) * 0.02)
        self.blocks = nn.Sequential(*[Block(config) for _ in range(config.depth)])
        self.norm = nn.LayerNorm(config.dim)
        self.head = nn.Linear(config.dim, config.num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        side = self.config.image_size
        patches = self.patch(x.reshape(-1, 1, side, side)).flatten(2).transpose(1, 2)
        tokens = torch.cat([self.cls_token.expand(patches.shape[0], -1, -1), patches], dim=1)
        tokens = self.blocks(tokens + self.position)
        return self.head(self.norm(tokens[:, 0]))
