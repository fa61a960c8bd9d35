"""Encoder-decoder models of Section 7.4: Fig. 7.9 (a) and (b), and with attention, Fig. 7.10.

- Fig. 7.9 (a): the code z, the encoder's last state, is the decoder's initial state.
- Fig. 7.9 (b): z is also fed to every decoder step and to the output layer (Cho et al., 2014).
- Fig. 7.10, (7.22): the decoder attends, (7.20)-(7.21), with the query z_q^<t> = s^<t-1>, to
  the bidirectional encoder's v^<tau> = [h_f^<tau>; h_r^<tau>] (Bahdanau et al., 2015).

In shape comments S = T_in and T = T_out. Padding (seqlib.text.pad_batch) never changes a
result: the encoder holds its state at padded steps, attention gives padded keys weight 0,
and the loss ignores padded targets. The decoding protocol, used by seqlib.decoding:
`start(src, src_mask)` -> state, `step(tokens (N,), state)` -> (logits (N, V), state),
`reorder(state, index)` -> the state of batch entries `index`.
"""

import torch
import torch.nn.functional as F
from torch import nn

from seqlib.attention import SCORES, Attention
from seqlib.checks import (
    check_decoding_state,
    check_ids,
    check_source,
    check_tgt_in,
    positive_int,
)
from seqlib.gated import make_unit
from seqlib.text import reverse_padded


def freeze(module: nn.Module) -> nn.Module:
    """Stop training `module` (requires_grad = False on its parameters); returns it."""
    return module.requires_grad_(False)


def unfreeze(module: nn.Module) -> nn.Module:
    """Train `module` again (requires_grad = True on its parameters); returns it."""
    return module.requires_grad_(True)


def masked_cross_entropy(logits: torch.Tensor, targets: torch.Tensor, pad_id: int = 0,
                         label_smoothing: float = 0.0):
    """Cross-entropy averaged over all real target tokens of the batch, positions where
    targets == pad_id left out (the chapter's footnote 9 charges no loss where prediction
    and target are both <empty>; here none wherever the target is). logits (B, T, V),
    targets (B, T).

    With label smoothing epsilon (beyond the chapter; Szegedy et al. 2016, used by Vaswani et
    al. 2017 with epsilon = 0.1), the target of each token is not the one-hot vector of the
    next word but (1 - epsilon) times it plus epsilon spread evenly over the V words, so
    the loss of one token is (1 - epsilon) (-log p_y) + epsilon (1/V) sum_k (-log p_k):
    the model is penalised for putting all its probability on one word.
    """
    if logits.dim() != 3 or targets.shape != logits.shape[:2]:
        raise ValueError(f"expected logits (B, T, V) and targets (B, T), got shapes "
                         f"{tuple(logits.shape)} and {tuple(targets.shape)}")
    if not 0.0 <= label_smoothing < 1.0:
        raise ValueError(f"label_smoothing must be in [0, 1), got {label_smoothing!r}")
    real = targets != pad_id  # (B, T)
    if not real.any():
        raise ValueError(f"every target is padding (pad_id={pad_id}): the loss is undefined")
    B, T, V = logits.shape
    if label_smoothing == 0.0:
        return F.cross_entropy(logits.reshape(B * T, V), targets.reshape(B * T),  # (B T, V)
                               ignore_index=pad_id)
    log_p = F.log_softmax(logits[real], dim=-1)  # (N, V): the N real tokens
    nll = -log_p.gather(1, targets[real].unsqueeze(1)).squeeze(1)  # (N,): -log p_y
    spread = -log_p.mean(1)  # (N,): (1/V) sum_k -log p_k
    return ((1 - label_smoothing) * nll + label_smoothing * spread).mean()


def teacher_forced_loss(model: nn.Module, batch: dict, label_smoothing: float = 0.0):
    """The loss of a batch {"src", "src_mask", "tgt_in", "tgt_out"} under teacher forcing:
    `masked_cross_entropy` of model(src, src_mask, tgt_in)'s logits against tgt_out."""
    logits = model(batch["src"], batch["src_mask"], batch["tgt_in"])
    return masked_cross_entropy(logits, batch["tgt_out"], label_smoothing=label_smoothing)


