"""The PyTorch "language translation with nn.Transformer" tutorial's model, as written there:
`nn.Transformer` between a token embedding scaled by sqrt(emb_size) and a sinusoidal
PositionalEncoding buffer, sequence-first batches built with `pad_sequence`, the square subsequent
mask from `torch.triu(...) == 1` turned into a float mask with `masked_fill`, padding masks from
`(src == PAD_IDX).transpose(0, 1)`, CrossEntropyLoss(ignore_index=PAD_IDX), Adam with
betas=(0.9, 0.98), eps=1e-9, and its `greedy_decode` (`torch.ones(1, 1).fill_(...)`, `type_as`,
`torch.max` over the generator's logits). The "language pair" is synthetic (the target is the
source reversed with every token shifted); dropout is 0 so that two libraries' runs from the same
weights can be compared step by step."""

import math
import sys

import numpy as np
import torch
import torch.nn as nn
from torch import Tensor
from torch.nn import Transformer
from torch.nn.utils.rnn import pad_sequence

UNK_IDX, PAD_IDX, BOS_IDX, EOS_IDX = 0, 1, 2, 3
SRC_VOCAB_SIZE = TGT_VOCAB_SIZE = 14
DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class PositionalEncoding(nn.Module):
    def __init__(self, emb_size: int, dropout: float, maxlen: int = 5000):
        super().__init__()
        den = torch.exp(-torch.arange(0, emb_size, 2) * math.log(10000) / emb_size)
        pos = torch.arange(0, maxlen).reshape(maxlen, 1)
        pos_embedding = torch.zeros((maxlen, emb_size))
        pos_embedding[:, 0::2] = torch.sin(pos * den)
        pos_embedding[:, 1::2] = torch.cos(pos * den)
        pos_embedding = pos_embedding.unsqueeze(-2)

        self.dropout = nn.Dropout(dropout)
        self.register_buffer("pos_embedding", pos_embedding)

    def forward(self, token_embedding: Tensor):
        return self.dropout(token_embedding + self.pos_embedding[: token_embedding.size(0), :])


class TokenEmbedding(nn.Module):
    def __init__(self, vocab_size: int, emb_size):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, emb_size)
        self.emb_size = emb_size

    def forward(self, tokens: Tensor):
        return self.embedding(tokens.long()) * math.sqrt(self.emb_size)


class Seq2SeqTransformer(nn.Module):
    def __init__(
        self,
        num_encoder_layers,
        num_decoder_layers,
        emb_size,
        nhead,
        src_vocab_size,
        tgt_vocab_size,
        dim_feedforward=512,
        dropout=0.1,
    ):
        super().__init__()
        self.transformer = Transformer(
            d_model=emb_size,
            nhead=nhead,
            num_encoder_layers=num_encoder_layers,
            num_decoder_layers=num_decoder_layers,
            dim_feedforward=dim_feedforward,
            dropout=dropout,
        )
        self.generator = nn.Linear(emb_size, tgt_vocab_size)
        self.src_tok_emb = TokenEmbedding(src_vocab_size, emb_size)
        self.tgt_tok_emb = TokenEmbedding(tgt_vocab_size, emb_size)
        self.positional_encoding = PositionalEncoding(emb_size, dropout=dropout)

    def forward(
        self,
        src,
        trg,
        src_mask,
        tgt_mask,
        src_padding_mask,
        tgt_padding_mask,
        memory_key_padding_mask,
    ):
        src_emb = self.positional_encoding(self.src_tok_emb(src))
        tgt_emb = self.positional_encoding(self.tgt_tok_emb(trg))
        outs = self.transformer(
            src_emb,
            tgt_emb,
            src_mask,
            tgt_mask,
            None,
            src_padding_mask,
            tgt_padding_mask,
            memory_key_padding_mask,
        )
        return self.generator(outs)

    def encode(self, src: Tensor, src_mask: Tensor):
        return self.transformer.encoder(self.positional_encoding(self.src_tok_emb(src)), src_mask)

    def decode(self, tgt: Tensor, memory: Tensor, tgt_mask: Tensor):
        return self.transformer.decoder(
            self.positional_encoding(self.tgt_tok_emb(tgt)), memory, tgt_mask
        )


def generate_square_subsequent_mask(sz):
    mask = (torch.triu(torch.ones((sz, sz), device=DEVICE)) == 1).transpose(0, 1)
    mask = mask.float().masked_fill(mask == 0, float("-inf")).masked_fill(mask == 1, 0.0)
    return mask


def create_mask(src, tgt):
    src_seq_len = src.shape[0]
    tgt_seq_len = tgt.shape[0]

    tgt_mask = generate_square_subsequent_mask(tgt_seq_len)
    src_mask = torch.zeros((src_seq_len, src_seq_len), device=DEVICE).type(torch.bool)

    src_padding_mask = (src == PAD_IDX).transpose(0, 1)
    tgt_padding_mask = (tgt == PAD_IDX).transpose(0, 1)
    return src_mask, tgt_mask, src_padding_mask, tgt_padding_mask


def tensor_transform(token_ids):
    return torch.cat((torch.tensor([BOS_IDX]), torch.tensor(token_ids), torch.tensor([EOS_IDX])))


def collate_fn(batch):
    src_batch, tgt_batch = [], []
    for src_sample, tgt_sample in batch:
        src_batch.append(tensor_transform(src_sample))
        tgt_batch.append(tensor_transform(tgt_sample))
    src_batch = pad_sequence(src_batch, padding_value=PAD_IDX)
    tgt_batch = pad_sequence(tgt_batch, padding_value=PAD_IDX)
    return src_batch, tgt_batch


