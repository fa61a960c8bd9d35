"""Every exercise checker, through the toolkit they share (seqlib.exercises.toolkit): the
book's worked solution passes and prints one line, a known wrong attempt fails with a
message that names its mistake, something that cannot be called is refused with a message
that names the argument, the signature and what was given, and the caller's random state
is left as it was. The worked solutions are those of the pages' own tests
(tests/exercises/test_<module>.py), which also try more wrong attempts per checker."""

import ast
import pathlib
import random

import numpy as np
import pytest
import torch

import seqlib.exercises as exercises
from exercises.test_attention import additive_attention
from exercises.test_attention import with_mistake as attention_with
from exercises.test_captioning import grid_attention
from exercises.test_decoding import beam_step, fit_temperature
from exercises.test_embeddings import analogy, with_options
from exercises.test_encoder_decoder import decoder_with, greedy_decode
from exercises.test_forecasting import companion, feed_back
from exercises.test_gated import gru_step, peephole
from exercises.test_language_models import top_p_filter
from exercises.test_length import carried
from exercises.test_recurrent import per_token, rnn_forward, sequence_loss, truncated_bptt
from exercises.test_scores import additive
from exercises.test_self_attention import multi_head_attention
from exercises.test_self_attention import with_mistake as heads_with
from exercises.test_sentiment import bidirectional_ends, masked_mean, swapped
from exercises.test_stacking import bidirectional
from exercises.test_subwords import leftmost_first, unweighted
from exercises.test_trainability import masked
from exercises.test_transformer import post_norm, pre_norm, right, rms_norm_class
from exercises.test_transformer_lm import solution as min_p_filter
from exercises.test_translation import log_probs
from exercises.test_translation import solution as sequence_log_prob
from exercises.test_window import windows
from seqlib.exercises import ExerciseError
from seqlib.exercises.toolkit import (
    close,
    expect_tensor,
    name_mistake,
    require_callable,
    run_attempt,
    seeded,
)
from seqlib.experiments.bpe import BPE, learn_merges
from seqlib.experiments.pretraining import lm_targets

EXERCISES = pathlib.Path(exercises.__file__).parent


