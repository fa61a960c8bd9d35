"""Write the coverage page, book/coverage.md, from book/coverage.yml.

Run `python book/coverage.py` (or `make execute`, which runs it) after changing the data
file; tests/test_coverage.py fails while the page and the data disagree.
"""

import pathlib

import yaml

BOOK = pathlib.Path(__file__).resolve().parent
DATA = BOOK / "coverage.yml"
PAGE = BOOK / "coverage.md"
TITLES = {
    "01_sequence_data_and_embeddings": "7.1 Sequence data and word embeddings",
    "02_recurrent_neural_networks": "7.2 Recurrent neural networks",
    "03_backpropagation_through_time": "7.2 Backpropagation through time",
    "04_stacked_and_bidirectional_rnns": "7.3 Stacked and bidirectional RNNs",
    "05_lstm_and_gru": "7.3 LSTM and GRU",
    "06_character_level_shakespeare": "Character-level Shakespeare",
    "07_encoder_decoder_translation": "7.4 Encoder-decoder translation",
    "08_attention": "7.4 Attention",
    "09_self_attention_and_positional_embeddings": "7.5 Self-attention and positions",
    "10_transformer_blocks_and_parameter_counts": "7.5 Transformer blocks",
    "11_transformer_translation": "7.5 Transformer translation",
    "12_transformer_language_model": "7.5 Transformer language model",
    "13_time_series_lookahead": "Time-series lookahead",
    "14_sentiment_classification": "Sentiment classification",
    "15_image_captioning": "Image captioning",
    "16_label_smoothing_and_beam_search": "Label smoothing and beam search",
    "17_subword_tokens": "Subword tokens",
    "18_attention_score_functions": "Attention score functions",
    "19_fixed_window_language_models": "Fixed-window language models",
    "20_length_generalisation": "Length generalisation",
    "21_training_deep_transformers": "What makes a transformer trainable",
    "22_pretraining_and_fine_tuning": "Pretraining and fine-tuning",
}


def load() -> dict:
    """The data file as a dict with the keys equations, figures, numbers and beyond."""
    return yaml.safe_load(DATA.read_text())


def _cell(text) -> str:
    """Text for a Markdown table cell: no line breaks, no bare pipes."""
    return str(text).replace("\n", " ").replace("|", "\\|")


def _code(text) -> str:
    return f"`{_cell(text)}`" if text else "(in the text)"


def _page(home: str) -> str:
    return f"[{TITLES.get(home, home)}](../notebooks/{home}.ipynb)"


def render(data: dict) -> str:
    """The coverage page as MyST Markdown."""
    equations, figures, numbers = data["equations"], data["figures"], data["numbers"]
    lines = [
        "# Coverage of Chapter 7",
        "",
        "Every numbered equation, every figure and every number stated in Chapter 7 of the",
        "book, with the page that is its home here and the check that backs it. This page is",
        "generated from one data file, `book/coverage.yml`, and a test holds the chapters to",
        "it: each equation has exactly one tagged display, each figure its captioned",
        "counterpart, each number the code that recomputes it. The pages that go beyond the",
        "chapter are listed at the end.",
        "",
        f"## Equations ({len(equations)})",
        "",
        "| equation | what it says | home | implemented by | checked by |",
        "| --- | --- | --- | --- | --- |",
    ]
    for number, eq in equations.items():
        label = "eq-" + number.replace(".", "-")
        lines.append(f"| [({number})]({label}) | {_cell(eq['what'])} | {_page(eq['home'])} "
                     f"| {_code(eq['code'])} | {_code(eq['check'])} |")
    lines += ["", f"## Figures ({len(figures)})", "",
              "| figure | what it shows | home | drawn by |", "| --- | --- | --- | --- |"]
    for number, fig in figures.items():
        label = "fig-" + number.replace(".", "-")
        drawn = "the notebook, from a model" if fig["drawn_by"] == "notebook" \
            else f"`{fig['drawn_by']}`"
        lines.append(f"| [Fig. {number}]({label}) | {_cell(fig['what'])} | "
                     f"{_page(fig['home'])} | {drawn} |")
    lines += ["", f"## Stated numbers and worked examples ({len(numbers)})", "",
              "| section | value | what | home | checked by |", "| --- | --- | --- | --- | --- |"]
    for item in numbers:
        check = _code(item["check"]) if item["check"] else f"cited: {_cell(item.get('note', ''))}"
        lines.append(f"| {item['section']} | {_cell(item['value'])} | {_cell(item['what'])} | "
                     f"{_page(item['home'])} | {check} |")
    beyond = data["beyond"]
    lines += ["", f"## Beyond the chapter ({len(beyond)} pages)", "",
              "| page | where the chapter touches it | what the page adds |", "| --- | --- | --- |"]
    for home, page in beyond.items():
        lines.append(f"| {_page(home)} | {_cell(page['chapter'])} | {_cell(page['adds'])} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    PAGE.write_text(render(load()))
    print(f"wrote {PAGE.relative_to(BOOK.parent)}")
