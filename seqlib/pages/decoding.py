"""The worked examples of decoding, tools of the book's pages (beyond the chapter):
`TableDecoder`, a decoder written as a table of probabilities; `beam_trace`, beam search step
by step with every extension it scored; `check_decoder`, the check of (7.34) on a trained
decoder: its steps give the logits of its teacher-forced pass, and what it writes depends on
the code z of the source. Models follow seqlib.decoding's protocol (`start`, `step`,
`reorder`); sources are padded batches, src (B, S) ids and src_mask (B, S) bool.
"""

from typing import NamedTuple

import torch

from seqlib.checks import check_source, positive_int
from seqlib.decoding import NEG_INF, at_least_float32, beam_steps, decoding_mode


class TableDecoder:
    """A decoder written as a table, for worked examples of decoding: `table` maps a prefix
    (a tuple of token ids, <start> left out) to the probabilities of the next token, a
    sequence of `vocab_size` numbers summing to 1; after a prefix the table lacks, <stop>
    comes with probability 1. It follows the decoding protocol; the source only sets the
    batch size."""

    def __init__(self, table: dict, vocab_size: int, stop_id: int):
        self.tgt_vocab_size = positive_int("vocab_size", vocab_size)
        self.stop_id = stop_id
        self.table = {}
        for prefix, probs in table.items():
            p = torch.as_tensor(probs, dtype=torch.float64)
            if not isinstance(prefix, tuple) or p.shape != (vocab_size,) or (p < 0).any() \
                    or abs(float(p.sum()) - 1) > 1e-9:
                raise ValueError(f"table[{prefix!r}] must be {vocab_size} probabilities summing "
                                 f"to 1 after a tuple prefix, got {probs!r}")
            self.table[prefix] = p

    def probabilities(self, prefix: tuple) -> torch.Tensor:
        """P(next token | prefix), (V,)."""
        if prefix in self.table:
            return self.table[prefix]
        return torch.nn.functional.one_hot(torch.tensor(self.stop_id),
                                           self.tgt_vocab_size).double()

    def start(self, src: torch.Tensor, src_mask: torch.Tensor) -> list:
        return [None] * len(check_source(src, src_mask))  # None: <start> not yet read

    def step(self, tokens: torch.Tensor, state: list):
        prefixes = [() if p is None else p + (y,) for p, y in zip(state, tokens.tolist(),
                                                                    strict=True)]
        return torch.stack([self.probabilities(p) for p in prefixes]).log(), prefixes

    @staticmethod
    def reorder(state: list, index: torch.Tensor) -> list:
        return [state[i] for i in index.tolist()]


def beam_trace(model, src: torch.Tensor, src_mask: torch.Tensor, **options):
    """seqlib.decoding.beam_search(model, src, src_mask, **options) and its trace: per step,
    one list per source of every extension of its live hypotheses by every token (K V of
    them: for small vocabularies), each a dict with the "prefix" (a tuple of ids), the
    "token", its "log_p" (the log-probability of the prefix and the token) and its
    "status": "live" (kept), "finished" (ended by <stop> among the K best) or "dropped".
    Returns (the search's result, the trace)."""
    search, trace = beam_steps(model, src, src_mask, **options), []
    while True:
        try:
            step = next(search)
        except StopIteration as end:
            return end.value, trace
        trace.append([[] if status is None else _extensions(total, prefixes, status)
                      for total, prefixes, status in zip(*step, strict=True)])


def _extensions(total: torch.Tensor, prefixes: list, status: dict) -> list[dict]:
    """Every extension of the live hypotheses (rows of `total` (K, V) above -inf) by every
    token, with its log-probability and what the beam did with it."""
    return [{"prefix": tuple(prefixes[k]), "token": y, "log_p": s,
             "status": status.get((k, y), "dropped")}
            for k, row in enumerate(total.tolist()) if max(row) > NEG_INF
            for y, s in enumerate(row) if s > NEG_INF]


class DecoderCheck(NamedTuple):
    """What `check_decoder` measured: the largest |difference| between the step-by-step and
    the teacher-forced logits, and per source sentence (B,) the mean total variation between
    its next-token distributions and those given another sentence's code."""
    max_diff: float
    code_effect: torch.Tensor


def check_decoder(model, src: torch.Tensor, src_mask: torch.Tensor, tgt_in: torch.Tensor, *,
                  atol: float = 1e-4, min_effect: float = 1e-3) -> DecoderCheck:
    """Check (7.34), y_hat^<t> = f_decoder(z, (y~^<1>, ..., y~^<t-1>)), on a batch: calling
    `step` once per position of tgt_in (B, T) gives the teacher-forced logits of
    `model(src, src_mask, tgt_in)` to `atol` (so position t reads the tokens before it only),
    and the code z matters: with each sentence given the next sentence's source (the batch
    rolled by one; B >= 2 different sources), the next-token distributions of every sentence
    move, in mean total variation over its T positions, by at least `min_effect`. A decoder
    that ignores z, or one that reads later tokens, raises an AssertionError."""
    B = len(check_source(src, src_mask))
    if B < 2:
        raise ValueError(f"check_decoder needs B >= 2 source sentences, got {B}")
    if tgt_in.dim() != 2 or len(tgt_in) != B:
        raise ValueError(f"tgt_in must be (B={B}, T), got shape {tuple(tgt_in.shape)}")
    with decoding_mode(model):
        parallel = at_least_float32(model(src, src_mask, tgt_in))  # (B, T, V)
        state, rows = model.start(src, src_mask), []
        for t in range(tgt_in.shape[1]):  # one decoder call per position
            logits, state = model.step(tgt_in[:, t], state)  # (B, V)
            rows.append(at_least_float32(logits))
        max_diff = (torch.stack(rows, dim=1) - parallel).abs().max().item()  # (B, T, V)
        assert max_diff <= atol, (f"expected step-by-step logits equal to the teacher-forced "
                                  f"ones to {atol:g}, got a difference of {max_diff:.3g}")
        other = model(src.roll(1, 0), src_mask.roll(1, 0), tgt_in)  # another sentence's z
        moved = (parallel.softmax(-1) - at_least_float32(other).softmax(-1)).abs()
        effect = 0.5 * moved.sum(-1).mean(-1)  # (B,): mean total variation per sentence
    b = int(effect.argmin())
    assert effect[b] >= min_effect, (
        f"expected another source to move every sentence's next-token distributions by "
        f"at least {min_effect:g} (mean total variation), got {effect[b].item():.3g} for "
        f"sentence {b}: the decoder ignores its code z")
    return DecoderCheck(max_diff, effect)
