"""The Redis index's connection: URI, the Lua script, bounded retries, errors that name the server.

Every call of the index goes through :meth:`ScriptClient.call`: one loop that retries what is worth
retrying (the server restarting, loading, failing over, resharding), reloads the script when Redis
forgot it, and turns every failure into a :class:`SimhashIndexError` naming the server.

Retries are bounded twice: by their number (``retries``) and, when ``retry_budget`` is given, by
time: a call that has failed for that many seconds gives up instead of sleeping past it. A crawl
sets a budget of about a second (see :mod:`scrapy_simhash.crawl_index`), because its circuit
breaker, not the client, should ride out an outage; a batch job keeps the longer default.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from importlib import resources
from typing import Any, TypeVar
from urllib.parse import SplitResult, parse_qsl, urlencode, urlsplit, urlunsplit

import redis
from redis.backoff import NoBackoff
from redis.exceptions import NoScriptError, RedisClusterException, ResponseError
from redis.retry import Retry

from ..base import IndexLostError, IndexUnavailableError, SimhashIndexError

logger = logging.getLogger(__name__)

URI_OPTIONS = (
    "prefix",
    "retention",
    "cluster",
    "retries",
    "retry_cap",
    "retry_budget",
    "timeout",
    "layout",
    "tables",
)
# Worth retrying: the server is restarting, loading, failing over or resharding.
UNAVAILABLE = (
    redis.ConnectionError,
    redis.TimeoutError,
    redis.exceptions.ClusterError,
    redis.exceptions.TryAgainError,
    redis.exceptions.AskError,
    redis.exceptions.SlotNotCoveredError,
)

LOST = "SIMHASH_LOST"
"""The script's error reply when the namespace's epoch is gone (see redis_store.lua)."""

T = TypeVar("T")
Client = redis.Redis | redis.RedisCluster


def _load_lua() -> str:
    return resources.files(__package__).joinpath("redis_store.lua").read_text(encoding="utf-8")


SCRIPT = _load_lua()


def parse_retry_budget(value: Any) -> float | None:
    """The ``retry_budget`` option as seconds (None or ``""``: no time bound, only the count)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    budget = float(value)
    if not budget >= 0:
        raise ValueError(f"retry_budget must be a number of seconds >= 0, got {value!r}")
    return budget


def connect(uri: str, options: dict[str, Any]) -> tuple[Client, str, dict[str, Any]]:
    """A client for ``uri``, the server's description for messages, and our options (URI + keywords)."""
    parts = urlsplit(uri)
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    ours = {name: query.pop(name) for name in URI_OPTIONS if name in query}
    ours.update(options)
    unknown = set(ours) - set(URI_OPTIONS)
    if unknown:
        raise TypeError(f"unknown Redis index option(s): {', '.join(sorted(unknown))}")
    clean = urlunsplit(parts._replace(query=urlencode(query)))
    timeout = float(ours.get("timeout", 5.0))
    connection = {
        "socket_timeout": timeout,
        "socket_connect_timeout": min(timeout, 2.0),
        "decode_responses": False,
    }
    location = describe(parts)
    if truthy(ours.get("cluster", False)):
        try:
            client: Client = redis.RedisCluster.from_url(clean, **connection)
        except (RedisClusterException, *UNAVAILABLE) as exc:
            raise IndexUnavailableError(f"Redis Cluster at {location} is unavailable: {exc}") from exc
    else:
        # Retries are ours (see ScriptClient.call): one loop that also reloads scripts and names the host.
        client = redis.Redis.from_url(clean, retry=Retry(NoBackoff(), 0), **connection)
    return client, location, ours


