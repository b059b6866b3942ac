"""One federation timed in this pipeline and in Flower's simulation engine (Flower 1.x, ``flwr[simulation]`` on Ray).

The work is the quick preset's FedAvg on digits (``presets/quick.yaml``: its CNN, 20 clients, 10 sampled a round,
30 rounds, evaluation on the test set every round), from one data stage (the partition both read):

* **ours**: ``hasfl train --method fedavg`` as the DAG's train job runs it (one process, ``threads_per_job``
  torch threads; it also computes what every run logs: the estimates E0-E3, the ledger, checkpoints);
* **Flower**: a ``ClientApp`` whose client trains the same model with the same local optimiser (this project's
  :class:`hasfl.fl.client.LocalSGD`: same epochs, batch size, learning rate and its per-round decay, momentum,
  weight decay, clipping) on the client's partition, and a ``ServerApp`` with Flower's ``FedAvg`` (samples
  weighted by n_i, as Algorithm 1 line 18; 10 of the 20 clients a round) evaluating the global model centrally
  every round. Ray runs as many clients at a time as the machine has cores, one torch thread each.

Both sides use the cores the machine has; the clients each samples differ (each its own random stream), so the
curves show the same work learning, not equal numbers. Flower is never a dependency of the pipeline: it is
installed in an environment of its own (the ``flower`` extra of pyproject.toml) and imported here only by
:func:`run_flower`.

``python -m hasfl.bench.flower --out docs/bench/flower.json --figure docs/bench/flower.png``, then the performance page
with it: ``hasfl bench --from-json docs/bench/cpu.json docs/bench/cpu-bf16.json docs/bench/flower.json --doc
docs/performance.md`` (:func:`hasfl.bench.report.render_markdown` renders a report of ``"kind": "flower"`` with
:func:`section`).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["KIND", "main", "make_data", "run_flower", "run_ours", "section"]

REPO = Path(__file__).resolve().parents[3]
PRESET = REPO / "presets" / "quick.yaml"
DATASET, METHOD, SEED = "digits", "fedavg", 42
#: The ``kind`` of this module's report, by which the performance page's renderer tells it from a ``hasfl bench`` one.
KIND = "flower"


def _config() -> dict[str, Any]:
    from hasfl.config import load_config

    return load_config(PRESET)


def _hasfl(*args: str) -> float:
    """Run ``hasfl ARGS`` (this interpreter) and return its wall seconds."""
    env = dict(os.environ, PYTHONHASHSEED="0")
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "hasfl.cli", *args], check=True, env=env, capture_output=True, text=True)
    return time.perf_counter() - start


def make_data(work: Path) -> Path:
    """The data stage both engines read (``hasfl data``), in ``work/data``."""
    data = work / "data"
    _hasfl("data", "--config", str(PRESET), "--dataset", DATASET, "--seed", str(SEED), "--out", str(data))
    return data


def run_ours(work: Path, threads: int) -> dict[str, Any]:
    """The FedAvg run on ``work/data`` (:func:`make_data`) as a ``hasfl train`` command, in ``work/ours<threads>``;
    the run's wall and its test accuracy per round."""
    import pandas as pd

    data, run = work / "data", work / f"ours{threads}"
    wall = _hasfl("train", "--config", str(PRESET), "--dataset", DATASET, "--method", METHOD, "--seed", str(SEED),
                  "--data", str(data), "--out", str(run), "--threads", str(threads))
    rounds = pd.read_parquet(run / "rounds.parquet")
    rows = rounds.dropna(subset=["test_acc"])
    return {"wall_s": wall, "threads": threads, "rounds": [int(r) for r in rows["round"]],
            "test_acc": [float(a) for a in rows["test_acc"]]}


class _Work:
    """What a Flower client and the server's evaluation read, loaded once per process (a Ray worker loads its own)."""

    _cache: dict[str, Any] = {}

    @classmethod
    def get(cls, data: Path) -> dict[str, Any]:
        if "work" not in cls._cache:
            import pandas as pd

            from hasfl.config import run_config
            from hasfl.data import load_dataset
            from hasfl.fl.client import OptimConfig, client_data
            from hasfl.fl.runtime import family_for

            full = _config()
            cfg = run_config(full, DATASET, METHOD, SEED)
            bundle = load_dataset(DATASET, full["data_dir"], full["dataset_params"][DATASET])
            partition = pd.read_parquet(data / "partition.parquet")
            cls._cache["work"] = {"cfg": cfg, "bundle": bundle, "clients": client_data(partition, bundle),
                                  "family": family_for(bundle, cfg["dataset_params"]["model"]),
                                  "optim": OptimConfig.from_config(cfg["dataset_params"]["optim"])}
        return cls._cache["work"]


