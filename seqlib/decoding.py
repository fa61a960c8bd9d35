"""Decoding: from an encoder-decoder to output sentences (Section 7.4), each step reading
back the token chosen, (7.22) and (7.34), from <start> until <stop> or `max_len` tokens:
`greedy` (the chapter's), `sample` (with temperature, top-k and top-p, Holtzman et al.,
2020) and `beam_search`, which the chapter names in Section 7.5 without their details.

Models follow the decoding protocol of seqlib.seq2seq (`start`, `step`, `reorder`). Each
function returns, per source, lists of token ids without <start> and <stop>.
"""

import contextlib
from typing import NamedTuple

import torch
from torch import nn

from seqlib.checks import check_source, int_in_range, positive_int

NEG_INF = float("-inf")


def at_least_float32(logits: torch.Tensor) -> torch.Tensor:
    """Half-precision logits in float32, float32 and float64 ones as they are."""
    return logits.to(torch.promote_types(logits.dtype, torch.float32))


@contextlib.contextmanager
def decoding_mode(model):
    """No gradients, and evaluation mode (no dropout) for an nn.Module, restored afterwards."""
    for name in ("start", "step", "reorder"):
        if not callable(getattr(model, name, None)):
            raise TypeError(f"model must have start, step and reorder methods (the decoding "
                            f"protocol of seqlib.seq2seq); {type(model).__name__} has no {name}")
    training = isinstance(model, nn.Module) and model.training
    if training:
        model.eval()
    try:
        with torch.no_grad():
            yield
    finally:
        if training:
            model.train()


def _check_ids(model, start_id, stop_id, max_len) -> None:
    """Special ids must be ints inside the model's target vocabulary, if it states its size."""
    positive_int("max_len", max_len)
    V = getattr(model, "tgt_vocab_size", None)
    for name, value in [("start_id", start_id), ("stop_id", stop_id)]:
        int_in_range(name, value, 0, expected="a non-negative int")
        if V is not None and value >= V:
            raise ValueError(f"{name}={value} is outside the model's target vocabulary of "
                             f"size {V}: is the vocabulary the one the model was trained on?")


def _check_logits(logits, N: int, start_id: int, stop_id: int) -> int:
    """The step's logits must be (N, V) with V above both special ids; returns V."""
    if not isinstance(logits, torch.Tensor) or logits.dim() != 2 or logits.shape[0] != N:
        got = tuple(logits.shape) if isinstance(logits, torch.Tensor) else type(logits).__name__
        raise ValueError(f"model.step must return logits (N, V) with N={N}, got {got}")
    V = logits.shape[1]
    if max(start_id, stop_id) >= V:
        raise ValueError(f"start_id={start_id} and stop_id={stop_id} must lie in the model's "
                         f"vocabulary of size {V}")
    return V


def filter_logits(logits: torch.Tensor, top_k: int | None = None,
                  top_p: float | None = None) -> torch.Tensor:
    """Logits (..., V) with the tokens outside the top-k, then outside the top-p nucleus,
    set to -inf. Top-k keeps the k largest (all of them if k >= V). Top-p keeps the most
    probable tokens, in order, until their probability reaches p (always at least one)."""
    if top_k is not None:
        k = min(positive_int("top_k", top_k), logits.shape[-1])
        index = logits.topk(k, dim=-1).indices  # (..., k)
        keep = torch.zeros_like(logits, dtype=torch.bool).scatter(-1, index, True)
        logits = logits.masked_fill(~keep, NEG_INF)
    if top_p is not None:
        if isinstance(top_p, bool) or not isinstance(top_p, (int, float)) or not 0 < top_p <= 1:
            raise ValueError(f"top_p must be a probability in (0, 1], got {top_p!r}")
        if top_p < 1:
            ranked, order = logits.sort(dim=-1, descending=True)  # (..., V)
            p = torch.softmax(ranked, dim=-1)
            above = p.cumsum(-1) - p  # probability of the tokens ranked before each one
            drop = torch.zeros_like(above, dtype=torch.bool).scatter(-1, order, above >= top_p)
            logits = logits.masked_fill(drop, NEG_INF)
    return logits


def _generate(model, src, src_mask, start_id, stop_id, max_len, choose) -> list[list[int]]:
    """Decode a batch with `choose(logits (N, V)) -> tokens (N,)`; finished sentences leave it."""
    _check_ids(model, start_id, stop_id, max_len)
    B = len(check_source(src, src_mask))
    outputs = [[] for _ in range(B)]
    with decoding_mode(model):
        state = model.start(src, src_mask)
        alive = torch.arange(B, device=src.device)  # which source each batch entry decodes
        tokens = torch.full((B,), start_id, dtype=torch.long, device=src.device)
        for _ in range(max_len):
            logits, state = model.step(tokens, state)
            _check_logits(logits, len(alive), start_id, stop_id)
            tokens = choose(logits)  # (N,)
            for b, token in zip(alive.tolist(), tokens.tolist(), strict=True):
                if token != stop_id:
                    outputs[b].append(token)
            going = tokens != stop_id  # (N,)
            if not going.all():
                if not going.any():
                    break
                keep = going.nonzero()[:, 0]  # (N',)
                state, alive, tokens = model.reorder(state, keep), alive[keep], tokens[keep]
    return outputs


def greedy(model, src: torch.Tensor, src_mask: torch.Tensor, *, start_id: int, stop_id: int,
           max_len: int) -> list[list[int]]:
    """The most probable token at each step, until <stop> or max_len tokens, per source."""
    return _generate(model, src, src_mask, start_id, stop_id, max_len,
                     lambda logits: logits.argmax(dim=-1))


