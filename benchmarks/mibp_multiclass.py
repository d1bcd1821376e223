"""Multi-class label flips, certkit against Abstract Gradient Training (AGT): accuracy, CPU time, memory.

Side by side: certified test accuracy under ``LabelFlips(k)``, CPU time and peak memory of AGT, certkit's box
carry (``carry="box"``) and certkit's default call (``carry="auto"``: the influence enclosure for a linear
model, the box carry otherwise), each method in a fresh process.

Runs (cross-entropy, constant rate, batches in a fixed order without shuffling; every network from
PyTorch's default initialisation after ``torch.manual_seed(0)``, the same weights, data and batch order for
both tools):

* ``1``-``4``: ``certkit.datasets.load_digits()`` (pixels in [0, 1]), shuffled once (seed 0) and split
  1,400 / 397; ``1`` linear [64, 10], full batch, rate 1.0, 2 epochs; ``2`` the same for 5 epochs
  (``2b``: rate 0.8, 12 epochs); ``3``
  [64, 64, 10], full batch, rate 0.5, 5 epochs; ``4`` [64, 64, 10], batches of 100, rate 0.5, 2 epochs;
  ``4b`` [64, 32, 10], batches of 100, rate 0.1, 3 epochs.
* ``5a``, ``5b``: a 10-class head behind the frozen convolutions of a CNN (``benchmarks/_mibp_protocols.py``'s
  ``cnn(10)``: three convolutions, Flatten, a [64, 32, 10] dense head) trained here on the 1,400 training
  images (Adam, rate 0.01, 30 epochs, batches of 100, one thread; about 0.98 test accuracy), its last
  convolution then divided by the training features' RMS norm over the pixels' (about 12; the next layer
  multiplied by it, so the network computes the same function), so that the 64 features have the pixels'
  scale; ``features=frozen`` (the convolutions and Flatten) for certkit,
  ``IntervalBoundedModel(head, transform=frozen)`` for AGT.  ``5a``: a new linear head [64, 10] (PyTorch's
  initialisation), full batch, rate 1.0, 5 epochs; ``5b``: the CNN's trained dense head [64, 32, 10]
  fine-tuned from its trained weights, full batch, rate 0.1, 2 epochs.
* ``6a``, ``6b``: 50,000 synthetic rows x 30 features, 10 Gaussian classes (5,000 test rows), batches of 500,
  rate 0.1, 3 epochs (300 steps), ``LabelFlips(10)``: [30, 64, 10] (``6a``) and linear [30, 10] (``6b``).
  When a certkit process fails on them (memory, time), that method is run again on the first 10,000 and
  5,000 training rows (same recipe) and its peak memory and time there are printed.

Budgets: AGT's ``label_k_poison=k`` (at most k changed labels in every batch) against
``LabelFlips(k, scope="batch")`` (the same definition) and ``LabelFlips(k, scope="run")`` (at most k in the
whole training set, which AGT cannot express; with the full batch both scopes are the same).  Certified
accuracy: the share of test rows whose prediction is correct for every model the budget allows (AGT: for
every parameter of its final box).

Attack bound (runs 1-5, ``--no-attack`` skips it): after the default call's run and outside its CPU time and
memory, `certkit.mibp.certification.attack.attack_label_flips` changes the labels that first-order
influence says move each test point's two closest margins most, and re-trains; the share of test rows that
are correct and not changed is an upper bound on the certified accuracy of every sound method.

Each (method, k) runs in a fresh interpreter with one BLAS / OpenMP / torch thread.  CPU: the process time
(``time.process_time``) of training and certification; peak memory: the process's ``ru_maxrss`` (imports
included, for both tools).  A process that fails, runs out of memory (``--max-memory-gb``, a data-segment
limit on every process) or time (``--timeout``) is reported with the peak memory and CPU time it reached.
AGT (GPL-3) runs from the user's checkout in its own environment through ``benchmarks/agt_peer.py
--multiclass`` (nothing of it is copied here)::

    python benchmarks/mibp_multiclass.py --agt-path ~/agt --agt-python ~/agt-venv/bin/python
    python benchmarks/mibp_multiclass.py --quick                  # runs 1-4 at k = 1
    python benchmarks/mibp_multiclass.py --only 5,6b --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _mibp_protocols import FROZEN, cnn, dense, multiclass_modules  # noqa: E402
from mibp_scale import ONE_THREAD, _gb, _ratio  # noqa: E402

from certkit._results import format_table  # noqa: E402

N_TRAIN_DIGITS = 1_400
N_TRAIN_BLOBS, N_TEST_BLOBS = 50_000, 5_000
KS = (1, 5, 10)

#: The runs: data set, network widths, batch size (None: full batch), constant rate, epochs, budgets.
RUNS: dict[str, dict] = {
    "1": dict(data="digits", sizes=[64, 10], batch=None, lr=1.0, epochs=2, ks=KS),
    "2": dict(data="digits", sizes=[64, 10], batch=None, lr=1.0, epochs=5, ks=KS),
    "2b": dict(data="digits", sizes=[64, 10], batch=None, lr=0.8, epochs=12, ks=KS),
    "3": dict(data="digits", sizes=[64, 64, 10], batch=None, lr=0.5, epochs=5, ks=KS),
    "4": dict(data="digits", sizes=[64, 64, 10], batch=100, lr=0.5, epochs=2, ks=(1, 5)),
    "4b": dict(data="digits", sizes=[64, 32, 10], batch=100, lr=0.1, epochs=3, ks=(1, 5)),
    "5a": dict(data="digits-cnn", sizes=[64, 10], batch=None, lr=1.0, epochs=5, ks=KS),
    "5b": dict(data="digits-cnn", sizes=[64, 32, 10], batch=None, lr=0.1, epochs=2, ks=KS, trained=True),
    "6a": dict(data="blobs", sizes=[30, 64, 10], batch=500, lr=0.1, epochs=3, ks=(10,)),
    "6b": dict(data="blobs", sizes=[30, 10], batch=500, lr=0.1, epochs=3, ks=(10,)),
}
QUICK = ("1", "2", "3", "4")
#: Training rows of the smaller runs made when a certkit process fails on the 50,000 rows of run 6.
FALLBACK_ROWS = (10_000, 5_000)
#: certkit's methods: (carry, scope of the budget).
METHODS = (("box", "batch"), ("box", "run"), ("auto", "batch"), ("auto", "run"))


def describe(name: str) -> str:
    spec = RUNS[name]
    data = {
        "digits": "digits",
        "digits-cnn": "digits behind the frozen CNN",
        "blobs": f"{N_TRAIN_BLOBS:,} blobs x 30",
    }[spec["data"]]
    kind = "linear " if len(spec["sizes"]) == 2 else ("trained " if spec.get("trained") else "")
    batch = "full batch" if spec["batch"] is None else f"batches of {spec['batch']}"
    return f"run {name}: {data}, {kind}{spec['sizes']}, {batch}, lr {spec['lr']}, {spec['epochs']} epochs"


# --------------------------------------------------------------------------------------------------- data


def digits_split() -> dict[str, np.ndarray]:
    """certkit's digits (pixels in [0, 1]) shuffled once (seed 0), 1,400 training rows, 397 test rows."""
    from certkit.datasets import load_digits

    ds = load_digits()
    order = np.random.default_rng(0).permutation(len(ds.y))
    X, y = ds.X[order], np.asarray(ds.y, dtype=np.int64)[order]
    m = N_TRAIN_DIGITS
    return {"X_train": X[:m], "y_train": y[:m], "X_test": X[m:], "y_test": y[m:]}


