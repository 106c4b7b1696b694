"""A real ``redis-server`` for the tests: own temp dir, free port, 127.0.0.1 only.

The suite starts its own servers and never relies on one already running. Persistence is on
(``appendonly yes``, ``appendfsync always``) so that an acknowledged write survives ``kill -9``, which
the restart tests depend on.
"""

from __future__ import annotations

import random
import shutil
import socket
import subprocess
import time
from pathlib import Path

import redis

REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"
REDIS_CLI = shutil.which("redis-cli") or "/usr/bin/redis-cli"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def free_cluster_port() -> int:
    """A free port p <= 55535 whose cluster bus port p + 10000 is free too."""
    rng = random.Random()
    for _ in range(1000):
        port = rng.randrange(20000, 55535)
        if _bindable(port) and _bindable(port + 10000):
            return port
    raise RuntimeError("no free port pair for a Redis Cluster node")


class RedisServer:
    """One redis-server process whose data directory outlives restarts."""

    def __init__(
        self, directory: Path, port: int | None = None, *, cluster: bool = False, password: str | None = None
    ) -> None:
        if not Path(REDIS_SERVER).exists():
            raise RuntimeError(
                "redis-server is not installed: `make test` installs it (Debian: redis-server)"
            )
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.port = port or (free_cluster_port() if cluster else free_port())
        self.cluster = cluster
        self.password = password
        """``--requirepass``: clients must give it (in the URI: ``redis://:PASSWORD@host:port/0``)."""
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 10.0, *, persistent: bool = True) -> RedisServer:
        """Start (or restart) the server; ``persistent=False``: no AOF, so it comes up empty."""
        args = [
            REDIS_SERVER,
            "--bind", "127.0.0.1",
            "--port", str(self.port),
            "--dir", str(self.directory),
            "--appendonly", "yes" if persistent else "no",
            "--appendfsync", "always",
            "--save", "",
            "--protected-mode", "yes",
            "--logfile", str(self.directory / "redis.log"),
        ]  # fmt: skip
        if self.cluster:
            args += ["--cluster-enabled", "yes", "--cluster-config-file", str(self.directory / "nodes.conf")]
        if self.password:
            args += ["--requirepass", self.password]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        client = redis.Redis(
            host="127.0.0.1", port=self.port, password=self.password, socket_connect_timeout=0.5
        )
        try:
            while True:
                if self.process is not None and self.process.poll() is not None:
                    log = (self.directory / "redis.log").read_text(errors="replace")[-2000:]
                    raise RuntimeError(f"redis-server exited with {self.process.returncode}:\n{log}")
                try:
                    client.ping()
                    return
                except (redis.ConnectionError, redis.exceptions.BusyLoadingError):
                    if time.monotonic() > deadline:
                        raise RuntimeError(
                            f"redis-server on port {self.port} not ready in {timeout} s"
                        ) from None
                    time.sleep(0.05)
        finally:
            client.close()

    def kill(self) -> None:
        """SIGKILL: no clean shutdown, so only what was fsynced survives."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        self.process = None

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self.process = None

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, password=self.password)


class RedisClusterServers:
    """A real Redis Cluster of ``size`` primaries (no replicas) on 127.0.0.1."""

    def __init__(self, directory: Path, size: int = 3) -> None:
        self.nodes = [RedisServer(Path(directory) / f"node{i}", cluster=True) for i in range(size)]

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.nodes[0].port}/0"

    def start(self, timeout: float = 30.0) -> RedisClusterServers:
        try:
            self._start(timeout)
        except BaseException:
            self.stop()  # never leave node processes behind
            raise
        return self

    def _start(self, timeout: float) -> None:
        for node in self.nodes:
            node.start()
        hosts = [f"127.0.0.1:{n.port}" for n in self.nodes]
        subprocess.run(
            [REDIS_CLI, "--cluster", "create", *hosts, "--cluster-replicas", "0", "--cluster-yes"],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=timeout,
        )
        deadline = time.monotonic() + timeout
        for node in self.nodes:
            client = node.client()
            try:
                while b"cluster_state:ok" not in client.execute_command("CLUSTER", "INFO"):
                    if time.monotonic() > deadline:
                        raise RuntimeError("Redis Cluster did not reach cluster_state:ok")
                    time.sleep(0.1)
            finally:
                client.close()

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


def age_writes(client: redis.Redis | redis.RedisCluster, prefix: str, seconds: float) -> int:
    """Move every write of the simhash index ``prefix`` ``seconds`` into the past: retention compares the
    insert times it keeps (milliseconds, sorted set ``<tag>:time``) with Redis's clock, so the test makes
    time pass for the index instead of sleeping through a short window. Returns how many it moved."""
    times = f"simhash:{{{prefix}}}:time"
    moved = client.zrange(times, 0, -1, withscores=True)
    if moved:
        client.zadd(times, {member: score - seconds * 1000 for member, score in moved}, xx=True)
    return len(moved)