class ScriptClient:
    """Runs the index's Lua script over ``keys``, with bounded retries.

    ``script``: the Lua source; the simhash index's by default, a subclass names another index's.
    """

    script: str = SCRIPT

    def __init__(
        self,
        client: Client,
        keys: list[str],
        *,
        location: str,
        namespace: str,
        retries: int = 10,
        retry_cap: float = 2.0,
        retry_budget: float | None = None,
    ) -> None:
        if retries < 0:
            raise ValueError(f"retries must be >= 0, got {retries}")
        if retry_budget is not None and not retry_budget >= 0:
            raise ValueError(f"retry_budget must be >= 0, got {retry_budget}")
        self.client = client
        self.keys = keys
        self.location = location
        self.namespace = namespace
        self.retries = retries
        self.retry_cap = retry_cap
        self.retry_budget = retry_budget
        self.closed = False
        self._sha: str | None = None

    def run(self, args: list[bytes], action: str) -> Any:
        """One script call, one round trip (plus a SCRIPT LOAD after a Redis restart)."""

        def attempt() -> Any:
            if self._sha is None:
                self._sha = self.client.script_load(self.script)
            try:
                return self.client.evalsha(self._sha, len(self.keys), *self.keys, *args)
            except NoScriptError:
                self._sha = None  # Redis restarted (or SCRIPT FLUSH): load and run again
                raise _Reload() from None

        return self.call(attempt, action)

    def run_many(self, batch: list[list[bytes]], action: str) -> list[Any]:
        """Pipelined script calls; retried as a whole, which is safe because writes are idempotent."""

        def attempt() -> list[Any]:
            if self._sha is None:
                self._sha = self.client.script_load(self.script)
            pipe = self._slot_client().pipeline(transaction=False)
            for args in batch:
                pipe.evalsha(self._sha, len(self.keys), *self.keys, *args)
            results = pipe.execute(raise_on_error=False)
            for result in results:
                if isinstance(result, NoScriptError):
                    self._sha = None
                    raise _Reload()
                if isinstance(result, redis.exceptions.AskError):  # MOVED/ASK: the slot moved
                    nodes = getattr(self.client, "nodes_manager", None)  # (a cluster's: MOVED/ASK)
                    if nodes is not None:
                        nodes.initialize()
                    raise result
                if isinstance(result, Exception):
                    raise result
            return results

        return self.call(attempt, action)

    def _slot_client(self) -> redis.Redis:
        """The client that pipelines go through: on Redis Cluster, the primary owning our one slot
        (redis-py's cluster pipeline refuses EVALSHA; every key of this index is in that slot anyway)."""
        if isinstance(self.client, redis.RedisCluster):
            return self.client.get_redis_connection(self.client.get_node_from_key(self.keys[0]))
        return self.client

    def call(self, fn: Callable[[], T], action: str) -> T:
        """Run ``fn`` with bounded retries; every failure leaves as a SimhashIndexError naming the server."""
        if self.closed:
            raise SimhashIndexError(f"{self.location}: the index is closed")
        started = time.monotonic()
        failures = 0
        while True:
            try:
                return fn()
            except _Reload:
                failures += 1
                if failures > self.retries + 1:
                    raise SimhashIndexError(f"{self.location}: could not load the index script") from None
            except UNAVAILABLE as exc:
                failures += 1
                pause = min(self.retry_cap, 0.05 * 2 ** (failures - 1))
                if failures > self.retries or self._over_budget(started, pause):
                    raise IndexUnavailableError(
                        f"Redis index at {self.location} is unavailable ({action}): {failures} attempt"
                        f"{'s' if failures > 1 else ''} in "
                        f"{time.monotonic() - started:.1f} s failed; last error: {type(exc).__name__}: {exc}"
                    ) from exc
                logger.warning(
                    "Redis index at %s: %s failed (%s: %s); retry %d/%d in %.2f s",
                    self.location, action, type(exc).__name__, exc, failures, self.retries, pause,
                )  # fmt: skip
                time.sleep(pause)
            except (ResponseError, RedisClusterException) as exc:
                if str(exc).startswith(LOST):
                    raise IndexLostError(
                        f"Redis at {self.location} lost the index namespace {self.namespace!r} "
                        f"({str(exc)[len(LOST) :].strip()}: restarted without persistence, flushed or "
                        "evicted?); it is not re-created silently. Restore the data, or start afresh with "
                        "another prefix or SIMHASH_RESET"
                    ) from None
                raise SimhashIndexError(f"Redis at {self.location} refused {action}: {exc}") from exc

    def _over_budget(self, started: float, pause: float) -> bool:
        """Whether pausing ``pause`` s more would take this call past its retry budget."""
        return self.retry_budget is not None and time.monotonic() - started + pause > self.retry_budget

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.client.close()


class _Reload(Exception):
    """Internal: the script cache was empty (Redis restarted); load the script and try again."""


def truthy(value: Any) -> bool:
    return str(value).strip().lower() in ("1", "true", "yes", "on")


def describe(parts: SplitResult) -> str:
    """host:port/db (or the socket path) without the password, for error messages."""
    if parts.scheme == "unix":
        return f"unix://{parts.path}"
    host = parts.hostname or "localhost"
    port = parts.port or 6379
    db = parts.path.strip("/") or "0"
    return f"{parts.scheme}://{host}:{port}/{db}"