def blobs(seed: int = 0) -> dict[str, np.ndarray]:
    """10 Gaussian classes in 30 dimensions (unit noise, class means of scale 0.6 per coordinate)."""
    gen = np.random.default_rng(seed)
    n = N_TRAIN_BLOBS + N_TEST_BLOBS
    means = gen.normal(size=(10, 30)) * 0.6
    y = gen.integers(0, 10, size=n)
    X = means[y] + gen.normal(size=(n, 30))
    m = N_TRAIN_BLOBS
    return {"X_train": X[:m], "y_train": y[:m], "X_test": X[m:], "y_test": y[m:]}


def pretrain_cnn(D: dict[str, np.ndarray]) -> tuple[dict, float]:
    """The 10-class CNN trained on the training images (Adam, rate 0.01, 30 epochs, batches of 100, one
    thread, seed 0), its last convolution divided by ``s`` and the next layer's weights multiplied by ``s``
    (the same function; ``s`` the RMS norm of the training rows' features over that of their pixels): its
    state dict and its test accuracy."""
    import torch

    torch.set_num_threads(1)
    model = cnn(10)
    X, y = torch.from_numpy(D["X_train"]), torch.from_numpy(D["y_train"])
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    gen = torch.Generator().manual_seed(0)
    for _ in range(30):
        for rows in torch.randperm(len(X), generator=gen).split(100):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(X[rows]), y[rows]).backward()
            opt.step()
    model.eval()
    with torch.no_grad():
        features = model[:FROZEN](X)
        s = float(torch.sqrt((features**2).sum(1).mean() / (X**2).sum((1, 2, 3)).mean()))
        model[FROZEN - 3].weight /= s
        model[FROZEN - 3].bias /= s
        model[FROZEN].weight *= s
        accuracy = float((model(torch.from_numpy(D["X_test"])).argmax(1).numpy() == D["y_test"]).mean())
    return {k: v.detach().numpy() for k, v in model.state_dict().items()}, accuracy


