"""Tests of edge-level circuits: the edge graph, edge patching, EAP scores, and certification of edges."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from certkit.circuits import (  # noqa: E402
    AttentionOnlyTransformer,
    ScoreRule,
    certify_circuit,
    edge_accuracy,
    edge_faithfulness,
    edge_scores,
)


def model(seed=0, heads=2, layers=2):
    torch.manual_seed(seed)
    return AttentionOnlyTransformer(11, 5, d_model=12, n_heads=heads, n_layers=layers).double()


def batch(n=7, seed=1):
    g = torch.Generator().manual_seed(seed)
    tok = torch.randint(0, 11, (n, 5), generator=g)
    cor = torch.randint(0, 11, (n, 5), generator=g)
    ans = np.arange(n) % 11
    return tok, cor, ans, (ans + 3) % 11


def metric(m, logits, ans, wrong):
    idx = torch.arange(len(ans))
    return (logits[idx, torch.from_numpy(ans)] - logits[idx, torch.from_numpy(wrong)]).detach().numpy()


def test_edge_graph():
    for heads, layers in ((2, 2), (4, 2), (8, 2), (3, 3)):
        m = model(heads=heads, layers=layers)
        expected = sum(3 * heads * (1 + layer * heads) for layer in range(layers)) + 1 + layers * heads
        assert m.n_edges == expected == len(m.edge_names)
    assert model(heads=4).n_edges == 81 and model(heads=8).n_edges == 257
    m = model()
    assert m.edge_names[:4] == ("embed->L0H0.q", "embed->L0H0.k", "embed->L0H0.v", "embed->L0H1.q")
    assert m.edge_names[-1] == "L1H1->logits"
    assert "L0H1->L1H0.v" in m.edge_names and "L1H0->L1H1.q" not in m.edge_names
    assert sum(m.input_sizes.values()) == m.n_edges


def test_masks_all_and_none_give_clean_and_corrupted_runs():
    m = model()
    tok, cor, _, _ = batch()
    with torch.no_grad():
        patch = m.node_outputs(cor)
        clean, corrupt = m(tok), m(cor)
        np.testing.assert_allclose(m(tok, torch.ones(m.n_edges, dtype=torch.bool), patch), clean, atol=1e-12)
        np.testing.assert_allclose(
            m(tok, torch.zeros(m.n_edges, dtype=torch.bool), patch), corrupt, atol=1e-12
        )


def test_eap_is_exact_for_edges_into_the_logits():
    """The logits are linear in their input, so EAP equals the true drop when one such edge is patched."""
    m = model()
    tok, cor, ans, wrong = batch()
    scores = edge_scores(m, tok, cor, answer=ans, wrong=wrong)
    with torch.no_grad():
        patch = m.node_outputs(cor)
        base = metric(m, m(tok), ans, wrong)
        for e, name in enumerate(m.edge_names):
            if not name.endswith("->logits"):
                continue
            mask = torch.ones(m.n_edges, dtype=torch.bool)
            mask[e] = False
            drop = base - metric(m, m(tok, mask, patch), ans, wrong)
            np.testing.assert_allclose(scores[:, e], drop, rtol=1e-9, atol=1e-10)


def test_eap_equals_the_derivative_along_the_patch_for_every_edge():
    """EAP = -d/de m(edge input moved by e * (corrupted - clean)) at e = 0 (finite differences, float64)."""
    m = model(seed=3)
    tok, cor, ans, wrong = batch(seed=4)
    scores = edge_scores(m, tok, cor, answer=ans, wrong=wrong, batch_size=3)
    eps = 1e-6
    with torch.no_grad():
        clean_nodes, corr_nodes = m.node_outputs(tok), m.node_outputs(cor)
        base = metric(m, m(tok), ans, wrong)
        for e in range(m.n_edges):
            mask = torch.ones(m.n_edges, dtype=torch.bool)
            mask[e] = False
            moved = metric(m, m(tok, mask, clean_nodes + eps * (corr_nodes - clean_nodes)), ans, wrong)
            np.testing.assert_allclose(scores[:, e], (base - moved) / eps, rtol=1e-4, atol=1e-6)


def test_scores_do_not_depend_on_batching_and_answer_only_metric():
    m = model()
    tok, cor, ans, wrong = batch()
    np.testing.assert_allclose(
        edge_scores(m, tok, cor, answer=ans, wrong=wrong),
        edge_scores(m, tok.numpy(), cor.numpy(), answer=ans, wrong=wrong, batch_size=2),
        atol=1e-12,
    )
    # without wrong: the metric is the answer's logit; the difference of the two metrics' scores is the
    # score of the wrong answer's logit
    s_ans = edge_scores(m, tok, cor, answer=ans)
    s_wrong = edge_scores(m, tok, cor, answer=wrong)
    np.testing.assert_allclose(edge_scores(m, tok, cor, answer=ans, wrong=wrong), s_ans - s_wrong, atol=1e-10)
    assert m.training  # mode restored
    assert all(p.grad is None for p in m.parameters())


def test_faithfulness_and_accuracy():
    m = model()
    tok, cor, ans, wrong = batch()
    every, none = np.ones(m.n_edges, bool), np.zeros(m.n_edges, bool)
    assert edge_faithfulness(m, every, tok, cor, answer=ans, wrong=wrong) == pytest.approx(1.0, abs=1e-12)
    assert edge_faithfulness(m, none, tok, cor, answer=ans, wrong=wrong) == pytest.approx(0.0, abs=1e-12)
    # hand formula on a partial circuit
    mask = np.arange(m.n_edges) % 2 == 0
    with torch.no_grad():
        patch = m.node_outputs(cor)
        full = metric(m, m(tok), ans, wrong).mean()
        empty = metric(m, m(cor), ans, wrong).mean()
        circ = metric(m, m(tok, torch.from_numpy(mask), patch), ans, wrong).mean()
        pred = m(tok, torch.from_numpy(mask), patch).argmax(1).numpy()
    assert edge_faithfulness(m, mask, tok, cor, answer=ans, wrong=wrong) == pytest.approx(
        (circ - empty) / (full - empty), rel=1e-10
    )
    assert edge_accuracy(m, mask, tok, cor, answer=ans) == np.mean(pred == ans)


def test_edges_are_certified_like_neurons():
    m = model()
    tok, cor, ans, wrong = batch(n=40, seed=5)
    scores = edge_scores(m, tok, cor, answer=ans, wrong=wrong)
    rule = ScoreRule(scores, top_k=5)
    res = certify_circuit(rule, subsample_size=10, n_subsamples=300, radius=1, rng=0, progress=False)
    assert res.included.shape == (m.n_edges,)
    assert res.included.sum() <= 5

    # the black-box path (scores of the subset's prompts) gives the same votes as the ScoreRule path
    def discover(rows):
        return ScoreRule(scores[np.asarray(rows, dtype=int)], top_k=5).discover()

    bb = certify_circuit(
        discover, np.arange(40), subsample_size=10, n_subsamples=300, radius=1, rng=0, progress=False
    )
    np.testing.assert_array_equal(bb.included, res.included)
    np.testing.assert_array_equal(bb.certified_radius, res.certified_radius)


def test_bad_input():
    m = model()
    tok, cor, ans, wrong = batch()
    with pytest.raises(ValueError, match="same shape"):
        edge_scores(m, tok, cor[:3], answer=ans)
    with pytest.raises(ValueError, match=r"answer must be token ids in \[0, 11\)"):
        edge_scores(m, tok, cor, answer=np.full(7, 11))
    with pytest.raises(ValueError, match="answer must be an int or have shape"):
        edge_scores(m, tok, cor, answer=ans[:3])
    with pytest.raises(TypeError, match="integer token ids"):
        edge_scores(m, tok.double(), cor, answer=ans)
    with pytest.raises(TypeError, match="AttentionOnlyTransformer"):
        edge_scores(torch.nn.Linear(2, 2), tok, cor, answer=ans)
    with pytest.raises(ValueError, match="edge_mask has 3 entries"):
        edge_faithfulness(m, np.ones(3, bool), tok, cor, answer=ans, wrong=wrong)
    with pytest.raises(ValueError, match="tokens must have shape"):
        m(torch.zeros((2, 4), dtype=torch.long))
    with pytest.raises(ValueError, match="n_heads must be a positive int"):
        AttentionOnlyTransformer(5, 3, n_heads=0)
    with pytest.raises(ValueError, match="same mean metric"):
        edge_faithfulness(m, np.ones(m.n_edges, bool), tok, tok, answer=ans, wrong=wrong)
