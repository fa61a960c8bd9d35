"""Translation on Multi30k (pages 07, 08, 11, 16-18): data, batches, runs and decoding.

- `PROFILES` (seqlib.pages.config.profile chooses): the setups of the pages' runs, the
  encoder-decoders of Fig. 7.9 ("seq2seq"), with attention ("attention"), the scores
  compared on page 18 ("scores"), the fine-tuning of page 07 ("tuning") and the
  transformer of Fig. 7.16 ("transformer"); the full profile's are for a GPU.
- `prepare` / `multi30k_data`: word tokenisation (seqlib.text.word_tokenize, lower-case),
  optionally split further into subwords by byte-pair encoding (seqlib.experiments.bpe,
  learned on the training split), vocabularies built on the training split only, ids;
  targets framed by <start>/<stop>.
- `batches`: shuffled, length-bucketed batches drawn with an explicit torch.Generator
  (seqlib.experiments.sentences.batch_indices), padded with <empty> and with masks (True
  at real tokens); `draws`, the same batches taken from tensors padded once on the
  device, which the runs train on.
- `run(name, model, data, fit)`: the training run of a model
  (seqlib.experiments.runs.Run), the masked cross-entropy with Adam; runs.trained trains
  it once and caches it.
- `translate`: greedy, beam or sampled translations as lower-case tokenised text; `bleu`
  (of seqlib.experiments.sentences) scores them, and `bleu_by_length` by source length.
"""

from dataclasses import dataclass
from functools import partial
from itertools import chain, pairwise

import torch

from seqlib.data import multi30k
from seqlib.decoding import beam_search, greedy, sample
from seqlib.experiments import runs
from seqlib.experiments.bpe import BPE
from seqlib.experiments.sentences import batch_indices, bleu
from seqlib.pages.config import check_config
from seqlib.seq2seq import teacher_forced_loss
from seqlib.text import UNK, Vocab, pad_batch, word_tokenize, word_vocab
from seqlib.training import adam, warmup_linear


# The setups, shared by the pages so that their models (and cache keys) agree: "data" are
# the arguments of multi30k_data, "model" those of the model's constructor after the two
# vocabulary sizes (seqlib.seq2seq.Seq2Seq, AttentionSeq2Seq, seqlib.transformer.Transformer),
# "fit" those of `run`. The recurrent models share the data, the sizes and the fit (page
# 18's scores train 300 steps in the book profile; page 07's fine-tuning 50 steps more, with
# another seed). The book profile runs on a laptop CPU, SEQLIB_FULL=1 selects the GPU one
# (seqlib.pages.config.profile). The full profile's transformer (under 10M parameters from
# German to English) and encoder-decoder with attention are also the runs of `python -m
# seqlib.experiments.distributed translation-de-en` and `attention-de-en`, on one or more
# GPUs.
def _setups(min_freq: int, sizes: dict, attention: dict, fit: dict, score_steps: int,
            transformer: dict) -> dict:
    """The setups of one profile: the recurrent models' vocabulary threshold, `sizes`
    (those of attention's model besides), `fit` and the steps of page 18's `score_steps`;
    the transformer's {"model", "fit"}."""
    data = dict(min_freq=min_freq)
    return {"seq2seq": {"data": dict(data), "model": dict(sizes), "fit": dict(fit)},
            "attention": {"data": dict(data), "model": sizes | attention, "fit": dict(fit)},
            "scores": {"data": dict(data), "model": dict(sizes),
                       "fit": fit | dict(steps=score_steps)},
            "tuning": {"fit": fit | dict(steps=50, seed=1)},
            "transformer": {"data": dict(data), **transformer}}