def prepare(name: str, folder: Path, cache: dict, rows: int | None = None) -> Path:
    """Write the run's data (``.npz``; its first ``rows`` training rows if given), initial weights (``.npz``)
    and recipe (``.json``, read by both tools' processes) into ``folder``; returns the recipe's path."""
    import torch

    spec = RUNS[name]
    kind = spec["data"]
    if rows is not None:
        prepare(name, folder, cache)
        D = dict(np.load(folder / f"{kind}.npz"))
        D["X_train"], D["y_train"] = D["X_train"][:rows], D["y_train"][:rows]
        np.savez(folder / f"{kind}-{rows}.npz", **D)
        out = json.loads((folder / f"run-{name}.json").read_text())
        out["data"] = str(folder / f"{kind}-{rows}.npz")
        path = folder / f"run-{name}-{rows}.json"
        path.write_text(json.dumps(out))
        return path
    if kind not in cache:
        D = blobs() if kind == "blobs" else digits_split()
        if kind == "digits-cnn":
            D = {k: v.reshape(-1, 1, 8, 8) if k.startswith("X") else v for k, v in D.items()}
            state, accuracy = pretrain_cnn(D)
            cache["cnn"] = (state, accuracy)
        np.savez(folder / f"{kind}.npz", **D)
        cache[kind] = len(D["y_test"])
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        head = dense(spec["sizes"])
    weights = {f"head.{k}": v.detach().numpy() for k, v in head.state_dict().items()}
    if kind == "digits-cnn":
        full = cache["cnn"][0]
        weights.update({f"frozen.{k}": full[k] for k in full if int(k.split(".")[0]) < FROZEN})
        if spec.get("trained"):  # the CNN's own dense head, from its trained weights
            for k in full:
                i, rest = k.split(".", 1)
                if int(i) >= FROZEN:
                    weights[f"head.{int(i) - FROZEN}.{rest}"] = full[k]
    np.savez(folder / f"weights-{name}.npz", **weights)
    out = dict(spec, data=str(folder / f"{kind}.npz"), weights=str(folder / f"weights-{name}.npz"))
    out["ks"] = list(spec["ks"])
    path = folder / f"run-{name}.json"
    path.write_text(json.dumps(out))
    return path


# ------------------------------------------------------------------------------------------------ workers


