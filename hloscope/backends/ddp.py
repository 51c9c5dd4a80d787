"""`--mode pytorch[+compile] --devices N`: DistributedDataParallel over N processes, started the way torchrun starts
them.

The run process is rank 0. Before building the model it starts ranks 1..N-1 as subprocesses of itself with torchrun's
environment (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, and OMP_NUM_THREADS=1 unless
set, as torchrun does for more than one process per node), then every rank joins the default process group with
`torch.distributed.init_process_group(init_method="env://")`: gloo on the CPU, NCCL on CUDA GPUs (rank r on
`cuda:<LOCAL_RANK>`). Each rank runs the same steps on its slice of the same global batch (batch / N samples); DDP
averages the gradients with an all-reduce in the backward pass, so the parallel step computes what the one-device step
computes.

A worker runs the driver's sequence without writing run.json (`worker_main`); rank 0 gathers every rank's step times
and memory after the timed window (`gather`, outside the timed region), and each rank writes its own Kineto trace
under `<run>/kineto/rank-N/`.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import subprocess
import sys
from pathlib import Path

from hloscope.backends.base import RunOptions
from hloscope.backends.devices import how_ranks_are_made
from hloscope.backends.driver import prepare_environment, rank_sequence
from hloscope.backends.torch_common import import_torch
from hloscope.machine import free_port
from hloscope.native_stderr import native_stdout_to_stderr

torch = import_torch()

WORKER_ENV = "HLOSCOPE_DDP_WORKER"      # set in the rank processes rank 0 starts: {"options": ..., "run_dir": ...}
# How long a collective (and the rendezvous) may wait for the other ranks before the rank fails: a rank that died
# usually fails the others at once (its sockets close); this bounds the rest.
TIMEOUT_S = 300
TORCHRUN_ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def is_worker() -> bool:
    return WORKER_ENV in os.environ


class ProcessGroup:
    """This process's place in the job: rank, world size, the other ranks' processes (rank 0 only) and the backend."""

    def __init__(self, options: RunOptions, run_dir: Path, device_type: str):
        self.world_size = options.devices
        self.workers: list[subprocess.Popen] = []
        if not is_worker():
            self._launch(options, run_dir)
        self.rank = int(os.environ["RANK"])
        self.local_rank = int(os.environ["LOCAL_RANK"])
        self.backend = "nccl" if device_type == "cuda" else "gloo"
        self.device = (torch.device("cuda", self.local_rank) if device_type == "cuda" else torch.device("cpu"))
        if device_type == "cuda":
            torch.cuda.set_device(self.device)
        if "OMP_NUM_THREADS" in os.environ:  # torch read it at import in the workers; rank 0 imported torch earlier
            torch.set_num_threads(max(1, int(os.environ["OMP_NUM_THREADS"])))
        import torch.distributed as dist

        with native_stdout_to_stderr():  # gloo prints "[Gloo] Rank 0 is connected to ..." on stdout
            dist.init_process_group(backend=self.backend, init_method="env://",
                                    timeout=datetime.timedelta(seconds=TIMEOUT_S))

    def _launch(self, options: RunOptions, run_dir: Path) -> None:
        """Rank 0 (this process): torchrun's variables here, and ranks 1..N-1 started with theirs."""
        world_size = options.devices
        common = {"WORLD_SIZE": str(world_size), "LOCAL_WORLD_SIZE": str(world_size), "MASTER_ADDR": "127.0.0.1",
                  "MASTER_PORT": str(free_port())}
        os.environ.update(common, RANK="0", LOCAL_RANK="0")
        os.environ.setdefault("OMP_NUM_THREADS", "1")  # torchrun's default with more than one process per node
        payload = json.dumps({"options": dataclasses.asdict(options), "run_dir": str(run_dir)})
        for rank in range(1, world_size):
            env = {**os.environ, **common, "RANK": str(rank), "LOCAL_RANK": str(rank), WORKER_ENV: payload}
            # stdout is the run's (`--json` prints there): a rank's output goes to stderr with the rest of its logs
            self.workers.append(subprocess.Popen(
                [sys.executable, "-c", "from hloscope.backends.ddp import worker_main; worker_main()"],
                env=env, stdout=sys.stderr, stdin=subprocess.DEVNULL))

    def describe(self, batch_size: int) -> dict:
        """run.json `environment.devices`."""
        return {"count": self.world_size, "platform": self.device.type, "strategy": "data parallel",
                "engine": "torch.nn.parallel.DistributedDataParallel, one process per rank (torchrun's environment)",
                "backend": self.backend, "processes": self.world_size, "ranks": list(range(self.world_size)),
                "global_batch": batch_size, "per_device_batch": batch_size // self.world_size,
                "batch_sharding": "rank r takes samples [r*B/N, (r+1)*B/N) of every global batch",
                "state_sharding": "replicated (DDP broadcasts rank 0's parameters at construction)",
                "threads_per_rank": torch.get_num_threads(),
                "made_by": how_ranks_are_made(self.device.type, self.world_size, self.backend)}

    def shard(self, tensor):
        """This rank's slice of a global batch (along the first dimension)."""
        size = tensor.shape[0] // self.world_size
        return tensor[self.rank * size:(self.rank + 1) * size]

    def mean(self, value: float) -> float:
        """The mean over ranks of a per-rank float (the global batch's loss from each rank's local loss)."""
        import torch.distributed as dist

        tensor = torch.tensor([value], dtype=torch.float64,
                              device=self.device if self.backend == "nccl" else "cpu")
        dist.all_reduce(tensor)
        return float(tensor.item()) / self.world_size

    def gather(self, value: object) -> list:
        """Every rank's `value` (picklable), by rank (on every rank: an all_gather_object, outside the timed region)."""
        import torch.distributed as dist

        gathered: list = [None] * self.world_size
        dist.all_gather_object(gathered, value)
        return gathered

    def barrier(self) -> None:
        import torch.distributed as dist

        dist.barrier()

    def close(self, completed: bool) -> list[str]:
        """Leave the process group; rank 0 waits for the other ranks and returns a line per rank that failed. A rank 0
        that stopped early (`completed` False: a failure, Ctrl-C, compare's setup-only audit) stops the others at
        once: they would wait for it in their next collective until gloo's timeout."""
        import torch.distributed as dist

        if dist.is_initialized():
            try:
                dist.destroy_process_group()
            # Shutdown after any ending, a failed collective included: whatever torch.distributed raises here must
            # not replace the run's own outcome, and the ranks are waited for below either way.
            except Exception:  # noqa: BLE001, S110
                pass
        failures = []
        for rank, worker in enumerate(self.workers, start=1):
            if not completed and worker.poll() is None:
                worker.terminate()
            try:
                code = worker.wait(timeout=60)
            except subprocess.TimeoutExpired:
                worker.kill()
                code = worker.wait()
                failures.append(f"rank {rank} had not finished 60 s after rank 0; killed")
                continue
            if code and completed:
                failures.append(f"rank {rank} exited with code {code}")
        return failures


def worker_main() -> None:
    """A rank > 0: the driver's sequence of collectives (setup, parity probe, warm-up and timed steps, the gathering
    of step times, the profile), without run.json; its trace goes under the run directory like rank 0's."""
    payload = json.loads(os.environ[WORKER_ENV])
    names = {field.name for field in dataclasses.fields(RunOptions)}
    options = RunOptions(**{key: value for key, value in payload["options"].items() if key in names})
    prepare_environment(options.mode, options.devices, options.threads)
    try:
        rank_sequence(options, Path(payload["run_dir"]))
    except KeyboardInterrupt:  # Ctrl-C reaches every rank of the terminal's process group; rank 0 reports it
        sys.exit(130)
    except Exception as error:  # noqa: BLE001  # a rank's process boundary: any framework failure, one line, exit 1
        print(f"hloscope: rank {os.environ.get('RANK')}: {type(error).__name__}: {error}".splitlines()[0],
              file=sys.stderr, flush=True)
        sys.exit(1)