def _arrays(model: Any) -> list[Any]:
    return [v.detach().cpu().numpy() for v in model.state_dict().values()]


def _load(model: Any, arrays: Sequence[Any]) -> None:
    import torch

    state = model.state_dict()
    model.load_state_dict({k: torch.as_tensor(a).to(state[k].dtype) for k, a in zip(state, arrays, strict=True)})


def _accuracy(model: Any, bundle: Any) -> float:
    import torch

    model.eval()
    correct = 0
    with torch.no_grad():
        for start in range(0, len(bundle.test_y), 512):
            x = bundle.inputs(bundle.test_x[start:start + 512])
            correct += int((model(x).argmax(1) == bundle.test_y[start:start + 512]).sum())
    return correct / len(bundle.test_y)


def run_flower(work: Path, cores: int) -> dict[str, Any]:
    """The same federation in Flower's simulation engine (see the module doc); its wall and accuracy per round."""
    import flwr
    import torch
    from flwr.client import ClientApp, NumPyClient
    from flwr.common import Context, ndarrays_to_parameters
    from flwr.server import ServerApp, ServerAppComponents, ServerConfig
    from flwr.server.strategy import FedAvg
    from flwr.simulation import run_simulation

    from hasfl.fl.client import LocalSGD

    data = work / "data"
    base = _Work.get(data)
    fed = base["cfg"]["federation"]
    n_clients, per_round, rounds = int(fed["clients"]), int(fed["clients_per_round"]), int(fed["rounds"])
    torch.manual_seed(SEED)
    init = _arrays(base["family"].build(1.0))
    accuracy: dict[int, float] = {}

    class Client(NumPyClient):
        def __init__(self, cid: int) -> None:
            self.cid = cid

        def fit(self, parameters: list[Any], config: Mapping[str, Any]) -> tuple[list[Any], int, dict[str, Any]]:
            torch.set_num_threads(1)
            w = _Work.get(data)
            model = w["family"].build(1.0)
            _load(model, parameters)
            t = int(config["round"]) - 1
            gen = torch.Generator().manual_seed(SEED * 100_003 + t * 1_009 + self.cid)
            mine = w["clients"][self.cid]
            LocalSGD(w["optim"], w["bundle"].inputs).train(model, mine, w["optim"].lr_at(t), gen)
            return _arrays(model), mine.n, {}

    def client_fn(context: Context) -> Any:
        return Client(int(context.node_config["partition-id"])).to_client()

    def evaluate(server_round: int, parameters: list[Any], config: Mapping[str, Any]) -> tuple[float, dict[str, Any]]:
        if server_round == 0:
            return 0.0, {}
        model = base["family"].build(1.0)
        _load(model, parameters)
        accuracy[server_round] = _accuracy(model, base["bundle"])
        return 0.0, {"accuracy": accuracy[server_round]}

    def server_fn(context: Context) -> ServerAppComponents:
        strategy = FedAvg(fraction_fit=per_round / n_clients, fraction_evaluate=0.0, min_fit_clients=per_round,
                          min_evaluate_clients=0, min_available_clients=n_clients, evaluate_fn=evaluate,
                          on_fit_config_fn=lambda r: {"round": r}, initial_parameters=ndarrays_to_parameters(init))
        return ServerAppComponents(strategy=strategy, config=ServerConfig(num_rounds=rounds))

    start = time.perf_counter()
    run_simulation(server_app=ServerApp(server_fn=server_fn), client_app=ClientApp(client_fn=client_fn),
                   num_supernodes=n_clients,
                   backend_config={"client_resources": {"num_cpus": 1, "num_gpus": 0.0},
                                   "init_args": {"num_cpus": cores, "include_dashboard": False}})
    wall = time.perf_counter() - start
    done = sorted(accuracy)
    import ray

    return {"wall_s": wall, "cores": cores, "flwr": flwr.__version__, "ray": ray.__version__,
            "rounds": done, "test_acc": [accuracy[r] for r in done]}


