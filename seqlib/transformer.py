"""Transformers of Section 7.5: layer normalisation, the transformer block (7.31) and its
parameter count (7.32), the decoder block (7.33), the encoder-decoder transformer of
Fig. 7.16 and a decoder-only transformer language model, generating with (7.34).

Tensors are (batch, time, features) with p features (the model dimension) throughout.
Both models follow the decoding protocol of seqlib.seq2seq (`start`, `step`, `reorder`),
so seqlib.decoding's greedy, sampling and beam search drive them. With `kv_cache = True`
(the default) each step feeds one token through the decoder, reusing the keys and values
of the earlier steps; with False every step runs on the whole prefix again. Both give the
same tokens; the cache makes generating n tokens cost O(n) decoder steps, not O(n^2).
"""

import math

import torch
from torch import nn

from seqlib.positional import PositionalEmbedding
from seqlib.rnn import positive_int
from seqlib.self_attention import MultiHeadAttention
from seqlib.seq2seq import check_source
from seqlib.text import check_ids


class LayerNorm(nn.Module):
    """Layer normalisation as the chapter defines it, for each vector z of p features:

        mu = (1/p) sum_i z_i,   sigma^2 = (1/p) sum_i (z_i - mu)^2,
        LayerNorm(z) = gamma * (z - mu) / sqrt(sigma^2 + eps) + beta,

    with learned gamma, beta in R^p (2 p parameters); equal to torch.nn.LayerNorm(p)."""

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
    """The block's feed-forward layer, applied at each time on its own:
    W_2 ReLU(W_1 z + b_1) + b_2, with W_1 (n1 x p) and W_2 (p x n1)."""

    def __init__(self, p: int, n1: int, dropout: float = 0.0):
        super().__init__()
        self.linear1 = nn.Linear(p, positive_int("n1", n1))
        self.linear2 = nn.Linear(n1, p)
        self.dropout = nn.Dropout(dropout)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.linear2(self.dropout(torch.relu(self.linear1(z))))


class TransformerBlock(nn.Module):
    """The transformer block (7.31), post-norm as in the chapter:

        z = LayerNorm(x + MultiHead(x)),   out = LayerNorm(z + FeedForward(z)),

    with multi-head self-attention of H = `heads` heads of sizes m, m_v, a feed-forward
    layer of n1 units, and no attention biases, so it has exactly the parameters of (7.32).
    `norm_first=True` gives the pre-norm variant (x + MultiHead(LayerNorm(x)), ...) that
    trains more easily in deep stacks; `bias=True` adds torch's attention biases. Dropout,
    when asked for, acts where torch.nn.TransformerEncoderLayer's does.

    forward(x (B, T, p), *, mask=None (B, T), causal=False, cache=None) -> (B, T, p).
    """

    def __init__(self, p: int, heads: int, m: int | None = None, m_v: int | None = None,
                 n1: int | None = None, *, dropout: float = 0.0, norm_first: bool = False,
                 bias: bool = False):
        super().__init__()
        self.norm_first = norm_first
        self.attention = MultiHeadAttention(p, heads, m, m_v, bias=bias)
        self.norm1 = LayerNorm(p)
        self.feed_forward = FeedForward(p, 4 * p if n1 is None else n1, dropout)
        self.norm2 = LayerNorm(p)
        self.dropout1, self.dropout2 = nn.Dropout(dropout), nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, *, mask: torch.Tensor | None = None,
                causal: bool = False, cache: dict | None = None) -> torch.Tensor:
        def attend(z):
            return self.dropout1(self.attention(z, mask=mask, causal=causal, cache=cache)[0])

        if self.norm_first:
            x = x + attend(self.norm1(x))
            return x + self.dropout2(self.feed_forward(self.norm2(x)))
        z = self.norm1(x + attend(x))
        return self.norm2(z + self.dropout2(self.feed_forward(z)))

    @classmethod
    def from_torch(cls, layer: nn.TransformerEncoderLayer) -> "TransformerBlock":
        """The same block with the weights of a torch.nn.TransformerEncoderLayer (ReLU,
        dropout 0); its attention biases are kept (bias=True)."""
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
        block = cls(attention.p, attention.heads, n1=ff.out_features,
                    norm_first=layer.norm_first, bias=True).to(ff.weight)
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