def reorder_state(state: dict, index: torch.Tensor) -> dict:
    """The decoding state of batch entries `index`: "hidden" (L, N, m) has the batch second."""
    return {key: None if value is None else tuple(s.index_select(1, index) for s in value)
            if key == "hidden" else value.index_select(0, index) for key, value in state.items()}


class Encoder(nn.Module):
    """Embedding and recurrent unit over the source; padding-proof through recur's mask.
    forward(src (B, S), src_mask (B, S)) -> outputs (B, S, D m), last state (tuple)."""

    def __init__(self, vocab_size: int, embed_size: int, hidden_size: int, *, unit: str = "gru",
                 num_layers: int = 1, bidirectional: bool = False, pad_id: int = 0):
        super().__init__()
        self.vocab_size = positive_int("vocab_size", vocab_size)
        self.embedding = nn.Embedding(vocab_size, embed_size, padding_idx=pad_id)
        self.recurrent = make_unit(unit, embed_size, hidden_size, num_layers=num_layers,
                                   bidirectional=bidirectional)

    def forward(self, src: torch.Tensor, src_mask: torch.Tensor):
        """Outputs v (B, S, D m) at every source position and the last state (the code z)."""
        check_source(src, src_mask, self.vocab_size)
        return self.recurrent.recur(self.embedding(src), mask=src_mask)  # x: (B, S, E)


class Decoder(nn.Module):
    """The decoder of Fig. 7.9: embedding, recurrent unit, output layer; with `code_size`
    (Fig. 7.9 (b)), the code z (B, code_size) joins every step's input and the output layer."""

    def __init__(self, vocab_size: int, embed_size: int, hidden_size: int, *, unit: str = "gru",
                 num_layers: int = 1, code_size: int = 0, pad_id: int = 0):
        super().__init__()
        self.vocab_size = positive_int("vocab_size", vocab_size)
        self.embedding = nn.Embedding(vocab_size, embed_size, padding_idx=pad_id)
        self.recurrent = make_unit(unit, embed_size + code_size, hidden_size,
                                   num_layers=num_layers)
        self.output = nn.Linear(hidden_size + code_size, vocab_size)

    def forward(self, tgt_in: torch.Tensor, state: tuple, z: torch.Tensor | None = None):
        """Logits (B, T, V) after each token of tgt_in (B, T), from `state`; the last state."""
        x = self.embedding(tgt_in)  # (B, T, E)
        if z is not None:
            z = z[:, None].expand(-1, x.shape[1], -1)  # (B, T, m): z at every step
            x = torch.cat([x, z], dim=-1)  # (B, T, E + m)
        s, state = self.recurrent.recur(x, state)  # (B, T, m)
        if z is not None:
            s = torch.cat([s, z], dim=-1)  # (B, T, 2 m)
        return self.output(s), state  # (B, T, V)

    def step(self, tokens: torch.Tensor, state: dict):
        """One decoding step, state {"hidden", "code"}: tokens (N,) -> logits (N, V), state."""
        check_ids(tokens, name="tokens", dim=1, vocab_size=self.vocab_size)
        check_decoding_state(state, ("hidden", "code"))
        logits, hidden = self(tokens[:, None], state["hidden"], state["code"])
        return logits[:, 0], {**state, "hidden": hidden}  # (N, V)


