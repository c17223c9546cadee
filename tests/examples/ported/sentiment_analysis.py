"""Binary sentiment classifiers as the widely copied PyTorch sentiment-analysis tutorials write
them: FastText (bigrams appended, embeddings averaged with `F.avg_pool2d`), a 2-layer
bidirectional LSTM over `pack_padded_sequence(enforce_sorted=False)` whose final forward and
backward hidden states are concatenated, and a CNN (`nn.Conv1d` filters of several widths over
permuted embeddings, `F.max_pool1d` over time). Each is trained with Adam and BCEWithLogitsLoss,
the pretrained-vector step done as `embedding.weight.data.copy_` with the pad and unk rows
zeroed, accuracy from `torch.round(torch.sigmoid(preds))`. The reviews are synthetic (sentiment
words among neutral ones, a negation flips them); dropout is 0 so that two libraries' runs from
the same weights can be compared step by step."""

import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

PAD_IDX, UNK_IDX = 0, 1
EMBEDDING_DIM, BATCH_SIZE = 16, 16


class FastText(nn.Module):
    def __init__(self, vocab_size, embedding_dim, output_dim, pad_idx):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embedding_dim, padding_idx=pad_idx)
        self.fc = nn.Linear(embedding_dim, output_dim)

    def forward(self, text, text_lengths=None):
        embedded = self.embedding(text)
        pooled = F.avg_pool2d(embedded, (embedded.shape[1], 1)).squeeze(1)
        return self.fc(pooled)


class RNN(nn.Module):
    def __init__(
        self,
        vocab_size,
        embedding_dim,
        hidden_dim,
        output_dim,
        n_layers,
        bidirectional,
        dropout,
        pad_idx,
    ):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embedding_dim, padding_idx=pad_idx)
        self.rnn = nn.LSTM(
            embedding_dim,
            hidden_dim,
            num_layers=n_layers,
            bidirectional=bidirectional,
            dropout=dropout,
            batch_first=True,
        )
        self.fc = nn.Linear(hidden_dim * 2, output_dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, text, text_lengths):
        embedded = self.dropout(self.embedding(text))
        packed_embedded = nn.utils.rnn.pack_padded_sequence(
            embedded, text_lengths.to("cpu"), batch_first=True, enforce_sorted=False
        )
        packed_output, (hidden, cell) = self.rnn(packed_embedded)
        output, output_lengths = nn.utils.rnn.pad_packed_sequence(packed_output, batch_first=True)
        hidden = self.dropout(torch.cat((hidden[-2, :, :], hidden[-1, :, :]), dim=1))
        return self.fc(hidden)


class CNN(nn.Module):
    def __init__(
        self, vocab_size, embedding_dim, n_filters, filter_sizes, output_dim, dropout, pad_idx
    ):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embedding_dim, padding_idx=pad_idx)
        self.convs = nn.ModuleList(
            [
                nn.Conv1d(in_channels=embedding_dim, out_channels=n_filters, kernel_size=fs)
                for fs in filter_sizes
            ]
        )
        self.fc = nn.Linear(len(filter_sizes) * n_filters, output_dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, text, text_lengths=None):
        embedded = self.embedding(text)
        embedded = embedded.permute(0, 2, 1)
        conved = [F.relu(conv(embedded)) for conv in self.convs]
        pooled = [F.max_pool1d(conv, conv.shape[2]).squeeze(2) for conv in conved]
        cat = self.dropout(torch.cat(pooled, dim=1))
        return self.fc(cat)


def generate_bigrams(x):
    n_grams = set(zip(*[x[i:] for i in range(2)]))
    for n_gram in sorted(n_grams):
        x.append(" ".join(n_gram))
    return x


def make_reviews(rng, n):
    good, bad = ["good", "great", "fun", "superb"], ["bad", "dull", "awful", "boring"]
    neutral = [f"w{i}" for i in range(16)]
    reviews = []
    for _ in range(n):
        label = int(rng.integers(2))
        words = [neutral[int(i)] for i in rng.integers(16, size=int(rng.integers(4, 10)))]
        for _ in range(int(rng.integers(1, 3))):
            negate = rng.random() < 0.25
            word = (bad if label ^ negate else good)[int(rng.integers(4))]
            words.insert(int(rng.integers(len(words) + 1)), word)
            if negate:
                words.insert(words.index(word), "not")
        reviews.append((words, float(label)))
    return reviews


def batchify(data, stoi, min_len):
    batches = []
    for start in range(0, len(data), BATCH_SIZE):
        chunk = data[start : start + BATCH_SIZE]
        seqs = [torch.tensor([stoi.get(w, UNK_IDX) for w in words]) for words, _ in chunk]
        lengths = torch.tensor([len(s) for s in seqs])
        text = nn.utils.rnn.pad_sequence(seqs, batch_first=True, padding_value=PAD_IDX)
        if text.shape[1] < min_len:
            text = F.pad(text, (0, min_len - text.shape[1]), value=PAD_IDX)
        label = torch.tensor([lab for _, lab in chunk])
        batches.append((text, lengths, label))
    return batches


