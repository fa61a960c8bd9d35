"""The checker of the exercises on reversing and stacking RNNs accepts the book's solution
and explains typical wrong attempts."""

import pytest
import torch

from seqlib.exercises import ExerciseError, check_bidirectional


def bidirectional(forward, reverse, x):
    """The book's solution: the reverse module reads x reversed in time."""
    h_f, h_n_f = forward(x)  # (B, T, m), (1, B, m)
    h_r, h_n_r = reverse(x.flip(1))  # states for t = T, ..., 1
    return torch.cat([h_f, h_r.flip(1)], dim=-1), torch.cat([h_n_f, h_n_r])


def test_reverse_states_not_flipped_back():
    def attempt(forward, reverse, x):
        h_f, h_n_f = forward(x)
        h_r, h_n_r = reverse(x.flip(1))
        return torch.cat([h_f, h_r], dim=-1), torch.cat([h_n_f, h_n_r])

    with pytest.raises(ExerciseError, match="forward half .* matches .* wrong order"):
        check_bidirectional(attempt)


def test_reverse_module_reading_left_to_right():
    def attempt(forward, reverse, x):
        h_f, h_n_f = forward(x)
        h_r, h_n_r = reverse(x)
        return torch.cat([h_f, h_r], dim=-1), torch.cat([h_n_f, h_n_r])

    with pytest.raises(ExerciseError, match=r"reading x from left to right: give it x\.flip"):
        check_bidirectional(attempt)


def test_halves_swapped():
    def attempt(forward, reverse, x):
        output, h_n = bidirectional(forward, reverse, x)
        m = output.shape[-1] // 2
        return torch.cat([output[..., m:], output[..., :m]], dim=-1), h_n

    with pytest.raises(ExerciseError, match="halves are swapped"):
        check_bidirectional(attempt)


def test_last_output_taken_as_the_reverse_final_state():
    def attempt(forward, reverse, x):
        output, h_n = bidirectional(forward, reverse, x)
        m = output.shape[-1] // 2
        return output, torch.stack([output[:, -1, :m], output[:, -1, m:]])

    with pytest.raises(ExerciseError, match=r"h_n\[1\] is output\[:, -1, m:\]"):
        check_bidirectional(attempt)


def test_wrong_shapes_and_types():
    with pytest.raises(ExerciseError, match=r"output has shape .* expected \(B, T, 2 m\)"):
        check_bidirectional(lambda f, r, x: (f(x)[0], f(x)[1]))
    with pytest.raises(ExerciseError, match="return a tuple"):
        check_bidirectional(lambda f, r, x: f(x)[0])
    with pytest.raises(ExerciseError, match=r"h_n has shape"):
        check_bidirectional(lambda f, r, x: (bidirectional(f, r, x)[0], f(x)[1]))


def test_an_attempt_that_changes_its_input():
    def attempt(forward, reverse, x):
        result = bidirectional(forward, reverse, x)
        x.zero_()
        return result

    with pytest.raises(ExerciseError, match="changed its input x in place"):
        check_bidirectional(attempt)
