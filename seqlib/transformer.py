"""Transformers of Section 7.5: LayerNorm, the block (7.31) and its parameter count (7.32),
the decoder block with cross-attention (7.33), and the encoder-decoder of Fig. 7.16, which
decodes by (7.34); seqlib.lm.TransformerLM is the decoder-only model of the same blocks.

p is the model dimension; the encoder's output is the code z (`memory` in code). With
`kv_cache = True` (the default; beyond the chapter) each decoding step feeds one token,
reusing the earlier keys and values (O(n) decoder steps for n tokens, not O(n^2)); with
False each step runs (7.34) on the whole prefix again, giving the same tokens.
"""

import math

import torch
from torch import nn

from seqlib.checks import (
    check_decoding_state,
    check_ids,
    check_keys,
    check_mask,
    check_source,
    positive_int,
)
from seqlib.positional import PositionalEmbedding
from seqlib.self_attention import MultiHeadAttention
from seqlib.text import pad_batch


class LayerNorm(nn.Module):
    """Layer normalisation as the chapter defines it with (7.31), for each z in R^p:

        mu_z = (1/p) sum_i z_i,   sigma_z = sqrt((1/p) sum_i (z_i - mu_z)^2),
        LayerNorm(z; gamma, beta) = gamma * (z - mu_z) / sqrt(sigma_z^2 + eps) + beta,

    element-wise, with learned gamma, beta in R^p (2 p parameters) and a small fixed
    eps > 0 (1e-5, torch's default); equal to torch.nn.LayerNorm(p)."""

    def __init__(self, p: int, eps: float = 1e-5):
        super().__init__()
        self.p, self.eps = positive_int("p", p), eps
        self.gamma = nn.Parameter(torch.ones(p))
        self.beta = nn.Parameter(torch.zeros(p))

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        mu = z.mean(-1, keepdim=True)  # (..., 1)
        var = (z - mu).pow(2).mean(-1, keepdim=True)  # (..., 1), the biased variance
        return self.gamma * (z - mu) / torch.sqrt(var + self.eps) + self.beta

    def extra_repr(self) -> str:
        return f"p={self.p}, eps={self.eps}"


class FeedForward(nn.Module):
    """The block's feed-forward network, applied at each time t on its own:
    u_[3]^<t> = W_[2] S(W_[1] u_[2]^<t> + b_[1]) + b_[2] with S = ReLU, W_[1] (N_1 x p) and
    b_[1] in `linear1`, W_[2] (p x N_1) and b_[2] in `linear2` (n1 is N_1)."""

    def __init__(self, p: int, n1: int, dropout: float = 0.0):
        super().__init__()
        self.linear1 = nn.Linear(p, positive_int("n1", n1))
        self.linear2 = nn.Linear(n1, p)
        self.dropout = nn.Dropout(dropout)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.linear2(self.dropout(torch.relu(self.linear1(z))))


def block_steps(block) -> list:
    """(name, module) pairs in the order forward runs them, each sublayer and its residual +
    LayerNorm as one step, as the chapter counts: 4 for a block, 6 for a decoder block."""
    steps = []
    for name, module, norm in block.sublayers():
        if block.norm_first:
            steps += [("LayerNorm", norm),
                      (f"{name} + residual" if block.residual else name, module)]
        else:
            steps += [(name, module),
                      ("residual + LayerNorm" if block.residual else "LayerNorm", norm)]
    return steps


