"""The PyTorch chatbot tutorial's seq2seq model, as written there: sentences turned into
time-major padded batches by `itertools.zip_longest` and the legacy `torch.LongTensor` /
`torch.BoolTensor` constructors (batches sorted by length for `pack_padded_sequence`), a 2-layer
bidirectional GRU encoder whose two directions are summed, a Luong attention decoder (dot, general
and concat scores, a `nn.Parameter(torch.FloatTensor(h))` vector), a masked NLL loss made of
`torch.gather` and `masked_select`, separate Adam optimizers, gradient clipping, and the greedy
search decoder of its evaluation section. The dialogue is synthetic (answer = the question's words
shifted by one); teacher forcing coin flips come from numpy so two libraries' runs agree."""

import itertools
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

PAD_token, SOS_token, EOS_token = 0, 1, 2
VOCAB, HIDDEN, MAX_LENGTH = 14, 24, 8


def indexesFromSentence(sentence):
    return [int(word) for word in sentence.split(" ")] + [EOS_token]


def zeroPadding(l, fillvalue=PAD_token):
    return list(itertools.zip_longest(*l, fillvalue=fillvalue))


def binaryMatrix(l):
    return [[0 if token == PAD_token else 1 for token in seq] for seq in l]


def inputVar(l):
    indexes_batch = [indexesFromSentence(sentence) for sentence in l]
    lengths = torch.tensor([len(indexes) for indexes in indexes_batch])
    padVar = torch.LongTensor(zeroPadding(indexes_batch))
    return padVar, lengths


def outputVar(l):
    indexes_batch = [indexesFromSentence(sentence) for sentence in l]
    max_target_len = max(len(indexes) for indexes in indexes_batch)
    padList = zeroPadding(indexes_batch)
    mask = torch.BoolTensor(binaryMatrix(padList))
    padVar = torch.LongTensor(padList)
    return padVar, mask, max_target_len


def batch2TrainData(pair_batch):
    pair_batch.sort(key=lambda x: len(x[0].split(" ")), reverse=True)
    input_batch, output_batch = zip(*pair_batch)
    inp, lengths = inputVar(input_batch)
    output, mask, max_target_len = outputVar(output_batch)
    return inp, lengths, output, mask, max_target_len


class EncoderRNN(nn.Module):
    def __init__(self, hidden_size, embedding, n_layers=1, dropout=0):
        super().__init__()
        self.n_layers = n_layers
        self.hidden_size = hidden_size
        self.embedding = embedding
        self.gru = nn.GRU(
            hidden_size,
            hidden_size,
            n_layers,
            dropout=(0 if n_layers == 1 else dropout),
            bidirectional=True,
        )

    def forward(self, input_seq, input_lengths, hidden=None):
        embedded = self.embedding(input_seq)
        packed = nn.utils.rnn.pack_padded_sequence(embedded, input_lengths)
        outputs, hidden = self.gru(packed, hidden)
        outputs, _ = nn.utils.rnn.pad_packed_sequence(outputs)
        outputs = outputs[:, :, : self.hidden_size] + outputs[:, :, self.hidden_size :]
        return outputs, hidden


class Attn(nn.Module):
    def __init__(self, method, hidden_size):
        super().__init__()
        self.method = method
        if self.method not in ["dot", "general", "concat"]:
            raise ValueError(self.method, "is not an appropriate attention method.")
        self.hidden_size = hidden_size
        if self.method == "general":
            self.attn = nn.Linear(self.hidden_size, hidden_size)
        elif self.method == "concat":
            self.attn = nn.Linear(self.hidden_size * 2, hidden_size)
            self.v = nn.Parameter(torch.FloatTensor(hidden_size))

    def dot_score(self, hidden, encoder_output):
        return torch.sum(hidden * encoder_output, dim=2)

    def general_score(self, hidden, encoder_output):
        energy = self.attn(encoder_output)
        return torch.sum(hidden * energy, dim=2)

    def concat_score(self, hidden, encoder_output):
        energy = self.attn(
            torch.cat((hidden.expand(encoder_output.size(0), -1, -1), encoder_output), 2)
        ).tanh()
        return torch.sum(self.v * energy, dim=2)

    def forward(self, hidden, encoder_outputs):
        if self.method == "general":
            attn_energies = self.general_score(hidden, encoder_outputs)
        elif self.method == "concat":
            attn_energies = self.concat_score(hidden, encoder_outputs)
        else:
            attn_energies = self.dot_score(hidden, encoder_outputs)
        attn_energies = attn_energies.t()
        return F.softmax(attn_energies, dim=1).unsqueeze(1)


