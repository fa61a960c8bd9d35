"""What the experiments on sentences share: batches of sentences of similar lengths
(`batch_indices`: translation, classification, pretraining) and corpus BLEU (`bleu`:
translation, captioning), with sacrebleu, loaded only where BLEU is asked for."""

import torch

from seqlib.checks import positive_int
from seqlib.text import word_tokenize


def batch_indices(examples: list, batch_size: int, generator: torch.Generator,
                  pool: int = 50):
    """Endless lists of the indices of one batch of examples: each epoch, the examples are
    shuffled, cut into pools of `pool` batches, sorted by length (of their first part, a
    source sentence) inside a pool (little padding), cut into batches, and the batches are
    shuffled. Every draw comes from `generator`."""
    positive_int("batch_size", batch_size)
    if len(examples) == 0:
        raise ValueError("examples is empty: there is nothing to batch")
    while True:
        order = torch.randperm(len(examples), generator=generator).tolist()
        chunk, epoch = batch_size * pool, []
        for i in range(0, len(order), chunk):
            part = sorted(order[i:i + chunk], key=lambda j: len(examples[j][0]))
            epoch += [part[k:k + batch_size] for k in range(0, len(part), batch_size)]
        for b in torch.randperm(len(epoch), generator=generator).tolist():
            yield epoch[b]


def _tokens(sentence: str) -> str:
    """Lower-case word_tokenize tokens joined by spaces; <unk> (and other <...>) kept whole."""
    return " ".join(w if w.startswith("<") and w.endswith(">") else " ".join(word_tokenize(w))
                    for w in sentence.split())


def bleu(hypotheses: list, references: list) -> float:
    """Corpus BLEU (0-100) with sacrebleu, one reference per sentence, on lower-case
    word_tokenize tokens (tokenize="none": the text is already tokenised)."""
    import sacrebleu  # loaded only where BLEU is asked for

    if isinstance(hypotheses, str) or isinstance(references, str):
        raise TypeError("hypotheses and references must be lists of sentences, not a str")
    if len(hypotheses) != len(references) or not hypotheses:
        raise ValueError(f"need as many hypotheses as references (at least one), got "
                         f"{len(hypotheses)} and {len(references)}")
    return sacrebleu.corpus_bleu([_tokens(h) for h in hypotheses],
                                 [[_tokens(r) for r in references]], tokenize="none",
                                 force=True).score
