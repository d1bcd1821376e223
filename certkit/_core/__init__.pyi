"""Type stubs of the compiled module `certkit._core` (built from `csrc/`).

One submodule per domain, each registered by `register_<domain>` in `csrc/<domain>.cpp`:

| submodule | kernels |
|---|---|
| `certkit._core.mixreg` | EM for mixtures of linear regressions; joint EM of one latent over several nodes |
| `certkit._core.rng` | `random_uint64`: raw draws of the counter-based generator |
| `certkit._core.subsample` | `indices`, `deletion_masks`: the subsamples of the subsampling certificates |
| `certkit._core.votes` | `subsample`, `partition`: inclusion votes of a score rule over subsamples / parts |

Every kernel is deterministic: subsample `b` uses the counter-based generator keyed by `(seed, stream=b)` (see
`csrc/rng.hpp`), so results never depend on `n_threads`.  The kernels validate their own arguments and raise
`ValueError` naming the argument; public certkit functions validate first and call these with keyword
arguments named as in Python.
"""

from certkit._core import mixreg as mixreg
from certkit._core import rng as rng
from certkit._core import subsample as subsample
from certkit._core import votes as votes
