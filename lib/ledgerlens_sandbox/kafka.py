"""A real single-node Kafka broker (KRaft) with tiered storage, for tests, demos and benchmarks.

Jars come from Maven Central (``kafka-pom.xml``, resolved once into the cache). The remote storage
manager is Kafka's own ``LocalTieredStorage`` from its published ``kafka-storage`` test artifact:
it writes real segment files under ``<workdir>/remote/kafka-tiered-storage``, and the broker's
topic-based metadata manager writes real ``__remote_log_metadata`` records.

Only one broker runs on this machine at a time: :meth:`KafkaBroker.start` takes the exclusive
lock ``/tmp/ll-kafka.lock`` (the same lock as ``flock /tmp/ll-kafka.lock ...``) and
:meth:`KafkaBroker.stop` releases it.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import shutil
import subprocess
import time
import uuid
from pathlib import Path
from typing import IO

from ledgerlens.errors import SandboxError
from ledgerlens_sandbox.servers import _Server, free_port, maven_jars

__all__ = ["KAFKA_LOCK", "KAFKA_VERSION", "KafkaBroker", "kafka_jars"]

KAFKA_VERSION = "4.1.1"
KAFKA_LOCK = "/tmp/ll-kafka.lock"
_MAIN = "kafka.Kafka"
_FORMAT_MAIN = "kafka.tools.StorageTool"
_LOCAL_TIERED_STORAGE = "org.apache.kafka.server.log.remote.storage.LocalTieredStorage"


def kafka_jars(timeout: float = 900) -> Path:
    """The directory of the broker's jars (``<cache>/kafka-<version>/jars``)."""
    return maven_jars("kafka", KAFKA_VERSION, "kafka-pom.xml", "kafka-storage-*-test.jar", timeout) / "jars"


class KafkaBroker(_Server):
    """A combined broker + controller on 127.0.0.1 with remote storage enabled (LocalTieredStorage).

    ``metadata_partitions`` is the partition count of ``__remote_log_metadata``;
    ``task_interval_ms`` how often the remote log manager copies and deletes segments.
    """

    name = "kafka"
    marker = _MAIN

    def __init__(
        self,
        workdir: Path,
        port: int | None = None,
        *,
        metadata_partitions: int = 3,
        task_interval_ms: int = 1000,
        lock_timeout: float = 1800,
    ) -> None:
        super().__init__(workdir, port)
        self.controller_port = free_port()
        self.metadata_partitions = metadata_partitions
        self.task_interval_ms = task_interval_ms
        self.lock_timeout = lock_timeout
        self._lock: IO[str] | None = None

    @property
    def bootstrap_servers(self) -> str:
        """``127.0.0.1:<port>``."""
        return f"127.0.0.1:{self.port}"

    @property
    def remote_dir(self) -> Path:
        """LocalTieredStorage's ``dir``; segment files are under ``kafka-tiered-storage/`` in it."""
        return self.workdir / "remote"

    def _java(self, main: str, *args: str) -> list[str]:
        jars = kafka_jars()
        return [
            shutil.which("java") or "java",
            "-Xms128m",
            "-Xmx768m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Djava.net.preferIPv4Stack=true",
            f"-Dlog4j.configuration=file:{self.workdir / 'log4j.properties'}",
            "-cp",
            f"{jars}/*",
            main,
            *args,
        ]

    def _write_config(self) -> Path:
        data = self.workdir / "data"
        self.remote_dir.mkdir(parents=True, exist_ok=True)
        (self.workdir / "log4j.properties").write_text(
            "log4j.rootLogger=INFO, stdout\n"
            "log4j.appender.stdout=org.apache.log4j.ConsoleAppender\n"
            "log4j.appender.stdout.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n\n"
            "log4j.logger.org.apache.kafka.clients=WARN\n"
        )
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT",
            "log.dirs": str(data),
            "num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "log.retention.check.interval.ms": "1000",
            "log.initial.task.delay.ms": "500",
            "remote.log.storage.system.enable": "true",
            "remote.log.storage.manager.class.name": _LOCAL_TIERED_STORAGE,
            "remote.log.storage.manager.impl.prefix": "rsm.config.",
            "rsm.config.dir": str(self.remote_dir),
            "remote.log.metadata.manager.impl.prefix": "rlmm.config.",
            "remote.log.metadata.manager.listener.name": "PLAINTEXT",
            "rlmm.config.remote.log.metadata.topic.replication.factor": "1",
            "rlmm.config.remote.log.metadata.topic.num.partitions": str(self.metadata_partitions),
            "remote.log.manager.task.interval.ms": str(self.task_interval_ms),
        }
        cfg = self.workdir / "server.properties"
        cfg.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        if not (data / "meta.properties").exists():
            cluster_id = "-"
            while cluster_id.startswith("-"):  # kafka-storage would read a leading '-' as an option
                cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
            cmd = self._java(_FORMAT_MAIN, "format", "-t", cluster_id, "-c", str(cfg))
            try:
                proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            except subprocess.TimeoutExpired as e:
                raise SandboxError("kafka: 'kafka-storage format' timed out after 300s") from e
            if proc.returncode != 0:
                tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-20:])
                raise SandboxError(f"kafka: 'kafka-storage format' failed (exit {proc.returncode}):\n{tail}")
        return cfg

    def _command(self) -> list[str]:
        return self._java(_MAIN, str(self._write_config()))

    def _ready(self) -> bool:
        from confluent_kafka.admin import AdminClient  # the Kafka client: only to probe the broker

        try:
            md = AdminClient({"bootstrap.servers": self.bootstrap_servers}).list_topics(timeout=2)
        except Exception:  # noqa: BLE001 - any failure means not ready yet
            return False
        return bool(md.brokers)

    def _take_lock(self) -> None:
        Path(KAFKA_LOCK).touch(exist_ok=True)
        lock = open(KAFKA_LOCK, "w")  # noqa: SIM115 - held until stop()
        deadline = time.monotonic() + self.lock_timeout
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                self._lock = lock
                return
            except BlockingIOError:
                if time.monotonic() > deadline:
                    lock.close()
                    raise SandboxError(
                        f"kafka: another broker holds {KAFKA_LOCK} for more than {self.lock_timeout:.0f}s"
                    ) from None
                time.sleep(1)

    def start(self, timeout: float = 240) -> KafkaBroker:
        """Take the machine-wide Kafka lock, format the storage on first start, start the broker."""
        if self.process is not None:
            return self
        self._take_lock()
        try:
            super().start(timeout)
        except BaseException:
            self._release()
            raise
        return self

    def _release(self) -> None:
        lock, self._lock = self._lock, None
        if lock is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(lock, fcntl.LOCK_UN)
            lock.close()

    def stop(self) -> None:
        """Stop the broker and release the lock; idempotent."""
        try:
            super().stop()
        finally:
            self._release()

    def __enter__(self) -> KafkaBroker:
        return self.start()