PROFILES = {
    "book": _setups(
        min_freq=8, sizes=dict(embed_size=128, hidden_size=256),
        attention=dict(unit="gru", encoder_size=128, score="additive", attention_size=64),
        fit=dict(steps=400, batch_size=32, lr=3e-3), score_steps=300,
        transformer={"model": dict(p=256, heads=8, n1=512, num_layers=2, dropout=0.0),
                     "fit": dict(steps=400, batch_size=32, lr=2e-3, warmup=100, decay=True)}),
    "full": _setups(
        min_freq=2, sizes=dict(embed_size=256, hidden_size=512),
        attention=dict(unit="gru", encoder_size=512, score="additive", attention_size=512),
        fit=dict(steps=20_000, batch_size=128, lr=1e-3), score_steps=20_000,
        transformer={"model": dict(p=256, heads=8, n1=512, num_layers=3, dropout=0.1),
                     "fit": dict(steps=8000, batch_size=128, lr=1e-3, warmup=800,
                                 decay=True)})}


@dataclass
class TranslationData:
    """Sentence pairs per split ({split: [(source, target)]}), the two vocabularies, and
    ids per split ({split: [(source ids, target ids with <start> ... <stop>)]}); with
    byte-pair encoding, the two learned encodings (None for whole words)."""

    pairs: dict
    src_vocab: Vocab
    tgt_vocab: Vocab
    ids: dict
    src_bpe: BPE | None = None
    tgt_bpe: BPE | None = None

    def source_tokens(self, sentence: str) -> list[str]:
        """The tokens of a source sentence: its words, or their subwords with BPE."""
        return _split(sentence, self.src_bpe)

    def target_text(self, tokens: list[str]) -> str:
        """Target tokens back to lower-case tokenised text (subwords joined into words)."""
        if self.tgt_bpe is None:
            return self.tgt_vocab.to_text(tokens)
        end = self.tgt_bpe.end_of_word  # <unk> stands alone: it ends the word before it
        text = self.tgt_bpe.decode(end + UNK + end if t == UNK else t for t in tokens)
        return " ".join(text.split())


def _split(sentence: str, bpe: BPE | None) -> list[str]:
    words = word_tokenize(sentence)
    return words if bpe is None else [t for w in words for t in bpe.encode_word(w)]


def prepare(pairs: dict, min_freq: int = 2, merges: int | None = None) -> TranslationData:
    """Tokenise {split: [(source, target)]} (a "train" split is required), build both
    vocabularies on "train" with `min_freq`, and encode every split (rare or unseen words
    become <unk>). With `merges`, each language's words are split into subwords by a
    byte-pair encoding of that many merges learned on its training sentences, and the
    vocabulary holds every symbol of the encoding (`min_freq` is not used): a word made of
    characters seen in training never becomes <unk>."""
    if not isinstance(pairs, dict) or "train" not in pairs:
        got = sorted(pairs) if isinstance(pairs, dict) else type(pairs).__name__
        raise ValueError(f"pairs must be a dict of splits with a 'train' split, got {got}")
    train_pairs = pairs["train"]
    if merges is None:
        src_bpe = tgt_bpe = None
        src_vocab = word_vocab((s for s, _ in train_pairs), min_freq=min_freq)
        tgt_vocab = word_vocab((t for _, t in train_pairs), min_freq=min_freq)
    else:
        src_bpe, tgt_bpe = (BPE.learn([w for pair in train_pairs for w in word_tokenize(pair[k])],
                                      merges) for k in (0, 1))
        src_vocab, tgt_vocab = (_subword_vocab([_split(pair[k], bpe) for pair in train_pairs],
                                               bpe) for k, bpe in ((0, src_bpe), (1, tgt_bpe)))
    ids = {split: [(src_vocab.encode(_split(s, src_bpe)),
                    tgt_vocab.encode(_split(t, tgt_bpe), add_start=True, add_stop=True))
                   for s, t in split_pairs]
           for split, split_pairs in pairs.items()}
    return TranslationData(dict(pairs), src_vocab, tgt_vocab, ids, src_bpe, tgt_bpe)


