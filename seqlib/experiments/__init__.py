"""The experiments of the book's pages: training runs on real data, the pages beyond the
chapter, and the full-profile runs for a GPU. The chapter's own models live in the modules
of seqlib itself, which never import this package.

- `runs` is what every experiment shares: a training run described by one record (which
  derives its key in the model cache), trained once on random numbers of its own and
  cached, several at once in worker processes.
- One module per experiment, each importing `runs` and the chapter library, never another
  experiment: `translation` (Multi30k, pages 07, 08, 11, 16-18), `forecasting` (page 13),
  `sentiment` (14), `captioning` (15), `window` (19), `length` (20), `trainability` (21)
  and `pretraining` (22). Each holds its settings in one shape, `PROFILES` (the book
  profile and the full one, a setup per kind of run: "model", "fit", and where they apply
  "data" and "seeds"; seqlib.pages.config), and makes a run with `run(name, model, data,
  fit)` (that of `classify`, `streams` or `word2vec` where it trains their models).
- The parts they share: `shakespeare` (the character-level language models of pages 06
  and 12 and their setups, which pages 19-21 reuse), `streams` (language modelling on one
  long text, and its run), `sentences` (batches of sentences of similar lengths, BLEU),
  `datasets` (the data sets of the pages beyond the chapter), `classify` (sequence
  classifiers and their run, pages 14 and 22), `ngrams` (NBSVM), `bpe` (byte-pair
  encoding), `digits` (MNIST strips), `calibration` and `word2vec` (its training's draws,
  and its run).
- `distributed`: the command line of the full-profile runs, on one GPU or several
  (`python -m seqlib.experiments.distributed`).
"""