def halves_swapped(forward, reverse, x):
    output, h_n = bidirectional(forward, reverse, x)
    return output.roll(output.shape[-1] // 2, dims=-1), h_n


def without_gamma(self, z):
    return z / torch.sqrt(z.pow(2).mean(-1, keepdim=True) + self.eps)


# checker: (the worked solution, a wrong attempt, what its message must say)
CASES = {
    "check_additive_attention": (additive_attention, attention_with("no-tanh"),
                                 "without a mask: the tanh seems missing"),
    "check_grid_attention": (grid_attention, lambda *a: grid_attention(*a, tanh=False),
                             "without the tanh"),
    "check_beam_step": (beam_step, lambda *a: beam_step(*a, worst_first=True),
                        "right hypotheses in the wrong order"),
    "check_fit_temperature": (fit_temperature, lambda *a: 1 / fit_temperature(*a),
                              "it is the inverse of the best temperature"),
    "check_analogy": (analogy, with_options(score="dot"), "by the dot product"),
    "check_greedy_decoding": (greedy_decode, decoder_with("feed"),
                              "read the token chosen at the step before"),
    "check_companion": (companion, lambda c: (companion(c)[0].T, companion(c)[1]),
                        "transpose of the companion matrix"),
    "check_feed_back": (feed_back, lambda *a: feed_back(*a, restart=True),
                        "without a calendar: lead 1 is right, but .* zero state"),
    "check_peephole_lstm": (peephole, lambda *a: peephole(*a, swap=True),
                            "w_f belongs to the forget gate"),
    "check_pytorch_gru": (gru_step, lambda x, h, cell: gru_step(x, h, cell, slip="update"),
                          "differs from torch.nn.GRUCell: the update is the wrong way round"),
    "check_top_p": (top_p_filter, lambda *a: torch.log_softmax(top_p_filter(*a), -1),
                    "their logits changed"),
    "check_stateful_reverse": (carried, lambda *a: carried(*a).flip(1),
                               "differs from the greedy one"),
    "check_lm_targets": (lm_targets, lambda ids, mask, size: lm_targets(ids, mask, 10**6),
                         "expected 1: a rare word"),
    "check_rnn_forward": (rnn_forward, lambda rnn, x: rnn_forward(rnn, x, transpose=True),
                          "H differs from torch.nn.RNN's output .*: the recurrent matrix looks "
                          "transposed"),
    "check_sequence_loss": (sequence_loss, per_token, "a long sequence weighs more"),
    "check_truncated_bptt": (truncated_bptt, lambda *a: truncated_bptt(*a, detach=False),
                             "not those of truncated BPTT: they are the gradients of full"),
    "check_additive_scores": (additive, lambda *a: additive(*a).transpose(1, 2),
                              "query t and key tau are swapped"),
    "check_multi_head_attention": (multi_head_attention, heads_with("no-scale"),
                                   "non-causal: the scores are not scaled"),
    "check_bidirectional_ends": (bidirectional_ends, swapped, "the two halves are swapped"),
    "check_masked_mean": (masked_mean, lambda z, mask: z.mean(1),
                          r"\(z padded to T = 7\): you averaged over every position"),
    "check_bidirectional": (bidirectional, halves_swapped, "nn.RNN: the two halves are swapped"),
    "check_bpe_encoder": (lambda merges, word: BPE(merges, None).encode_word(word),
                          leftmost_first, "merge learned first among the pairs present"),
    "check_bpe_learner": (lambda counts, n: learn_merges(counts, n, end_of_word=None),
                          unweighted, r"seen \d+ times at that point"),
    "check_masked_batch_norm": (masked, lambda x, mask, eps: masked(x, mask, 1e-5),
                                r"eps=0.5\) differs from the expected values"),
    "check_pre_norm_block": (pre_norm, post_norm, "a_out: this is the post-norm block"),
    "check_rms_norm": (rms_norm_class(right), rms_norm_class(without_gamma),
                       r"RMSNorm\(z of shape \(2, 5, 8\)\): gamma is missing"),
    "check_min_p_filter": (min_p_filter, lambda x, p: x.masked_fill(torch.softmax(x, -1) < p,
                                                                    -float("inf")),
                           "compared the probabilities with p_min itself"),
    "check_sequence_log_prob": (sequence_log_prob,
                                lambda *a: (log_probs(*a) * (a[3] != 0)).sum(1)
                                / (a[3] != 0).sum(1),
                                "the log-probabilities: this is the mean log-probability"),
    "check_window_features": (windows, lambda x, k: torch.cat(
        windows(x, k).split(x.shape[-1], dim=-1)[::-1], dim=-1), "the window is newest first"),
}
# The one checker that draws from the global generator: its parameters are the initial
# weights of seqlib.attention.Attention. A page's stored outputs depend on that draw (page
# 18 builds an Attention from the global generator after calling it).
DRAWS_FROM_THE_GLOBAL_GENERATOR = {"check_additive_scores"}


def test_every_checker_has_a_case():
    assert set(CASES) == set(exercises.CHECKERS)


def random_states():
    return torch.random.get_rng_state(), random.getstate(), np.random.get_state()[1].copy()


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_worked_solution_passes_and_keeps_the_random_state(name, capsys):
    check = getattr(exercises, name)
    torch.manual_seed(1234)
    before = random_states()
    check(CASES[name][0])
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 and lines[0].startswith("correct: "), lines
    after = random_states()
    assert before[1:2] == after[1:2] and np.array_equal(before[2], after[2])
    if name not in DRAWS_FROM_THE_GLOBAL_GENERATOR:
        assert torch.equal(before[0], after[0]), f"{name} changed torch's global random state"


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_wrong_attempt_fails_with_a_message_that_names_its_mistake(name):
    with pytest.raises(ExerciseError, match=CASES[name][2]) as failure:
        getattr(exercises, name)(CASES[name][1])
    assert "\n" not in str(failure.value)


@pytest.mark.parametrize("name", sorted(CASES))
def test_something_that_cannot_be_called_is_refused(name):
    with pytest.raises(TypeError, match=r"must be callable as \w+\(.*, got str 'oops'$"):
        getattr(exercises, name)("oops")


def test_close_states_its_tolerance():
    expected = torch.tensor([1.0, 100.0], dtype=torch.float64)
    assert close(expected + torch.tensor([1e-6, 1e-3]), expected, atol=1e-5, rtol=1e-5)
    assert not close(expected + torch.tensor([1e-6, 2e-3]), expected, atol=1e-5, rtol=1e-5)
    assert not close(expected + 1e-9, expected, atol=0, rtol=0)
    assert not close(expected[:1], expected) and not close([1.0, 100.0], expected)
    assert close(expected.float().requires_grad_(), expected.double())


def test_the_messages_name_what_is_wrong():
    with pytest.raises(TypeError, match=r"^lm must be callable as lm\(ids\) -> logits, got "
                                        r"Tensor tensor\(\[0\., 0\.\]\)$"):
        require_callable(torch.zeros(2), "lm(ids) -> logits", name="lm")
    mistakes = [(torch.zeros(2), "zeros"), (torch.ones(2), "ones")]
    with pytest.raises(ExerciseError, match="^the sums: ones$"):
        name_mistake("the sums", torch.ones(2), mistakes)
    assert name_mistake("the sums", torch.full((2,), 2.0), mistakes) is None


def test_expect_tensor_names_the_type_or_shape_given_and_expected():
    expect_tensor("u", torch.zeros(2, 3), (2, 3))
    expect_tensor("u", torch.zeros(2, 3))  # any shape
    with pytest.raises(ExerciseError, match=r"^u should be a torch.Tensor, got list$"):
        expect_tensor("u", [0.0, 0.0], (2,))
    with pytest.raises(ExerciseError, match=r"^u has shape \(3, 2\), expected \(2, 3\)$"):
        expect_tensor("u", torch.zeros(3, 2), torch.Size([2, 3]))
    with pytest.raises(ExerciseError, match=r"^u has shape \(\), expected \(B, m\) = \(2, 3\): "
                                            r"one row per sequence$"):
        expect_tensor("u", torch.tensor(0.0), (2, 3), dims="(B, m)", why="one row per sequence")


def test_run_attempt_names_the_case_and_checks_what_comes_back():
    assert run_attempt(lambda x, k=1: x + k, 1, what="on 1", k=2) == 3
    with pytest.raises(ExerciseError, match=r"^on a batch: your function raised "
                                            r"ZeroDivisionError: division by zero$"):
        run_attempt(lambda: 1 / 0, what="on a batch")

    def refuses():
        raise ExerciseError("called model.forecast")

    with pytest.raises(ExerciseError, match="^called model.forecast$"):  # unchanged
        run_attempt(refuses, what="on a batch")
    assert run_attempt(lambda: (1, 2), what="on a batch", returns=("u", "alpha")) == (1, 2)
    for result, given in [((1, 2, 3), "a tuple of 3"), ([1, 2], "list"), (None, "NoneType")]:
        with pytest.raises(ExerciseError, match=rf"^on a batch: return a tuple \(u, alpha\), "
                                                rf"got {given}$"):
            run_attempt(lambda result=result: result, what="on a batch", returns=("u", "alpha"))


def test_run_attempt_runs_without_gradients_unless_asked():
    w = torch.ones(2, requires_grad=True)
    assert not run_attempt(lambda: w * 2, what="w").requires_grad
    assert run_attempt(lambda: w * 2, what="w", grad=True).requires_grad
    with torch.no_grad():  # grad=True leaves autograd as the caller has it
        assert not run_attempt(lambda: w * 2, what="w", grad=True).requires_grad


def test_seeded_restores_the_callers_random_state():
    torch.manual_seed(5)
    before = torch.random.get_rng_state()
    with seeded(0):
        first = torch.rand(3)
    assert torch.equal(torch.random.get_rng_state(), before)
    with pytest.raises(ValueError), seeded(0):
        assert torch.equal(torch.rand(3), first)
        raise ValueError("an attempt that fails")
    assert torch.equal(torch.random.get_rng_state(), before)


def test_the_checkers_keep_no_plumbing_of_their_own():
    """Closeness, the callable check and seeding go through the toolkit."""
    for path in sorted(EXERCISES.glob("*.py")):
        if path.name == "toolkit.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef):
                assert node.name not in ("_close", "_same", "_matches", "_callable",
                                         "_require_callable", "_check_callable"), \
                    (path.name, node.name)
            if isinstance(node, ast.Call):
                called = ast.unparse(node.func)
                assert called not in ("callable", "torch.allclose", "torch.manual_seed",
                                      "torch.random.fork_rng", "seed_everything"), \
                    f"{path.name}:{node.lineno} calls {called}: use seqlib.exercises.toolkit"


def test_every_checker_calls_its_attempt_through_the_toolkit():
    """Each module runs its attempts through run_attempt and raises no ExerciseError by
    hand, but in a stand-in for a method an attempt must not call (a function that only
    raises): the toolkit's helpers say what is wrong."""
    for path in sorted(EXERCISES.glob("*.py")):
        if path.name in ("toolkit.py", "__init__.py"):
            continue
        tree = ast.parse(path.read_text())
        called = {ast.unparse(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}
        assert "run_attempt" in called, f"{path.name} calls no attempt through run_attempt"
        refusals = {id(node.body[0]) for node in ast.walk(tree)
                    if isinstance(node, ast.FunctionDef) and len(node.body) == 1}
        for node in ast.walk(tree):
            if isinstance(node, ast.Raise) and "ExerciseError" in ast.unparse(node):
                assert id(node) in refusals, \
                    f"{path.name}:{node.lineno} raises ExerciseError by hand: use the toolkit"
