"""The reversal task of the length-generalisation page: data, loss, decoding, evaluation."""

import pytest
import torch
from torch import nn

from seqlib.experiments import length, runs
from seqlib.lm import RecurrentLM


def gen(seed=0):
    return torch.Generator().manual_seed(seed)


def test_a_batch_is_symbols_separator_reversal():
    batch = length.reversal_batch(4, 3, 7, gen())
    assert batch.shape == (3, 9) and batch.dtype == torch.long
    assert (batch[:, 4] == 7).all() and (batch[:, :4] < 7).all()
    assert torch.equal(batch[:, 5:], batch[:, :4].flip(1))


def test_batches_are_seeded():
    assert torch.equal(length.reversal_batch(5, 4, 3, gen(1)),
                       length.reversal_batch(5, 4, 3, gen(1)))
    assert not torch.equal(length.reversal_batch(5, 4, 3, gen(1)),
                           length.reversal_batch(5, 4, 3, gen(2)))


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="n"):
        length.reversal_batch(0, 2, 3, gen())
    with pytest.raises(ValueError, match="symbols must be at least 2"):
        length.reversal_batch(2, 2, 1, gen())
    with pytest.raises(TypeError, match="generator must be a torch.Generator"):
        length.reversal_batch(2, 2, 3, 0)
    with pytest.raises(ValueError, match="x must be a long tensor"):
        length.greedy_reverse(RecurrentLM("lstm", 4, 2, 2), torch.zeros(2, 3), 3)
    fit = dict(batch_size=2, steps=2, lr=1e-3, warmup=1, seed=0)
    with pytest.raises(ValueError, match="config must be a dict"):
        length.run("tiny", RecurrentLM("lstm", 4, 2, 2), dict(lengths=(1, 2), symbols=3),
                   {"steps": 1})
    with pytest.raises(ValueError, match=r"config has the keys \['symbol'\]"):
        length.run("tiny", RecurrentLM("lstm", 4, 2, 2),
                   dict(lengths=(1, 2), symbols=3, symbol=3), fit)
    with pytest.raises(ValueError, match="lengths"):
        length.run("tiny", RecurrentLM("lstm", 4, 2, 2), dict(lengths=(3, 2), symbols=3), fit)


class Oracle(nn.Module):
    """Reads [x, SEP, answer so far] and puts all its weight on the right next token (or,
    with `wrong_from`, on a wrong one from that answer position on)."""

    def __init__(self, symbols, wrong_from=None):
        super().__init__()
        self.symbols, self.wrong_from = symbols, wrong_from

    def forward(self, ids, state=None):
        B, T = ids.shape
        logits = torch.zeros(B, T, self.symbols + 1)
        n = int((ids[0] == self.symbols).nonzero()[0])
        for t in range(n, T):  # the answer token t - n + 1 comes after position t
            j = t - n  # answer position, from 0
            token = ids[:, n - 1 - j]
            if self.wrong_from is not None and j >= self.wrong_from:
                token = (token + 1) % self.symbols
            logits[torch.arange(B), t, token] = 1.0
        return logits, None


def test_the_evaluation_of_a_perfect_and_of_a_wrong_model():
    perfect = length.accuracy_by_length(Oracle(5), [1, 3, 8], 16, 5)
    assert perfect == {1: (1.0, 1.0), 3: (1.0, 1.0), 8: (1.0, 1.0)}
    wrong = length.accuracy_by_length(Oracle(5, wrong_from=2), [1, 2, 4, 8], 16, 5)
    assert wrong == {1: (1.0, 1.0), 2: (1.0, 1.0), 4: (0.5, 0.0), 8: (0.25, 0.0)}


def test_the_loss_reads_only_the_answer():
    batch = length.reversal_batch(3, 4, 5, gen())
    assert length.reversal_loss(Oracle(5), batch) < length.reversal_loss(Oracle(5, 0), batch)
    model = RecurrentLM("lstm", 6, 4, 4)
    loss = length.reversal_loss(model, batch)
    assert loss.shape == () and loss.requires_grad


def test_training_is_seeded_and_lowers_the_loss():
    data = dict(lengths=(1, 3), symbols=3)
    fit = dict(batch_size=8, steps=30, lr=1e-2, warmup=5, seed=0)
    histories = []
    for _ in range(2):
        torch.manual_seed(0)
        run = length.run("tiny", RecurrentLM("lstm", 4, 4, 8), data, fit)
        histories.append(runs.fit(run)["loss"])
    assert histories[0] == histories[1] and len(histories[0]) == 30
    assert sum(histories[0][-5:]) < sum(histories[0][:5])
