"""Real servers on loopback for tests, demos and benchmarks: ZooKeeper and an S3 API (moto).

Each server runs as a child process in its own session, logs to its work directory and writes its
pid there (``<name>.pid``) so another process can stop it (see :func:`stop_pid`).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from importlib import resources
from pathlib import Path
from types import TracebackType

from ledgerlens.errors import SandboxError
from ledgerlens.settings.config import cache_dir

ZOOKEEPER_VERSION = "3.9.3"
_ZK_MAIN = "org.apache.zookeeper.server.ZooKeeperServerMain"
_S3_MAIN = "moto.server"


_HANDED_OUT: set[int] = set()
_HANDED_OUT_LOCK = threading.Lock()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago and that this process has not handed out
    before: the kernel gives a port just closed out again, and two picks for one server (a bookie's
    and a broker's port) once got the same one."""
    with _HANDED_OUT_LOCK:
        while True:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.bind(("127.0.0.1", 0))
                port = int(s.getsockname()[1])
            if port not in _HANDED_OUT:
                _HANDED_OUT.add(port)
                return port


def _tail(path: Path, lines: int = 30) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


def zookeeper_jars(timeout: float = 900) -> Path:
    """The directory of ZooKeeper server jars, resolved with Maven once per cache dir."""
    return maven_jars("zookeeper", ZOOKEEPER_VERSION, "zookeeper-pom.xml", "zookeeper-*.jar", timeout)


def maven_jars(name: str, version: str, pom_resource: str, expect: str, timeout: float = 900) -> Path:
    """``cache_dir()/<name>-<version>`` with the jars of a packaged pom under ``jars/``.

    Resolved with ``mvn dependency:copy-dependencies`` once per cache dir: a marker file records a
    finished resolution, a file lock keeps parallel processes from resolving at the same time.
    ``expect`` is a glob that must match a resolved jar.
    """
    target = cache_dir() / f"{name}-{version}"
    marker = target / ".resolved"
    if marker.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    lock_path = target.parent / f"{name}-{version}.lock"
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if marker.exists():
                return target
            mvn = shutil.which("mvn")
            if mvn is None:
                raise SandboxError(f"{name}: 'mvn' not found on PATH; Maven is needed to fetch the jars")
            jars = target / "jars"
            shutil.rmtree(target, ignore_errors=True)
            jars.mkdir(parents=True)
            pom = target / "pom.xml"
            pom.write_bytes(resources.files("ledgerlens_sandbox").joinpath(pom_resource).read_bytes())
            cmd = [
                mvn,
                "-q",
                "-B",
                "-f",
                str(pom),
                "dependency:copy-dependencies",
                f"-DoutputDirectory={jars}",
            ]
            try:
                proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
            except subprocess.TimeoutExpired as e:
                raise SandboxError(f"{name}: {' '.join(cmd)} timed out after {timeout:.0f}s") from e
            if proc.returncode != 0 or not any(jars.glob(expect)):
                out = "\n".join((proc.stdout + proc.stderr).splitlines()[-30:])
                raise SandboxError(
                    f"{name}: resolving jars failed (exit {proc.returncode}): {' '.join(cmd)}\n{out}"
                )
            marker.write_text(version + "\n")
            return target
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists (and is not a zombie)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def stop_pid(pid: int, expect: str, timeout: float = 15) -> bool:
    """Stop the server process ``pid`` (and its process group) if its command line contains ``expect``.

    Returns whether a process was stopped. A pid that was reused by an unrelated process is left alone.
    """
    if not pid_alive(pid) or expect not in _cmdline(pid):
        return False
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if os.getpgid(pid) == pid:
                os.killpg(pid, sig)
            else:
                os.kill(pid, sig)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
            if not pid_alive(pid):
                return True
            time.sleep(0.05)
    return not pid_alive(pid)