class TransformerDecoderBlock(nn.Module):
    """The decoder block (7.33): causal self-attention, then cross-attention whose keys and
    values are the encoder's outputs, then the feed-forward layer, each followed (post-norm)
    or preceded (norm_first) by its LayerNorm, with a residual connection:

        z1 = LayerNorm(y + MaskedMultiHead(y)),
        z2 = LayerNorm(z1 + MultiHead(z1, encoder outputs)),
        out = LayerNorm(z2 + FeedForward(z2)).

    forward(y (B, T, p), memory (B, S, p), *, memory_mask=None (B, S), cache=None,
    need_weights=False) -> out (B, T, p), and the cross-attention weights (B, H, T, S) if
    asked. `cache` is a dict {"self": {}, "cross": {}} for step-by-step decoding.
    """

    def __init__(self, p: int, heads: int, m: int | None = None, m_v: int | None = None,
                 n1: int | None = None, *, dropout: float = 0.0, norm_first: bool = False,
                 bias: bool = False):
        super().__init__()
        self.norm_first = norm_first
        self.self_attention = MultiHeadAttention(p, heads, m, m_v, bias=bias)
        self.norm1 = LayerNorm(p)
        self.cross_attention = MultiHeadAttention(p, heads, m, m_v, bias=bias)
        self.norm2 = LayerNorm(p)
        self.feed_forward = FeedForward(p, 4 * p if n1 is None else n1, dropout)
        self.norm3 = LayerNorm(p)
        self.dropouts = nn.ModuleList(nn.Dropout(dropout) for _ in range(3))

    def forward(self, y: torch.Tensor, memory: torch.Tensor, *,
                memory_mask: torch.Tensor | None = None, cache: dict | None = None,
                need_weights: bool = False):
        self_cache, cross_cache = (None, None) if cache is None else (
            cache.setdefault("self", {}), cache.setdefault("cross", {}))
        weights = None

        def masked_self(z):
            return self.self_attention(z, causal=True, cache=self_cache)[0]

        def cross(z):
            nonlocal weights
            u, weights = self.cross_attention(z, memory, mask=memory_mask, cache=cross_cache,
                                              need_weights=need_weights)
            return u

        for sublayer, norm, dropout in zip(
                (masked_self, cross, self.feed_forward), (self.norm1, self.norm2, self.norm3),
                self.dropouts, strict=True):
            if self.norm_first:
                y = y + dropout(sublayer(norm(y)))
            else:
                y = norm(y + dropout(sublayer(y)))
        return (y, weights) if need_weights else y


def transformer_block_params(p: int, n1: int, m: int, m_v: int, heads: int,
                             decoder: bool = False) -> int:
    """Parameters of a transformer block, (7.32): H heads of W_q^h, W_k^h (m x p), W_v^h
    (m_v x p) and W_c^h (p x m_v); the feed-forward layer's W_1, b_1, W_2, b_2; two
    LayerNorms (gamma, beta each). A decoder block adds the cross-attention and a third
    LayerNorm. 3,150,336 and 4,199,936 at p=512, n1=2048, m=m_v=64, heads=8."""
    for name, value in [("p", p), ("n1", n1), ("m", m), ("m_v", m_v), ("heads", heads)]:
        positive_int(name, value)
    attention = heads * (2 * m * p + m_v * p + p * m_v)
    feed_forward = n1 * p + n1 + p * n1 + p
    norms = 2 * (2 * p)
    if decoder:
        return 2 * attention + feed_forward + norms + 2 * p
    return attention + feed_forward + norms


def select_batch(state, index: torch.Tensor):
    """The decoding state of batch entries `index`: every tensor, at any depth of dicts and
    lists, has the batch first; everything else is kept as it is."""
    if isinstance(state, torch.Tensor):
        return state.index_select(0, index)
    if isinstance(state, dict):
        return {key: select_batch(value, index) for key, value in state.items()}
    if isinstance(state, list):
        return [select_batch(value, index) for value in state]
    return state


