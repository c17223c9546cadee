"""pytorch/examples' word language model, LSTM variant, as written there (RNNModel with an
embedding encoder, nn.LSTM, a linear decoder with tied weights, `init_hidden` from
`weight.new_zeros`, `repackage_hidden` detaching the state between batches, clip_grad_norm_ and
a hand-written SGD update, evaluation perplexity), on a synthetic corpus. Dropout is 0 so that two
libraries' runs from the same weights can be compared step by step."""

import math
import sys

import numpy as np
import torch
import torch.nn as nn

DROPOUT = 0.0


class RNNModel(nn.Module):
    def __init__(self, rnn_type, ntoken, ninp, nhid, nlayers, dropout=0.5, tie_weights=False):
        super().__init__()
        self.ntoken = ntoken
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        if rnn_type in ["LSTM", "GRU"]:
            self.rnn = getattr(nn, rnn_type)(ninp, nhid, nlayers, dropout=dropout)
        else:
            nonlinearity = {"RNN_TANH": "tanh", "RNN_RELU": "relu"}[rnn_type]
            self.rnn = nn.RNN(ninp, nhid, nlayers, nonlinearity=nonlinearity, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        if tie_weights:
            self.decoder.weight = self.encoder.weight
        self.rnn_type = rnn_type
        self.nhid = nhid
        self.nlayers = nlayers

    def forward(self, input, hidden):
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        output = self.drop(output)
        decoded = self.decoder(output)
        decoded = decoded.view(-1, self.ntoken)
        return nn.functional.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        if self.rnn_type == "LSTM":
            return (
                weight.new_zeros(self.nlayers, bsz, self.nhid),
                weight.new_zeros(self.nlayers, bsz, self.nhid),
            )
        return weight.new_zeros(self.nlayers, bsz, self.nhid)


def repackage_hidden(h):
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


def batchify(data, bsz):
    nbatch = data.size(0) // bsz
    return data.narrow(0, 0, nbatch * bsz).view(bsz, -1).t().contiguous()


def get_batch(source, i, bptt):
    seq_len = min(bptt, len(source) - 1 - i)
    return source[i : i + seq_len], source[i + 1 : i + 1 + seq_len].view(-1)


def main(out_dir):
    torch.manual_seed(1111)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    rng = np.random.default_rng(0)
    ntokens, bptt, lr, clip = 40, 10, 5.0, 0.25
    ids = [0]
    for _ in range(1200):
        ids.append(
            (3 * ids[-1] + 1) % ntokens if rng.random() < 0.8 else int(rng.integers(ntokens))
        )
    corpus = torch.tensor(ids, dtype=torch.long)
    train_data = batchify(corpus[:1000], 10).to(device)
    val_data = batchify(corpus[1000:], 4).to(device)
    criterion = nn.NLLLoss()

    for rnn_type in ("LSTM", "GRU", "RNN_TANH"):
        model = RNNModel(rnn_type, ntokens, 24, 24, 2, DROPOUT, tie_weights=True).to(device)
        with torch.no_grad():
            for _, p in sorted(model.named_parameters()):
                p.copy_(torch.from_numpy(rng.uniform(-0.2, 0.2, tuple(p.shape)).astype(np.float32)))
        for epoch in range(1, 3):
            model.train()
            hidden = model.init_hidden(10)
            for batch, i in enumerate(range(0, train_data.size(0) - 1, bptt)):
                data, targets = get_batch(train_data, i, bptt)
                model.zero_grad()
                hidden = repackage_hidden(hidden)
                output, hidden = model(data, hidden)
                loss = criterion(output, targets)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
                for p in model.parameters():
                    p.data.add_(p.grad, alpha=-lr)
                print(f"LOSS {rnn_type} {epoch} {batch} {loss.item():.8g}")
            model.eval()
            total_loss, hidden = 0.0, model.init_hidden(4)
            with torch.no_grad():
                for i in range(0, val_data.size(0) - 1, bptt):
                    data, targets = get_batch(val_data, i, bptt)
                    output, hidden = model(data, hidden)
                    hidden = repackage_hidden(hidden)
                    total_loss += len(data) * criterion(output, targets).item()
            val_loss = total_loss / (len(val_data) - 1)
            print(f"LOSS {rnn_type}_val {epoch} 0 {val_loss:.8g}")
            print(f"METRIC {rnn_type}_ppl_{epoch} {math.exp(val_loss):.6g}")
        with open(f"{out_dir}/{rnn_type}.pt", "wb") as f:
            torch.save(model.state_dict(), f)


if __name__ == "__main__":
    main(sys.argv[1])
