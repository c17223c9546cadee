"""pytorch/examples' word language model, Transformer variant, as written there (positional
encoding buffer, nn.TransformerEncoder with a square subsequent mask, batchify/get_batch,
CrossEntropyLoss, plain SGD by hand with clip_grad_norm_, evaluation perplexity), on a synthetic
corpus. Dropout is 0 so that two libraries' runs from the same weights can be compared step by
step."""

import math
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

DROPOUT = 0.0


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, dropout=0.1, max_len=5000):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        pe = pe.unsqueeze(0).transpose(0, 1)
        self.register_buffer("pe", pe)

    def forward(self, x):
        x = x + self.pe[: x.size(0), :]
        return self.dropout(x)


class TransformerModel(nn.Transformer):
    def __init__(self, ntoken, ninp, nhead, nhid, nlayers, dropout=0.5):
        super().__init__(
            d_model=ninp,
            nhead=nhead,
            dim_feedforward=nhid,
            num_encoder_layers=nlayers,
            dropout=dropout,
        )
        self.model_type = "Transformer"
        self.src_mask = None
        self.pos_encoder = PositionalEncoding(ninp, dropout)
        self.input_emb = nn.Embedding(ntoken, ninp)
        self.ninp = ninp
        self.decoder = nn.Linear(ninp, ntoken)

    def _generate_square_subsequent_mask(self, sz):
        return torch.log(torch.tril(torch.ones(sz, sz)))

    def forward(self, src, has_mask=True):
        if has_mask:
            device = src.device
            if self.src_mask is None or self.src_mask.size(0) != len(src):
                mask = self._generate_square_subsequent_mask(len(src)).to(device)
                self.src_mask = mask
        else:
            self.src_mask = None
        src = self.input_emb(src) * math.sqrt(self.ninp)
        src = self.pos_encoder(src)
        output = self.encoder(src, mask=self.src_mask)
        output = self.decoder(output)
        return F.log_softmax(output, dim=-1)


def batchify(data, bsz):
    nbatch = data.size(0) // bsz
    data = data.narrow(0, 0, nbatch * bsz)
    data = data.view(bsz, -1).t().contiguous()
    return data


def get_batch(source, i, bptt):
    seq_len = min(bptt, len(source) - 1 - i)
    data = source[i : i + seq_len]
    target = source[i + 1 : i + 1 + seq_len].view(-1)
    return data, target


def main(out_dir):
    torch.manual_seed(1111)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    rng = np.random.default_rng(0)
    ntokens, bptt, lr, clip = 50, 12, 1.0, 0.25
    # a corpus with structure: token t is usually followed by (3 t + 1) mod ntokens
    ids = [0]
    for _ in range(1200):
        ids.append(
            (3 * ids[-1] + 1) % ntokens if rng.random() < 0.8 else int(rng.integers(ntokens))
        )
    corpus = torch.tensor(ids, dtype=torch.long)
    train_data = batchify(corpus[:1000], 8).to(device)
    val_data = batchify(corpus[1000:], 4).to(device)

    model = TransformerModel(ntokens, 32, 2, 64, 2, DROPOUT).to(device)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            if "norm" in name:
                continue  # LayerNorm keeps its ones/zeros
            p.copy_(torch.from_numpy(rng.uniform(-0.1, 0.1, tuple(p.shape)).astype(np.float32)))
    criterion = nn.NLLLoss()

    for epoch in range(1, 3):
        model.train()
        for batch, i in enumerate(range(0, train_data.size(0) - 1, bptt)):
            data, targets = get_batch(train_data, i, bptt)
            model.zero_grad()
            output = model(data)
            output = output.view(-1, ntokens)
            loss = criterion(output, targets)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            for p in model.parameters():
                p.data.add_(p.grad, alpha=-lr)
            print(f"LOSS train {epoch} {batch} {loss.item():.8g}")
        model.eval()
        total_loss = 0.0
        with torch.no_grad():
            for i in range(0, val_data.size(0) - 1, bptt):
                data, targets = get_batch(val_data, i, bptt)
                output = model(data).view(-1, ntokens)
                total_loss += len(data) * criterion(output, targets).item()
        val_loss = total_loss / (len(val_data) - 1)
        print(f"LOSS val {epoch} 0 {val_loss:.8g}")
        print(f"METRIC ppl_{epoch} {math.exp(val_loss):.6g}")
    with open(f"{out_dir}/model.pt", "wb") as f:
        torch.save(model, f)
    with open(f"{out_dir}/model.pt", "rb") as f:
        model = torch.load(f, weights_only=False)


if __name__ == "__main__":
    main(sys.argv[1])