class LuongAttnDecoderRNN(nn.Module):
    def __init__(self, attn_model, embedding, hidden_size, output_size, n_layers=1, dropout=0.1):
        super().__init__()
        self.n_layers = n_layers
        self.embedding = embedding
        self.embedding_dropout = nn.Dropout(dropout)
        self.gru = nn.GRU(
            hidden_size, hidden_size, n_layers, dropout=(0 if n_layers == 1 else dropout)
        )
        self.concat = nn.Linear(hidden_size * 2, hidden_size)
        self.out = nn.Linear(hidden_size, output_size)
        self.attn = Attn(attn_model, hidden_size)

    def forward(self, input_step, last_hidden, encoder_outputs):
        embedded = self.embedding(input_step)
        embedded = self.embedding_dropout(embedded)
        rnn_output, hidden = self.gru(embedded, last_hidden)
        attn_weights = self.attn(rnn_output, encoder_outputs)
        context = attn_weights.bmm(encoder_outputs.transpose(0, 1))
        rnn_output = rnn_output.squeeze(0)
        context = context.squeeze(1)
        concat_input = torch.cat((rnn_output, context), 1)
        concat_output = torch.tanh(self.concat(concat_input))
        output = self.out(concat_output)
        output = F.softmax(output, dim=1)
        return output, hidden


def maskNLLLoss(inp, target, mask):
    nTotal = mask.sum()
    crossEntropy = -torch.log(torch.gather(inp, 1, target.view(-1, 1)).squeeze(1))
    loss = crossEntropy.masked_select(mask).mean()
    return loss, nTotal.item()


def train(
    input_variable,
    lengths,
    target_variable,
    mask,
    max_target_len,
    encoder,
    decoder,
    encoder_optimizer,
    decoder_optimizer,
    batch_size,
    clip,
    forcing,
):
    encoder_optimizer.zero_grad()
    decoder_optimizer.zero_grad()
    loss = 0
    print_losses = []
    n_totals = 0
    encoder_outputs, encoder_hidden = encoder(input_variable, lengths)
    decoder_input = torch.LongTensor([[SOS_token for _ in range(batch_size)]])
    decoder_hidden = encoder_hidden[: decoder.n_layers]
    for t in range(max_target_len):
        decoder_output, decoder_hidden = decoder(decoder_input, decoder_hidden, encoder_outputs)
        if forcing[t]:
            decoder_input = target_variable[t].view(1, -1)
        else:
            _, topi = decoder_output.topk(1)
            decoder_input = torch.LongTensor([[topi[i][0] for i in range(batch_size)]])
        mask_loss, nTotal = maskNLLLoss(decoder_output, target_variable[t], mask[t])
        loss += mask_loss
        print_losses.append(mask_loss.item() * nTotal)
        n_totals += nTotal
    loss.backward()
    _ = nn.utils.clip_grad_norm_(encoder.parameters(), clip)
    _ = nn.utils.clip_grad_norm_(decoder.parameters(), clip)
    encoder_optimizer.step()
    decoder_optimizer.step()
    return sum(print_losses) / n_totals


class GreedySearchDecoder(nn.Module):
    def __init__(self, encoder, decoder):
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder

    def forward(self, input_seq, input_length, max_length):
        encoder_outputs, encoder_hidden = self.encoder(input_seq, input_length)
        decoder_hidden = encoder_hidden[: self.decoder.n_layers]
        decoder_input = torch.ones(1, 1, dtype=torch.long) * SOS_token
        all_tokens = torch.zeros([0], dtype=torch.long)
        all_scores = torch.zeros([0])
        for _ in range(max_length):
            decoder_output, decoder_hidden = self.decoder(
                decoder_input, decoder_hidden, encoder_outputs
            )
            decoder_scores, decoder_input = torch.max(decoder_output, dim=1)
            all_tokens = torch.cat((all_tokens, decoder_input), dim=0)
            all_scores = torch.cat((all_scores, decoder_scores), dim=0)
            decoder_input = torch.unsqueeze(decoder_input, 0)
        return all_tokens, all_scores