def greedy_decode(model, src, src_mask, max_len, start_symbol):
    src = src.to(DEVICE)
    src_mask = src_mask.to(DEVICE)

    memory = model.encode(src, src_mask)
    ys = torch.ones(1, 1).fill_(start_symbol).type(torch.long).to(DEVICE)
    for _ in range(max_len - 1):
        memory = memory.to(DEVICE)
        tgt_mask = (generate_square_subsequent_mask(ys.size(0)).type(torch.bool)).to(DEVICE)
        out = model.decode(ys, memory, tgt_mask)
        out = out.transpose(0, 1)
        prob = model.generator(out[:, -1])
        _, next_word = torch.max(prob, dim=1)
        next_word = next_word.item()

        ys = torch.cat([ys, torch.ones(1, 1).type_as(src.data).fill_(next_word)], dim=0)
        if next_word == EOS_IDX:
            break
    return ys


def make_pairs(rng, n):
    pairs = []
    for _ in range(n):
        src = rng.integers(4, SRC_VOCAB_SIZE, size=int(rng.integers(3, 8))).tolist()
        tgt = [4 + (t - 4 + 3) % (TGT_VOCAB_SIZE - 4) for t in reversed(src)]
        pairs.append((src, tgt))
    return pairs


def main(out_dir):
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    train_pairs, val_pairs = make_pairs(rng, 128), make_pairs(rng, 32)
    BATCH_SIZE = 16

    transformer = Seq2SeqTransformer(2, 2, 32, 4, SRC_VOCAB_SIZE, TGT_VOCAB_SIZE, 64, dropout=0.0)
    # the tutorial's xavier_uniform_ on every matrix, drawn with numpy (LayerNorms keep their
    # ones and zeros, the biases get small numpy values)
    with torch.no_grad():
        for name, p in sorted(transformer.named_parameters()):
            if p.dim() > 1:
                bound = math.sqrt(6.0 / (p.shape[0] + p.shape[1]))
            elif "norm" in name:
                continue
            else:
                bound = 0.05
            p.copy_(torch.from_numpy(rng.uniform(-bound, bound, tuple(p.shape)).astype(np.float32)))
    transformer = transformer.to(DEVICE)
    loss_fn = torch.nn.CrossEntropyLoss(ignore_index=PAD_IDX)
    optimizer = torch.optim.Adam(transformer.parameters(), lr=0.002, betas=(0.9, 0.98), eps=1e-9)

    def train_epoch(model, optimizer, epoch):
        model.train()
        losses = 0
        batches = [
            collate_fn(train_pairs[i : i + BATCH_SIZE])
            for i in range(0, len(train_pairs), BATCH_SIZE)
        ]
        for step, (src, tgt) in enumerate(batches):
            src = src.to(DEVICE)
            tgt = tgt.to(DEVICE)
            tgt_input = tgt[:-1, :]
            src_mask, tgt_mask, src_padding_mask, tgt_padding_mask = create_mask(src, tgt_input)
            logits = model(
                src,
                tgt_input,
                src_mask,
                tgt_mask,
                src_padding_mask,
                tgt_padding_mask,
                src_padding_mask,
            )
            optimizer.zero_grad()
            tgt_out = tgt[1:, :]
            loss = loss_fn(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1))
            loss.backward()
            optimizer.step()
            losses += loss.item()
            print(f"LOSS train {epoch} {step} {loss.item():.8g}")
        return losses / len(batches)

    def evaluate(model):
        model.eval()
        losses = 0
        batches = [
            collate_fn(val_pairs[i : i + BATCH_SIZE]) for i in range(0, len(val_pairs), BATCH_SIZE)
        ]
        for src, tgt in batches:
            tgt_input = tgt[:-1, :]
            src_mask, tgt_mask, src_padding_mask, tgt_padding_mask = create_mask(src, tgt_input)
            logits = model(
                src,
                tgt_input,
                src_mask,
                tgt_mask,
                src_padding_mask,
                tgt_padding_mask,
                src_padding_mask,
            )
            tgt_out = tgt[1:, :]
            loss = loss_fn(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1))
            losses += loss.item()
        return losses / len(batches)

    for epoch in range(1, 5):
        train_loss = train_epoch(transformer, optimizer, epoch)
        val_loss = evaluate(transformer)
        print(f"LOSS epoch {epoch} 0 {train_loss:.8g}")
        print(f"LOSS val {epoch} 0 {val_loss:.8g}")

    def translate(model: torch.nn.Module, src_tokens):
        model.eval()
        src = tensor_transform(src_tokens).view(-1, 1)
        num_tokens = src.shape[0]
        src_mask = (torch.zeros(num_tokens, num_tokens)).type(torch.bool)
        tgt_tokens = greedy_decode(
            model, src, src_mask, max_len=num_tokens + 5, start_symbol=BOS_IDX
        ).flatten()
        return [int(t) for t in tgt_tokens if int(t) not in (BOS_IDX, EOS_IDX)]

    correct = total = 0
    with torch.no_grad():
        for src, tgt in val_pairs[:12]:
            out = translate(transformer, src)
            correct += sum(a == b for a, b in zip(out, tgt))
            total += len(tgt)
    print(f"METRIC greedy_token_acc {correct / total:.6g}")

    torch.save(transformer.state_dict(), f"{out_dir}/transformer.pt")
    reloaded = Seq2SeqTransformer(2, 2, 32, 4, SRC_VOCAB_SIZE, TGT_VOCAB_SIZE, 64, dropout=0.0)
    reloaded.load_state_dict(torch.load(f"{out_dir}/transformer.pt"))
    with torch.no_grad():
        same = translate(reloaded, val_pairs[0][0]) == translate(transformer, val_pairs[0][0])
        same = same and evaluate(reloaded) == evaluate(transformer)
    print(f"METRIC reload_equal {int(same)}")


if __name__ == "__main__":
    main(sys.argv[1])