def worker(spec_path: str, k: int, carry: str, scope: str, attack: bool) -> dict:
    """certkit's run of one configuration in this process (``--worker``); with ``attack``, afterwards (not
    counted in its CPU time and memory), the attack bound: the share of test rows correct and not changed
    by `attack_label_flips`, an upper bound on any sound method's certified accuracy."""
    import torch

    from certkit.mibp import MLP, LabelFlips, certified_training, certify_predictions
    from certkit.mibp.certification.attack import attack_label_flips

    torch.set_num_threads(1)
    spec = json.loads(Path(spec_path).read_text())
    D = np.load(spec["data"])
    frozen, head = multiclass_modules(spec)
    model = MLP.from_torch(head)
    X_train, y_train, X_test, y_test = D["X_train"], D["y_train"], D["X_test"], D["y_test"]
    cpu, wall = time.process_time(), time.perf_counter()
    res = certified_training(
        model,
        X_train,
        y_train,
        perturbation=LabelFlips(k, scope=scope),
        loss="cross_entropy",
        epochs=spec["epochs"],
        learning_rate=spec["lr"],
        batch_size=spec["batch"],
        carry=carry,
        features=frozen,
        progress=False,
    )
    cert = certify_predictions(res, X_test)
    accuracy = cert.certified_accuracy(y_test)
    steps = res.recipe.n_steps
    out = {
        "certified_accuracy": accuracy,
        "nominal_accuracy": float(np.mean(cert.prediction == y_test)),
        "cpu_seconds": time.process_time() - cpu,
        "seconds": time.perf_counter() - wall,
        "max_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "carry": res.carry,
        # the steps the influence enclosure bounds (it gives up where the linearisation stops holding)
        "influence_steps": None if res.influence is None else [int(res.influence.valid_steps), int(steps)],
        "mean_width": float(res.mean_widths()[-1]),
    }
    if attack:
        cpu = time.process_time()
        changed = attack_label_flips(res, X_train, y_train, LabelFlips(k, scope=scope), X_test)
        out["attack_bound"] = float(np.mean((cert.prediction == y_test) & ~changed))
        out["attack_cpu_seconds"] = time.process_time() - cpu
    return out


def spawn(cmd: list[str], timeout: float, max_memory_gb: float) -> dict:
    """Run ``cmd`` in a fresh process with one thread and a data-segment limit; its last stdout line (JSON),
    or ``{"error": ...}`` with the peak memory and CPU seconds the process reached (from ``wait4``)."""
    limit = int(max_memory_gb * 2**30)

    def limit_memory() -> None:
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))

    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=err, env={**os.environ, **ONE_THREAD}, preexec_fn=limit_memory
        )
        killed: list[bool] = []
        timer = threading.Timer(timeout, lambda: killed.append(True) or os.kill(proc.pid, 9))
        timer.start()
        _, status, usage = os.wait4(proc.pid, 0)
        timer.cancel()
        timed_out = bool(killed)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if proc.returncode == 0 and stdout.strip():
        return json.loads(stdout.strip().splitlines()[-1])
    if timed_out:
        why = f"timed out after {timeout:.0f} s"
    elif proc.returncode < 0:
        why = f"killed by signal {-proc.returncode}"
    else:
        lines = [line for line in stderr.strip().splitlines() if line.strip()]
        why = lines[-1] if lines else f"exit status {proc.returncode}"
    return {
        "error": why,
        "max_rss_bytes": usage.ru_maxrss * 1024,
        "process_cpu_seconds": usage.ru_utime + usage.ru_stime,
    }


def run_certkit(args, spec: Path, k: int, carry: str, scope: str, attack: bool = False) -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", str(spec), "--k", str(k)]
    cmd += ["--carry", carry, "--scope", scope] + (["--attack"] if attack else [])
    return spawn(cmd, args.timeout, args.max_memory_gb)


def run_agt(args, spec: Path, k: int) -> dict | None:
    if args.agt_path is None:
        return None
    cmd = [args.agt_python or sys.executable, str(HERE / "agt_peer.py"), "--agt-path", args.agt_path]
    cmd += ["--multiclass", str(spec), "--k", str(k), "--threads", "1"]
    return spawn(cmd, args.timeout, args.max_memory_gb)


# ------------------------------------------------------------------------------------------------- tables


def _acc(row: dict | None) -> str:
    if not row:
        return "-"
    if "error" in row:
        return "error"
    return f"{row['certified_accuracy']:.3f}"


def _cpu(row: dict | None) -> str:
    if not row:
        return "-"
    if "error" in row:
        return f"({row['process_cpu_seconds']:.1f})"
    return f"{row['cpu_seconds']:.2f}"


def _bound(row: dict) -> str:
    """The attack bound of a worker's row (`worker`), or ``-``."""
    return f"{row['attack_bound']:.3f}" if "attack_bound" in row else "-"


def _carry(row: dict) -> str:
    """The carry ``carry="auto"`` chose, and where the influence enclosure gave up (steps bounded / all)."""
    if "error" in row:
        return "-"
    steps = row.get("influence_steps")
    if steps is None or steps[0] == steps[1]:
        return row["carry"]
    return f"{row['carry']} {steps[0]}/{steps[1]} steps"


