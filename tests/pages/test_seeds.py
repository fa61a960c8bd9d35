"""The book's seeding rule (seqlib.pages.seeds): seeded draws, and SEQLIB_SEED offsetting every
seed."""

import pytest
import torch

from seqlib.pages import seeds


def test_seed_everything_returns_a_reproducible_cpu_generator():
    a = torch.randn(5, generator=seeds.seed_everything(7))
    b = torch.randn(5, generator=seeds.seed_everything(7))
    assert torch.equal(a, b)
    assert torch.are_deterministic_algorithms_enabled()
    with pytest.raises(TypeError, match="seed must be an int"):
        seeds.seed_everything(1.5)


def test_seqlib_seed_offsets_every_seed(monkeypatch):
    monkeypatch.delenv("SEQLIB_SEED", raising=False)
    assert seeds.book_seed(7) == 7
    zero = torch.randn(5, generator=seeds.generator(7))
    assert torch.equal(zero, torch.randn(5, generator=torch.Generator().manual_seed(7)))
    monkeypatch.setenv("SEQLIB_SEED", "2")
    assert seeds.book_seed(7) == 9
    assert torch.equal(torch.randn(5, generator=seeds.generator(7)),
                       torch.randn(5, generator=torch.Generator().manual_seed(9)))
    seeds.seed_everything(7)
    assert torch.equal(torch.randn(5), torch.randn(5, generator=torch.Generator().manual_seed(9)))
    for bad in ["-1", "one", "1.5"]:
        monkeypatch.setenv("SEQLIB_SEED", bad)
        with pytest.raises(ValueError, match=f"SEQLIB_SEED='{bad}' is not a seed offset"):
            seeds.generator(0)
