"""A real Apache Pulsar standalone (pinned release) with ZooKeeper metadata and S3 offload to moto.

:class:`PulsarSandbox` fetches the distribution and the jcloud offloader with the ordinary Maven
client (once per cache directory, under a file lock), writes a broker configuration from the
distribution's ``conf/standalone.conf`` with small rollover / offload / delayed-bucket settings,
starts its own moto S3 server and ``bin/pulsar standalone -nfw -nss`` on free loopback ports, and
records everything (ports, pids, URLs) in ``workdir/state.json`` so that ``down()`` can stop exactly
what ``up()`` started, also from another process.

Command line::

    python -m ledgerlens_sandbox.pulsar up|seed|plant|restore-s3|status|down --workdir DIR
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from ledgerlens.errors import SandboxError
from ledgerlens.settings.config import cache_dir
from ledgerlens_sandbox.servers import S3Server, _tail, free_port, pid_alive, port_open, stop_pid

PULSAR_VERSION = "4.0.8"
CLUSTER = "standalone"
BUCKET = "ledgerlens-offload"
REGION = "us-east-1"
# Dummy credentials for moto (it accepts any); never real secrets.
AWS_DUMMY = {
    "AWS_ACCESS_KEY_ID": "ledgerlens-sandbox",
    "AWS_SECRET_ACCESS_KEY": "ledgerlens-sandbox",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_REGION": REGION,
}
# The jcloud offloader's generic ``S3`` driver does not use the AWS chain: it reads these (Aliyun-style)
# variables (JCloudBlobStoreProvider, 4.0.x); ``aws-s3`` reads the AWS_* ones.
S3_DRIVER_DUMMY = {"ACCESS_KEY_ID": "ledgerlens-sandbox", "ACCESS_KEY_SECRET": "ledgerlens-sandbox"}
_DIST = f"org.apache.pulsar:pulsar-server-distribution:{PULSAR_VERSION}:tar.gz:bin"
_OFFLOADER = f"org.apache.pulsar:tiered-storage-jcloud:{PULSAR_VERSION}"
_STANDALONE_MAIN = "org.apache.pulsar.PulsarStandaloneStarter"
_MOTO_MAIN = "moto.server"
_PULSAR_MEM = "-Xms512m -Xmx1g -XX:MaxDirectMemorySize=1g"

# Broker settings written over the distribution's conf/standalone.conf (ports and paths are added by up()).
BROKER_OVERRIDES: dict[str, str] = {
    "clusterName": CLUSTER,
    "bindAddress": "127.0.0.1",
    "advertisedAddress": "127.0.0.1",
    "brokerDeleteInactiveTopicsEnabled": "false",
    "allowAutoTopicCreation": "true",
    # small ledgers: several ledgers per topic after a few hundred messages
    "managedLedgerMaxEntriesPerLedger": "50",
    "managedLedgerMinLedgerRolloverTimeMinutes": "0",
    "managedLedgerMaxLedgerRolloverTimeMinutes": "10",
    # cursor ledgers roll over every 10 acknowledgements, not every second: the cursor znode lags its
    # cursor ledger as in production (4 hours / 50,000 entries by default), which the audit must judge
    "managedLedgerCursorMaxEntriesPerLedger": "10",
    "managedLedgerCursorRolloverTimeInSeconds": "3600",
    # offload to the sandbox's own moto S3 server
    "managedLedgerOffloadDriver": "S3",
    "managedLedgerOffloadBucket": BUCKET,
    "managedLedgerOffloadRegion": REGION,
    "managedLedgerOffloadDeletionLagMs": "5000",
    "managedLedgerOffloadAutoTriggerSizeThresholdBytes": "-1",
    "managedLedgerOffloadMaxBlockSizeInBytes": "1048576",
    "managedLedgerOffloadReadBufferSizeInBytes": "65536",
    # PIP-195 bucket-based delayed delivery with tiny buckets
    "delayedDeliveryEnabled": "true",
    "delayedDeliveryTrackerFactoryClassName": (
        "org.apache.pulsar.broker.delayed.BucketDelayedDeliveryTrackerFactory"
    ),
    "delayedDeliveryMinIndexCountPerBucket": "10",
    "delayedDeliveryMaxIndexesPerBucketSnapshotSegment": "5",
    "delayedDeliveryMaxTimeStepPerBucketSnapshotSegmentSeconds": "1",
    "delayedDeliveryTickTimeMillis": "100",
    # schemas in BookKeeper (the default storage), evolution allowed
    "schemaRegistryStorageClassName": (
        "org.apache.pulsar.broker.service.schema.BookkeeperSchemaStorageFactory"
    ),
    "isSchemaValidationEnforced": "false",
    # retention: broker trims only what retention allows; the seeding sets namespace policies
    "defaultRetentionTimeInMinutes": "0",
    "defaultRetentionSizeInMB": "0",
    "retentionCheckIntervalInSeconds": "2",
    # compaction is triggered explicitly by the seeding
    "brokerServiceCompactionMonitorIntervalInSeconds": "60",
    "brokerServiceCompactionThresholdInBytes": "0",
    # no background surprises during audits
    "topicLevelPoliciesEnabled": "true",
    "systemTopicEnabled": "true",
    "functionsWorkerEnabled": "false",
    "webSocketServiceEnabled": "false",
    "exposeTopicLevelMetricsInPrometheus": "false",
}


# --- fetching ---------------------------------------------------------------------------------------


def _m2_artifact(group: str, artifact: str, version: str, ext: str, classifier: str = "") -> Path:
    repo = Path(os.environ.get("LEDGERLENS_M2_REPO", Path.home() / ".m2" / "repository"))
    name = f"{artifact}-{version}{'-' + classifier if classifier else ''}.{ext}"
    return repo / group.replace(".", "/") / artifact / version / name


def _mvn_get(artifact: str, timeout: float) -> float:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise SandboxError("pulsar: 'mvn' not found on PATH; Maven is needed to fetch the distribution")
    cmd = [mvn, "-q", "-B", "dependency:get", f"-Dartifact={artifact}", "-Dtransitive=false"]
    if "LEDGERLENS_M2_REPO" in os.environ:
        cmd.append(f"-Dmaven.repo.local={os.environ['LEDGERLENS_M2_REPO']}")
    t0 = time.monotonic()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        raise SandboxError(f"pulsar: {' '.join(cmd)} timed out after {timeout:.0f}s") from e
    if proc.returncode != 0:
        out = "\n".join((proc.stdout + proc.stderr).splitlines()[-30:])
        raise SandboxError(f"pulsar: fetching failed (exit {proc.returncode}): {' '.join(cmd)}\n{out}")
    return time.monotonic() - t0


def pulsar_home(timeout: float = 1800) -> Path:
    """The Pulsar distribution directory: ``$LEDGERLENS_PULSAR_HOME``, else fetched and extracted once.

    The tarball and the offloader come from Maven Central through ``mvn dependency:get`` (the local
    Maven repository is Maven's own cache), are extracted under ``$LEDGERLENS_CACHE`` (or
    ``~/.cache/ledgerlens``) as ``pulsar-<version>/``; a marker file records a finished extraction
    and a file lock serializes parallel processes. Timings go to ``fetch.json`` beside it.
    """
    env = os.environ.get("LEDGERLENS_PULSAR_HOME")
    if env:
        home = Path(env)
        if not (home / "bin" / "pulsar").exists():
            raise SandboxError(f"pulsar: $LEDGERLENS_PULSAR_HOME={env} has no bin/pulsar")
        return home
    target = cache_dir() / f"pulsar-{PULSAR_VERSION}"
    home = target / f"apache-pulsar-{PULSAR_VERSION}"
    marker = target / ".resolved"
    if marker.exists():
        return home
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f"pulsar-{PULSAR_VERSION}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if marker.exists():
                return home
            report: dict[str, Any] = {"version": PULSAR_VERSION}
            report["mvn_distribution_s"] = round(_mvn_get(_DIST, timeout), 2)
            report["mvn_offloader_s"] = round(_mvn_get(_OFFLOADER, timeout), 2)
            tgz = _m2_artifact(
                "org.apache.pulsar", "pulsar-server-distribution", PULSAR_VERSION, "tar.gz", "bin"
            )
            nar = _m2_artifact("org.apache.pulsar", "tiered-storage-jcloud", PULSAR_VERSION, "jar")
            for p in (tgz, nar):
                if not p.exists():
                    raise SandboxError(f"pulsar: Maven reported success but {p} is missing")
            report["distribution_bytes"] = tgz.stat().st_size
            report["offloader_bytes"] = nar.stat().st_size
            shutil.rmtree(target, ignore_errors=True)
            target.mkdir(parents=True)
            t0 = time.monotonic()
            with tarfile.open(tgz) as tf:
                tf.extractall(target, filter="tar")
            report["extract_s"] = round(time.monotonic() - t0, 2)
            if not (home / "bin" / "pulsar").exists():
                raise SandboxError(f"pulsar: {tgz} did not extract to {home}")
            offloaders = home / "offloaders"
            offloaders.mkdir(exist_ok=True)
            # the 3.x/4.x jar of tiered-storage-jcloud is the NAR itself
            shutil.copyfile(nar, offloaders / f"tiered-storage-jcloud-{PULSAR_VERSION}.nar")
            (target / "fetch.json").write_text(json.dumps(report, indent=2) + "\n")
            marker.write_text(PULSAR_VERSION + "\n")
            return home
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


# --- admin REST -----------------------------------------------------------------------------------


class AdminError(SandboxError):
    """A Pulsar admin REST call answered with an unexpected status."""

    def __init__(self, method: str, url: str, status: int, body: str) -> None:
        super().__init__(f"pulsar admin: {method} {url} -> HTTP {status}: {body[:500]}")
        self.status = status
        self.body = body


def admin(
    web_url: str,
    method: str,
    path: str,
    body: Any = None,
    *,
    params: dict[str, Any] | None = None,
    timeout: float = 60,
    ok: tuple[int, ...] = (200, 204),
) -> Any:
    """Call the broker's admin REST API; JSON in and out (``None`` for an empty answer).

    ``path`` is already URL-encoded where it holds topic names (see :func:`topic_path`).
    """
    url = web_url.rstrip("/") + path
    if params:
        url += "?" + urllib.parse.urlencode(params)
    data = None
    headers = {"Accept": "application/json"}
    if body is not None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            status, text = resp.status, resp.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read().decode(errors="replace")
    if status not in ok:
        raise AdminError(method, url, status, text)
    if not text.strip():
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def topic_path(topic: str) -> str:
    """``persistent://t/ns/local name`` -> ``/admin/v2/persistent/t/ns/<percent-encoded local name>``."""
    domain, rest = topic.split("://", 1)
    tenant, ns, local = rest.split("/", 2)
    return f"/admin/v2/{domain}/{tenant}/{ns}/{urllib.parse.quote(local, safe='')}"


