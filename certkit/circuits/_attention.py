"""A small attention-only transformer whose computation graph is explicit, edge by edge (torch).

Imported lazily by `certkit.circuits.edges` (torch is optional).
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

__all__ = ["AttentionOnlyTransformer"]

CHANNELS = ("q", "k", "v")


class AttentionOnlyTransformer(nn.Module):
    r"""Attention-only transformer (no MLPs, no layer norm) with every edge of its graph exposed.

    Nodes: the embedding (token + position), every attention head, and the logits.  The residual
    stream read by a node is the sum of the outputs of all earlier nodes, so the model is a graph
    whose **edges** are (upstream node, downstream input): ``embed`` and each head of layer
    $\ell' < \ell$ feed the query, key and value inputs of each head of layer $\ell$
    separately, and every node feeds the logits.  With $H$ heads and $L$ layers there are
    $\sum_\ell 3H (1 + \ell H) + 1 + LH$ edges (81 for L = 2, H = 4; 257 for H = 8).

    ``forward(tokens, edge_mask=None, patch=None)`` returns the logits at the last position; an edge
    with ``edge_mask[e] = False`` carries the node output of ``patch`` (the node outputs of another
    input, from `node_outputs`) instead of the clean one: the usual edge ablation of circuit
    discovery (activation patching of a single edge).

    Parameters
    ----------
    vocab_size : int
    n_positions : int
        Sequence length (tokens are ``(batch, n_positions)`` integer tensors).
    d_model : int, default 64
    n_heads : int, default 4
    n_layers : int, default 2
    d_head : int, optional
        Default ``d_model // n_heads``.
    """

    def __init__(
        self,
        vocab_size: int,
        n_positions: int,
        *,
        d_model: int = 64,
        n_heads: int = 4,
        n_layers: int = 2,
        d_head: int | None = None,
    ) -> None:
        super().__init__()
        for name, value in (
            ("vocab_size", vocab_size),
            ("n_positions", n_positions),
            ("d_model", d_model),
            ("n_heads", n_heads),
            ("n_layers", n_layers),
        ):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        d_head = d_model // n_heads if d_head is None else d_head
        if not isinstance(d_head, int) or d_head < 1:
            raise ValueError(f"d_head must be a positive int, got {d_head!r}")
        self.vocab_size, self.n_positions = vocab_size, n_positions
        self.d_model, self.n_heads, self.n_layers, self.d_head = d_model, n_heads, n_layers, d_head
        self.embed = nn.Embedding(vocab_size, d_model)
        self.pos = nn.Parameter(torch.randn(n_positions, d_model) / math.sqrt(d_model))
        scale = 1.0 / math.sqrt(d_model)
        self.W_Q = nn.Parameter(torch.randn(n_layers, n_heads, d_model, d_head) * scale)
        self.W_K = nn.Parameter(torch.randn(n_layers, n_heads, d_model, d_head) * scale)
        self.W_V = nn.Parameter(torch.randn(n_layers, n_heads, d_model, d_head) * scale)
        self.W_O = nn.Parameter(torch.randn(n_layers, n_heads, d_head, d_model) / math.sqrt(d_head))
        self.unembed = nn.Linear(d_model, vocab_size)
        self.register_buffer("causal", torch.tril(torch.ones(n_positions, n_positions, dtype=torch.bool)))
        heads = tuple(f"L{layer}H{h}" for layer in range(n_layers) for h in range(n_heads))
        self.node_names = ("embed", *heads)
        edges = []
        for layer in range(n_layers):
            n_up = 1 + layer * n_heads
            for h in range(n_heads):
                for ch in CHANNELS:
                    edges.extend((u, f"L{layer}H{h}.{ch}") for u in range(n_up))
        edges.extend((u, "logits") for u in range(len(self.node_names)))
        #: (upstream node index, downstream input name) of every edge, in edge order.
        self.edge_index = tuple(edges)
        #: ``"<upstream>-><downstream input>"`` of every edge.
        self.edge_names = tuple(f"{self.node_names[u]}->{v}" for u, v in edges)
        sizes = {
            f"L{layer}H{h}.{ch}": 1 + layer * n_heads
            for layer in range(n_layers)
            for h in range(n_heads)
            for ch in CHANNELS
        }
        sizes["logits"] = len(self.node_names)
        #: Downstream inputs in edge order; input ``v`` reads the first ``input_sizes[v]`` nodes.
        self.input_names = tuple(sizes)
        self.input_sizes = sizes
        starts, pos = {}, 0
        for name, size in sizes.items():
            starts[name] = pos
            pos += size
        self._starts = starts

    @property
    def n_edges(self) -> int:
        """Number of edges."""
        return len(self.edge_index)

    def _check_tokens(self, tokens: Any) -> Any:
        if not isinstance(tokens, torch.Tensor) or tokens.dtype not in (torch.int64, torch.int32):
            raise TypeError("tokens must be an integer torch.Tensor of shape (batch, n_positions)")
        if tokens.ndim != 2 or tokens.shape[1] != self.n_positions:
            raise ValueError(f"tokens must have shape (batch, {self.n_positions}), got {tuple(tokens.shape)}")
        if tokens.numel() and (int(tokens.min()) < 0 or int(tokens.max()) >= self.vocab_size):
            raise ValueError(f"tokens must lie in [0, {self.vocab_size})")
        return tokens.long()

    def _read(self, name: str, outs: list[Any], mask: Any, patch: Any) -> Any:
        """Input of the downstream ``name``: sum of upstream outputs, patched on masked-out edges."""
        stacked = torch.stack(outs, dim=1)  # (batch, n_up, T, d)
        if mask is None:
            return stacked.sum(dim=1)
        start = self._starts[name]
        keep = mask[start : start + len(outs)].to(stacked.dtype).reshape(1, -1, 1, 1)
        return (keep * stacked + (1 - keep) * patch[:, : len(outs)]).sum(dim=1)

    def run(
        self, tokens: Any, edge_mask: Any = None, patch: Any = None, record: dict | None = None
    ) -> tuple[Any, list[Any]]:
        """Logits at the last position and the list of node outputs.

        With ``record`` (a dict), the summed input of every downstream input is stored in it under its
        name, with ``retain_grad()`` so that its gradient is available after a backward pass.
        """
        tokens = self._check_tokens(tokens)
        if edge_mask is not None:
            edge_mask = torch.as_tensor(edge_mask, dtype=torch.bool, device=tokens.device)
            if edge_mask.shape != (self.n_edges,):
                raise ValueError(f"edge_mask must have shape ({self.n_edges},), got {tuple(edge_mask.shape)}")
            if patch is None:
                raise ValueError("edge_mask needs patch (the node outputs of the corrupted input)")
        if patch is not None and patch.shape[:2] != (tokens.shape[0], len(self.node_names)):
            raise ValueError("patch must come from node_outputs of a batch of the same size")
        T = self.n_positions
        outs = [self.embed(tokens) + self.pos]
        for layer in range(self.n_layers):
            new = []
            for h in range(self.n_heads):
                x = {}
                for ch in CHANNELS:
                    name = f"L{layer}H{h}.{ch}"
                    x[ch] = self._read(name, outs, edge_mask, patch)
                    if record is not None:
                        x[ch].retain_grad()
                        record[name] = x[ch]
                q = x["q"] @ self.W_Q[layer, h]
                k = x["k"] @ self.W_K[layer, h]
                v = x["v"] @ self.W_V[layer, h]
                att = (q @ k.transpose(1, 2)) / math.sqrt(self.d_head)
                att = att.masked_fill(~self.causal[:T, :T], float("-inf")).softmax(dim=-1)
                new.append(att @ v @ self.W_O[layer, h])
            outs.extend(new)
        final = self._read("logits", outs, edge_mask, patch)
        if record is not None:
            final.retain_grad()
            record["logits"] = final
        return self.unembed(final[:, -1]), outs

    def forward(self, tokens: Any, edge_mask: Any = None, patch: Any = None) -> Any:
        """Logits at the last position, shape (batch, vocab_size)."""
        return self.run(tokens, edge_mask, patch)[0]

    def node_outputs(self, tokens: Any) -> Any:
        """Outputs of every node (embed, then heads layer by layer): shape (batch, n_nodes, T, d_model)."""
        return torch.stack(self.run(tokens)[1], dim=1)
