"""seqlib.pages.claims.claim, the one way a page states a claim about a trained model: its
message when it fails, its checks, and the line it logs for the ledger of runs."""

import json
import math

import pytest
import torch

from seqlib.pages.claims import claim


def test_a_claim_that_holds_returns_nothing(monkeypatch):
    monkeypatch.delenv("SEQLIB_CLAIMS", raising=False)
    assert claim("stack ahead", torch.tensor(0.25), "the stack ahead of both") is None


@pytest.mark.parametrize("margin", [-0.012, 0.0, math.nan])
def test_a_failing_claim_names_itself_what_it_expected_and_what_came_out(margin, monkeypatch):
    monkeypatch.delenv("SEQLIB_CLAIMS", raising=False)
    with pytest.raises(AssertionError) as raised:
        claim("stack ahead", margin, "the stack's accuracy above the better of the two",
              stack=0.781, best=0.793)
    message = str(raised.value)
    assert message.startswith("claim 'stack ahead' does not hold: expected the stack's "
                              "accuracy above the better of the two; measured stack = 0.781; "
                              "best = 0.793; margin ")
    assert "(it holds when positive)" in message


def test_a_claim_checks_its_arguments():
    with pytest.raises(TypeError, match="name must be a non-empty str, got 3"):
        claim(3, 1.0, "x")
    with pytest.raises(TypeError, match="says must be a non-empty str"):
        claim("a", 1.0, "")
    with pytest.raises(TypeError, match="margin must be a real number, got str '1'"):
        claim("a", "1", "x")
    with pytest.raises(TypeError, match="margin must be a real number, got Tensor"):
        claim("a", torch.ones(2), "x")


def test_a_run_of_the_ledger_logs_every_claim_and_says_which_failed(tmp_path, monkeypatch,
                                                                     capsys):
    log = tmp_path / "claims.jsonl"
    monkeypatch.setenv("SEQLIB_CLAIMS", str(log))
    claim("first", 0.5, "a positive margin", values=torch.tensor([1.0, 2.0]), n=3)
    claim("second", -1.0, "a negative one", best={"rnn": 1.5})  # logged, said, not raised
    assert capsys.readouterr().err == ("claim 'second' does not hold: expected a negative "
                                       "one; measured best = {rnn: 1.5}; margin -1 (it "
                                       "holds when positive)\n")
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert lines == [
        {"claim": "first", "margin": 0.5, "says": "a positive margin",
         "measured": {"values": [1.0, 2.0], "n": 3}},
        {"claim": "second", "margin": -1.0, "says": "a negative one",
         "measured": {"best": {"rnn": 1.5}}}]