# --- the sandbox ----------------------------------------------------------------------------------


def _spawn(cmd: list[str], log: Path, env: dict[str, str], cwd: Path) -> subprocess.Popen[bytes]:
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        return subprocess.Popen(
            cmd,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=cwd,
            env=env,
            start_new_session=True,
        )


def write_broker_conf(
    home: Path, target: Path, overrides: dict[str, str], base: str = "standalone.conf"
) -> Path:
    """``conf/<base>`` of the distribution with ``overrides`` replaced in place or appended."""
    lines = (home / "conf" / base).read_text().splitlines()
    todo = dict(overrides)
    out: list[str] = []
    for line in lines:
        key = line.split("=", 1)[0].strip() if "=" in line and not line.lstrip().startswith("#") else None
        if key is not None and key in todo:
            out.append(f"{key}={todo.pop(key)}")
        else:
            out.append(line)
    if todo:
        out.append("")
        out.append("### ledgerlens sandbox additions")
        out.extend(f"{k}={v}" for k, v in todo.items())
    target.write_text("\n".join(out) + "\n")
    return target


class PulsarSandbox:
    """A Pulsar standalone (ZooKeeper metadata, BookKeeper, S3 offload to moto) under ``workdir``.

    Parameters
    ----------
    workdir
        Holds ``state.json``, the broker conf, data directories and logs.
    pulsar_home
        An extracted distribution; default ``$LEDGERLENS_PULSAR_HOME`` or fetched (:func:`pulsar_home`).
    extra_conf
        Settings added over :data:`BROKER_OVERRIDES` (the standalone bookie reads the same file), e.g.
        ``{"gcWaitTime": "2000"}`` for a bookie that reclaims deleted ledgers within seconds.
    """

    def __init__(
        self, workdir: Path, *, pulsar_home: Path | None = None, extra_conf: dict[str, str] | None = None
    ) -> None:
        self.workdir = Path(workdir).resolve()
        self._home = Path(pulsar_home) if pulsar_home else None
        self.extra_conf = dict(extra_conf or {})
        self._s3_server: Any = None

    # paths
    @property
    def state_path(self) -> Path:
        return self.workdir / "state.json"

    @property
    def log_path(self) -> Path:
        return self.workdir / "logs" / "pulsar-standalone.out"

    @property
    def home(self) -> Path:
        if self._home is None:
            self._home = pulsar_home()
        return self._home

    def state(self) -> dict[str, Any]:
        """The recorded state (empty when never started)."""
        try:
            return dict(json.loads(self.state_path.read_text()))
        except (OSError, json.JSONDecodeError):
            return {}

    def _write_state(self, state: dict[str, Any]) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2, sort_keys=True) + "\n")
        tmp.replace(self.state_path)

    # lifecycle
    def up(self, timeout: float = 240) -> dict[str, Any]:
        """Start moto, the S3 relay and Pulsar standalone; wait until a message round-trips.

        Returns the state (also in ``state.json``). Raises SandboxError naming the log and its tail.
        """
        state = self.state()
        if state and all(pid_alive(p) for p in state.get("pids", {}).values()) and state.get("pids"):
            return state
        t_total = time.monotonic()
        t0 = time.monotonic()
        home = self.home
        fetch_s = time.monotonic() - t0
        self.workdir.mkdir(parents=True, exist_ok=True)
        old_ports = state.get("ports", {})
        # an existing data directory pins the ports (the bookie cookie records its address)
        ports = {
            k: int(old_ports.get(k) or free_port())
            for k in ("zookeeper", "bookie", "broker", "web", "s3", "s3_relay")
        }
        state = {
            "version": PULSAR_VERSION,
            "pulsar_home": str(home),
            "workdir": str(self.workdir),
            "cluster": CLUSTER,
            "ports": ports,
            "pids": {},
            "zookeeper_hosts": f"127.0.0.1:{ports['zookeeper']}",
            "service_url": f"pulsar://127.0.0.1:{ports['broker']}",
            "web_url": f"http://127.0.0.1:{ports['web']}",
            "s3_endpoint": f"http://127.0.0.1:{ports['s3']}",
            "s3_relay_endpoint": f"http://127.0.0.1:{ports['s3_relay']}",
            "bucket": BUCKET,
            "region": REGION,
            "logs": {
                "pulsar": str(self.log_path),
                "s3": str(self.workdir / "s3" / "s3.log"),
                "s3_relay": str(self.workdir / "logs" / "s3-relay.log"),
            },
            "conf": str(self.workdir / "conf" / "standalone.conf"),
            "timings": {"fetch_s": round(fetch_s, 2)},
        }
        self._write_state(state)
        try:
            t0 = time.monotonic()
            self._start_s3(state)
            self.start_s3_relay(state)
            state["timings"]["s3_start_s"] = round(time.monotonic() - t0, 2)
            self._write_state(state)
            t0 = time.monotonic()
            self._start_pulsar(state)
            self._write_state(state)
            self._wait_ready(state, timeout)
            state["timings"]["pulsar_ready_s"] = round(time.monotonic() - t0, 2)
            state["timings"]["up_s"] = round(time.monotonic() - t_total, 2)
            state["started_at_ms"] = int(time.time() * 1000)
            self._write_state(state)
            return state
        except BaseException:
            self.down()
            raise

    def _start_s3(self, state: dict[str, Any]) -> None:
        server = S3Server(self.workdir / "s3", port=state["ports"]["s3"])
        server.start(timeout=60)
        state["pids"]["s3"] = server.pid
        # keep the Popen alive for this process; other processes stop it by pid
        self._s3_server = server
        import boto3  # boto3: only when the sandbox starts its S3 server

        s3 = boto3.client(
            "s3",
            endpoint_url=state["s3_endpoint"],
            region_name=REGION,
            aws_access_key_id=AWS_DUMMY["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=AWS_DUMMY["AWS_SECRET_ACCESS_KEY"],
        )
        with contextlib.suppress(s3.exceptions.BucketAlreadyOwnedByYou):
            s3.create_bucket(Bucket=state["bucket"])

    def start_s3_relay(self, state: dict[str, Any] | None = None, timeout: float = 20) -> int:
        """Start the TCP relay the broker reaches S3 through (same port as recorded); returns its pid."""
        state = state if state is not None else self.state()
        port, target = state["ports"]["s3_relay"], state["ports"]["s3"]
        cmd = [
            sys.executable,
            "-m",
            "ledgerlens_sandbox.pulsar",
            "_s3relay",
            "--listen",
            str(port),
            "--target",
            str(target),
        ]
        proc = _spawn(cmd, Path(state["logs"]["s3_relay"]), dict(os.environ), self.workdir)
        deadline = time.monotonic() + timeout
        while not port_open(port):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SandboxError(
                    f"s3 relay on 127.0.0.1:{port} did not start\nlog {state['logs']['s3_relay']}:\n"
                    f"{_tail(Path(state['logs']['s3_relay']))}"
                )
            time.sleep(0.05)
        state["pids"]["s3_relay"] = proc.pid
        if self.state_path.exists():
            self._write_state(state)
        return proc.pid

    def stop_s3_relay(self, state: dict[str, Any] | None = None) -> None:
        """Stop the relay: from the broker's side, S3 is down (connection refused). moto keeps its data."""
        state = state if state is not None else self.state()
        pid = state.get("pids", {}).pop("s3_relay", None)
        if pid:
            stop_pid(int(pid), "_s3relay")
        self._write_state(state)

    def _start_pulsar(self, state: dict[str, Any]) -> None:
        home = Path(state["pulsar_home"])
        ports = state["ports"]
        conf_dir = self.workdir / "conf"
        conf_dir.mkdir(parents=True, exist_ok=True)
        overrides = dict(BROKER_OVERRIDES)
        overrides.update(self.extra_conf)
        overrides.update(
            {
                "brokerServicePort": str(ports["broker"]),
                "webServicePort": str(ports["web"]),
                "managedLedgerOffloadServiceEndpoint": state["s3_relay_endpoint"],
                "offloadersDirectory": str(home / "offloaders"),
                "narExtractionDirectory": str(self.workdir / "nar"),
            }
        )
        write_broker_conf(home, Path(state["conf"]), overrides)
        data = self.workdir / "data"
        cmd = [
            str(home / "bin" / "pulsar"), "standalone", "-nfw", "-nss",
            "--zookeeper-port", str(ports["zookeeper"]),
            "--bookkeeper-port", str(ports["bookie"]),
            "--zookeeper-dir", str(data / "zookeeper"),
            "--bookkeeper-dir", str(data / "bookkeeper"),
            "--advertised-address", "127.0.0.1",
        ]  # fmt: skip
        env = dict(os.environ)
        env.update(AWS_DUMMY)
        env.update(S3_DRIVER_DUMMY)
        env.update(
            {
                "PULSAR_STANDALONE_USE_ZOOKEEPER": "1",
                "PULSAR_STANDALONE_CONF": state["conf"],
                "PULSAR_MEM": os.environ.get("LEDGERLENS_PULSAR_MEM", _PULSAR_MEM),
                "PULSAR_GC": "-XX:+UseG1GC -XX:+PerfDisableSharedMem",
                "PULSAR_GC_LOG": " ",
                "PULSAR_LOG_DIR": str(self.workdir / "logs"),
            }
        )
        proc = _spawn(cmd, self.log_path, env, self.workdir)
        state["pids"]["pulsar"] = proc.pid
        state["command"] = cmd

    def _wait_ready(self, state: dict[str, Any], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        pid = state["pids"]["pulsar"]
        last = "not answering"
        while time.monotonic() < deadline:
            if not pid_alive(pid):
                last = "process exited"
                break
            try:
                clusters = admin(state["web_url"], "GET", "/admin/v2/clusters", timeout=5)
                if CLUSTER in (clusters or []):
                    admin(state["web_url"], "GET", "/admin/v2/namespaces/public", timeout=5)
                    self._round_trip(state, timeout=max(5.0, deadline - time.monotonic()))
                    return
                last = f"clusters: {clusters}"
            except (OSError, SandboxError) as e:
                last = str(e)[:300]
            except Exception as e:  # noqa: BLE001 - pulsar client errors while the broker starts
                last = f"{type(e).__name__}: {e}"[:300]
            time.sleep(1)
        raise SandboxError(
            f"pulsar standalone not ready after {timeout:.0f}s ({last})\n"
            f"command: {' '.join(state['command'])}\n"
            f"log {self.log_path}:\n{_tail(self.log_path, 40)}"
        )

    @staticmethod
    def _round_trip(state: dict[str, Any], timeout: float) -> None:
        topic = "persistent://public/default/ledgerlens-ready"
        client = make_client(state)
        try:
            consumer = client.subscribe(topic, "ready")
            producer = client.create_producer(topic)
            payload = f"ready {time.time()}".encode()
            producer.send(payload)
            msg = consumer.receive(timeout_millis=int(timeout * 1000))
            consumer.acknowledge(msg)
            if msg.data() != payload:
                raise SandboxError(f"pulsar: round trip on {topic} returned {msg.data()!r}")
            producer.close()
            consumer.unsubscribe()
            consumer.close()
        finally:
            client.close()
        admin(state["web_url"], "DELETE", topic_path(topic), params={"force": "true"})

    def down(self) -> dict[str, Any]:
        """Stop what ``up`` started (recorded pids only); returns which were stopped."""
        state = self.state()
        stopped: dict[str, bool] = {}
        markers = {"pulsar": _STANDALONE_MAIN, "s3_relay": "_s3relay", "s3": _MOTO_MAIN}
        pids = state.get("pids", {})
        for name in ("pulsar", "s3_relay", "s3"):
            pid = pids.get(name)
            if pid:
                stopped[name] = stop_pid(int(pid), markers[name], timeout=30)
        server = getattr(self, "_s3_server", None)
        if server is not None:
            server.stop()
            self._s3_server = None
        if state:
            state["pids"] = {}
            state["stopped_at_ms"] = int(time.time() * 1000)
            self._write_state(state)
        return stopped

    def status(self) -> dict[str, Any]:
        """State plus liveness of each recorded process and whether the admin API answers."""
        state = self.state()
        alive = {k: pid_alive(int(v)) for k, v in state.get("pids", {}).items()}
        out = dict(state)
        out["alive"] = alive
        out["running"] = bool(alive) and all(alive.values())
        if alive.get("pulsar"):
            try:
                out["clusters"] = admin(state["web_url"], "GET", "/admin/v2/clusters", timeout=5)
            except (OSError, SandboxError) as e:
                out["clusters"] = f"error: {e}"
        return out


_BROKER_MAIN = "org.apache.pulsar.PulsarBrokerStarter"


class MetadataBroker:
    """A real Pulsar broker without bookies over an existing metadata store (``hosts``: a ZooKeeper
    connect string with the cluster's chroot, e.g. a generated cluster's): it serves the admin REST
    API from that metadata, as ``--source admin`` reads it.

    System topics and topic-level policies are off and no topic is created or loaded, so the broker
    writes no managed ledger and no ledger: besides its own registration nodes (outside the audited
    roots) the tree stays as it was written.
    """

    def __init__(self, workdir: Path, hosts: str, cluster: str) -> None:
        self.workdir = Path(workdir)
        self.hosts = hosts
        self.cluster = cluster
        self.proc: subprocess.Popen[bytes] | None = None
        self.web_url = ""

    @property
    def log_path(self) -> Path:
        return self.workdir / "broker.out"

    def up(self, timeout: float = 180) -> str:
        """Start the broker; returns its admin URL once ``/admin/v2/clusters`` names the cluster."""
        home = pulsar_home()
        self.workdir.mkdir(parents=True, exist_ok=True)
        web = free_port()
        store = f"zk:{self.hosts}"
        conf = write_broker_conf(
            home,
            self.workdir / "broker.conf",
            {
                "clusterName": self.cluster,
                "metadataStoreUrl": store,
                "configurationMetadataStoreUrl": store,
                "bookkeeperMetadataServiceUri": f"metadata-store:{store}/ledgers",
                "brokerServicePort": str(free_port()),
                "webServicePort": str(web),
                "bindAddress": "127.0.0.1",
                "advertisedAddress": "127.0.0.1",
                "systemTopicEnabled": "false",
                "topicLevelPoliciesEnabled": "false",
                "allowAutoTopicCreation": "false",
                "brokerDeleteInactiveTopicsEnabled": "false",
                "functionsWorkerEnabled": "false",
                "webSocketServiceEnabled": "false",
                "narExtractionDirectory": str(self.workdir / "nar"),
            },
            base="broker.conf",
        )
        env = dict(os.environ)
        env.update(
            {
                "PULSAR_BROKER_CONF": str(conf),
                "PULSAR_MEM": "-Xms256m -Xmx768m -XX:MaxDirectMemorySize=512m",
                "PULSAR_GC": "-XX:+UseG1GC -XX:+PerfDisableSharedMem",
                "PULSAR_GC_LOG": " ",
                "PULSAR_LOG_DIR": str(self.workdir / "logs"),
            }
        )
        cmd = [str(home / "bin" / "pulsar"), "broker"]
        self.proc = _spawn(cmd, self.log_path, env, self.workdir)
        self.web_url = f"http://127.0.0.1:{web}"
        deadline = time.monotonic() + timeout
        last = "not answering"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                last = f"process exited ({self.proc.returncode})"
                break
            try:
                clusters = admin(self.web_url, "GET", "/admin/v2/clusters", timeout=5)
                if self.cluster in (clusters or []):
                    return self.web_url
                last = f"clusters: {clusters}"
            except (OSError, SandboxError) as e:
                last = str(e)[:300]
            time.sleep(1)
        self.down()
        raise SandboxError(
            f"pulsar broker over {self.hosts} not ready after {timeout:.0f}s ({last})\n"
            f"log {self.log_path}:\n{_tail(self.log_path, 40)}"
        )

    def down(self) -> None:
        """Stop the broker (and wait for it)."""
        if self.proc is not None and self.proc.poll() is None:
            stop_pid(self.proc.pid, _BROKER_MAIN, timeout=30)
        self.proc = None


def make_client(state: dict[str, Any], **kwargs: Any) -> Any:
    """A ``pulsar.Client`` for the sandbox with its C++ logging kept quiet."""
    import pulsar  # the Pulsar client: only where a client is made

    # the C++ client's log factory is process-wide and set by the first client: a Python logger
    # there would let lines that are not UTF-8 (message payloads at DEBUG) through its level
    kwargs.setdefault("operation_timeout_seconds", 30)
    quiet = pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
    return pulsar.Client(state["service_url"], logger=quiet, **kwargs)


# --- the S3 relay -----------------------------------------------------------------------------------


def _relay_main(listen: int, target: int) -> None:
    """Forward TCP 127.0.0.1:listen -> 127.0.0.1:target until killed."""

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    async def handle(cr: asyncio.StreamReader, cw: asyncio.StreamWriter) -> None:
        try:
            sr, sw = await asyncio.open_connection("127.0.0.1", target)
        except OSError:
            cw.close()
            return
        await asyncio.gather(pipe(cr, sw), pipe(sr, cw))

    async def main() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", listen, reuse_address=True)
        async with server:
            await server.serve_forever()

    asyncio.run(main())


# --- command line -----------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    """``up|seed|plant|restore-s3|status|down --workdir DIR``; prints JSON."""
    parser = argparse.ArgumentParser(prog="python -m ledgerlens_sandbox.pulsar")
    parser.add_argument(
        "command", choices=["up", "seed", "plant", "restore-s3", "status", "down", "_s3relay"]
    )
    parser.add_argument("--workdir", type=Path, default=Path("pulsar-sandbox"))
    parser.add_argument("--timeout", type=float, default=240)
    parser.add_argument("--listen", type=int)
    parser.add_argument("--target", type=int)
    args = parser.parse_args(argv)
    if args.command == "_s3relay":
        _relay_main(args.listen, args.target)
        return 0
    box = PulsarSandbox(args.workdir)
    result: Any
    try:
        if args.command == "up":
            result = box.up(timeout=args.timeout)
        elif args.command == "seed":
            from ledgerlens_sandbox.seed import seed  # cycle: seed imports this module

            result = seed(box.state())
        elif args.command == "plant":
            from ledgerlens_sandbox.failures import plant  # cycle: failures imports this module

            result = plant(box.state())
        elif args.command == "restore-s3":
            from ledgerlens_sandbox.failures import restore_s3  # cycle: failures imports this module

            restore_s3(box.state())
            result = box.status()
        elif args.command == "status":
            result = box.status()
        else:
            result = box.down()
    except SandboxError as e:
        print(json.dumps({"error": str(e)}, indent=2), file=sys.stderr)
        return 1
    print(json.dumps(result, indent=2, sort_keys=True, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
