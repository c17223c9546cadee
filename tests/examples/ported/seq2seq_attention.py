"""The PyTorch seq2seq translation tutorial's GRU encoder-decoder with attention, as written there
(an embedding + GRU encoder, a decoder that attends over the encoder outputs with additive
(Bahdanau) or dot-product scores through `torch.bmm`, teacher forcing, `log_softmax` + NLLLoss),
batched the way public ports batch it: padded sequences from `pad_sequence`, an encoder run over
`pack_padded_sequence(enforce_sorted=False)` / `pad_packed_sequence`, padding ignored by the loss
and masked out of the attention. The task is synthetic (reverse a sequence of tokens); the teacher
forcing coin flips come from numpy so that two libraries' runs can be compared step by step."""

import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import optim
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence, pad_sequence

PAD, SOS, EOS = 0, 1, 2
VOCAB, HIDDEN, MAX_LEN = 12, 32, 8


class EncoderRNN(nn.Module):
    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.embedding = nn.Embedding(input_size, hidden_size, padding_idx=PAD)
        self.gru = nn.GRU(hidden_size, hidden_size, batch_first=True)

    def forward(self, input, lengths):
        embedded = self.embedding(input)
        packed = pack_padded_sequence(embedded, lengths, batch_first=True, enforce_sorted=False)
        output, hidden = self.gru(packed)
        output, _ = pad_packed_sequence(output, batch_first=True, total_length=input.size(1))
        return output, hidden


class BahdanauAttention(nn.Module):
    def __init__(self, hidden_size):
        super().__init__()
        self.Wa = nn.Linear(hidden_size, hidden_size)
        self.Ua = nn.Linear(hidden_size, hidden_size)
        self.Va = nn.Linear(hidden_size, 1)

    def forward(self, query, keys, mask):
        scores = self.Va(torch.tanh(self.Wa(query) + self.Ua(keys)))
        scores = scores.squeeze(2).unsqueeze(1)
        scores = scores.masked_fill(mask.unsqueeze(1), float("-inf"))
        weights = F.softmax(scores, dim=-1)
        context = torch.bmm(weights, keys)
        return context, weights


class DotAttention(nn.Module):
    def forward(self, query, keys, mask):
        scores = torch.bmm(query, keys.transpose(1, 2)) / keys.size(-1) ** 0.5
        scores = scores.masked_fill(mask.unsqueeze(1), float("-inf"))
        weights = F.softmax(scores, dim=-1)
        return torch.bmm(weights, keys), weights


class AttnDecoderRNN(nn.Module):
    def __init__(self, hidden_size, output_size, attention):
        super().__init__()
        self.embedding = nn.Embedding(output_size, hidden_size, padding_idx=PAD)
        self.attention = (
            BahdanauAttention(hidden_size) if attention == "bahdanau" else DotAttention()
        )
        self.gru = nn.GRU(2 * hidden_size, hidden_size, batch_first=True)
        self.out = nn.Linear(hidden_size, output_size)

    def forward(self, encoder_outputs, encoder_hidden, mask, target_tensor=None, forcing=None):
        batch_size = encoder_outputs.size(0)
        decoder_input = torch.empty(batch_size, 1, dtype=torch.long).fill_(SOS)
        decoder_hidden = encoder_hidden
        decoder_outputs, attentions = [], []
        for i in range(MAX_LEN):
            decoder_output, decoder_hidden, attn_weights = self.forward_step(
                decoder_input, decoder_hidden, encoder_outputs, mask
            )
            decoder_outputs.append(decoder_output)
            attentions.append(attn_weights)
            if target_tensor is not None and forcing[i]:
                decoder_input = target_tensor[:, i].unsqueeze(1)  # teacher forcing
            else:
                _, topi = decoder_output.topk(1)
                decoder_input = topi.squeeze(-1).detach()
        decoder_outputs = torch.cat(decoder_outputs, dim=1)
        decoder_outputs = F.log_softmax(decoder_outputs, dim=-1)
        return decoder_outputs, decoder_hidden, torch.cat(attentions, dim=1)

    def forward_step(self, input, hidden, encoder_outputs, mask):
        embedded = self.embedding(input)
        query = hidden.permute(1, 0, 2)
        context, attn_weights = self.attention(query, encoder_outputs, mask)
        input_gru = torch.cat((embedded, context), dim=2)
        output, hidden = self.gru(input_gru, hidden)
        return self.out(output), hidden, attn_weights