class Transformer(nn.Module):
    """The encoder-decoder transformer of Fig. 7.16 (Vaswani et al., 2017).

    Token embeddings (entries of standard deviation p^(-1/2), times sqrt(p), as in the
    paper) plus sinusoidal positions (7.29)-(7.30);
    `num_layers` transformer blocks (7.31) over the source with its padding mask;
    `num_decoder_layers` (default num_layers) decoder blocks (7.33) over the target; an
    output layer (p -> target vocabulary). With `norm_first`, a final LayerNorm closes each
    stack, as in torch.nn.Transformer.

    forward(src (B, S), src_mask (B, S), tgt_in (B, T), return_attention=False) returns the
    teacher-forced logits (B, T, V) in one parallel pass (the causal mask stands in for the
    step-by-step decoding of (7.34)), and with return_attention the cross-attention weights
    of every decoder layer, a list of (B, H, T, S).
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
        sizes = dict(m=m, m_v=m_v, n1=n1, dropout=dropout, norm_first=norm_first)
        self.src_embedding = nn.Embedding(src_vocab_size, p, padding_idx=pad_id)
        self.tgt_embedding = nn.Embedding(tgt_vocab_size, p, padding_idx=pad_id)
        with torch.no_grad():  # entries of standard deviation p^(-1/2), as in the paper, so
            for embedding in (self.src_embedding, self.tgt_embedding):  # that sqrt(p) times
                embedding.weight.normal_(0, p ** -0.5)  # a word vector is about as long as
                embedding.weight[pad_id] = 0  # a position vector (norm sqrt(p / 2))
        self.positions = PositionalEmbedding(max_len, p)
        self.dropout = nn.Dropout(dropout)
        self.encoder = nn.ModuleList(TransformerBlock(p, heads, **sizes)
                                     for _ in range(positive_int("num_layers", num_layers)))
        self.decoder = nn.ModuleList(TransformerDecoderBlock(p, heads, **sizes)
                                     for _ in range(positive_int("num_decoder_layers", n_dec)))
        self.encoder_norm = LayerNorm(p) if norm_first else nn.Identity()
        self.decoder_norm = LayerNorm(p) if norm_first else nn.Identity()
        self.output = nn.Linear(p, tgt_vocab_size)

    def _embed(self, embedding: nn.Embedding, ids: torch.Tensor, offset: int = 0):
        x = embedding(ids) * math.sqrt(self.p)  # (B, T, p)
        return self.dropout(self.positions(x, offset))

    def encode(self, src: torch.Tensor, src_mask: torch.Tensor) -> torch.Tensor:
        """The encoder's outputs (B, S, p), the keys and values of every cross-attention."""
        check_source(src, src_mask, self.src_vocab_size)
        x = self._embed(self.src_embedding, src)
        for block in self.encoder:
            x = block(x, mask=src_mask)
        return self.encoder_norm(x)

    def decode(self, tgt_in: torch.Tensor, memory: torch.Tensor, src_mask: torch.Tensor, *,
               caches: list | None = None, offset: int = 0, need_weights: bool = False):
        """Logits (B, T, V) after each token of tgt_in (B, T) at positions offset, ...;
        with need_weights also the cross-attention weights per layer."""
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
        if tgt_in.shape[0] != src.shape[0]:
            raise ValueError(f"tgt_in has batch size {tgt_in.shape[0]}, expected "
                             f"{src.shape[0]} like src")
        return self.decode(tgt_in, self.encode(src, src_mask), src_mask,
                           need_weights=return_attention)

    def start(self, src: torch.Tensor, src_mask: torch.Tensor) -> dict:
        """Decoding state: the encoder's outputs, the source mask, the tokens so far and,
        with kv_cache, one cache per decoder layer."""
        memory = self.encode(src, src_mask)
        return {"memory": memory, "mask": src_mask, "tokens": src.new_zeros(len(src), 0),
                "caches": [{} for _ in self.decoder] if self.kv_cache else None}

    def step(self, tokens: torch.Tensor, state: dict):
        """(7.34): the previous tokens (N,) -> logits (N, V) of the next, and the state."""
        check_ids(tokens, name="tokens", dim=1, vocab_size=self.tgt_vocab_size)
        history = torch.cat([state["tokens"], tokens[:, None]], dim=1)  # (N, t)
        if state["caches"] is not None:  # one new token; earlier keys and values cached
            logits = self.decode(tokens[:, None], state["memory"], state["mask"],
                                 caches=state["caches"], offset=history.shape[1] - 1)
        else:  # the whole prefix again
            logits = self.decode(history, state["memory"], state["mask"])
        return logits[:, -1], {**state, "tokens": history}

    reorder = staticmethod(select_batch)


