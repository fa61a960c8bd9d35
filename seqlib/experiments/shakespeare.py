"""The character-level language models of tiny Shakespeare (pages 06 and 12, and the pages
beyond the chapter that reuse them): their configurations. A run of one is
`runs.language_model(name, model, train_ids, config, module=__name__)`, so that every page that
trains the same model with the same configuration shares it through the model cache.

- `BOOK_PROFILE`, `FULL_PROFILE`: the recurrent models (seqlib.lm.recurrent_model) and how
  they train; the book profile trains on a laptop CPU in minutes, `SEQLIB_FULL=1` selects
  the full one, for a GPU (`runs.profile(BOOK_PROFILE, FULL_PROFILE)`).
- `TRANSFORMER_BOOK_PROFILE`, `TRANSFORMER_FULL_PROFILE`: the decoder-only transformer of
  Section 7.5 (seqlib.lm.TransformerLM): "arch" are its constructor's arguments,
  "fit" the configuration of its run. The book profile trains on the batches and steps of
  BOOK_PROFILE; the full profile is nanoGPT's shakespeare_char configuration, for a GPU
  (`python -m seqlib.experiments.run char-lm` trains it on one or more).
"""

BOOK_PROFILE = dict(embed_size=32, hidden_size=192, num_layers=1, batch_size=12, context=64,
                    steps=2000, lr=1e-2, warmup=100)
FULL_PROFILE = dict(embed_size=64, hidden_size=512, num_layers=2, batch_size=64, context=256,
                    steps=600, lr=2e-3, warmup=50)

TRANSFORMER_BOOK_PROFILE = {
    "arch": dict(p=128, heads=4, n1=512, num_layers=4, max_len=64, dropout=0.0,
                 positional="sinusoidal"),
    "fit": dict(batch_size=12, context=64, steps=2000, lr=3e-3, warmup=100, beta2=0.99,
                weight_decay=0.1)}
TRANSFORMER_FULL_PROFILE = {
    "arch": dict(p=384, heads=6, n1=1536, num_layers=6, max_len=256, dropout=0.2,
                 positional="sinusoidal"),
    "fit": dict(batch_size=64, context=256, steps=5000, lr=1e-3, warmup=100, beta2=0.99,
                weight_decay=0.1)}