def tables(name: str, rows: list[dict], n_test: int) -> str:
    """The run's two tables: certified accuracy, then CPU and peak memory."""
    acc, cost = [], []
    found = [r["certkit"]["box-batch"] for r in rows if "error" not in r["certkit"]["box-batch"]]
    found += [r["agt"] for r in rows if r.get("agt") and "error" not in r["agt"]]
    nominal = sorted({f"{r['nominal_accuracy']:.3f}" for r in found})
    for r in rows:
        agt, ours = r.get("agt"), r["certkit"]
        bb, br, ab, ar = (ours[f"{c}-{s}"] for c, s in METHODS)
        less = [
            f"{c} {s}"
            for (c, s), row in zip(METHODS, (bb, br, ab, ar))
            if agt
            and "error" not in agt
            and "error" not in row
            and row["certified_accuracy"] < agt["certified_accuracy"]
        ]
        acc.append(
            [
                r["k"],
                _acc(agt),
                _acc(bb),
                _acc(br),
                _acc(ab),
                _acc(ar),
                _carry(ab),
                _carry(ar),
                _bound(ab),
                _bound(ar),
                "-" if not agt else ("yes" if not less else "NO: " + ", ".join(less)),
            ]
        )
        cost.append(
            [
                r["k"],
                _cpu(agt),
                _cpu(bb),
                _cpu(ab),
                _cpu(ar),
                _ratio(bb, agt, "cpu_seconds"),
                _ratio(ab, agt, "cpu_seconds"),
                _gb(agt),
                _gb(bb),
                _gb(ab),
                _gb(ar),
                _ratio(bb, agt, "max_rss_bytes"),
                _ratio(ab, agt, "max_rss_bytes"),
            ]
        )
    nom = " / ".join(nominal) or "-"  # certkit's and AGT's nominal runs agree: one number
    title = f"{describe(name)}: certified test accuracy on {n_test} rows (nominal {nom})"
    head = ["k", "AGT", "box batch", "box run", "auto batch", "auto run", "auto's carry", "(run)"]
    head += ["attack bound batch", "(run)", "certkit >= AGT"]
    out = [format_table(head, acc, title=title)]
    head = ["k", "CPU s AGT", "box", "auto", "auto run", "box/AGT", "auto/AGT"]
    head += ["RSS GB AGT", "box", "auto", "auto run", "box/AGT", "auto/AGT"]
    out.append(format_table(head, cost, title=f"{describe(name)}: CPU seconds and peak RSS"))
    errors = [
        f"  {who} k={r['k']}: {row['error']} (peak RSS {_gb(row)} GB, {row['process_cpu_seconds']:.1f} CPU s)"
        for r in rows
        for who, row in [("AGT", r.get("agt"))] + [(f"certkit {m}", v) for m, v in r["certkit"].items()]
        if row and "error" in row
    ]
    if errors:
        out.append("failed:\n" + "\n".join(errors))
    return "\n".join(out) + "\n"


def fallback(args, name: str, rows: list[dict], folder: Path, cache: dict) -> None:
    """Each certkit method that failed on the 50,000 rows run again on fewer rows (``FALLBACK_ROWS``), its
    certified accuracy, CPU seconds and peak memory printed (added to ``rows`` as ``smaller``)."""
    for r in rows:
        for method, row in r["certkit"].items():
            if "error" not in row:
                continue
            carry, scope = method.split("-")
            smaller = []
            for n in FALLBACK_ROWS:
                spec = prepare(name, folder, cache, rows=n)
                out = run_certkit(args, spec, r["k"], carry, scope)
                smaller.append(dict(out, rows=n))
                if "error" in out:
                    text = f"{out['error']} (peak RSS {_gb(out)} GB, {out['process_cpu_seconds']:.1f} CPU s)"
                else:
                    text = (
                        f"certified {out['certified_accuracy']:.3f} (nominal {out['nominal_accuracy']:.3f}), "
                        f"carry {_carry(out)}, {out['cpu_seconds']:.1f} CPU s, peak RSS {_gb(out)} GB"
                    )
                print(
                    f"run {name} certkit {carry} {scope} k={r['k']} on the first {n:,} training rows: {text}"
                )
            row["smaller"] = smaller