class TransformerLM(nn.Module):
    """A decoder-only transformer language model: token embeddings plus learned (7.28) or
    sinusoidal (7.29) positions, `num_layers` blocks (7.31) with causal self-attention
    (7.27), a final LayerNorm (pre-norm, the default, as GPT-2 and nanoGPT) and an output
    layer over the vocabulary.

    forward(ids (B, T), state=None) returns the logits (B, T, V) of the next token after
    each position and None: unlike a recurrent model, nothing is carried from one chunk to
    the next (the context is the chunk, at most max_len tokens), so it trains and evaluates
    with the same functions of seqlib.lm as the recurrent models.

    Decoding protocol: `start(prompts (N, S), mask)` reads every prompt token but the last
    (prompts of one length), which the decoding functions then feed as start_id. Past
    max_len tokens, each step reads the last max_len tokens (a sliding window).
    """

    def __init__(self, vocab_size: int, p: int, heads: int, n1: int, num_layers: int, *,
                 max_len: int, m: int | None = None, m_v: int | None = None,
                 dropout: float = 0.0, norm_first: bool = True, positional: str = "learned"):
        super().__init__()
        self.vocab_size, self.max_len = positive_int("vocab_size", vocab_size), max_len
        self.tgt_vocab_size, self.kv_cache = vocab_size, True
        self.embedding = nn.Embedding(vocab_size, p)
        self.positions = PositionalEmbedding(max_len, p, kind=positional)
        self.dropout = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(
            TransformerBlock(p, heads, m, m_v, n1, dropout=dropout, norm_first=norm_first)
            for _ in range(positive_int("num_layers", num_layers)))
        self.norm = LayerNorm(p) if norm_first else nn.Identity()
        self.output = nn.Linear(p, vocab_size)

    def logits(self, ids: torch.Tensor, caches: list | None = None, offset: int = 0):
        """Logits (B, T, V) after each of ids (B, T) at positions offset, offset + 1, ..."""
        check_ids(ids, vocab_size=self.vocab_size, dim=2, nonempty=True)
        x = self.dropout(self.positions(self.embedding(ids), offset))  # (B, T, p)
        for i, block in enumerate(self.blocks):
            x = block(x, causal=True, cache=None if caches is None else caches[i])
        return self.output(self.norm(x))  # (B, T, V)

    def forward(self, ids: torch.Tensor, state=None):
        if state is not None:
            raise ValueError("a TransformerLM carries no state between chunks: pass "
                             "state=None")
        return self.logits(ids), None

    def start(self, src: torch.Tensor, src_mask: torch.Tensor) -> dict:
        check_source(src, src_mask, self.vocab_size)
        if not src_mask.all():
            raise ValueError("prompts must all have one length (src_mask all True)")
        state = {"tokens": src[:, :-1], "caches": None}
        S = src.shape[1]
        if self.kv_cache and S <= self.max_len:
            state["caches"] = [{} for _ in self.blocks]
            if S > 1:
                self.logits(src[:, :-1], state["caches"])  # fills the caches
        return state

    def step(self, tokens: torch.Tensor, state: dict):
        """(7.34): the previous tokens (N,) -> logits (N, V) of the next, and the state."""
        check_ids(tokens, name="tokens", dim=1, vocab_size=self.vocab_size)
        history = torch.cat([state["tokens"], tokens[:, None]], dim=1)  # (N, t)
        t, caches = history.shape[1], state["caches"]
        if caches is not None and t <= self.max_len:  # one new token at position t - 1
            logits = self.logits(tokens[:, None], caches, offset=t - 1)
        else:  # the whole prefix again, or its last max_len tokens
            logits, caches = self.logits(history[:, -self.max_len:]), None
        return logits[:, -1], {"tokens": history, "caches": caches}

    reorder = staticmethod(select_batch)

