"""seqlib.experiments.pretraining: the biLM and its layer mix, BERT's masking and loss,
transfer models."""

import pytest
import torch

from seqlib.experiments import pretraining as pretrain
from seqlib.text import pad_batch

V = 30
SENTENCES = [[4, 5, 6, 7, 8], [9, 10], [11, 12, 13]]


def small_bilm(layers=2):
    torch.manual_seed(0)
    return pretrain.BiLM(V, 8, layers, output_size=20).eval()


def test_bilm_shapes_and_layers():
    bilm = small_bilm()
    ids, mask = pad_batch(SENTENCES)
    logits_f, logits_b = bilm(ids, mask)
    assert logits_f.shape == logits_b.shape == (3, 5, 20)
    layers = bilm.layers(ids, mask)
    assert layers.shape == (3, 3, 5, 16)  # (B, L + 1, T, 2p)
    x = bilm.embedding(ids)
    assert torch.equal(layers[:, 0], torch.cat([x, x], -1))  # layer 0: [x; x]


def test_padding_changes_no_output():
    bilm, encoder = small_bilm(), None
    encoder = pretrain.ELMoEncoder(bilm).eval()
    torch.manual_seed(1)
    mlm = pretrain.MaskedLM(V, 8, 2, n1=16).eval()
    ids, mask = pad_batch(SENTENCES)
    with torch.no_grad():
        for b, s in enumerate(SENTENCES):
            alone, one = pad_batch([s])
            n = len(s)
            assert torch.allclose(bilm.layers(ids, mask)[b, :, :n],
                                  bilm.layers(alone, one)[0], atol=1e-6)
            assert torch.allclose(encoder(ids, mask)[b], encoder(alone, one)[0], atol=1e-6)
            assert torch.allclose(mlm(ids, mask)[b, :n], mlm(alone, one)[0], atol=1e-5)


def test_backward_lm_reads_only_later_words():
    bilm = small_bilm(1)
    ids, mask = pad_batch([[4, 5, 6, 7]])
    changed = ids.clone()
    changed[0, 0] = 9  # the first word
    _, backward = bilm.states(ids, mask)[1:]
    _, backward2 = bilm.states(changed, mask)[1:]
    assert torch.allclose(backward[0][0, 1:], backward2[0][0, 1:])  # positions 2.. unchanged
    assert not torch.allclose(backward[0][0, 0], backward2[0][0, 0])


def test_lm_targets():
    ids, mask = pad_batch([[4, 25, 6], [7]])
    forward, backward = pretrain.lm_targets(ids, mask, 20)
    assert forward.tolist() == [[1, 6, -100], [-100, -100, -100]]
    assert backward.tolist() == [[-100, 4, 1], [-100, -100, -100]]


def test_scalar_mix_weights_sum_to_one_and_mix():
    mix = pretrain.ScalarMix(3)
    with torch.no_grad():
        mix.w.copy_(torch.tensor([0.5, -1.0, 2.0]))
        mix.gamma.fill_(2.0)
    assert torch.isclose(mix.s.sum(), torch.tensor(1.0)) and (mix.s > 0).all()
    layers = torch.randn(2, 3, 4, 5)
    expected = 2.0 * sum(mix.s[j] * layers[:, j] for j in range(3))
    assert torch.allclose(mix(layers), expected, atol=1e-6)
    with pytest.raises(ValueError, match=r"layers must be \(B, 3, T, d\)"):
        mix(torch.randn(2, 2, 4, 5))


def test_masking_statistics():
    g = torch.Generator().manual_seed(0)
    ids, mask = pad_batch([list(range(4, 4 + n)) for n in range(5, 26)] * 200)
    inputs, targets = pretrain.mask_tokens(ids, mask, V, V, generator=g)
    chosen = targets != pretrain.IGNORE
    assert not (chosen & ~mask).any()  # padding is never chosen
    assert abs(chosen.sum() / mask.sum() - 0.15) < 0.005
    shown_mask = (inputs == V)[chosen].double().mean()
    kept = (inputs == ids)[chosen].double().mean()
    random = ((inputs != ids) & (inputs != V))[chosen]
    assert abs(shown_mask - 0.8) < 0.01 and abs(kept - 0.1 - 0.1 / (V - 4)) < 0.01
    assert abs(random.double().mean() - 0.1) < 0.01
    replaced = inputs[chosen][random]
    assert (replaced >= 4).all() and (replaced < V).all()  # real words, never specials
    assert torch.equal(targets[chosen], ids[chosen]) and torch.equal(inputs[~chosen], ids[~chosen])