class TransformerBlock(nn.Module):
    """The transformer block of Fig. 7.15 (a), post-norm as in the chapter, (7.31):

        u_[1]^<t> = MultiHead(a_in)^<t>                             (7.25)-(7.26)
        u_[2]^<t> = LayerNorm(a_in^<t> + u_[1]^<t>; gamma, beta)      (7.31)
        u_[3]^<t> = W_[2] S(W_[1] u_[2]^<t> + b_[1]) + b_[2]
        a_out^<t> = LayerNorm(u_[2]^<t> + u_[3]^<t>; gamma~, beta~),

    with H = `heads` heads of sizes m, m_v, N_1 = n1 and no attention biases: the parameters
    of (7.32). Beyond the chapter: `bias=True` (torch's attention biases), dropout where
    torch.nn.TransformerEncoderLayer has it. forward(x (B, T, p), *, mask, causal, cache).
    """

    norm_first, residual = False, True  # the chapter's: post-norm, residual connections

    def __init__(self, p: int, heads: int, m: int | None = None, m_v: int | None = None,
                 n1: int | None = None, *, dropout: float = 0.0, bias: bool = False):
        super().__init__()
        self.attention = MultiHeadAttention(p, heads, m, m_v, bias=bias)
        self.norm1 = LayerNorm(p)
        self.feed_forward = FeedForward(p, 4 * p if n1 is None else n1, dropout)
        self.norm2 = LayerNorm(p)
        self.dropout1, self.dropout2 = nn.Dropout(dropout), nn.Dropout(dropout)

    def sublayers(self) -> list:
        """(name, module, its LayerNorm) of each sublayer, in the order forward runs them."""
        return [("multi-head self-attention", self.attention, self.norm1),
                ("feed-forward", self.feed_forward, self.norm2)]

    steps = block_steps

    def attend(self, z: torch.Tensor, mask, causal: bool, cache) -> torch.Tensor:
        """MultiHead(z), (7.25)-(7.26)."""
        return self.attention(z, mask=mask, causal=causal, cache=cache)[0]

    def forward(self, x: torch.Tensor, *, mask: torch.Tensor | None = None,
                causal: bool = False, cache: dict | None = None) -> torch.Tensor:
        u2 = self.norm1(x + self.dropout1(self.attend(x, mask, causal, cache)))  # (7.31)
        return self.norm2(u2 + self.dropout2(self.feed_forward(u2)))  # a_out

    @classmethod
    def from_torch(cls, layer: nn.TransformerEncoderLayer) -> "TransformerBlock":
        """The same block (bias=True; a PreNormBlock for norm_first) with the weights of a
        torch.nn.TransformerEncoderLayer (ReLU, dropout 0)."""
        if not isinstance(layer, nn.TransformerEncoderLayer):
            raise TypeError(f"layer must be a torch.nn.TransformerEncoderLayer, got "
                            f"{type(layer).__name__}")
        if layer.activation_relu_or_gelu != 1:
            raise ValueError("only the ReLU activation of the chapter has a seqlib twin")
        if layer.linear1.bias is None or layer.norm1.bias is None:
            raise ValueError("layer was built with bias=False: the block's feed-forward "
                             "biases and LayerNorm betas have no seqlib twin; use bias=True")
        attention = MultiHeadAttention.from_torch(layer.self_attn)
        ff = layer.linear1
        kind = PreNormBlock if layer.norm_first else TransformerBlock
        block = kind(attention.p, attention.heads, n1=ff.out_features, bias=True).to(ff.weight)
        block.attention = attention
        with torch.no_grad():
            block.feed_forward.load_state_dict({"linear1.weight": ff.weight,
                                                "linear1.bias": ff.bias,
                                                "linear2.weight": layer.linear2.weight,
                                                "linear2.bias": layer.linear2.bias})
            for ours, theirs in [(block.norm1, layer.norm1), (block.norm2, layer.norm2)]:
                ours.gamma.copy_(theirs.weight)
                ours.beta.copy_(theirs.bias)
                ours.eps = theirs.eps
        return block


class PreNormBlock(TransformerBlock):
    """Beyond the chapter: the pre-norm block (GPT-2, nanoGPT), a_in + MultiHead(LayerNorm(
    a_in)), then the same with the feed-forward network; easier to train deep (page 21)."""

    norm_first = True

    def forward(self, x: torch.Tensor, *, mask: torch.Tensor | None = None,
                causal: bool = False, cache: dict | None = None) -> torch.Tensor:
        u2 = x + self.dropout1(self.attend(self.norm1(x), mask, causal, cache))
        return u2 + self.dropout2(self.feed_forward(self.norm2(u2)))


def check_memory(memory, y: torch.Tensor, p: int, memory_mask) -> None:
    """Raise unless `memory` is the code z (B, T_in, p) for `y`, with a (B, T_in) mask."""
    if not isinstance(memory, torch.Tensor):
        raise TypeError(f"memory must be the encoder's output z = encode(src, src_mask), a "
                        f"(B, T_in, p={p}) tensor that cross-attention reads, got "
                        f"{type(memory).__name__}")
    check_keys("memory", memory, p, y.dtype)
    if memory.shape[0] != y.shape[0]:
        raise ValueError(f"memory has batch size {memory.shape[0]}, expected {y.shape[0]} "
                         "like the target tokens")
    if memory_mask is not None:
        check_mask(memory_mask, memory.shape[:2], "src_mask")