def binary_accuracy(preds, y):
    rounded_preds = torch.round(torch.sigmoid(preds))
    correct = (rounded_preds == y).float()
    return correct.sum() / len(correct)


def train(model, batches, optimizer, criterion, name, epoch):
    epoch_loss, epoch_acc = 0, 0
    model.train()
    for i, (text, text_lengths, label) in enumerate(batches):
        optimizer.zero_grad()
        predictions = model(text, text_lengths).squeeze(1)
        loss = criterion(predictions, label)
        acc = binary_accuracy(predictions, label)
        loss.backward()
        optimizer.step()
        epoch_loss += loss.item()
        epoch_acc += acc.item()
        print(f"LOSS {name} {epoch} {i} {loss.item():.8g}")
    return epoch_loss / len(batches), epoch_acc / len(batches)


def evaluate(model, batches, criterion):
    epoch_loss, epoch_acc = 0, 0
    model.eval()
    with torch.no_grad():
        for text, text_lengths, label in batches:
            predictions = model(text, text_lengths).squeeze(1)
            epoch_loss += criterion(predictions, label).item()
            epoch_acc += binary_accuracy(predictions, label).item()
    return epoch_loss / len(batches), epoch_acc / len(batches)


def main(out_dir):
    torch.manual_seed(1234)
    rng = np.random.default_rng(0)
    train_data, test_data = make_reviews(rng, 192), make_reviews(rng, 64)

    for name in ("fasttext", "rnn", "cnn"):
        prepare = generate_bigrams if name == "fasttext" else list
        train_tok = [(prepare(list(words)), label) for words, label in train_data]
        test_tok = [(prepare(list(words)), label) for words, label in test_data]
        itos = ["<pad>", "<unk>"] + sorted({w for words, _ in train_tok for w in words})
        stoi = {w: i for i, w in enumerate(itos)}

        min_len = 4 if name == "cnn" else 1  # the widest filter
        train_batches = batchify(train_tok, stoi, min_len)
        test_batches = batchify(test_tok, stoi, min_len)
        if name == "fasttext":
            model = FastText(len(itos), EMBEDDING_DIM, 1, PAD_IDX)
        elif name == "rnn":
            model = RNN(len(itos), EMBEDDING_DIM, 12, 1, 2, True, 0.0, PAD_IDX)
        else:
            model = CNN(len(itos), EMBEDDING_DIM, 6, [2, 3, 4], 1, 0.0, PAD_IDX)
        with torch.no_grad():
            for _, p in sorted(model.named_parameters()):
                p.copy_(torch.from_numpy(rng.uniform(-0.3, 0.3, tuple(p.shape)).astype(np.float32)))
        pretrained_embeddings = torch.from_numpy(
            rng.normal(0, 0.5, (len(itos), EMBEDDING_DIM)).astype(np.float32)
        )
        model.embedding.weight.data.copy_(pretrained_embeddings)
        model.embedding.weight.data[UNK_IDX] = torch.zeros(EMBEDDING_DIM)
        model.embedding.weight.data[PAD_IDX] = torch.zeros(EMBEDDING_DIM)
        n_params = sum(p.numel() for p in model.parameters() if p.requires_grad)
        print(f"METRIC {name}_params {n_params}")

        optimizer = optim.Adam(model.parameters(), lr=0.01)
        criterion = nn.BCEWithLogitsLoss()
        best_valid_loss = float("inf")
        for epoch in range(5):
            train_loss, train_acc = train(model, train_batches, optimizer, criterion, name, epoch)
            valid_loss, valid_acc = evaluate(model, test_batches, criterion)
            if valid_loss < best_valid_loss:
                best_valid_loss = valid_loss
                torch.save(model.state_dict(), f"{out_dir}/{name}-model.pt")
            print(f"LOSS {name}_valid {epoch} 0 {valid_loss:.8g}")
            print(f"METRIC {name}_train_acc_{epoch} {train_acc:.6g}")
            print(f"METRIC {name}_valid_acc_{epoch} {valid_acc:.6g}")

        model.load_state_dict(torch.load(f"{out_dir}/{name}-model.pt"))
        test_loss, test_acc = evaluate(model, test_batches, criterion)
        same = test_loss == best_valid_loss
        print(f"METRIC {name}_best_acc {test_acc:.6g}")
        if name == "rnn":
            print(f"METRIC reload_equal {int(same)}")
        sentence = ["not", "good", "w3", "w5"]
        text = torch.LongTensor([stoi.get(w, UNK_IDX) for w in prepare(sentence)]).unsqueeze(0)
        if text.shape[1] < min_len:
            text = F.pad(text, (0, min_len - text.shape[1]))
        prediction = torch.sigmoid(model(text, torch.LongTensor([text.shape[1]])))
        print(f"METRIC {name}_predict {prediction.item():.6g}")


if __name__ == "__main__":
    main(sys.argv[1])
