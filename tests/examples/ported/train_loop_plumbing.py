"""Training-loop plumbing as real projects write it: a map-style Dataset returning dicts of
variable-length sequences, a DataLoader with a custom collate_fn (pad_sequence plus a mask) and
drop_last, an epoch-seeded sampler built from numpy indices, gradient accumulation over two
micro-batches under bfloat16 CPU autocast, Adam with OneCycleLR, and a checkpoint dict
(model/optimizer/scheduler state_dict and epoch) saved with torch.save and resumed with
torch.load(map_location="cpu") into fresh objects, whose next losses must equal the uninterrupted
run's. The evaluation loader uses default_collate on the same dicts. A seeded torch.Generator
shuffle is checked for reproducibility, not for torch's exact order: gpucore draws from its own
counter-based generator (Philox), not PyTorch's CPU Mersenne Twister stream."""

import sys

import numpy as np
import torch
import torch.nn as nn
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader, Dataset, Sampler

FEATURES, CLASSES = 6, 3


class SequenceDataset(Dataset):
    """Sequences of 3..9 feature vectors; the label is which feature has the largest mean."""

    def __init__(self, n, seed):
        rng = np.random.default_rng(seed)
        self.items = []
        for _ in range(n):
            length = int(rng.integers(3, 10))
            x = rng.standard_normal((length, FEATURES)).astype(np.float32)
            label = int(np.argmax(x[:, :CLASSES].mean(axis=0)))
            self.items.append((x, label))

    def __len__(self):
        return len(self.items)

    def __getitem__(self, idx):
        x, label = self.items[idx]
        return {"tokens": torch.from_numpy(x), "label": label, "length": len(x)}


class EpochShuffleSampler(Sampler):
    """A permutation drawn from numpy per epoch, so a resumed run sees the same order."""

    def __init__(self, data_source, seed=0):
        self.n = len(data_source)
        self.seed = seed
        self.epoch = 0

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __iter__(self):
        rng = np.random.default_rng(self.seed + self.epoch)
        return iter(rng.permutation(self.n).tolist())

    def __len__(self):
        return self.n


def collate_padded(batch):
    tokens = pad_sequence([item["tokens"] for item in batch], batch_first=True)
    lengths = torch.tensor([item["length"] for item in batch])
    mask = torch.arange(tokens.size(1))[None, :] < lengths[:, None]
    labels = torch.tensor([item["label"] for item in batch], dtype=torch.long)
    return {"tokens": tokens, "mask": mask, "labels": labels}


class MaskedMeanClassifier(nn.Module):
    def __init__(self, hidden=16):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(FEATURES, hidden), nn.Tanh())
        self.head = nn.Linear(hidden, CLASSES)

    def forward(self, tokens, mask):
        h = self.encoder(tokens) * mask.unsqueeze(-1)
        pooled = h.sum(dim=1) / mask.sum(dim=1, keepdim=True).clamp(min=1)
        return self.head(pooled)


def build(rng_seed, total_steps):
    rng = np.random.default_rng(rng_seed)
    model = MaskedMeanClassifier()
    with torch.no_grad():
        for _, p in sorted(model.named_parameters()):
            p.copy_(torch.from_numpy(rng.uniform(-0.4, 0.4, tuple(p.shape)).astype(np.float32)))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=3e-2, total_steps=total_steps, pct_start=0.3
    )
    return model, optimizer, scheduler


def train_epoch(model, optimizer, scheduler, loader, criterion, accum_steps=2):
    losses = []
    model.train()
    optimizer.zero_grad()
    for i, batch in enumerate(loader):
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            logits = model(batch["tokens"], batch["mask"])
            loss = criterion(logits, batch["labels"]) / accum_steps
        loss.backward()
        losses.append(loss.item() * accum_steps)
        if (i + 1) % accum_steps == 0:
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
    return losses


def main(out_dir):
    train_set, val_set = SequenceDataset(100, seed=1), SequenceDataset(40, seed=2)
    sampler = EpochShuffleSampler(train_set, seed=7)
    train_loader = DataLoader(
        train_set, batch_size=8, sampler=sampler, collate_fn=collate_padded, drop_last=True
    )
    epochs, accum = 4, 2
    total_steps = epochs * (len(train_loader) // accum)
    criterion = nn.CrossEntropyLoss()
    model, optimizer, scheduler = build(0, total_steps)

    history = {}
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        history[epoch] = train_epoch(model, optimizer, scheduler, train_loader, criterion, accum)
        for step, value in enumerate(history[epoch]):
            print(f"LOSS train {epoch} {step} {value:.8g}")
        print(f"LOSS lr {epoch} 0 {scheduler.get_last_lr()[0]:.8g}")
        if epoch == 1:
            checkpoint = {
                "epoch": epoch,
                "model": model.state_dict(),
                "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(),
            }
            torch.save(checkpoint, f"{out_dir}/checkpoint.pt")

    # evaluation: dict items through default_collate; lengths differ, so one item per batch
    model.eval()
    correct = 0
    with torch.no_grad():
        for batch in DataLoader(val_set, batch_size=1):
            mask = torch.ones(batch["tokens"].shape[:2], dtype=torch.bool)
            correct += (model(batch["tokens"], mask).argmax(1) == batch["label"]).sum().item()
    print(f"LOSS val_acc {epochs - 1} 0 {correct / len(val_set):.8g}")

    # resume from the checkpoint into fresh objects and replay the remaining epochs
    ckpt = torch.load(f"{out_dir}/checkpoint.pt", map_location="cpu")
    model2, optimizer2, scheduler2 = build(123, total_steps)
    model2.load_state_dict(ckpt["model"])
    optimizer2.load_state_dict(ckpt["optimizer"])
    scheduler2.load_state_dict(ckpt["scheduler"])
    resumed = {}
    for epoch in range(ckpt["epoch"] + 1, epochs):
        sampler.set_epoch(epoch)
        resumed[epoch] = train_epoch(model2, optimizer2, scheduler2, train_loader, criterion, accum)
        for step, value in enumerate(resumed[epoch]):
            print(f"LOSS resumed {epoch} {step} {value:.8g}")
    same = all(resumed[e] == history[e] for e in resumed)
    same = same and all(
        torch.equal(a, b) for a, b in zip(model.parameters(), model2.parameters(), strict=True)
    )
    print(f"METRIC reload_equal {int(same)}")

    # a seeded generator gives the same shuffle each time it is reseeded, and every item once
    orders = []
    for _ in range(2):
        g = torch.Generator()
        g.manual_seed(2024)
        loader = DataLoader(
            train_set, batch_size=8, shuffle=True, generator=g, collate_fn=collate_padded
        )
        orders.append([b["labels"].tolist() for b in loader])
    flat = sorted(label for batch in orders[0] for label in batch)
    expected = sorted(label for _, label in train_set.items)
    print(f"METRIC seeded_shuffle_reproducible {int(orders[0] == orders[1] and flat == expected)}")


if __name__ == "__main__":
    main(sys.argv[1])
