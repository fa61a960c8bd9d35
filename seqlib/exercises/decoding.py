"""Checkers for the exercises of the page on label smoothing, calibration and beam search.

`check_beam_step(attempt)` checks one step of beam search,

    beam_step(hypotheses, log_p, K, stop_id) -> (live, finished)

hypotheses: the live partial sentences, a list of (prefix, score) pairs, best first, where
prefix is a tuple of token ids (without <start>) and score its log-probability; log_p: a
(len(hypotheses), V) tensor, row i the log-probabilities of the next token after prefix i
(-inf for a token that cannot come). Every hypothesis is extended by every token, with the
score score_i + log_p[i, y]; the extensions are ranked all together. live: the K best
extensions that do not end in <stop> (and have a finite score), each (prefix + (y,),
score), best first; finished: the extensions by <stop> that rank among the K best of all
the extensions, each (prefix, score) with the prefix as it was (no <stop>), best first.
The reference is seqlib.decoding.beam_search, step by step (seqlib.pages.decoding.beam_trace),
on random tables.

`check_fit_temperature(attempt)` checks temperature scaling,

    fit_temperature(logits, targets) -> float

logits (N, V), targets (N,): the temperature T > 0 that minimises the mean negative
log-likelihood of the targets under softmax(logits / T). The reference minimises it by
Newton's method in the inverse temperature, in which it is convex.
"""

import math
import numbers
import operator

import torch

from seqlib.exercises.toolkit import (
    expect,
    name_mistake,
    passed,
    require_callable,
    run_attempt,
)
from seqlib.pages.decoding import TableDecoder, beam_trace

STOP = 1  # the tables' ids: 0 <start> (never written), 1 <stop>, 2... words


def _random_table(gen: torch.Generator, V: int, depth: int) -> dict:
    """P(next token | prefix) for every prefix of up to `depth` words: Dirichlet draws,
    with no <start>, and no <stop> before the first word."""
    table, frontier = {}, [()]
    for length in range(depth + 1):
        grown = []
        for prefix in frontier:
            p = -torch.rand(V, generator=gen, dtype=torch.float64).log()  # Dirichlet(1)
            p[0] = 0
            if length == 0:
                p[STOP] = 0
            table[prefix] = (p / p.sum()).tolist()
            grown += [prefix + (y,) for y in range(2, V)]
        frontier = grown
    return table


def _cases():
    """(decoder, K, steps): random tables and beam sizes, with each step's input
    hypotheses and the trace's live and finished extensions."""
    gen = torch.Generator().manual_seed(16)
    src, src_mask = torch.zeros(1, 1, dtype=torch.long), torch.ones(1, 1, dtype=torch.bool)
    for V, depth, K in [(5, 2, 2), (5, 2, 3), (6, 3, 2), (4, 2, 1), (6, 2, 4)]:
        decoder = TableDecoder(_random_table(gen, V, depth), vocab_size=V, stop_id=STOP)
        _, trace = beam_trace(decoder, src, src_mask, start_id=0, stop_id=STOP,
                              max_len=depth + 2, beam_size=K, length_penalty=0)
        hypotheses, steps = [((), 0.0)], []
        for step in trace:
            extensions = step[0]  # the one source's extensions at this step
            live = sorted(((e["prefix"] + (e["token"],), e["log_p"]) for e in extensions
                           if e["status"] == "live"), key=lambda pair: -pair[1])
            finished = sorted(((e["prefix"], e["log_p"]) for e in extensions
                               if e["status"] == "finished"), key=lambda pair: -pair[1])
            steps.append((hypotheses, live, finished))
            hypotheses = live
        yield decoder, K, steps


def _pairs(name: str, got, where: str) -> list:
    """`got` as a list of (tuple of ints, float), or an ExerciseError that says why not."""
    expect(isinstance(got, list), f"{name} should be a list of (prefix, score) pairs, got "
                                  f"{type(got).__name__} {where}")
    out = []
    for item in got:
        ok = isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], tuple) \
            and isinstance(item[1], (numbers.Real, torch.Tensor))
        expect(ok, f"each entry of {name} should be a pair (prefix tuple, score), got "
                   f"{item!r} {where}")
        out.append((tuple(int(y) for y in item[0]), float(item[1])))
    return out


def _show(pairs: list) -> str:
    return "[" + ", ".join(f"({p}, {s:.4f})" for p, s in pairs) + "]"


def _compare(name: str, got: list, expected: list, hypotheses, log_p, where: str) -> None:
    """The same prefixes in the same order with the same scores, or a message saying how
    they differ."""
    right = [p for p, _ in got] == [p for p, _ in expected] and all(
        abs(s - s_ref) < 1e-9 for (_, s), (_, s_ref) in zip(got, expected, strict=True))
    if not right:
        prefixes = [p for p, _ in hypotheses]
        alone = name == "live" and bool(got) and all(p[:-1] in prefixes and abs(
            s - log_p[prefixes.index(p[:-1]), p[-1]].item()) < 1e-9 for p, s in got) \
            and any(s != 0 for _, s in hypotheses)
        expect(not alone, f"the scores of live are the last token's log-probabilities alone: a "
                          f"score is the log-probability of the whole prefix, score_i + "
                          f"log_p[i, y] {where}")
        name_mistake(f"{name} holds the right hypotheses in the wrong order", sorted(
            p for p, _ in got), [(sorted(p for p, _ in expected), f"best first. Got "
                                  f"{_show(got)}, expected {_show(expected)} {where}")],
            same=operator.eq)
    expect(right, f"{name} should be {_show(expected)}, got {_show(got)} {where}")