class TransformerDecoderBlock(nn.Module):
    """The decoder block of Fig. 7.15 (b), post-norm (`PreNormDecoderBlock`: pre-norm):

        u_[1]^<t> = MaskedMultiHead(a_in)^<t>,      u_[2]^<t> = LayerNorm(a_in^<t> + u_[1]^<t>),
        u_[3]^<t> = MultiHead(u~ = u_[2], z)^<t>,   u_[4]^<t> = LayerNorm(u_[2]^<t> + u_[3]^<t>),
        u_[5]^<t> = FeedForward(u_[4]^<t>),         a_out^<t> = LayerNorm(u_[4]^<t> + u_[5]^<t>).

    forward(y (B, T, p), memory: the code z (B, T_in, p), *, memory_mask, cache, need_weights)
    -> a_out (B, T, p), and the cross-attention weights (B, H, T, T_in) if asked.
    """

    norm_first, residual = False, True

    def __init__(self, p: int, heads: int, m: int | None = None, m_v: int | None = None,
                 n1: int | None = None, *, dropout: float = 0.0, bias: bool = False):
        super().__init__()
        self.self_attention = MultiHeadAttention(p, heads, m, m_v, bias=bias)
        self.norm1 = LayerNorm(p)
        self.cross_attention = MultiHeadAttention(p, heads, m, m_v, bias=bias)
        self.norm2 = LayerNorm(p)
        self.feed_forward = FeedForward(p, 4 * p if n1 is None else n1, dropout)
        self.norm3 = LayerNorm(p)
        self.dropouts = nn.ModuleList(nn.Dropout(dropout) for _ in range(3))

    def sublayers(self) -> list:
        """(name, module, its LayerNorm) of each sublayer, in the order forward runs them."""
        return [("masked multi-head self-attention", self.self_attention, self.norm1),
                ("multi-head cross-attention", self.cross_attention, self.norm2),
                ("feed-forward", self.feed_forward, self.norm3)]

    steps = block_steps

    def attentions(self, memory: torch.Tensor, memory_mask, cache, need_weights: bool):
        """MaskedMultiHead(z), (7.27), and MultiHead(z, code) with its weights, (7.33)."""
        self_cache, cross_cache = (None, None) if cache is None else (
            cache.setdefault("self", {}), cache.setdefault("cross", {}))

        def masked_self(z):
            return self.self_attention(z, causal=True, cache=self_cache)[0]

        def cross(z):
            return self.cross_attention(z, memory, mask=memory_mask, cache=cross_cache,
                                        need_weights=need_weights)

        return masked_self, cross

    def forward(self, y: torch.Tensor, memory: torch.Tensor, *,
                memory_mask: torch.Tensor | None = None, cache: dict | None = None,
                need_weights: bool = False):
        check_memory(memory, y, self.cross_attention.kv_size, memory_mask)
        masked_self, cross = self.attentions(memory, memory_mask, cache, need_weights)
        dropout1, dropout2, dropout3 = self.dropouts
        u2 = self.norm1(y + dropout1(masked_self(y)))
        u3, weights = cross(u2)
        u4 = self.norm2(u2 + dropout2(u3))
        a_out = self.norm3(u4 + dropout3(self.feed_forward(u4)))
        return (a_out, weights) if need_weights else a_out


class PreNormDecoderBlock(TransformerDecoderBlock):
    """Beyond the chapter: the pre-norm decoder block (torch's norm_first)."""

    norm_first = True

    def forward(self, y: torch.Tensor, memory: torch.Tensor, *,
                memory_mask: torch.Tensor | None = None, cache: dict | None = None,
                need_weights: bool = False):
        check_memory(memory, y, self.cross_attention.kv_size, memory_mask)
        masked_self, cross = self.attentions(memory, memory_mask, cache, need_weights)
        dropout1, dropout2, dropout3 = self.dropouts
        u2 = y + dropout1(masked_self(self.norm1(y)))
        u3, weights = cross(self.norm2(u2))
        u4 = u2 + dropout2(u3)
        a_out = u4 + dropout3(self.feed_forward(self.norm3(u4)))
        return (a_out, weights) if need_weights else a_out