class Seq2Seq(nn.Module):
    """Encoder-decoder of Fig. 7.9 (a), or (b) with `feed_code`; `reverse_source` reads each
    source backwards (Sutskever et al., 2014). forward gives the teacher-forced logits."""

    def __init__(self, src_vocab_size: int, tgt_vocab_size: int, embed_size: int,
                 hidden_size: int, *, unit: str = "gru", num_layers: int = 1,
                 feed_code: bool = False, reverse_source: bool = False, pad_id: int = 0):
        super().__init__()
        self.src_vocab_size, self.tgt_vocab_size = src_vocab_size, tgt_vocab_size
        self.feed_code, self.reverse_source = bool(feed_code), bool(reverse_source)
        self.encoder = Encoder(src_vocab_size, embed_size, hidden_size, unit=unit,
                               num_layers=num_layers, pad_id=pad_id)
        self.decoder = Decoder(tgt_vocab_size, embed_size, hidden_size, unit=unit,
                               num_layers=num_layers, code_size=hidden_size * feed_code,
                               pad_id=pad_id)

    def encode(self, src: torch.Tensor, src_mask: torch.Tensor) -> tuple:
        """The code z: the encoder's state after the last real token, a tuple of (L, B, m)."""
        if self.reverse_source:
            src = reverse_padded(src, check_source(src, src_mask))
        return self.encoder(src, src_mask)[1]

    def start(self, src: torch.Tensor, src_mask: torch.Tensor) -> dict:
        """Decoding state: z as the initial state, and its top layer (B, m) for Fig. 7.9 (b)."""
        z = self.encode(src, src_mask)
        return {"hidden": z, "code": z[0][-1] if self.feed_code else None}

    def step(self, tokens: torch.Tensor, state: dict):
        """One decoder step: the previous tokens (N,) -> logits (N, V) of the next, state."""
        return self.decoder.step(tokens, state)

    reorder = staticmethod(reorder_state)

    def forward(self, src: torch.Tensor, src_mask: torch.Tensor, tgt_in: torch.Tensor):
        """Teacher forcing: logits (B, T, V) of y^<t> given the source and tgt_in[:, :t+1]."""
        check_tgt_in(tgt_in, src, self.tgt_vocab_size)
        state = self.start(src, src_mask)
        return self.decoder(tgt_in, state["hidden"], state["code"])[0]


class AttentionDecoder(nn.Module):
    """The decoder of Fig. 7.10, (7.22), e^<t-1> the embedded previous token:
        u^<t>, alpha^<t> = Attention(z_q = s^<t-1>, z_k = v, values v)   (7.20)-(7.21)
        s^<t> = unit(s^<t-1>, [e^<t-1>; u^<t>])                          f_decoder, (7.22)
        logits^<t> = W_o s^<t> + b_o                                     f_decoder-out
    or, with `deep_output=True` (Bahdanau et al.'s), W_o [s^<t>; u^<t>; e^<t-1>] + b_o. A state
    holds "hidden", "keys" v, "projected", "mask" and "weights", the last step's alpha^<t>."""

    def __init__(self, vocab_size: int, embed_size: int, hidden_size: int, key_size: int, *,
                 unit: str = "gru", score: str = "additive", attention_size: int | None = None,
                 deep_output: bool = False, initial_size: int | None = None, pad_id: int = 0):
        super().__init__()
        self.vocab_size, self.deep_output = positive_int("vocab_size", vocab_size), deep_output
        self.embedding = nn.Embedding(vocab_size, embed_size, padding_idx=pad_id)
        if initial_size is not None:
            self.initial = nn.Linear(initial_size, hidden_size)  # W_init, b_init
        self.attention = Attention(hidden_size, key_size, score, attention_size)
        self.recurrent = make_unit(unit, embed_size + key_size, hidden_size)
        reads = hidden_size + (key_size + embed_size if deep_output else 0)  # s, or [s; u; e]
        self.output = nn.Linear(reads, vocab_size)

    def recur(self, tokens: torch.Tensor, state: dict):
        """One decoder step (7.22) up to its output layer: the previous tokens (N,) ->
        what the output layer reads, s^<t> (N, m) (or [s^<t>; u^<t>; e^<t-1>] with a deep
        output), and the state (whose "weights" (N, T_in) are this step's alpha^<t>)."""
        check_ids(tokens, name="tokens", dim=1, vocab_size=self.vocab_size)
        check_decoding_state(state, ("hidden", "keys", "projected", "mask"))
        v = state["keys"]
        e = self.embedding(tokens)  # (N, E): the previous token y^<t-1>
        s_prev = state["hidden"][0][-1]  # (N, m): the query z_q^<t> = s^<t-1>
        u, alpha = self.attention(s_prev[:, None], v, v, mask=state["mask"],
                                  projected=state["projected"])  # (N, 1, 2n)
        u, alpha = u[:, 0], alpha[:, 0]  # u^<t> (N, 2 n), alpha^<t> (N, T_in)
        s, hidden = self.recurrent.recur(torch.cat([e, u], -1)[:, None], state["hidden"])
        s = s[:, 0]  # (N, m): s^<t> = f_decoder(s^<t-1>, y^<t-1>, u^<t>)
        read = torch.cat([s, u, e], dim=-1) if self.deep_output else s
        return read, {**state, "hidden": hidden, "weights": alpha}

    def step(self, tokens: torch.Tensor, state: dict):
        """One decoder step (7.22): the previous tokens (N,) -> logits (N, V) of the next,
        and the state of `recur`."""
        read, state = self.recur(tokens, state)
        return self.output(read), state  # (N, V)

    def forward(self, tgt_in: torch.Tensor, state: dict):
        """Teacher forcing from `state`: logits (B, T_out, V) and weights (B, T_out, T_in)."""
        reads, weights = [], []
        for y_prev in tgt_in.unbind(1):  # the query z_q^<t> = s^<t-1>: one step at a time,
            read, state = self.recur(y_prev, state)  # reading y^<t-1> for y_hat^<t-1>
            reads.append(read)
            weights.append(state["weights"])
        logits = self.output(torch.stack(reads, dim=1))  # all steps at once: (B, T_out, V)
        return logits, torch.stack(weights, dim=1)