def check_beam_step(attempt) -> None:
    """Check `attempt(hypotheses, log_p, K, stop_id) -> (live, finished)` (see the module's
    docstring) against seqlib.decoding.beam_search, step by step, on random tables."""
    require_callable(attempt, "beam_step(hypotheses, log_p, K, stop_id) -> (live, finished)")
    count = 0
    for decoder, K, steps in _cases():
        for t, (hypotheses, live, finished) in enumerate(steps):
            log_p = torch.stack([decoder.probabilities(p) for p, _ in hypotheses]).log()
            where = (f"(step {t + 1} of a beam of K={K}, hypotheses {_show(hypotheses)}, "
                     f"V={log_p.shape[1]}, stop_id={STOP})")
            result = run_attempt(attempt, list(hypotheses), log_p.clone(), K, STOP,
                                 what=f"beam_step {where}", returns=("live", "finished"))
            got_live = _pairs("live", result[0], where)
            got_finished = _pairs("finished", result[1], where)
            expect(len(got_live) <= K, f"live holds {len(got_live)} hypotheses, more than "
                                       f"K={K} {where}")
            for prefix, _ in got_live:
                expect(not prefix or prefix[-1] != STOP,
                       f"live holds {prefix}, which ends in <stop>: a hypothesis ended by "
                       f"<stop> is finished or dropped, not kept live {where}")
            expect(all(math.isfinite(s) for _, s in got_live),
                   f"live holds an extension of probability 0 (score -inf) {where}")
            candidates = sorted((s + log_p[i, y].item(), p + (y,)) for i, (p, s)
                                in enumerate(hypotheses) for y in range(log_p.shape[1]))
            ranked = [p for _, p in reversed(candidates)]  # every extension, best first
            finishing = {p for p, _ in finished}
            for prefix, _ in got_finished:
                rank = ranked.index(prefix + (STOP,)) + 1 if prefix + (STOP,) in ranked \
                    else None
                expect(prefix in finishing,
                       f"finished holds {prefix}, whose <stop> extension ranks {rank} of all "
                       f"the extensions: only a <stop> among the K={K} best finishes {where}")
            _compare("live", got_live, live, hypotheses, log_p, where)
            _compare("finished", got_finished, finished, hypotheses, log_p, where)
            count += 1
    passed(f"live and finished hypotheses agree with seqlib.decoding.beam_search at all "
           f"{count} steps of 5 beam searches on random tables (beams of 1 to 4)")


def _nll(logits: torch.Tensor, targets: torch.Tensor, T: float) -> float:
    """Mean negative log-likelihood of the targets under softmax(logits / T)."""
    log_p = torch.log_softmax(logits / T, -1)
    return -log_p.gather(-1, targets[:, None]).mean().item()


def best_temperature(logits: torch.Tensor, targets: torch.Tensor) -> float:
    """The temperature minimising the mean NLL, by Newton's method on beta = 1 / T: the NLL
    mean(logsumexp(beta z) - beta z_y) is convex in beta, with derivative
    mean(E_p[z] - z_y) and second derivative mean(Var_p[z]), p = softmax(beta z)."""
    z = logits.double()
    z_y = z.gather(-1, targets[:, None])[:, 0]  # (N,)
    beta = 1.0
    for _ in range(100):
        p = torch.softmax(beta * z, -1)  # (N, V)
        mean = (p * z).sum(-1)  # (N,)
        slope = (mean - z_y).mean().item()
        curvature = (p * (z - mean[:, None]) ** 2).sum(-1).mean().item()
        step = slope / curvature
        while beta - step <= 0:  # stay at beta > 0
            step /= 2
        beta -= step
        if abs(step) < 1e-12 * beta:
            break
    return 1 / beta


def check_fit_temperature(attempt) -> None:
    """Check `attempt(logits (N, V), targets (N,)) -> T` (see the module's docstring) on an
    over-confident and an under-confident set of predictions."""
    require_callable(attempt, "fit_temperature(logits, targets) -> T")
    gen = torch.Generator().manual_seed(16)
    found = []
    for scale, kind in [(3.0, "over-confident"), (0.4, "under-confident")]:
        true = 2 * torch.randn(2000, 10, generator=gen, dtype=torch.float64)  # (N, V)
        targets = torch.multinomial(torch.softmax(true, -1), 1, generator=gen)[:, 0]  # (N,)
        logits = (scale * true).float()  # the model's logits: too sharp or too flat
        T_ref = best_temperature(logits, targets)
        where = f"on {kind} predictions (logits {scale} times the true ones)"
        T = run_attempt(attempt, logits.clone(), targets.clone(), what=f"fit_temperature {where}",
                        grad=True)  # an attempt may fit T by gradient descent
        if isinstance(T, torch.Tensor) and T.numel() == 1:
            T = T.item()
        expect(isinstance(T, numbers.Real) and not isinstance(T, bool),
               f"fit_temperature should return a number, got {type(T).__name__}")
        T = float(T)
        expect(math.isfinite(T) and T > 0, f"the temperature must be a number > 0, got {T}")
        name_mistake(f"got T = {T:.4f} {where}", T, [(1 / T_ref, f"it is the inverse of the "
                     f"best temperature {T_ref:.4f}: the logits are divided by T")],
                     same=lambda got, wrong: abs(got / wrong - 1) < 0.02)
        nll, nll_ref = _nll(logits.double(), targets, T), _nll(logits.double(), targets, T_ref)
        expect(abs(T - T_ref) <= 2e-3 * T_ref or nll - nll_ref < 1e-7,
               f"got T = {T:.4f} with a mean NLL of {nll:.6f}; the best temperature is "
               f"{T_ref:.4f}, with {nll_ref:.6f} {where}")
        found.append(f"{T:.3f} (best {T_ref:.3f}) {where}")
    passed("the temperature minimises the NLL: " + "; ".join(found))


__all__ = ["best_temperature", "check_beam_step", "check_fit_temperature"]