def test_mlm_loss_counts_only_the_chosen_positions():
    torch.manual_seed(0)
    mlm = pretrain.MaskedLM(V, 8, 2, n1=16)
    ids, mask = pad_batch(SENTENCES)
    targets = torch.full_like(ids, pretrain.IGNORE)
    targets[0, 1], targets[2, 0] = 5, 11
    inputs = ids.masked_fill(targets != pretrain.IGNORE, mlm.mask_id)
    logits = mlm(inputs, mask)
    expected = torch.nn.functional.cross_entropy(logits[[0, 2], [1, 0]], torch.tensor([5, 11]))
    assert torch.allclose(pretrain.mlm_loss(mlm, inputs, targets, mask), expected)
    with pytest.raises(ValueError, match="no position is chosen"):
        pretrain.mlm_loss(mlm, inputs, torch.full_like(ids, pretrain.IGNORE), mask)


def test_transfer_model_regimes():
    bilm = small_bilm(1)
    frozen = pretrain.transfer_model(bilm, "frozen")
    trainable = {n for n, p in frozen.named_parameters() if p.requires_grad}
    assert trainable == {"encoder.mix.w", "encoder.mix.gamma", "head.weight", "head.bias"}
    tuned = pretrain.transfer_model(bilm, "fine-tuned")
    assert all(p.requires_grad for p in tuned.parameters())
    assert all(p.requires_grad for p in bilm.parameters())  # the original is left alone
    ids, mask = pad_batch(SENTENCES)
    assert tuned(ids, mask).shape == (3, 2)
    torch.manual_seed(0)
    mlm_classifier = pretrain.transfer_model(pretrain.MaskedLM(V, 8, 2, n1=16), "frozen")
    assert mlm_classifier(ids, mask).shape == (3, 2)


def test_bad_input_raises_a_clear_error():
    bilm = small_bilm(1)
    ids, mask = pad_batch(SENTENCES)
    with pytest.raises(ValueError, match=r"must lie in \[0, 30\)"):
        bilm(ids + 30, mask)
    with pytest.raises(TypeError, match="src_mask must be a bool tensor"):
        bilm(ids, mask.int())
    with pytest.raises(ValueError, match="output_size must lie in"):
        pretrain.BiLM(V, 8, output_size=V + 1)
    with pytest.raises(ValueError, match="rate must lie strictly between 0 and 1"):
        pretrain.mask_tokens(ids, mask, V, V, generator=torch.Generator(), rate=1.5)
    with pytest.raises(ValueError, match="regime must be one of"):
        pretrain.transfer_model(bilm, "partly")
    with pytest.raises(TypeError, match="base must be a BiLM or a MaskedLM"):
        pretrain.transfer_model(torch.nn.Linear(2, 2), "frozen")
    with pytest.raises(TypeError, match="bilm must be a BiLM"):
        pretrain.ELMoEncoder(torch.nn.Linear(2, 2))


def test_a_pretraining_run_is_seeded_and_checks_its_fit():
    """pretrain.run: the same history twice (the masks from the run's generator, dropout,
    if any, from its seed), the biLM's two directions kept; a misspelt setting is an error."""
    from seqlib.experiments import runs

    fit = dict(steps=4, batch_size=2, lr=1e-2)
    histories = [runs.fit(pretrain.run(name, model, SENTENCES * 4, fit))
                 for name, model in [("bilm", small_bilm()), ("bilm", small_bilm())]]
    first, second = ({k: v for k, v in h.items() if k != "seconds"} for h in histories)
    assert first == second and len(first["forward"]) == 4
    torch.manual_seed(0)
    long = [[4 + (k + i) % 20 for i in range(30)] for k in range(6)]  # some words masked
    masked = pretrain.run("mlm", pretrain.MaskedLM(V, 8, 2, n1=16), long, fit)
    assert masked.fit == fit | {"clip": 1.0, "seed": 0} and len(runs.fit(masked)["loss"]) == 4
    with pytest.raises(ValueError, match=r"config has the keys \['step'\]"):
        pretrain.run("bilm", small_bilm(), SENTENCES, fit | {"step": 3})
    with pytest.raises(TypeError, match="model must be a BiLM or a MaskedLM"):
        pretrain.run("bilm", torch.nn.Linear(2, 2), SENTENCES, fit)