def sample(model, src: torch.Tensor, src_mask: torch.Tensor, *, start_id: int, stop_id: int,
           max_len: int, temperature: float = 1.0, top_k: int | None = None,
           top_p: float | None = None, generator: torch.Generator) -> list[list[int]]:
    """Draw each token from softmax(logits / temperature), restricted by `filter_logits`
    (top_k, top_p); the explicit `generator` makes the draws reproducible."""
    if not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator (for reproducible draws), got "
                        f"{type(generator).__name__}")
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) \
            or not temperature > 0:
        raise ValueError(f"temperature must be a number > 0, got {temperature!r}")

    def choose(logits):
        logits = filter_logits(at_least_float32(logits) / temperature, top_k, top_p)
        p = torch.softmax(logits, dim=-1).to(generator.device)  # (N, V)
        return torch.multinomial(p, 1, generator=generator)[:, 0].to(logits.device)  # (N,)

    return _generate(model, src, src_mask, start_id, stop_id, max_len, choose)


def beam_search(model, src: torch.Tensor, src_mask: torch.Tensor, *, start_id: int,
                stop_id: int, max_len: int, beam_size: int = 4,
                length_penalty: float = 1.0) -> list[list[tuple[list[int], float]]]:
    """Keep the K = `beam_size` most probable partial sentences of each source at every step.

    Of the best 2 K extensions, those among the best K that end in <stop> finish and the best
    K others stay live, until K have finished (or max_len steps). Scores are log P / n **
    length_penalty, n counting <stop>: 0 gives the log-probability, 1 the mean per token.
    Returns, per source, up to K (tokens, score) pairs, best first.
    """
    search = beam_steps(model, src, src_mask, start_id=start_id, stop_id=stop_id,
                        max_len=max_len, beam_size=beam_size, length_penalty=length_penalty)
    while True:
        try:
            next(search)
        except StopIteration as end:
            return end.value


def beam_steps(model, src: torch.Tensor, src_mask: torch.Tensor, *, start_id: int,
               stop_id: int, max_len: int, beam_size: int = 4, length_penalty: float = 1.0):
    """Beam search as a generator of BeamSteps, returning beam_search's result."""
    _check_ids(model, start_id, stop_id, max_len)
    K = positive_int("beam_size", beam_size)
    if isinstance(length_penalty, bool) or not isinstance(length_penalty, (int, float)) \
            or not length_penalty >= 0:
        raise ValueError(f"length_penalty must be a number >= 0, got {length_penalty!r}")
    B = len(check_source(src, src_mask))
    finished = [[] for _ in range(B)]  # (tokens, score) per source
    with decoding_mode(model):
        device = src.device
        state = model.start(src, src_mask)
        state = model.reorder(state, torch.arange(B, device=device).repeat_interleave(K))
        tokens = torch.full((B * K,), start_id, dtype=torch.long, device=device)  # (B K,)
        scores = torch.full((B, K), NEG_INF, dtype=torch.float64, device=device)  # log P
        scores[:, 0] = 0  # one live hypothesis, <start>, for each source at first
        prefixes = [[[] for _ in range(K)] for _ in range(B)]
        done = [False] * B
        for _ in range(max_len):
            logits, state = model.step(tokens, state)
            V = _check_logits(logits, B * K, start_id, stop_id)
            log_p = torch.log_softmax(at_least_float32(logits), -1).view(B, K, V)  # (B, K, V)
            total = (scores[:, :, None] + log_p).view(B, K * V)  # (B, K V)
            best, flat = total.topk(min(2 * K, K * V), dim=-1)  # (B, 2 K)
            beam, token = flat // V, flat % V  # (B, 2 K): which hypothesis, which token
            scores = torch.full_like(scores, NEG_INF)
            rows = torch.arange(B * K, device=device).view(B, K)  # (B, K): by default, stay
            tokens = tokens.view(B, K).clone()  # (B, K)
            new_prefixes = [[[] for _ in range(K)] for _ in range(B)]
            statuses = [None] * B  # None: the source was done before this step
            for b in range(B):
                if done[b]:
                    continue
                live, status = 0, {}
                for j, (s, k, y) in enumerate(zip(best[b].tolist(), beam[b].tolist(),
                                                  token[b].tolist(), strict=True)):
                    if s == NEG_INF or live == K:
                        break
                    if y == stop_id:
                        if j < K:  # a finished hypothesis among the K best
                            n = len(prefixes[b][k]) + 1
                            finished[b].append((prefixes[b][k], s / n ** length_penalty))
                            status[k, y] = "finished"
                        continue
                    scores[b, live], rows[b, live], tokens[b, live] = s, b * K + k, y
                    new_prefixes[b][live] = prefixes[b][k] + [y]
                    status[k, y] = "live"
                    live += 1
                statuses[b] = status
                done[b] = len(finished[b]) >= K or live == 0
            yield BeamStep(total.view(B, K, V), prefixes, statuses)
            if all(done):
                break
            prefixes, tokens = new_prefixes, tokens.view(B * K)  # (B K,)
            state = model.reorder(state, rows.view(B * K))  # the rows the new beams extend
        for b in range(B):  # max_len reached: the live hypotheses end there
            if not done[b]:
                for k, s in enumerate(scores[b].tolist()):
                    if s > NEG_INF:
                        n = max(len(prefixes[b][k]), 1)
                        finished[b].append((prefixes[b][k], s / n ** length_penalty))
    return [sorted(f, key=lambda pair: -pair[1])[:K] for f in finished]


class BeamStep(NamedTuple):
    """One step of beam search: `total` (B, K, V), the log-probability of every extension;
    `prefixes` before the step; `status`, per source, {(k, token): "live" or "finished"}."""

    total: torch.Tensor
    prefixes: list
    status: list