def make_pairs(rng, n):
    pairs = []
    for _ in range(n):
        seq = rng.integers(3, VOCAB, size=int(rng.integers(3, MAX_LEN)))
        pairs.append((seq.tolist(), seq[::-1].tolist() + [EOS]))
    return pairs


def collate(pairs):
    src = [torch.tensor(s, dtype=torch.long) for s, _ in pairs]
    tgt = [torch.tensor(t, dtype=torch.long) for _, t in pairs]
    lengths = torch.tensor([len(s) for s in src])
    src = pad_sequence(src, batch_first=True, padding_value=PAD)
    tgt = pad_sequence(tgt, batch_first=True, padding_value=PAD)
    tgt = F.pad(tgt, (0, MAX_LEN - tgt.size(1)), value=PAD)
    return src, lengths, tgt


def evaluate(encoder, decoder, batch):
    src, lengths, tgt = batch
    encoder.eval()
    decoder.eval()
    with torch.no_grad():
        encoder_outputs, encoder_hidden = encoder(src, lengths)
        mask = src == PAD
        decoder_outputs, _, _ = decoder(encoder_outputs, encoder_hidden, mask)
        predicted = decoder_outputs.argmax(dim=-1)
        keep = tgt != PAD
        correct = ((predicted == tgt) & keep).sum().item()
        exact = ((predicted == tgt) | ~keep).all(dim=1).float().mean().item()
    return correct / keep.sum().item(), exact


def main(out_dir):
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    train = [collate(make_pairs(rng, 16)) for _ in range(6)]
    valid = collate(make_pairs(rng, 32))
    criterion = nn.NLLLoss(ignore_index=PAD)

    for attention in ("bahdanau", "dot"):
        encoder = EncoderRNN(VOCAB, HIDDEN)
        decoder = AttnDecoderRNN(HIDDEN, VOCAB, attention)
        with torch.no_grad():
            for module in (encoder, decoder):
                for _, p in sorted(module.named_parameters()):
                    p.copy_(
                        torch.from_numpy(rng.uniform(-0.3, 0.3, tuple(p.shape)).astype(np.float32))
                    )
        encoder_optimizer = optim.Adam(encoder.parameters(), lr=0.01)
        decoder_optimizer = optim.Adam(decoder.parameters(), lr=0.01)
        forcing = rng.random((4, len(train), MAX_LEN)) < 0.5
        for epoch in range(4):
            encoder.train()
            decoder.train()
            total_loss = 0
            for step, (src, lengths, tgt) in enumerate(train):
                encoder_optimizer.zero_grad()
                decoder_optimizer.zero_grad()
                encoder_outputs, encoder_hidden = encoder(src, lengths)
                decoder_outputs, _, _ = decoder(
                    encoder_outputs, encoder_hidden, src == PAD, tgt, forcing[epoch, step]
                )
                loss = criterion(decoder_outputs.view(-1, decoder_outputs.size(-1)), tgt.view(-1))
                loss.backward()
                nn.utils.clip_grad_norm_(encoder.parameters(), 1.0)
                nn.utils.clip_grad_norm_(decoder.parameters(), 1.0)
                encoder_optimizer.step()
                decoder_optimizer.step()
                total_loss += loss.item()
                print(f"LOSS {attention} {epoch} {step} {loss.item():.8g}")
            print(f"LOSS {attention}_epoch {epoch} 0 {total_loss / len(train):.8g}")
        token_acc, exact = evaluate(encoder, decoder, valid)
        print(f"METRIC {attention}_token_acc {token_acc:.6g}")
        print(f"METRIC {attention}_exact {exact:.6g}")

    path = f"{out_dir}/seq2seq.pt"
    torch.save({"encoder": encoder.state_dict(), "decoder": decoder.state_dict()}, path)
    state = torch.load(path)
    encoder2, decoder2 = EncoderRNN(VOCAB, HIDDEN), AttnDecoderRNN(HIDDEN, VOCAB, "dot")
    encoder2.load_state_dict(state["encoder"])
    decoder2.load_state_dict(state["decoder"])
    same = evaluate(encoder2, decoder2, valid) == evaluate(encoder, decoder, valid)
    same = same and all(
        torch.equal(a, b)
        for a, b in zip(encoder.state_dict().values(), encoder2.state_dict().values())
    )
    print(f"METRIC reload_equal {int(same)}")


if __name__ == "__main__":
    main(sys.argv[1])