def _subword_vocab(sequences: list, bpe: BPE) -> Vocab:
    """The subwords of the training sequences, then every other symbol of `bpe`: the
    characters seen, at the end of a word and inside one, and every merged symbol."""
    chars = {c for tokens in sequences for t in tokens for c in t.removesuffix(bpe.end_of_word)}
    symbols = sorted(chars | {c + bpe.end_of_word for c in chars} | set(bpe.symbols()))
    return Vocab.build(sequences + [symbols])


def unknown_rate(data: TranslationData, split: str) -> tuple[float, float]:
    """The fraction of <unk> among the source and among the target tokens of `split`
    (<start> and <stop> left out)."""
    if split not in data.ids:
        raise ValueError(f"split must be one of {sorted(data.ids)}, got {split!r}")
    src = [i for s, _ in data.ids[split] for i in s]
    tgt = [i for _, t in data.ids[split] for i in t[1:-1]]
    return (src.count(data.src_vocab.unk_id) / max(len(src), 1),
            tgt.count(data.tgt_vocab.unk_id) / max(len(tgt), 1))


def multi30k_data(src: str = "en", tgt: str = "fr", min_freq: int = 2,
                  splits=("train", "val", "test_2016_flickr"),
                  merges: int | None = None) -> TranslationData:
    """Multi30k task 1 (seqlib.data.multi30k) prepared by `prepare`."""
    return prepare({split: multi30k(split, src, tgt) for split in splits}, min_freq, merges)


def collate(examples: list) -> dict:
    """A batch of (source ids, target ids) pairs: src, src_mask (B, S); tgt_in = <start> y
    and tgt_out = y <stop> (B, T), padded with <empty> (id 0)."""
    src, src_mask = pad_batch([s for s, _ in examples])
    tgt, _ = pad_batch([t for _, t in examples])  # (B, T + 1)
    return {"src": src, "src_mask": src_mask, "tgt_in": tgt[:, :-1], "tgt_out": tgt[:, 1:]}


def batches(examples: list, batch_size: int, generator: torch.Generator, pool: int = 50):
    """Endless shuffled batches (`collate`) of the examples batch_indices draws."""
    for index in batch_indices(examples, batch_size, generator, pool):
        yield collate([examples[j] for j in index])


def draws(examples: list, batch_size: int, device, generator: torch.Generator):
    """The batches of a run, those of `batches`, assembled on `device`: every pair is
    padded once into tensors moved there once; each step takes its pairs' rows and cuts
    them to its longest sentences (the same values as `collate`, without a list or a copy
    to the device per step)."""
    indices = batch_indices(examples, batch_size, generator)
    first = next(indices)  # batch_size and examples checked before anything is padded
    src_lengths = [len(s) for s, _ in examples]
    tgt_lengths = [len(t) for _, t in examples]
    src, src_mask = (t.to(device) for t in pad_batch([s for s, _ in examples]))  # (N, S)
    tgt = pad_batch([t for _, t in examples])[0].to(device)  # (N, T + 1)
    for index in chain([first], indices):
        rows = torch.tensor(index, device=device)  # (B,)
        S = max(src_lengths[j] for j in index)
        T = max(tgt_lengths[j] for j in index)
        batch = tgt[rows, :T]  # (B, T + 1)
        yield {"src": src[rows, :S], "src_mask": src_mask[rows, :S],
               "tgt_in": batch[:, :-1], "tgt_out": batch[:, 1:]}


# The settings of `run` (its fit): those it needs, and the defaults of the others.
FIT_KEYS = ("steps", "batch_size", "lr")
FIT_DEFAULTS = dict(clip=1.0, seed=0, warmup=0, decay=False, label_smoothing=0.0)


