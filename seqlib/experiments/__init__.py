"""The experiments of the book's pages: training runs on real data, the pages beyond the
chapter, and the full-profile runs for a GPU. The chapter's own models live in the modules
of seqlib itself, which never import this package.

- `runs` is what every experiment shares: a training run described by one record (which
  derives its key in the model cache), trained once and cached, several at once in worker
  processes, the book and full profiles. An experiment's run is `run(name, model, data,
  config)`.
- One module per experiment, each importing `runs` and the chapter library, never another
  experiment: `translation` (Multi30k, pages 07, 08, 11, 16-18), `forecasting` (page 13),
  `sentiment` (14), `captioning` (15), `window` (19), `length` (20), `trainability` (21)
  and `pretraining` (22).
- The parts they share: `shakespeare` (the character-level language models of pages 06
  and 12 and their configurations, which pages 19-21 reuse), `streams` (language modelling
  on one long text), `sentences` (batches of sentences of similar lengths, BLEU),
  `datasets` (the data sets of the pages beyond the chapter), `classify` (sequence
  classifiers, pages 14 and 22), `ngrams` (NBSVM), `bpe` (byte-pair encoding), `digits`
  (MNIST strips), `calibration` and `word2vec` (its training's draws).
- `distributed`: the command line of the full-profile runs, on one GPU or several
  (`python -m seqlib.experiments.distributed`).
"""