class _Server:
    """A child process with a work directory, a log file, a pid file and a readiness check."""

    name = "server"
    marker = ""  # a string of the command line, checked before stopping by pid

    def __init__(self, workdir: Path, port: int | None = None) -> None:
        self.workdir = Path(workdir).resolve()
        self.port = port or free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def log_path(self) -> Path:
        return self.workdir / f"{self.name}.log"

    @property
    def pid_path(self) -> Path:
        return self.workdir / f"{self.name}.pid"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def _command(self) -> list[str]:
        raise NotImplementedError

    def _env(self) -> dict[str, str]:
        return dict(os.environ)

    def _ready(self) -> bool:
        raise NotImplementedError

    def start(self, timeout: float = 30) -> _Server:
        """Start the process and wait until it answers; SandboxError with the log tail if not."""
        if self.process is not None:
            return self
        self.workdir.mkdir(parents=True, exist_ok=True)
        cmd = self._command()
        with open(self.log_path, "ab") as log:
            try:
                self.process = subprocess.Popen(
                    cmd,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    cwd=self.workdir,
                    env=self._env(),
                    start_new_session=True,
                )
            except OSError as e:
                raise SandboxError(f"{self.name}: cannot run {' '.join(cmd)}: {e}") from e
        self.pid_path.write_text(f"{self.process.pid}\n")
        deadline = time.monotonic() + timeout
        reason = "not answering"
        while time.monotonic() < deadline:
            code = self.process.poll()
            if code is not None:
                reason = f"process exited with code {code}"
                break
            if port_open(self.port) and self._ready():
                return self
            time.sleep(0.1)
        else:
            reason = f"not ready after {timeout:.0f}s"
        self.stop()
        raise SandboxError(
            f"{self.name} on 127.0.0.1:{self.port}: {reason}\ncommand: {' '.join(cmd)}\n"
            f"log {self.log_path}:\n{_tail(self.log_path)}"
        )

    def stop(self) -> None:
        """Stop the process group; idempotent."""
        proc, self.process = self.process, None
        if proc is not None and proc.poll() is None:
            for sig in (signal.SIGTERM, signal.SIGKILL):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, sig)
                try:
                    proc.wait(timeout=10)
                    break
                except subprocess.TimeoutExpired:
                    continue
        with contextlib.suppress(FileNotFoundError):
            self.pid_path.unlink()

    def __enter__(self) -> _Server:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def port_open(port: int) -> bool:
    """Whether something listens on 127.0.0.1:``port`` (a connection within half a second)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


class ZooKeeperServer(_Server):
    """A standalone ZooKeeper 3.9 server on 127.0.0.1 (jars from Maven, cached)."""

    name = "zookeeper"
    marker = _ZK_MAIN

    def __init__(
        self,
        workdir: Path,
        port: int | None = None,
        *,
        sasl_users: dict[str, str] | None = None,
        snap_count: int | None = None,
        snapshot_compression: str = "",
        heap: str = "512m",
    ) -> None:
        """``sasl_users`` (user -> password): also accept SASL DIGEST-MD5 logins of these users;
        ``snap_count``: transactions between snapshots (ZooKeeper's default 100,000);
        ``snapshot_compression``: ``gz`` or ``snappy`` (``zookeeper.snapshot.compression.method``)."""
        super().__init__(workdir, port)
        self.sasl_users = dict(sasl_users or {})
        self.snap_count = snap_count
        self.snapshot_compression = snapshot_compression
        self.heap = heap

    @property
    def data_dir(self) -> Path:
        """ZooKeeper's ``dataDir`` (snapshots and transaction logs under ``version-2``)."""
        return self.workdir / "zk-data"

    @property
    def hosts(self) -> str:
        """Connection string, ``127.0.0.1:<port>``."""
        return f"127.0.0.1:{self.port}"

    def _command(self) -> list[str]:
        jars = zookeeper_jars() / "jars"
        data = self.workdir / "zk-data"
        data.mkdir(parents=True, exist_ok=True)
        cfg = self.workdir / "zoo.cfg"
        cfg.write_text(
            "tickTime=2000\n"
            f"dataDir={data}\n"
            f"clientPort={self.port}\n"
            "clientPortAddress=127.0.0.1\n"
            "admin.enableServer=false\n"
            "maxClientCnxns=0\n"
            "4lw.commands.whitelist=*\n"
            "autopurge.purgeInterval=0\n" + (f"snapCount={self.snap_count}\n" if self.snap_count else "")
        )
        sasl: list[str] = []
        if self.sasl_users:
            jaas = self.workdir / "server-jaas.conf"
            users = "\n".join(f'  user_{u}="{pw}"' for u, pw in self.sasl_users.items())
            jaas.write_text(
                f"Server {{\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n{users};\n}};\n"
            )
            jaas.chmod(0o600)
            with cfg.open("a") as f:
                f.write("authProvider.sasl=org.apache.zookeeper.server.auth.SASLAuthenticationProvider\n")
            sasl = [f"-Djava.security.auth.login.config={jaas}"]
        java = shutil.which("java") or "java"
        extra = [f"-Dzookeeper.snapCount={self.snap_count}"] if self.snap_count else []
        if self.snapshot_compression:
            extra.append(f"-Dzookeeper.snapshot.compression.method={self.snapshot_compression}")
        return [
            java,
            *sasl,
            "-Xms64m",
            f"-Xmx{self.heap}",
            *extra,
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Djava.net.preferIPv4Stack=true",
            "-Dzookeeper.jmx.log4j.disable=true",
            "-cp",
            f"{jars}/*",
            _ZK_MAIN,
            str(cfg),
        ]

    def _ready(self) -> bool:
        from kazoo.client import KazooClient  # kazoo: only to probe the ZooKeeper server
        from kazoo.handlers.threading import KazooTimeoutError

        quiet = logging.getLogger("ledgerlens_sandbox.zookeeper-probe")
        quiet.setLevel(logging.CRITICAL)
        client = KazooClient(hosts=self.hosts, timeout=5, connection_retry={"max_tries": 0}, logger=quiet)
        try:
            client.start(timeout=2)
            client.get("/")
            return True
        except (KazooTimeoutError, Exception):  # noqa: BLE001 - any failure means not ready yet
            return False
        finally:
            with contextlib.suppress(Exception):
                client.stop()
                client.close()

    def start(self, timeout: float = 30) -> ZooKeeperServer:
        super().start(timeout)
        return self

    def __enter__(self) -> ZooKeeperServer:
        return self.start()


class S3Server(_Server):
    """moto's S3-compatible server on 127.0.0.1, run with this interpreter."""

    name = "s3"
    marker = _S3_MAIN

    @property
    def endpoint_url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self.port}"

    def _command(self) -> list[str]:
        return [sys.executable, "-m", _S3_MAIN, "-H", "127.0.0.1", "-p", str(self.port)]

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.setdefault("AWS_ACCESS_KEY_ID", "sandbox")
        env.setdefault("AWS_SECRET_ACCESS_KEY", "sandbox")
        env.setdefault("AWS_DEFAULT_REGION", "us-east-1")
        return env

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(self.endpoint_url + "/", timeout=2) as resp:
                return resp.status < 500
        except urllib.error.HTTPError as e:
            return e.code < 500
        except OSError:
            return False

    def start(self, timeout: float = 30) -> S3Server:
        super().start(timeout)
        return self

    def __enter__(self) -> S3Server:
        return self.start()
