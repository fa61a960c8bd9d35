"""The checkers of the transformer block's exercises accept the book's solutions and
reject typical wrong attempts with a message that says what is wrong."""

import pytest
import torch
from torch import nn

from seqlib.exercises import ExerciseError, check_pre_norm_block, check_rms_norm


def rms_norm_class(forward):
    """An RMSNorm class whose forward is forward(self, z)."""
    class RMSNorm(nn.Module):
        def __init__(self, p, eps=1e-5):
            super().__init__()
            self.eps = eps
            self.gamma = nn.Parameter(torch.ones(p))

    RMSNorm.forward = forward
    return RMSNorm


def right(self, z):
    return self.gamma * z / torch.sqrt(z.pow(2).mean(-1, keepdim=True) + self.eps)


@pytest.mark.parametrize("forward, match", [
    (lambda self, z: self.gamma * (z - z.mean(-1, keepdim=True)) / torch.sqrt(
        (z - z.mean(-1, keepdim=True)).pow(2).mean(-1, keepdim=True) + self.eps),
     "subtracted the mean"),
    (lambda self, z: self.gamma * z / (z.pow(2).mean(-1, keepdim=True).sqrt() + self.eps),
     "outside the square root"),
    (lambda self, z: self.gamma * z / torch.sqrt(z.pow(2).sum(-1, keepdim=True) + self.eps),
     "sum of the squares"),
    (lambda self, z: z / torch.sqrt(z.pow(2).mean(-1, keepdim=True) + self.eps),
     "gamma is missing"),
    (lambda self, z: (self.gamma * z / torch.sqrt(z.pow(2).mean(-1, keepdim=True)
                                                  + self.eps)).detach(),
     "no gradient"),
])
def test_rms_norm_rejects_wrong_forms(forward, match):
    with pytest.raises(ExerciseError, match=match):
        check_rms_norm(rms_norm_class(forward))


def test_rms_norm_rejects_a_beta():
    class WithBeta(rms_norm_class(right)):
        def __init__(self, p, eps=1e-5):
            super().__init__(p, eps)
            self.beta = nn.Parameter(torch.zeros(p))

    with pytest.raises(ExerciseError, match="no beta"):
        check_rms_norm(WithBeta)


def test_rms_norm_rejects_a_missing_gamma_and_bad_arguments():
    with pytest.raises(ExerciseError, match="should hold gamma"):
        check_rms_norm(lambda p: nn.Identity())
    with pytest.raises(ExerciseError, match="nn.Module"):
        check_rms_norm(lambda p: 3)


def layer_norm(z, norm):
    mu_z = z.mean(-1, keepdim=True)
    sigma_z = (z - mu_z).pow(2).mean(-1, keepdim=True).sqrt()
    return norm.gamma * (z - mu_z) / torch.sqrt(sigma_z ** 2 + norm.eps) + norm.beta


def feed_forward(z, ff):
    return torch.relu(z @ ff.linear1.weight.T + ff.linear1.bias) @ ff.linear2.weight.T \
        + ff.linear2.bias


def pre_norm(block, a_in):
    u = a_in + block.attention(layer_norm(a_in, block.norm1))[0]
    return u + feed_forward(layer_norm(u, block.norm2), block.feed_forward)


def post_norm(block, a_in):
    u = layer_norm(a_in + block.attention(a_in)[0], block.norm1)
    return layer_norm(u + feed_forward(u, block.feed_forward), block.norm2)


def no_second_residual(block, a_in):
    u = a_in + block.attention(layer_norm(a_in, block.norm1))[0]
    return feed_forward(layer_norm(u, block.norm2), block.feed_forward)


def one_norm(block, a_in):
    u = a_in + block.attention(layer_norm(a_in, block.norm1))[0]
    return u + feed_forward(layer_norm(u, block.norm1), block.feed_forward)


def normalised_at_the_end(block, a_in):
    return layer_norm(pre_norm(block, a_in), block.norm2)


def calls_the_block(block, a_in):
    return block(a_in)


@pytest.mark.parametrize("attempt, match", [
    (post_norm, "post-norm block of \\(7.31\\)"),
    (no_second_residual, "second residual connection is missing"),
    (one_norm, "block.norm2"),
    (normalised_at_the_end, "normalised at the end"),
    (calls_the_block, "called block"),
    (lambda block, a_in: pre_norm(block, a_in)[:, :-1], "shape"),
    (lambda block, a_in: pre_norm(block, a_in).tolist(), "torch.Tensor"),
])
def test_pre_norm_block_rejects_wrong_attempts(attempt, match):
    with pytest.raises(ExerciseError, match=match):
        check_pre_norm_block(attempt)
