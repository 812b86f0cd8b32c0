"""The real node program and real worker clients over loopback (no root): a node process on
127.0.0.1 and one thread per worker on 127.0.1.x."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from hosts.ina.client import InaEndpoint

NODE = "127.0.0.1"


@contextmanager
def loopback_node(tmp_path: Path, pool_slots: int = 256, sharing: str = "reserved", drop_frac: float = 0.0,
                  link_rate_bps: float | None = None):
    """Yields a function returning the node's counters so far (read after it stops)."""
    config = {"address": NODE, "pool_slots": pool_slots, "sharing": sharing, "drop_frac": drop_frac, "seed": 3,
              "link_rate_bps": link_rate_bps, "ready": str(tmp_path / "ready"),
              "counters": str(tmp_path / "counters.json")}
    (tmp_path / "node.json").write_text(json.dumps(config))
    process = subprocess.Popen([sys.executable, "-m", "hosts.ina.node", "--config", str(tmp_path / "node.json")])
    report: dict = {}
    try:
        deadline = time.monotonic() + 20
        while not (tmp_path / "ready").exists():
            assert process.poll() is None, "the node exited at start"
            assert time.monotonic() < deadline, "the node did not start"
            time.sleep(0.01)
        yield report
    finally:
        process.terminate()
        process.wait(timeout=10)
        report.update(json.loads((tmp_path / "counters.json").read_text()))


def worker_address(job_index: int, worker: int) -> str:
    return f"127.0.{job_index + 1}.{worker + 1}"


def run_jobs(jobs: dict[int, list[list[np.ndarray]]], window: int = 16, rto_s: float = 0.03,
             calls: int = 1, link_rate_bps: float | None = None) -> dict[int, list[list[np.ndarray]]]:
    """jobs: job id → per worker, the buffers it all-reduces one after another. Returns the results
    the same way, and raises the first worker error."""
    results: dict[int, list] = {job: [None] * len(workers) for job, workers in jobs.items()}
    errors: list[BaseException] = []
    done = threading.Barrier(sum(len(w) for w in jobs.values()))

    def worker(job_index: int, job: int, w: int, buffers: list[np.ndarray]) -> None:
        addresses = tuple(worker_address(job_index, i) for i in range(len(jobs[job])))
        endpoint = InaEndpoint(addresses[w], NODE, rto_s, link_rate_bps=link_rate_bps)
        try:
            client = endpoint.register(job, w, addresses, window)
            out = []
            for buffer in buffers:
                data = buffer.copy()
                client.allreduce(data)
                out.append(data)
            results[job][w] = out
        except BaseException as error:  # reported to the test
            errors.append(error)
        finally:
            try:
                done.wait(timeout=60)  # a job's fallback aggregator serves until everyone is done
            except threading.BrokenBarrierError:
                pass
            endpoint.close()

    threads = [threading.Thread(target=worker, args=(index, job, w, buffers))
               for index, (job, workers) in enumerate(jobs.items()) for w, buffers in enumerate(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    if errors:
        raise errors[0]
    return results