class AttentionSeq2Seq(nn.Module):
    """Encoder-decoder with attention, Fig. 7.10 and (7.22) (Bahdanau et al., 2015). The
    chapter leaves s^<0> open: here tanh(W_init h_r^<1> + b_init), from the reverse state
    that read the whole sentence (and c^<0> = 0 for the LSTM).
    """

    def __init__(self, src_vocab_size: int, tgt_vocab_size: int, embed_size: int,
                 hidden_size: int, *, unit: str = "gru", encoder_size: int | None = None,
                 score: str = "additive", attention_size: int | None = None,
                 deep_output: bool = False, pad_id: int = 0):
        super().__init__()
        n = hidden_size if encoder_size is None else positive_int("encoder_size", encoder_size)
        if score == "inner" and hidden_size != 2 * n:
            raise ValueError(f"score='inner' needs queries s^<t> and keys v^<t> of one size, "
                             f"got hidden_size={hidden_size} and 2 * encoder_size={2 * n}")
        if score not in SCORES:
            raise ValueError(f"score must be one of {SCORES}, got {score!r}")
        if not isinstance(deep_output, bool):
            raise TypeError(f"deep_output must be a bool, got {type(deep_output).__name__}")
        self.src_vocab_size, self.tgt_vocab_size, self.encoder_size = (src_vocab_size,
                                                                       tgt_vocab_size, n)
        self.encoder = Encoder(src_vocab_size, embed_size, n, unit=unit, bidirectional=True,
                               pad_id=pad_id)
        self.decoder = AttentionDecoder(tgt_vocab_size, embed_size, hidden_size, 2 * n,
                                        unit=unit, score=score, attention_size=attention_size,
                                        deep_output=deep_output, initial_size=n, pad_id=pad_id)

    @property
    def deep_output(self) -> bool:
        """Whether the output layer reads [s^<t>; u^<t>; e^<t-1>]: the decoder's setting."""
        return self.decoder.deep_output

    def start(self, src: torch.Tensor, src_mask: torch.Tensor) -> dict:
        """Decoding state (AttentionDecoder's): s^<0>, v (B, T_in, 2 n) and its projection."""
        v, _ = self.encoder(src, src_mask)  # (B, T_in, 2 n)
        h_r1 = v[:, 0, self.encoder_size:]  # (B, n): h_r^<1>, the reverse state at tau = 1
        s0 = torch.tanh(self.decoder.initial(h_r1))[None]  # (1, B, m)
        lstm = self.decoder.recurrent.state_count == 2
        hidden = (s0, torch.zeros_like(s0)) if lstm else (s0,)  # c^<0> = 0 for the LSTM
        return {"hidden": hidden, "keys": v, "projected": self.decoder.attention.project_keys(v),
                "mask": src_mask, "weights": None}

    def step(self, tokens: torch.Tensor, state: dict):
        """One decoder step (7.22): the previous tokens (N,) -> logits (N, V), the state."""
        return self.decoder.step(tokens, state)

    reorder = staticmethod(reorder_state)

    def forward(self, src: torch.Tensor, src_mask: torch.Tensor, tgt_in: torch.Tensor,
                return_attention: bool = False):
        """Teacher forcing: logits (B, T_out, V), and weights (B, T_out, T_in) if asked."""
        check_tgt_in(tgt_in, src, self.tgt_vocab_size)
        logits, weights = self.decoder(tgt_in, self.start(src, src_mask))
        return (logits, weights) if return_attention else logits