def evaluate(searcher, sentence, max_length=MAX_LENGTH):
    indexes_batch = [indexesFromSentence(sentence)]
    lengths = torch.tensor([len(indexes) for indexes in indexes_batch])
    input_batch = torch.LongTensor(indexes_batch).transpose(0, 1)
    tokens, scores = searcher(input_batch, lengths, max_length)
    return [int(token) for token in tokens], scores


def make_pairs(rng, n):
    pairs = []
    for _ in range(n):
        words = rng.integers(3, VOCAB, size=int(rng.integers(2, MAX_LENGTH - 1)))
        answer = 3 + (words - 2) % (VOCAB - 3)
        pairs.append((" ".join(map(str, words)), " ".join(map(str, answer))))
    return pairs


def main(out_dir):
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    pairs = make_pairs(rng, 96)
    tests = make_pairs(rng, 12)
    batch_size, clip, learning_rate, decoder_learning_ratio = 16, 50.0, 0.01, 2.0
    results = {}
    for attn_model in ("dot", "general", "concat"):
        embedding = nn.Embedding(VOCAB, HIDDEN)
        encoder = EncoderRNN(HIDDEN, embedding, 2, 0.0)
        decoder = LuongAttnDecoderRNN(attn_model, embedding, HIDDEN, VOCAB, 2, 0.0)
        with torch.no_grad():
            for module in (encoder, decoder):
                for _, p in sorted(module.named_parameters()):
                    p.copy_(
                        torch.from_numpy(rng.uniform(-0.3, 0.3, tuple(p.shape)).astype(np.float32))
                    )
        encoder.train()
        decoder.train()
        encoder_optimizer = torch.optim.Adam(encoder.parameters(), lr=learning_rate)
        decoder_optimizer = torch.optim.Adam(
            decoder.parameters(), lr=learning_rate * decoder_learning_ratio
        )
        n_iteration = 20
        training_batches = [
            batch2TrainData([pairs[int(i)] for i in rng.integers(len(pairs), size=batch_size)])
            for _ in range(n_iteration)
        ]
        forcing = rng.random((n_iteration, MAX_LENGTH)) < 0.7
        for iteration in range(n_iteration):
            input_variable, lengths, target_variable, mask, max_target_len = training_batches[
                iteration
            ]
            loss = train(
                input_variable,
                lengths,
                target_variable,
                mask,
                max_target_len,
                encoder,
                decoder,
                encoder_optimizer,
                decoder_optimizer,
                batch_size,
                clip,
                forcing[iteration],
            )
            print(f"LOSS {attn_model} 0 {iteration} {loss:.8g}")

        encoder.eval()
        decoder.eval()
        searcher = GreedySearchDecoder(encoder, decoder)
        correct = total = 0
        score_sum = 0.0
        with torch.no_grad():
            for question, answer in tests:
                output_words, scores = evaluate(searcher, question)
                expected = indexesFromSentence(answer)
                correct += sum(a == b for a, b in zip(output_words, expected))
                total += len(expected)
                score_sum += scores.sum().item()
        print(f"METRIC {attn_model}_token_acc {correct / total:.6g}")
        print(f"LOSS {attn_model}_scores 0 0 {score_sum:.8g}")
        results[attn_model] = (encoder, decoder)

    encoder, decoder = results["concat"]
    torch.save(
        {
            "en": encoder.state_dict(),
            "de": decoder.state_dict(),
            "embedding": encoder.embedding.state_dict(),
        },
        f"{out_dir}/chatbot.tar",
    )
    checkpoint = torch.load(f"{out_dir}/chatbot.tar")
    embedding = nn.Embedding(VOCAB, HIDDEN)
    embedding.load_state_dict(checkpoint["embedding"])
    encoder2 = EncoderRNN(HIDDEN, embedding, 2, 0.0)
    decoder2 = LuongAttnDecoderRNN("concat", embedding, HIDDEN, VOCAB, 2, 0.0)
    encoder2.load_state_dict(checkpoint["en"])
    decoder2.load_state_dict(checkpoint["de"])
    encoder2.eval()
    decoder2.eval()
    with torch.no_grad():
        a = evaluate(GreedySearchDecoder(encoder, decoder), tests[0][0])
        b = evaluate(GreedySearchDecoder(encoder2, decoder2), tests[0][0])
    print(f"METRIC reload_equal {int(a[0] == b[0] and torch.equal(a[1], b[1]))}")


if __name__ == "__main__":
    main(sys.argv[1])
