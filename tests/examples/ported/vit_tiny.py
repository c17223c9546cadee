"""A tiny Vision Transformer as the public ViT repositories write it: patch embedding by a strided
Conv2d then flatten(2).transpose(1, 2), a learnable class token expanded over the batch, a learned
position embedding, nn.TransformerEncoder of pre-norm GELU layers (batch_first), a final LayerNorm
and a linear head; label-smoothed cross-entropy, AdamW with two parameter groups (no weight decay
for biases, norms and embeddings), a LambdaLR linear warmup then cosine schedule, gradient
clipping by global norm, activation checkpointing of the encoder layers (as timm's
grad_checkpointing), an EMA of the weights (swa_utils.AveragedModel), and an evaluation at a
higher resolution with the position embeddings resized by bicubic interpolation (as DINO's ViT);
on synthetic 3x16x16 images whose class is the brightest quadrant."""

import math
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn
from torch.utils.checkpoint import checkpoint
from torch.utils.data import DataLoader, TensorDataset


class PatchEmbed(nn.Module):
    def __init__(self, img_size=16, patch_size=4, in_chans=3, embed_dim=32):
        super().__init__()
        self.num_patches = (img_size // patch_size) ** 2
        self.proj = nn.Conv2d(in_chans, embed_dim, kernel_size=patch_size, stride=patch_size)

    def forward(self, x):
        return self.proj(x).flatten(2).transpose(1, 2)  # B, N, D


class ViT(nn.Module):
    def __init__(self, num_classes=4, embed_dim=32, depth=2, heads=4, mlp_ratio=2):
        super().__init__()
        self.patch_embed = PatchEmbed(embed_dim=embed_dim)
        n = self.patch_embed.num_patches
        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, n + 1, embed_dim))
        layer = nn.TransformerEncoderLayer(
            embed_dim,
            heads,
            dim_feedforward=embed_dim * mlp_ratio,
            dropout=0.0,
            activation="gelu",
            batch_first=True,
            norm_first=True,
        )
        self.encoder = nn.TransformerEncoder(layer, num_layers=depth, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(embed_dim)
        self.head = nn.Linear(embed_dim, num_classes)
        self.grad_checkpointing = True

    def interpolate_pos_encoding(self, n_patches):
        """The learned grid of position embeddings resized (bicubic) to another image size."""
        if n_patches == self.pos_embed.shape[1] - 1:
            return self.pos_embed
        cls_pos, patch_pos = self.pos_embed[:, :1], self.pos_embed[:, 1:]
        dim = patch_pos.shape[-1]
        old, new = int(math.sqrt(patch_pos.shape[1])), int(math.sqrt(n_patches))
        patch_pos = patch_pos.reshape(1, old, old, dim).permute(0, 3, 1, 2)
        patch_pos = F.interpolate(patch_pos, size=(new, new), mode="bicubic", align_corners=False)
        patch_pos = patch_pos.permute(0, 2, 3, 1).reshape(1, -1, dim)
        return torch.cat((cls_pos, patch_pos), dim=1)

    def forward(self, x):
        x = self.patch_embed(x)
        cls = self.cls_token.expand(x.shape[0], -1, -1)
        x = torch.cat((cls, x), dim=1) + self.interpolate_pos_encoding(x.shape[1])
        if self.grad_checkpointing and torch.is_grad_enabled():
            for layer in self.encoder.layers:  # activations recomputed in backward
                x = checkpoint(layer, x, use_reentrant=False)
        else:
            x = self.encoder(x)
        return self.head(self.norm(x[:, 0]))


def param_groups(model, weight_decay):
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        if p.ndim <= 1 or name.endswith(".bias") or name in ("cls_token", "pos_embed"):
            no_decay.append(p)
        else:
            decay.append(p)
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]


def warmup_cosine(warmup, total):
    def fn(step):
        if step < warmup:
            return (step + 1) / warmup
        progress = (step - warmup) / max(1, total - warmup)
        return 0.5 * (1.0 + math.cos(math.pi * progress))

    return fn


def main(out_dir):
    device = "cuda" if torch.cuda.is_available() else "cpu"
    rng = np.random.default_rng(0)
    x = rng.standard_normal((96, 3, 16, 16)).astype(np.float32)
    y = rng.integers(0, 4, 96)
    for i, c in enumerate(y):
        r, q = divmod(int(c), 2)
        x[i, :, r * 8 : r * 8 + 8, q * 8 : q * 8 + 8] += 1.5
    train = DataLoader(
        TensorDataset(torch.from_numpy(x[:64]), torch.from_numpy(y[:64])), batch_size=16
    )
    test = DataLoader(
        TensorDataset(torch.from_numpy(x[64:]), torch.from_numpy(y[64:])), batch_size=32
    )

    model = ViT().to(device)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            if "norm" in name and p.ndim == 1:
                continue  # LayerNorm keeps its ones/zeros
            fan_in = np.prod(p.shape[1:]) if p.ndim > 1 else 1
            scale = 0.02 if p.ndim == 1 or name in ("cls_token", "pos_embed") else fan_in**-0.5
            p.copy_(torch.from_numpy(rng.normal(0, scale, tuple(p.shape)).astype(np.float32)))

    epochs, steps = 3, len(train)
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    optimizer = torch.optim.AdamW(param_groups(model, 0.05), lr=3e-3, betas=(0.9, 0.999))
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, warmup_cosine(3, epochs * steps))
    ema = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.9))
    for epoch in range(epochs):
        model.train()
        for step, (images, labels) in enumerate(train):
            images, labels = images.to(device), labels.to(device)
            logits = model(images)
            loss = criterion(logits, labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
            optimizer.step()
            scheduler.step()
            ema.update_parameters(model)
            print(f"LOSS train {epoch} {step} {loss.item():.8g}")
            print(f"LOSS gnorm {epoch} {step} {grad_norm.item():.8g}")
        print(f"LOSS lr {epoch} 0 {scheduler.get_last_lr()[1]:.8g}")
        model.eval()
        ema.eval()
        correct = ema_correct = 0
        with torch.no_grad():
            for images, labels in test:
                correct += (model(images).argmax(dim=-1) == labels).sum().item()
                ema_loss = criterion(ema(images), labels)
                ema_correct += (ema(images).argmax(dim=-1) == labels).sum().item()
        print(f"LOSS acc {epoch} 0 {correct / len(test.dataset):.8g}")
        print(f"LOSS ema_acc {epoch} 0 {ema_correct / len(test.dataset):.8g}")
        print(f"LOSS ema_loss {epoch} 0 {ema_loss.item():.8g}")

    # evaluation at a higher resolution: 24x24 images, the position grid resized from 4x4 to 6x6
    big = F.interpolate(torch.from_numpy(x[64:]), size=(24, 24), mode="bilinear")
    with torch.no_grad():
        logits = model(big)
    print(f"LOSS hires 0 0 {criterion(logits, torch.from_numpy(y[64:])).item():.8g}")

    path = f"{out_dir}/vit.pt"
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, path)
    ckpt = torch.load(path, map_location="cpu")
    fresh = ViT()
    fresh.load_state_dict(ckpt["model"])
    fresh.eval()
    with torch.no_grad():
        same = torch.allclose(fresh(torch.from_numpy(x[64:])), model(torch.from_numpy(x[64:])))
    print(f"METRIC reload_equal {int(same)}")
    print(f"METRIC groups {len(ckpt['optimizer']['param_groups'])}")


if __name__ == "__main__":
    main(sys.argv[1])
