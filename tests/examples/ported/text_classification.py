"""The torchtext text classification tutorial's model, as written there (an `nn.EmbeddingBag` in
mean mode over a flat tensor of token ids with bag offsets built by `cumsum`, a Linear head,
CrossEntropyLoss, SGD with gradient clipping, StepLR(gamma=0.1) stepped when the validation
accuracy stops improving), then the same model over padded 2-D batches (`padding_idx`) with
ReduceLROnPlateau on the validation loss. The corpus is synthetic (four topics with their own
words); the train/validation split takes numpy indices with `Subset`, since `random_split`'s
permutation depends on the library's random generator."""

import sys

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Subset

NUM_CLASS, EMBED_DIM, BATCH_SIZE = 4, 16, 16


class TextClassificationModel(nn.Module):
    def __init__(self, vocab_size, embed_dim, num_class, padding_idx=None):
        super().__init__()
        self.embedding = nn.EmbeddingBag(
            vocab_size, embed_dim, mode="mean", padding_idx=padding_idx
        )
        self.fc = nn.Linear(embed_dim, num_class)

    def forward(self, text, offsets=None):
        embedded = self.embedding(text, offsets)
        return self.fc(embedded)


def make_corpus(rng, n):
    topics = [[f"t{c}w{i}" for i in range(8)] for c in range(NUM_CLASS)]
    common = [f"c{i}" for i in range(20)]
    data = []
    for _ in range(n):
        label = int(rng.integers(NUM_CLASS))
        words = [
            topics[label][int(rng.integers(8))]
            if rng.random() < 0.3
            else common[int(rng.integers(20))]
            for _ in range(int(rng.integers(4, 15)))
        ]
        data.append((label + 1, " ".join(words)))
    return data


def build_vocab(data):
    vocab = {"<pad>": 0, "<unk>": 1}
    for _, text in data:
        for token in text.split():
            vocab.setdefault(token, len(vocab))
    return vocab


def main(out_dir):
    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    rng = np.random.default_rng(0)
    train_iter, test_iter = make_corpus(rng, 320), make_corpus(rng, 80)
    vocab = build_vocab(train_iter)

    def text_pipeline(x):
        return [vocab.get(token, vocab["<unk>"]) for token in x.split()]

    def label_pipeline(x):
        return int(x) - 1

    def collate_batch(batch):
        label_list, text_list, offsets = [], [], [0]
        for _label, _text in batch:
            label_list.append(label_pipeline(_label))
            processed_text = torch.tensor(text_pipeline(_text), dtype=torch.int64)
            text_list.append(processed_text)
            offsets.append(processed_text.size(0))
        label_list = torch.tensor(label_list, dtype=torch.int64)
        offsets = torch.tensor(offsets[:-1]).cumsum(dim=0)
        text_list = torch.cat(text_list)
        return label_list.to(device), text_list.to(device), offsets.to(device)

    def collate_padded(batch):
        labels = torch.tensor([label_pipeline(label) for label, _ in batch])
        texts = [torch.tensor(text_pipeline(text)) for _, text in batch]
        padded = nn.utils.rnn.pad_sequence(texts, batch_first=True, padding_value=vocab["<pad>"])
        return labels.to(device), padded.to(device), None

    perm = rng.permutation(len(train_iter))
    num_train = int(len(train_iter) * 0.95)
    split_train_, split_valid_ = (
        Subset(train_iter, perm[:num_train]),
        Subset(train_iter, perm[num_train:]),
    )

    def train(model, dataloader, optimizer, criterion, name, epoch):
        model.train()
        total_acc, total_count = 0, 0
        for idx, (label, text, offsets) in enumerate(dataloader):
            optimizer.zero_grad()
            predicted_label = model(text, offsets)
            loss = criterion(predicted_label, label)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.1)
            optimizer.step()
            total_acc += (predicted_label.argmax(1) == label).sum().item()
            total_count += label.size(0)
            print(f"LOSS {name} {epoch} {idx} {loss.item():.8g}")
        return total_acc / total_count

    def evaluate(model, dataloader, criterion):
        model.eval()
        total_acc, total_count, total_loss = 0, 0, 0.0
        with torch.no_grad():
            for label, text, offsets in dataloader:
                predicted_label = model(text, offsets)
                total_loss += criterion(predicted_label, label).item() * label.size(0)
                total_acc += (predicted_label.argmax(1) == label).sum().item()
                total_count += label.size(0)
        return total_acc / total_count, total_loss / total_count

    criterion = torch.nn.CrossEntropyLoss()
    for name, collate_fn, padding_idx in (
        ("bag", collate_batch, None),
        ("padded", collate_padded, 0),
    ):
        train_dataloader = DataLoader(split_train_, batch_size=BATCH_SIZE, collate_fn=collate_fn)
        valid_dataloader = DataLoader(split_valid_, batch_size=BATCH_SIZE, collate_fn=collate_fn)
        test_dataloader = DataLoader(test_iter, batch_size=BATCH_SIZE, collate_fn=collate_fn)
        model = TextClassificationModel(len(vocab), EMBED_DIM, NUM_CLASS, padding_idx).to(device)
        with torch.no_grad():
            for _, p in sorted(model.named_parameters()):
                p.copy_(torch.from_numpy(rng.uniform(-0.5, 0.5, tuple(p.shape)).astype(np.float32)))
        optimizer = torch.optim.SGD(model.parameters(), lr=8.0)
        if name == "bag":
            scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1.0, gamma=0.1)
        else:
            scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(
                optimizer, factor=0.5, patience=0
            )
        total_accu = None
        for epoch in range(1, 9):
            train_acc = train(model, train_dataloader, optimizer, criterion, name, epoch)
            accu_val, loss_val = evaluate(model, valid_dataloader, criterion)
            if name == "padded":
                scheduler.step(loss_val)
            elif total_accu is not None and total_accu > accu_val:
                scheduler.step()
            else:
                total_accu = accu_val
            print(f"LOSS {name}_valid {epoch} 0 {loss_val:.8g}")
            print(f"METRIC {name}_train_acc_{epoch} {train_acc:.6g}")
            print(f"METRIC {name}_lr_{epoch} {optimizer.param_groups[0]['lr']:.6g}")
        accu_test, loss_test = evaluate(model, test_dataloader, criterion)
        print(f"LOSS {name}_test 0 0 {loss_test:.8g}")
        print(f"METRIC {name}_test_acc {accu_test:.6g}")

    torch.save(model.state_dict(), f"{out_dir}/text_classification.pt")
    reloaded = TextClassificationModel(len(vocab), EMBED_DIM, NUM_CLASS, 0)
    reloaded.load_state_dict(torch.load(f"{out_dir}/text_classification.pt"))
    _, text, _ = next(iter(test_dataloader))
    with torch.no_grad():
        same = torch.equal(model(text), reloaded(text))
    print(f"METRIC reload_equal {int(same)}")


if __name__ == "__main__":
    main(sys.argv[1])
