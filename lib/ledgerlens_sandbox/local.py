"""A local sandbox that outlives the process that started it: ZooKeeper + S3 server + a seeded cluster.

``up`` starts the servers and records ports and pids in ``<workdir>/state.json``; ``seed`` writes a
cluster and ``<workdir>/ground_truth.json``; ``down`` stops exactly the recorded processes. Each step
may run in a different process::

    python -m ledgerlens_sandbox.local up --workdir /tmp/sbx
    python -m ledgerlens_sandbox.local seed --workdir /tmp/sbx --scenario planted
    python -m ledgerlens_sandbox.local status --workdir /tmp/sbx
    python -m ledgerlens_sandbox.local down --workdir /tmp/sbx
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from ledgerlens.errors import SandboxError
from ledgerlens_sandbox import cluster
from ledgerlens_sandbox.servers import S3Server, ZooKeeperServer, pid_alive, stop_pid

DEFAULT_BUCKET = "ledgerlens-offload"
_ZK_MARK = "ZooKeeperServerMain"
_S3_MARK = "moto.server"


def _dummy_aws_env() -> None:
    # The sandbox S3 server accepts any credentials; never real ones.
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "sandbox")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "sandbox")
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")


class LocalSandbox:
    """Servers and seeded data under one work directory."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = Path(workdir).resolve()

    @property
    def state_path(self) -> Path:
        return self.workdir / "state.json"

    @property
    def ground_truth_path(self) -> Path:
        return self.workdir / "ground_truth.json"

    def _state(self) -> dict[str, Any] | None:
        try:
            return dict(json.loads(self.state_path.read_text()))
        except FileNotFoundError:
            return None

    def _require(self) -> dict[str, Any]:
        state = self._state()
        if state is None:
            raise SandboxError(f"sandbox {self.workdir}: not up (no {self.state_path})")
        return state

    def up(self, bucket: str = DEFAULT_BUCKET, timeout: float = 60) -> dict[str, Any]:
        """Start ZooKeeper and the S3 server (unless already running) and create the bucket."""
        state = self._state()
        if state and pid_alive(state["zk_pid"]) and pid_alive(state["s3_pid"]):
            return self.status()
        if state:
            self.down()
        self.workdir.mkdir(parents=True, exist_ok=True)
        zk = ZooKeeperServer(self.workdir / "zookeeper").start(timeout)
        try:
            s3 = S3Server(self.workdir / "s3").start(timeout)
        except SandboxError:
            zk.stop()
            raise
        _dummy_aws_env()
        import boto3  # boto3: only to create the bucket

        boto3.client("s3", endpoint_url=s3.endpoint_url, region_name="us-east-1").create_bucket(Bucket=bucket)
        state = {
            "workdir": str(self.workdir),
            "zk_hosts": zk.hosts,
            "zk_port": zk.port,
            "zk_pid": zk.pid,
            "s3_endpoint": s3.endpoint_url,
            "s3_port": s3.port,
            "s3_pid": s3.pid,
            "bucket": bucket,
            "started_at_ms": int(time.time() * 1000),
        }
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2))
        tmp.replace(self.state_path)
        return self.status()

    def seed(
        self, scenario: str = "planted", now_ms: int | None = None, root: str = ""
    ) -> cluster.GroundTruth:
        """Write a cluster; ``now_ms`` defaults to :func:`cluster.default_now_ms` (two days ahead)."""
        state = self._require()
        _dummy_aws_env()
        truth = cluster.generate(
            state["zk_hosts"],
            root=root,
            s3_endpoint=state["s3_endpoint"],
            bucket=state["bucket"],
            scenario=scenario,
            now_ms=now_ms if now_ms is not None else cluster.default_now_ms(),
        )
        self.ground_truth_path.write_text(truth.to_json())
        return truth

    def status(self) -> dict[str, Any]:
        """Recorded state plus whether each process is alive."""
        state = self._state()
        if state is None:
            return {"workdir": str(self.workdir), "up": False}
        zk_alive = pid_alive(state["zk_pid"])
        s3_alive = pid_alive(state["s3_pid"])
        out = dict(state, zk_alive=zk_alive, s3_alive=s3_alive, up=zk_alive and s3_alive)
        out["ground_truth"] = str(self.ground_truth_path) if self.ground_truth_path.exists() else None
        return out

    def down(self) -> dict[str, Any]:
        """Stop the recorded processes (only those); idempotent."""
        state = self._state()
        if state is None:
            return {"workdir": str(self.workdir), "stopped": []}
        stopped = []
        if stop_pid(int(state["zk_pid"]), _ZK_MARK):
            stopped.append("zookeeper")
        if stop_pid(int(state["s3_pid"]), _S3_MARK):
            stopped.append("s3")
        self.state_path.unlink(missing_ok=True)
        return {"workdir": str(self.workdir), "stopped": stopped}


def main(argv: list[str] | None = None) -> int:
    """Command line: ``up|seed|status|down --workdir DIR``; prints JSON."""
    parser = argparse.ArgumentParser(
        prog="python -m ledgerlens_sandbox.local", description=__doc__.split("\n")[0]
    )
    parser.add_argument("command", choices=("up", "seed", "status", "down"))
    parser.add_argument("--workdir", required=True, type=Path)
    parser.add_argument("--scenario", default="planted", choices=cluster.SCENARIOS)
    parser.add_argument("--root", default="", help="path prefix of the seeded cluster ('' = real paths)")
    parser.add_argument(
        "--now-ms", type=int, default=None, help="the audit's as_of_ms (default: now + 2 days)"
    )
    parser.add_argument("--bucket", default=DEFAULT_BUCKET)
    args = parser.parse_args(argv)
    box = LocalSandbox(args.workdir)
    try:
        if args.command == "up":
            out: dict[str, Any] = box.up(bucket=args.bucket)
        elif args.command == "seed":
            truth = box.seed(args.scenario, args.now_ms, args.root)
            out = dict(
                box.status(),
                scenario=truth.scenario,
                root=truth.root,
                now_ms=truth.now_ms,
                expected_findings=len(truth.expected),
                counts=truth.counts,
            )
        elif args.command == "status":
            out = box.status()
        else:
            out = box.down()
    except (SandboxError, ValueError) as e:
        print(json.dumps({"error": str(e)}), file=sys.stderr)
        return 1
    print(json.dumps(out, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