def summary(results: list[dict]) -> str:
    """For each certkit method, at how many (run, k) it certifies at least AGT's figure, and where less."""
    lines = []
    for carry, scope in METHODS:
        both = [
            (r, r["certkit"][f"{carry}-{scope}"])
            for r in results
            if r.get("agt") and "error" not in r["agt"] and "error" not in r["certkit"][f"{carry}-{scope}"]
        ]
        less = [
            f"{r['run']} k={r['k']} ({row['certified_accuracy']:.3f} < {r['agt']['certified_accuracy']:.3f})"
            for r, row in both
            if row["certified_accuracy"] < r["agt"]["certified_accuracy"]
        ]
        line = f"certkit {carry} {scope}: >= AGT at {len(both) - len(less)} of {len(both)}"
        lines.append(line + (f"; less at {', '.join(less)}" if less else ""))
    return "\n".join(lines)


def _runs(text: str | None, quick: bool) -> list[str]:
    if text is None:
        return list(QUICK if quick else RUNS)
    names = []
    for t in (t.strip() for t in text.split(",") if t.strip()):
        match = [n for n in RUNS if n == t or n.rstrip("ab") == t]
        if not match:
            raise SystemExit(
                f"--only: unknown run {t!r}; expected some of {', '.join(RUNS)} (2: 2 and 2b, 4: 4 and 4b, "
                "5: 5a and 5b)"
            )
        names += [n for n in match if n not in names]
    return names


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--agt-path", help="a checkout of AbstractGradientTraining (without it: certkit alone)")
    ap.add_argument("--agt-python", help="the Python of AGT's environment (default: this one)")
    ap.add_argument("--quick", action="store_true", help="runs 1-4 at k = 1 only")
    ap.add_argument("--only", help=f"comma-separated runs of {', '.join(RUNS)} (5, 6: both variants)")
    ap.add_argument("--json", help="also write every result row to this JSON file")
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds per process (default 3600)")
    ap.add_argument(
        "--max-memory-gb", type=float, default=8.0, help="data-segment limit per process (default 8)"
    )
    ap.add_argument(
        "--no-attack", action="store_true", help="skip the attack bounds (attack_label_flips, runs 1-5)"
    )
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--attack", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--k", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--carry", default="auto", help=argparse.SUPPRESS)
    ap.add_argument("--scope", default="batch", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker is not None:
        print(json.dumps(worker(args.worker, args.k, args.carry, args.scope, args.attack)), flush=True)
        return
    names = _runs(args.only, args.quick)
    start = time.perf_counter()
    load = os.getloadavg()
    print(f"load average at start {load[0]:.2f}, {load[1]:.2f}, {load[2]:.2f} ({os.cpu_count()} CPUs)")
    print("one BLAS / OpenMP / torch thread per process; CPU s: process time of training + certification")
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        cache: dict = {}
        for name in names:
            fresh = "cnn" not in cache
            spec = prepare(name, Path(tmp), cache)
            if fresh and "cnn" in cache:
                print(f"(the frozen CNN: test accuracy {cache['cnn'][1]:.3f} after pretraining)\n")
            ks = list(RUNS[name]["ks"])
            if args.quick:
                ks = ks[:1]
            rows = []
            for k in ks:
                row = {"run": name, "k": k, "agt": run_agt(args, spec, k), "certkit": {}}
                # the attack bounds (not on the 50,000 rows of run 6) in the default call's processes
                attack = not args.no_attack and RUNS[name]["data"] != "blobs"
                for carry, scope in METHODS:
                    row["certkit"][f"{carry}-{scope}"] = run_certkit(
                        args, spec, k, carry, scope, attack=attack and carry == "auto"
                    )
                rows.append(row)
                print(
                    f"  run {name} k={k} done ({time.perf_counter() - start:.0f} s)",
                    file=sys.stderr,
                    flush=True,
                )
            kind = RUNS[name]["data"]
            print(tables(name, rows, cache[kind]))
            if kind == "blobs":
                fallback(args, name, rows, Path(tmp), cache)
            results += rows
            if args.json:
                Path(args.json).write_text(json.dumps(results, indent=1) + "\n")
    if args.agt_path is not None:
        print(summary(results))
    load = os.getloadavg()
    print(f"load average at the end {load[0]:.2f}, {load[1]:.2f}, {load[2]:.2f}")
    print(f"({time.perf_counter() - start:.0f} s in all)")


if __name__ == "__main__":
    main()
