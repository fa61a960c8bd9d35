"""The bibliography parses, and every citation of the book names one of its entries."""

import json
import re
from pathlib import Path

from pybtex.database import parse_file

ROOT = Path(__file__).resolve().parents[2]
CITE = re.compile(r"\{cite:[a-z]+\}`([^`]+)`")


def test_every_cited_key_is_in_the_bibliography():
    entries = parse_file(ROOT / "book" / "references.bib", bib_format="bibtex").entries
    texts = [p.read_text() for p in (ROOT / "book").glob("*.md")]
    for path in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"):
        texts += ["".join(c["source"]) for c in json.loads(path.read_text())["cells"]
                  if c["cell_type"] == "markdown"]
    cited = {key.strip() for text in texts for keys in CITE.findall(text)
             for key in keys.split(",")}
    assert cited, "no citations found"
    assert cited <= set(entries), f"cited but not in references.bib: {sorted(cited - set(entries))}"
