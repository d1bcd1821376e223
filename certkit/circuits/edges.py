r"""Edge-level circuits of a transformer: edge attribution patching (EAP) and edge ablation.

A component is an **edge** of the model's computation graph: (upstream node, downstream input), e.g.
"head 0.2 feeds the value input of head 1.1".  `edge_scores` gives, for every example and every
edge, the attribution-patching estimate (Syed, Rager & Conmy, 2023) of how much the metric drops
when that edge alone carries the corrupted input's activation instead of the clean one:

$$
s_{u \to v}(x) = \big(a_u(x) - a_u(\tilde x)\big)^\top \frac{\partial m(x)}{\partial z_v},
$$

with $a_u$ the output of node $u$, $z_v$ the (summed) input of the downstream
input $v$, and $m$ the logit difference between the answer and a wrong answer.  The
score matrix is per example, so a `certkit.circuits.ScoreRule` over it is a decomposable
discovery rule and the edge circuit is certified by `certkit.circuits.certify_circuit` exactly
as neurons are.  `edge_faithfulness` and `edge_accuracy` evaluate a circuit by patching
every edge outside it.

The model is a `AttentionOnlyTransformer` (or any torch module with the same edge interface:
``edge_index``, ``input_names``, ``input_sizes``, ``vocab_size``, ``node_outputs(tokens)``,
``run(tokens, edge_mask, patch, record)`` and ``forward(tokens, edge_mask, patch)``).
torch is an optional dependency, imported inside the functions.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from certkit._validation import check_array, check_integer

__all__ = ["edge_accuracy", "edge_faithfulness", "edge_scores"]  # + AttentionOnlyTransformer (lazy)


def __getattr__(name: str) -> Any:
    if name == "AttentionOnlyTransformer":
        return _model_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _model_class() -> Any:
    from certkit._optional import require

    require("torch", extra="torch", purpose="certkit.circuits edge circuits")
    from certkit.circuits._attention import AttentionOnlyTransformer

    return AttentionOnlyTransformer


def _check_model(model: Any) -> Any:
    import torch

    for attr in ("edge_index", "input_names", "input_sizes", "vocab_size", "node_outputs", "run"):
        if not hasattr(model, attr):
            raise TypeError(
                f"model must be an AttentionOnlyTransformer (or expose the same edge interface); "
                f"{type(model).__name__} has no {attr!r}"
            )
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    return model


def _tokens(tokens: Any, name: str) -> Any:
    import torch

    if isinstance(tokens, torch.Tensor):
        if tokens.dtype not in (torch.int64, torch.int32):
            raise TypeError(f"{name} must hold integer token ids, got dtype {tokens.dtype}")
        return tokens.detach().long()
    arr = check_array(tokens, name, dtype=int, ndim=2)
    return torch.from_numpy(arr)


def _labels(values: Any, n: int, name: str, vocab: int) -> np.ndarray:
    arr = check_array(values, name, dtype=int, ndim=(0, 1))
    if arr.ndim == 0:
        arr = np.full(n, int(arr), dtype=np.int64)
    if arr.shape != (n,):
        raise ValueError(f"{name} must be an int or have shape ({n},), got shape {arr.shape}")
    if np.any((arr < 0) | (arr >= vocab)):
        raise ValueError(f"{name} must be token ids in [0, {vocab})")
    return arr


def _prepare(model: Any, tokens: Any, corrupted: Any, answer: Any, wrong: Any) -> tuple:
    model = _check_model(model)
    clean = _tokens(tokens, "tokens")
    corr = _tokens(corrupted, "corrupted")
    if clean.shape != corr.shape:
        raise ValueError(
            f"tokens and corrupted must have the same shape, got {tuple(clean.shape)} and {tuple(corr.shape)}"
        )
    if clean.shape[0] == 0:
        raise ValueError("tokens must contain at least one example")
    n = clean.shape[0]
    ans = _labels(answer, n, "answer", model.vocab_size)
    wrg = None if wrong is None else _labels(wrong, n, "wrong", model.vocab_size)
    return model, clean, corr, ans, wrg


def _metric(logits: Any, ans: Any, wrg: Any) -> Any:
    out = logits.gather(1, ans.reshape(-1, 1)).squeeze(1)
    if wrg is not None:
        out = out - logits.gather(1, wrg.reshape(-1, 1)).squeeze(1)
    return out


def edge_scores(
    model: Any,
    tokens: Any,
    corrupted: Any,
    *,
    answer: Any,
    wrong: Any = None,
    batch_size: int = 256,
) -> np.ndarray:
    r"""Per-example edge attribution patching (EAP) scores: a score matrix for `ScoreRule`.

    Parameters
    ----------
    model : AttentionOnlyTransformer
        Evaluated in eval mode (its mode is restored).
    tokens, corrupted : array-like of int or torch.Tensor, shape (n, n_positions)
        Clean prompts and their corrupted counterparts (same shape, row ``i`` paired with row ``i``).
    answer : int or array-like of int, shape (n,)
        The correct next token of each clean prompt.
    wrong : int or array-like of int, shape (n,), optional
        A wrong answer; the metric is then the logit difference ``answer - wrong`` (else the answer's
        logit).
    batch_size : int, default 256

    Returns
    -------
    numpy.ndarray of float64, shape (n, n_edges)
        Column ``e`` belongs to ``model.edge_names[e]``.  Positive: patching the edge is estimated to
        lower the metric (the edge supports the answer).
    """
    import torch

    model, clean, corr, ans, wrg = _prepare(model, tokens, corrupted, answer, wrong)
    batch_size = check_integer(batch_size, "batch_size", minimum=1)
    was_training = model.training
    model.eval()
    out = []
    try:
        for start in range(0, clean.shape[0], batch_size):
            sl = slice(start, start + batch_size)
            with torch.no_grad():
                a_corr = model.node_outputs(corr[sl])
            inputs: dict[str, Any] = {}
            with torch.enable_grad():
                logits, outs = model.run(clean[sl], record=inputs)
                _metric(
                    logits, torch.from_numpy(ans[sl]), None if wrg is None else torch.from_numpy(wrg[sl])
                ).sum().backward()
            diff = (torch.stack(outs, dim=1) - a_corr).detach().flatten(2)  # (b, nodes, T*d)
            cols = []
            for name in model.input_names:
                grad = inputs[name].grad.flatten(1)  # (b, T*d)
                cols.append(torch.einsum("bud,bd->bu", diff[:, : model.input_sizes[name]], grad))
            out.append(torch.cat(cols, dim=1))
    finally:
        model.zero_grad(set_to_none=True)
        model.train(was_training)
    return torch.cat(out).double().numpy()


def _circuit_metric(model: Any, edge_mask: Any, clean: Any, corr: Any, ans: Any, wrg: Any, bs: int):
    """Metric and arg-max prediction with the edges outside ``edge_mask`` patched (None: full model)."""
    import torch

    metric, pred = [], []
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            for start in range(0, clean.shape[0], bs):
                sl = slice(start, start + bs)
                if edge_mask is None:
                    logits = model(clean[sl])
                else:
                    logits = model(clean[sl], edge_mask=edge_mask, patch=model.node_outputs(corr[sl]))
                metric.append(
                    _metric(
                        logits, torch.from_numpy(ans[sl]), None if wrg is None else torch.from_numpy(wrg[sl])
                    )
                )
                pred.append(logits.argmax(dim=1))
    finally:
        model.train(was_training)
    return torch.cat(metric).double().numpy(), torch.cat(pred).numpy()


def _mask(edge_mask: Any, model: Any) -> np.ndarray:
    mask = check_array(edge_mask, "edge_mask", dtype=bool, ndim=1)
    if mask.size != len(model.edge_index):
        raise ValueError(f"edge_mask has {mask.size} entries but the model has {len(model.edge_index)} edges")
    return mask


def edge_faithfulness(
    model: Any,
    edge_mask: Any,
    tokens: Any,
    corrupted: Any,
    *,
    answer: Any,
    wrong: Any = None,
    batch_size: int = 256,
) -> float:
    r"""Normalised faithfulness of an edge circuit: the share of the metric it recovers.

    $F = (\bar m_C - \bar m_\emptyset) / (\bar m_{\text{full}} - \bar m_\emptyset)$, where
    $\bar m_C$ is the mean metric with every edge outside the circuit patched with the corrupted
    prompt's activations, $\bar m_\emptyset$ the same with every edge patched (the corrupted
    run) and $\bar m_{\text{full}}$ the clean model (Wang et al., 2023).  1: the circuit
    recovers the whole effect; 0: nothing; it can fall outside [0, 1].

    Parameters
    ----------
    model : AttentionOnlyTransformer
    edge_mask : array-like of bool, shape (n_edges,)
        The circuit.
    tokens, corrupted, answer, wrong, batch_size
        As in `edge_scores`.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        If the full and the fully patched model have the same mean metric (nothing to recover).
    """
    model, clean, corr, ans, wrg = _prepare(model, tokens, corrupted, answer, wrong)
    mask = _mask(edge_mask, model)
    bs = check_integer(batch_size, "batch_size", minimum=1)
    full = _circuit_metric(model, None, clean, corr, ans, wrg, bs)[0].mean()
    empty = _circuit_metric(model, np.zeros_like(mask), clean, corr, ans, wrg, bs)[0].mean()
    if full == empty:
        raise ValueError(
            "the clean and the corrupted prompts give the same mean metric; faithfulness is undefined"
        )
    circ = _circuit_metric(model, mask, clean, corr, ans, wrg, bs)[0].mean()
    return float((circ - empty) / (full - empty))


def edge_accuracy(
    model: Any,
    edge_mask: Any,
    tokens: Any,
    corrupted: Any,
    *,
    answer: Any,
    batch_size: int = 256,
) -> float:
    """Fraction of prompts whose arg-max next token is ``answer`` with the edges outside the circuit patched.

    Parameters are as in `edge_faithfulness`; an all-True mask gives the model's own accuracy.
    """
    model, clean, corr, ans, _ = _prepare(model, tokens, corrupted, answer, None)
    mask = _mask(edge_mask, model)
    bs = check_integer(batch_size, "batch_size", minimum=1)
    pred = _circuit_metric(model, mask, clean, corr, ans, None, bs)[1]
    return float(np.mean(pred == ans))