def transformer_block_params(p: int, n1: int, m: int, m_v: int, heads: int,
                             decoder: bool = False) -> int:
    """Parameters of a transformer block, (7.32): H heads of W_q^h, W_k^h (m x p), W_v^h
    (m_v x p) and W_c^h (p x m_v); the feed-forward network's W_[1], b_[1], W_[2], b_[2]
    (n1 = N_1); two LayerNorms (gamma, beta and gamma~, beta~). A decoder block adds the
    cross-attention, H (2 m p + 2 m_v p), and a third LayerNorm, 2 p. 3,150,336 and
    4,199,936 at p=512, n1=2048, m=m_v=64, heads=8."""
    for name, value in [("p", p), ("n1", n1), ("m", m), ("m_v", m_v), ("heads", heads)]:
        positive_int(name, value)
    attention = heads * (2 * m * p + m_v * p + p * m_v)
    feed_forward = n1 * p + n1 + p * n1 + p
    norms = 2 * (2 * p)
    if decoder:
        return 2 * attention + feed_forward + norms + 2 * p
    return attention + feed_forward + norms


def pad_to_length(sequences, length: int, pad_id: int = 0):
    """Id sequences padded with <empty> to the fixed length of Section 7.5: (B, length) ids and
    mask, True at real tokens; a longer sequence raises a ValueError."""
    positive_int("length", length)
    ids, mask = pad_batch(sequences, pad_id)  # (B, longest)
    if ids.shape[1] > length:
        b = int((mask.sum(1) > length).nonzero()[0])
        raise ValueError(f"sequences[{b}] has {int(mask[b].sum())} tokens, more than the "
                         f"length {length}: truncate or split it first")
    extra = length - ids.shape[1]
    return (torch.nn.functional.pad(ids, (0, extra), value=pad_id),
            torch.nn.functional.pad(mask, (0, extra), value=False))


def select_batch(state, index: torch.Tensor):
    """The decoding state of batch entries `index` (tensors at any depth, batch first)."""
    if isinstance(state, torch.Tensor):
        return state.index_select(0, index)
    if isinstance(state, dict):
        return {key: select_batch(value, index) for key, value in state.items()}
    if isinstance(state, list):
        return [select_batch(value, index) for value in state]
    return state


