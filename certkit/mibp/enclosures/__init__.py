"""Enclosures of one training step: interval arithmetic (``carry="box"``), the per-input zonotope
(``carry="affine"``) and the zonotope shared by every sample (``carry="shared"``), with the affine forms and
gradient-change bounds they share."""
