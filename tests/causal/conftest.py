"""Fixtures of the causal tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def dispatch_every_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    """Send every batch of two or more fits to the executor, one fit per chunk: the test data are far too
    small to reach the work of a batch that goes there (``certkit.causal.batches``), and a
    test of the parallel path must run it."""
    from certkit.causal import batches

    monkeypatch.setattr(batches, "START_WORK", 0.0)
    monkeypatch.setattr(batches, "MIN_BATCH_WORK", 0.0)
    monkeypatch.setattr(batches, "CHUNK_WORK", 1e-9)
