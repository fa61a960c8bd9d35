"""Checkers for the exercises of the transformer block's page (Section 7.5, (7.31)-(7.32)):
RMS normalisation, a variant of the block's LayerNorm, and the pre-norm block written out
step by step."""

import torch
from torch import nn

from seqlib.exercises.toolkit import (
    ExerciseError,
    close,
    expect,
    expect_close,
    expect_tensor,
    name_mistake,
    passed,
    require_callable,
    run_attempt,
    seeded,
)
from seqlib.transformer import PreNormBlock, TransformerBlock

SLIPS = dict(atol=1e-5, rtol=0)  # how close an output must be to a typical slip's to name it


def check_rms_norm(RMSNorm) -> None:
    """Check a class `RMSNorm(p, eps=1e-5)`: an nn.Module with one parameter `gamma` (p ones
    at the start) whose forward maps z (..., p) to gamma * z / sqrt(mean_i z_i^2 + eps),
    the mean taken over the last dimension. Compared with torch.nn.RMSNorm(p, eps=1e-5),
    outputs and gradients."""
    require_callable(RMSNorm, "RMSNorm(p, eps=1e-5) -> nn.Module", name="RMSNorm")
    p = 8
    norm = run_attempt(RMSNorm, p, what=f"RMSNorm({p})")
    expect(isinstance(norm, nn.Module),
           f"RMSNorm(p) should build an nn.Module, got {type(norm).__name__}")
    gamma = getattr(norm, "gamma", None)
    expect(isinstance(gamma, nn.Parameter) and tuple(gamma.shape) == (p,),
           f"RMSNorm({p}) should hold gamma, an nn.Parameter of shape ({p},), got "
           f"{type(gamma).__name__}"
           + (f" of shape {tuple(gamma.shape)}" if isinstance(gamma, torch.Tensor) else ""))
    expect(bool((gamma.detach() == 1).all()),
           "gamma should start as ones, so that the layer starts as a plain normalisation")
    count = sum(t.numel() for t in norm.parameters())
    expect(count == p, f"RMSNorm({p}) has {count} parameters, expected p = {p} (gamma "
                       f"only: RMS normalisation has no beta)")

    gen = torch.Generator().manual_seed(0)
    reference = nn.RMSNorm(p, eps=1e-5)
    with torch.no_grad():
        gamma.copy_(torch.randn(p, generator=gen))
        reference.weight.copy_(gamma)
    z = 3 * torch.randn(2, 5, p, generator=gen) + 2  # (B, T, p), means far from 0
    small = 1e-3 * torch.randn(4, p, generator=gen)  # (N, p): sizes where eps matters
    for name, x in [("z of shape (2, 5, 8)", z), ("a small z of shape (4, 8)", small)]:
        got, expected = run_attempt(norm, x, what=f"RMSNorm({name})"), reference(x)
        if not close(got, expected, **SLIPS):
            name_mistake(f"RMSNorm({name})", got, _rms_slips(x, gamma.detach()), **SLIPS)
        expect_close(f"RMSNorm({name})", got, expected)

    z_attempt = z.clone().requires_grad_()
    z_reference = z.clone().requires_grad_()
    target = torch.randn(2, 5, p, generator=gen)
    out = run_attempt(norm, z_attempt, what="RMSNorm(z) with gradients", grad=True)  # (B, T, p)
    no_gradient = ("no gradient reached z or gamma: build the output from z and gamma with "
                   "torch operations (no .detach(), .item() or .numpy())")
    expect(out.requires_grad, no_gradient)
    (out * target).sum().backward()
    (reference(z_reference) * target).sum().backward()
    expect(z_attempt.grad is not None and gamma.grad is not None, no_gradient)
    expect_close("the gradient with respect to z", z_attempt.grad, z_reference.grad)
    expect_close("the gradient with respect to gamma", gamma.grad, reference.weight.grad)
    passed("RMSNorm equals torch.nn.RMSNorm(p, eps=1e-5): outputs for large and small "
           "inputs, gradients with respect to z and gamma; p parameters")


def _rms_slips(z: torch.Tensor, gamma: torch.Tensor) -> list:
    """(output, message) for typical wrong forms of RMS normalisation."""
    eps = 1e-5
    mean_square = z.pow(2).mean(-1, keepdim=True)
    centred = z - z.mean(-1, keepdim=True)
    return [
        (gamma * centred / torch.sqrt(centred.pow(2).mean(-1, keepdim=True) + eps),
         "you subtracted the mean mu_z: that is LayerNorm (7.31); RMS normalisation divides "
         "z itself by the root of the mean of its squares"),
        (gamma * z / (mean_square.sqrt() + eps),
         "eps is added outside the square root: divide by sqrt(mean_i z_i^2 + eps)"),
        (gamma * z / torch.sqrt(z.pow(2).sum(-1, keepdim=True) + eps),
         "you divided by the root of the sum of the squares: use their mean, (1/p) sum_i "
         "z_i^2"),
        (z / torch.sqrt(mean_square + eps), "gamma is missing: multiply by gamma"),
        (gamma * z / torch.sqrt(z.pow(2).mean(-2, keepdim=True) + eps),
         "you averaged over the wrong dimension: the mean is over the p features of each "
         "vector, the last dimension"),
    ]