def run(name: str, model, data: TranslationData, fit: dict) -> runs.Run:
    """The run (seqlib.experiments.runs) that trains `model` (a model, or a function that
    builds one after seed_everything(fit["seed"])) on data.ids["train"]: fit["steps"]
    batches of fit["batch_size"] pairs drawn by `draws` from the run's generator, Adam at
    rate fit["lr"], all along or with fit["warmup"] steps and fit["decay"] (warmup_linear:
    transformers learn worse at full rate from their first step), the loss of teacher
    forcing (the masked cross-entropy, with fit["label_smoothing"] epsilon), gradients
    clipped at fit["clip"] (FIT_DEFAULTS for the settings fit leaves out)."""
    fit = check_config(fit, FIT_KEYS, FIT_DEFAULTS)
    model = runs.built(model, fit["seed"])
    smoothing = fit["label_smoothing"]
    loss = teacher_forced_loss if smoothing == 0.0 else partial(
        teacher_forced_loss, label_smoothing=smoothing)
    return runs.Run(name, model, loss,
                    partial(draws, data.ids["train"], fit["batch_size"],
                            next(model.parameters()).device),
                    partial(adam, lr=fit["lr"]), fit,
                    partial(warmup_linear, decay=fit["decay"]), data=(data.ids["train"],),
                    module=__name__)


def translate(model, data: TranslationData, sources: list, *, method: str = "greedy",
              beam_size: int = 4, length_penalty: float = 1.0, max_len: int = 50,
              temperature: float = 1.0, generator: torch.Generator | None = None,
              batch_size: int = 100) -> list:
    """Translations of the source sentences (strs) as lower-case tokenised text, by
    `method` "greedy", "beam" (beam_size, length_penalty) or "sample" (temperature,
    generator), decoded on the model's device."""
    if method not in ("greedy", "beam", "sample"):
        raise ValueError(f"method must be 'greedy', 'beam' or 'sample', got {method!r}")
    if isinstance(sources, str):
        raise TypeError("sources must be a list of sentences, got a single str")
    special = {"start_id": data.tgt_vocab.start_id, "stop_id": data.tgt_vocab.stop_id,
               "max_len": max_len}
    device = next(model.parameters()).device
    ids = [data.src_vocab.encode(data.source_tokens(s)) or [data.src_vocab.unk_id]
           for s in sources]
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))  # similar lengths together
    out = [None] * len(ids)
    for k in range(0, len(order), batch_size):
        chunk = order[k:k + batch_size]
        src, src_mask = (t.to(device) for t in pad_batch([ids[i] for i in chunk]))
        if method == "greedy":
            tokens = greedy(model, src, src_mask, **special)
        elif method == "beam":
            tokens = [hyps[0][0] for hyps in beam_search(
                model, src, src_mask, beam_size=beam_size, length_penalty=length_penalty,
                **special)]
        else:
            tokens = sample(model, src, src_mask, temperature=temperature,
                            generator=generator, **special)
        for i, t in zip(chunk, tokens, strict=True):
            out[i] = data.target_text(data.tgt_vocab.decode(t))
    return out


def bleu_by_length(hypotheses: list, references: list, src_lengths: list, edges) -> list:
    """BLEU of the sentences whose source length n lies in each bucket edges[i] <= n <
    edges[i + 1]; returns one dict (low, high, count, bleu) per non-empty bucket."""
    if not (len(hypotheses) == len(references) == len(src_lengths)):
        raise ValueError(f"hypotheses, references and src_lengths must have one length, got "
                         f"{len(hypotheses)}, {len(references)} and {len(src_lengths)}")
    edges = list(edges)
    if len(edges) < 2 or any(a >= b for a, b in pairwise(edges)):
        raise ValueError(f"edges must increase, with at least two of them, got {edges}")
    rows = []
    for low, high in pairwise(edges):
        keep = [i for i, n in enumerate(src_lengths) if low <= n < high]
        if keep:
            rows.append({"low": low, "high": high, "count": len(keep),
                         "bleu": bleu([hypotheses[i] for i in keep],
                                  [references[i] for i in keep])})
    return rows