def section(report: Mapping[str, Any], source: str | None = None, page_dir: str = "docs") -> list[str]:
    """The performance page's section of a report of :func:`main` (``source``: its JSON file; the figure the report
    names is linked relative to ``page_dir``, the page's folder)."""
    first = report["ours"][0]
    lines = ["## Against Flower's simulation", "",
             f"`{source or 'the report'}`: measured {report['date']} on {report['machine']} ({report['cores']} cores, "
             f"load average {report['load']:.1f} at the start), `python -m hasfl.bench.flower` (Flower {report['flwr']}, Ray "
             f"{report['ray']}): the quick preset's FedAvg on digits, {report['clients']} clients, "
             f"{report['per_round']} a round, {report['rounds']} rounds, the same model and local optimiser, the test "
             "set evaluated every round. Ours is one training job as the DAG runs it (`hasfl train`: it also "
             "computes the estimates E0-E3, the ledger and a checkpoint); Flower's is its simulation engine on Ray.",
             "", "| engine | cores used | wall (s) | vs ours on the same cores | final test acc | best test acc |",
             "|---|---|---|---|---|---|"]
    ours = {r["threads"]: r for r in report["ours"]}
    for r in report["ours"]:
        lines.append(f"| this pipeline, {r['threads']} torch thread(s) | {r['threads']} | {r['wall_s']:.1f} | 1.00 | "
                     f"{r['test_acc'][-1]:.3f} | {max(r['test_acc']):.3f} |")
    for r in report["flower"]:
        base = ours.get(r["cores"], first)
        lines.append(f"| Flower simulation, {r['cores']} client(s) at a time, 1 thread each | {r['cores']} | "
                     f"{r['wall_s']:.1f} | {r['wall_s'] / base['wall_s']:.2f} | {r['test_acc'][-1]:.3f} | "
                     f"{max(r['test_acc']):.3f} |")
    lines += ["", "\"vs ours on the same cores\": Flower's wall over ours on as many cores (above 1: Flower slower). The "
              "clients each samples differ (each engine its own random stream), so the curves differ round by round; "
              "both learn the same task."]
    if report.get("figure"):
        lines += ["", f"![Test accuracy per round, both engines]({os.path.relpath(report['figure'], page_dir)})"]
    return [*lines, ""]


def _plot(report: Mapping[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 3.4))
    for rows, label, marker in ((report["ours"], "this pipeline, {} thread(s)", "o"),
                                (report["flower"], "Flower simulation, {} core(s)", "s")):
        for r in rows:
            n = r.get("threads", r.get("cores"))
            ax.plot(r["rounds"], [100 * a for a in r["test_acc"]], marker=marker, ms=3, label=label.format(n))
    ax.set_xlabel("round")
    ax.set_ylabel("test accuracy (%)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120, metadata={"Software": None})
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m hasfl.bench.flower", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="the report (JSON)")
    ap.add_argument("--figure", type=Path, default=None, help="the accuracy curves (PNG), linked from the page")
    ap.add_argument("--cores", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args(argv)

    from hasfl.bench.harness import cpu_model, loadavg

    fed = _config()["federation"]
    counts = sorted({1, args.cores})
    load = loadavg()[0]
    with tempfile.TemporaryDirectory(prefix="hasfl-flower-") as tmp:
        work = Path(tmp)
        make_data(work)
        ours = [run_ours(work, threads=n) for n in counts]
        flower = [run_flower(work, cores=n) for n in counts]
    report = {"kind": KIND, "date": time.strftime("%Y-%m-%d"), "machine": cpu_model(), "cores": args.cores, "load": load,
              "flwr": flower[0]["flwr"], "ray": flower[0]["ray"],
              "clients": int(fed["clients"]), "per_round": int(fed["clients_per_round"]),
              "rounds": int(fed["rounds"]), "ours": ours, "flower": flower,
              "ratio": flower[-1]["wall_s"] / ours[-1]["wall_s"]}
    if args.figure is not None:
        _plot(report, args.figure)
        report["figure"] = os.path.relpath(args.figure, REPO) if args.figure.resolve().is_relative_to(REPO) \
            else str(args.figure)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({"ratio": report["ratio"], "ours_s": [r["wall_s"] for r in ours],
                      "flower_s": [r["wall_s"] for r in flower]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