def _post_norm_twin(block: TransformerBlock) -> TransformerBlock:
    with seeded(0):  # initial weights, replaced below: the caller's random numbers untouched
        twin = TransformerBlock(block.attention.p, block.attention.heads, block.attention.m,
                                block.attention.m_v, block.feed_forward.linear1.out_features)
    twin.load_state_dict(block.state_dict())
    return twin


def check_pre_norm_block(pre_norm_block) -> None:
    """Check `pre_norm_block(block, a_in) -> a_out`, the pre-norm transformer block written
    out from the parts of `block` (a seqlib.transformer.PreNormBlock):
    u = a_in + MultiHead(LayerNorm(a_in; gamma, beta)), then
    a_out = u + FeedForward(LayerNorm(u; gamma~, beta~)), on (B, T, p) tensors."""
    require_callable(pre_norm_block, "pre_norm_block(block, a_in) -> a_out",
                     name="pre_norm_block")
    gen = torch.Generator().manual_seed(0)
    with seeded(0):  # the same block on every call, the caller's random numbers untouched
        block = PreNormBlock(16, 4, n1=32)
    with torch.no_grad():  # gammas and betas away from 1 and 0, so that each one shows
        for norm in (block.norm1, block.norm2):
            norm.gamma.copy_(1 + 0.5 * torch.randn(16, generator=gen))
            norm.beta.copy_(0.5 * torch.randn(16, generator=gen))
    a_in = 2 * torch.randn(2, 6, 16, generator=gen) + 1  # (B, T, p)
    with torch.no_grad():
        expected = block(a_in)
        slips = _pre_norm_slips(block, a_in)

    def refuse(*args, **kwargs):
        raise ExerciseError("pre_norm_block called block(...) itself: compute the steps "
                            "from block.attention, block.norm1, block.feed_forward and "
                            "block.norm2")

    block.forward = refuse
    got = run_attempt(pre_norm_block, block, a_in, what="pre_norm_block(block, a_in)")
    expect_tensor("pre_norm_block(block, a_in)", got, expected.shape, dims="(B, T, p)")
    if not close(got, expected, **SLIPS):
        name_mistake("a_out", got, slips, **SLIPS)
    expect_close("a_out", got, expected)
    passed("pre_norm_block equals PreNormBlock: a_in + MultiHead("
           "LayerNorm(a_in)), then u + FeedForward(LayerNorm(u))")


def _pre_norm_slips(block: TransformerBlock, a_in: torch.Tensor) -> list:
    """(output, message) for typical wrong versions of the pre-norm block."""
    def attend(z):
        return block.attention(z)[0]

    ff, n1, n2 = block.feed_forward, block.norm1, block.norm2
    u = a_in + attend(n1(a_in))
    return [
        (_post_norm_twin(block)(a_in),
         "this is the post-norm block of (7.31), LayerNorm(a_in + u_[1]): in the pre-norm "
         "block each LayerNorm comes before its sublayer, and the sum is not normalised"),
        (n1(a_in) + attend(n1(a_in)) + ff(n2(n1(a_in) + attend(n1(a_in)))),
         "the residual connections add the normalised input: add the sublayer's output to "
         "the un-normalised a_in (and u), which is what lets the input through unchanged"),
        (ff(n2(u)), "the second residual connection is missing: a_out = u + FeedForward("
                    "LayerNorm(u))"),
        (attend(n1(a_in)) + ff(n2(attend(n1(a_in)))),
         "the first residual connection is missing: u = a_in + MultiHead(LayerNorm(a_in))"),
        (u + ff(n1(u)), "the feed-forward network must read LayerNorm(u) with block.norm2's "
                        "gamma~ and beta~, not block.norm1's"),
        (u + ff(u), "the feed-forward network reads LayerNorm(u), not u"),
        (n2(u + ff(n2(u))), "the output is normalised at the end: in the pre-norm block "
                            "a_out = u + FeedForward(LayerNorm(u)), with no LayerNorm after "
                            "the sum"),
    ]


__all__ = ["check_pre_norm_block", "check_rms_norm"]