class Transformer(nn.Module):
    """The encoder-decoder transformer of Fig. 7.16 (Vaswani et al., 2017).

    Token embeddings (times sqrt(p), as in the paper) plus sinusoidal positions (7.29)-(7.30);
    `num_layers` blocks (7.31) giving the code z; `num_decoder_layers` decoder blocks reading
    z by cross-attention (7.33); an output layer p -> d_V. `norm_first` (beyond the chapter):
    pre-norm blocks and a final LayerNorm per stack, as torch.nn.Transformer. forward gives
    the teacher-forced logits (B, T, d_V) in one causal pass, (7.34), and with
    return_attention each decoder layer's cross-attention weights (B, H, T, T_in).
    """

    def __init__(self, src_vocab_size: int, tgt_vocab_size: int, p: int, heads: int,
                 n1: int, num_layers: int, *, num_decoder_layers: int | None = None,
                 m: int | None = None, m_v: int | None = None, max_len: int = 256,
                 dropout: float = 0.1, norm_first: bool = False, pad_id: int = 0):
        super().__init__()
        self.src_vocab_size = positive_int("src_vocab_size", src_vocab_size)
        self.tgt_vocab_size = positive_int("tgt_vocab_size", tgt_vocab_size)
        self.p, self.kv_cache = p, True
        n_dec = num_layers if num_decoder_layers is None else num_decoder_layers
        sizes = dict(m=m, m_v=m_v, n1=n1, dropout=dropout)
        block, decoder_block = (PreNormBlock, PreNormDecoderBlock) if norm_first \
            else (TransformerBlock, TransformerDecoderBlock)
        self.src_embedding = nn.Embedding(src_vocab_size, p, padding_idx=pad_id)
        self.tgt_embedding = nn.Embedding(tgt_vocab_size, p, padding_idx=pad_id)
        with torch.no_grad():  # entries of standard deviation p^(-1/2), as in the paper, so
            for embedding in (self.src_embedding, self.tgt_embedding):  # that sqrt(p) times
                embedding.weight.normal_(0, p ** -0.5)  # a word vector is about as long as
                embedding.weight[pad_id] = 0  # a position vector (norm sqrt(p / 2))
        self.positions = PositionalEmbedding(max_len, p)
        self.dropout = nn.Dropout(dropout)
        self.encoder = nn.ModuleList(block(p, heads, **sizes)
                                     for _ in range(positive_int("num_layers", num_layers)))
        self.decoder = nn.ModuleList(decoder_block(p, heads, **sizes)
                                     for _ in range(positive_int("num_decoder_layers", n_dec)))
        self.encoder_norm = LayerNorm(p) if norm_first else nn.Identity()
        self.decoder_norm = LayerNorm(p) if norm_first else nn.Identity()
        self.output = nn.Linear(p, tgt_vocab_size)

    def _embed(self, embedding: nn.Embedding, ids: torch.Tensor, offset: int = 0):
        x = embedding(ids) * math.sqrt(self.p)  # (B, T, p)
        return self.dropout(self.positions(x, offset))

    def encode(self, src: torch.Tensor, src_mask: torch.Tensor) -> torch.Tensor:
        """The code z (B, T_in, p): the encoder's output, the keys and values of every
        cross-attention (7.33)."""
        check_source(src, src_mask, self.src_vocab_size)
        x = self._embed(self.src_embedding, src)
        for block in self.encoder:
            x = block(x, mask=src_mask)
        return self.encoder_norm(x)

    def decode(self, tgt_in: torch.Tensor, memory: torch.Tensor, src_mask: torch.Tensor, *,
               caches: list | None = None, offset: int = 0, need_weights: bool = False):
        """f_decoder of (7.34): logits (B, T, d_V) after each token of tgt_in (B, T) at
        positions offset + 1, ..., given the code z (`memory`); with need_weights also the
        cross-attention weights per layer."""
        check_ids(tgt_in, name="tgt_in", dim=2, vocab_size=self.tgt_vocab_size, nonempty=True)
        y, weights = self._embed(self.tgt_embedding, tgt_in, offset), []
        for i, block in enumerate(self.decoder):
            y = block(y, memory, memory_mask=src_mask, need_weights=need_weights,
                      cache=None if caches is None else caches[i])
            if need_weights:
                y, w = y
                weights.append(w)  # (B, H, T, S)
        logits = self.output(self.decoder_norm(y))  # (B, T, V)
        return (logits, weights) if need_weights else logits

    def forward(self, src: torch.Tensor, src_mask: torch.Tensor, tgt_in: torch.Tensor,
                return_attention: bool = False):
        check_source(src, src_mask, self.src_vocab_size)
        check_ids(tgt_in, name="tgt_in", dim=2, vocab_size=self.tgt_vocab_size, nonempty=True)
        if tgt_in.shape[0] != src.shape[0]:
            raise ValueError(f"tgt_in has batch size {tgt_in.shape[0]}, expected "
                             f"{src.shape[0]} like src")
        return self.decode(tgt_in, self.encode(src, src_mask), src_mask,
                           need_weights=return_attention)

    def start(self, src: torch.Tensor, src_mask: torch.Tensor) -> dict:
        """Decoding state: the code z (run the encoder once), the source mask, the tokens
        so far and, with kv_cache, one cache per decoder layer."""
        memory = self.encode(src, src_mask)
        return {"memory": memory, "mask": src_mask, "tokens": src.new_zeros(len(src), 0),
                "caches": [{} for _ in self.decoder] if self.kv_cache else None}

    def step(self, tokens: torch.Tensor, state: dict):
        """(7.34): y_hat^<t> = f_decoder(z, (y_hat~^<1>, ..., y_hat~^<t-1>)), the previous
        tokens (N,) -> logits (N, d_V) of the next, and the state."""
        check_ids(tokens, name="tokens", dim=1, vocab_size=self.tgt_vocab_size)
        check_decoding_state(state, ("memory", "mask", "tokens", "caches"))
        history = torch.cat([state["tokens"], tokens[:, None]], dim=1)  # (N, t)
        if state["caches"] is not None:  # one new token; earlier keys and values cached
            logits = self.decode(tokens[:, None], state["memory"], state["mask"],
                                 caches=state["caches"], offset=history.shape[1] - 1)
        else:  # the whole prefix again
            logits = self.decode(history, state["memory"], state["mask"])
        return logits[:, -1], {**state, "tokens": history}

    reorder = staticmethod(select_batch)
