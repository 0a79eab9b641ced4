"""Multi-host DDP by simulation (issue 28.4): two ``torchrun`` "nodes" of one process each on
this machine, against one node of two processes; the same losses and parameters.

    python scripts/multinode_sim.py OUT_DIR                 # CPU: gloo
    python scripts/multinode_sim.py OUT_DIR --steps 20      # 2+ GPUs: NCCL, one GPU per node

Each node is a launcher of its own (``torchrun --nnodes 2 --node-rank R``, c10d rendezvous on
localhost), as on two hosts; on GPU node R sees only GPU R (``CUDA_VISIBLE_DEVICES``). Both
runs train ``examples/ddp_train.py`` with ``--backend`` (xla by default); rank 0 records every
loss and a digest of the parameters. Writes OUT_DIR/one_node.json, OUT_DIR/two_nodes.json, the
launchers' logs and OUT_DIR/summary.json; exits 1 where they differ.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "ddp_train.py"


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _torchrun(args: list[str], log: Path, env: dict) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "torch.distributed.run", *args]
    f = open(log, "w")  # noqa: SIM115  (closed by the caller's wait)
    return subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, cwd=ROOT)


def _wait(procs: list[subprocess.Popen], timeout: float) -> list[int]:
    end = time.monotonic() + timeout
    codes = []
    for p in procs:
        try:
            codes.append(p.wait(max(1.0, end - time.monotonic())))
        except subprocess.TimeoutExpired:
            p.kill()
            codes.append(p.wait())
    return codes


def run(
    out: Path,
    steps: int = 20,
    backend: str = "xla",
    cuda: bool | None = None,
    timeout: float = 900.0,
) -> dict:
    """Both runs; the summary (also written to ``out/summary.json``)."""
    import torch

    out.mkdir(parents=True, exist_ok=True)
    if cuda is None:
        cuda = torch.cuda.is_available() and torch.cuda.device_count() >= 2
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    if not cuda:
        env["CUDA_VISIBLE_DEVICES"] = ""  # (the example takes NCCL wherever it sees a GPU)
    train = [str(EXAMPLE), "--steps", str(steps), "--backend", backend]

    # one node of two processes
    one = out / "one_node.json"
    p = _torchrun(
        ["--standalone", "--nnodes", "1", "--nproc-per-node", "2", *train, "--record", str(one)],
        out / "one_node.log",
        env,
    )
    one_code = _wait([p], timeout)[0]

    # two nodes of one process, each its own launcher, one c10d rendezvous on localhost
    two = out / "two_nodes.json"
    endpoint = f"127.0.0.1:{_port()}"
    procs = []
    for node in range(2):
        node_env = dict(env, CUDA_VISIBLE_DEVICES=str(node)) if cuda else env
        procs.append(
            _torchrun(
                [
                    "--nnodes",
                    "2",
                    "--nproc-per-node",
                    "1",
                    "--node-rank",
                    str(node),
                    "--rdzv-backend",
                    "c10d",
                    "--rdzv-endpoint",
                    endpoint,
                    "--rdzv-id",
                    f"t2x-sim-{os.getpid()}",
                    *train,
                    "--record",
                    str(two),
                ],
                out / f"node{node}.log",
                node_env,
            )
        )
    two_codes = _wait(procs, timeout)

    summary: dict = {
        "device": "cuda" if cuda else "cpu",
        "backend": backend,
        "steps": steps,
        "exit_codes": {"one_node": one_code, "two_nodes": two_codes},
    }
    if one_code == 0 and two_codes == [0, 0]:
        a, b = json.loads(one.read_text()), json.loads(two.read_text())
        summary["world"] = [a["world"], b["world"]]
        summary["losses"] = {"one_node": a["losses"], "two_nodes": b["losses"]}
        summary["max_loss_diff"] = max(abs(x - y) for x, y in zip(a["losses"], b["losses"]))
        summary["max_param_sum_diff"] = max(
            abs(x - y) for x, y in zip(a["param_sums"], b["param_sums"])
        )
        # CPU/gloo runs the same reduction in both: equal to the bit. NCCL may pick another
        # algorithm across "nodes": float-rounding differences, far below bf16/fp32 noise.
        tol = 0.0 if not cuda else 1e-4
        summary["same"] = (
            a["world"] == b["world"] == 2
            and len(a["losses"]) == len(b["losses"]) == steps
            and summary["max_loss_diff"] <= tol * max(1.0, max(map(abs, a["losses"])))
        )
    else:
        summary["same"] = False
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path, help="directory for the records, logs and summary")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--backend", default="xla", help="torch.compile backend, or 'none'")
    parser.add_argument("--cpu", action="store_true", help="gloo on CPU even where GPUs are")
    args = parser.parse_args()
    summary = run(args.out, args.steps, args.backend, cuda=False if args.cpu else None)
    print(json.dumps({k: v for k, v in summary.items() if k != "losses"}, indent=2))
    sys.exit(0 if summary["same"] else 1)


if __name__ == "__main__":
    main()
