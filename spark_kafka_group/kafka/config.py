"""librdkafka configuration shared by the driver (:mod:`.cluster`) and the executors (fetcher).

* librdkafka's own log lines never reach stderr: they go to the Python logger
  ``spark_kafka_group.librdkafka`` at DEBUG level (configuration warnings at WARNING). The
  failures that matter surface as our exceptions, with the broker's words in them.
* Java client security settings (``sasl.jaas.config``, ``ssl.truststore.*``, ...) are
  translated to librdkafka's by :func:`.java_settings.translate_java_settings` in
  :func:`client_config`, so every client (driver, executors, CLI) gets the same translation.
* Client-level errors (connection refused, DNS, TLS, SASL) arrive through ``error_cb``;
  :class:`ErrorTracker` remembers them so a timeout can say *why* nothing answered.
* :func:`error_text` / :func:`error_code` read a confluent-kafka exception, for our messages.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from spark_kafka_group.kafka.java_settings import translate_java_settings
from spark_kafka_group.retry import Backoff

log = logging.getLogger(__name__)

#: Logger that receives librdkafka's log lines (at DEBUG; configuration warnings at WARNING).
LIBRDKAFKA_LOGGER_NAME = "spark_kafka_group.librdkafka"

# librdkafka log facilities worth a user's attention even though the client keeps working.
_WARN_FACILITIES = frozenset({"CONFWARN", "CONFIG"})

# Error codes that mean "the cluster cannot be reached or refuses us" (as opposed to an
# answer about a topic or an offset).
CONNECTIVITY_ERRORS = frozenset(
    {
        KafkaError._TRANSPORT,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError._RESOLVE,
        KafkaError._TIMED_OUT,
        KafkaError._SSL,
        KafkaError._AUTHENTICATION,
        KafkaError.SASL_AUTHENTICATION_FAILED,
        KafkaError.ILLEGAL_SASL_STATE,
        KafkaError.UNSUPPORTED_SASL_MECHANISM,
        KafkaError.NETWORK_EXCEPTION,
    }
)

#: Answers that say a partition's leadership is moving (a broker restarted or was fenced by
#: the controller, an election is under way). Kafka's own clients refresh their metadata and
#: send such a request again; so does :meth:`KafkaCluster.request`, within its attempt.
LEADERSHIP_ERRORS = frozenset(
    {
        KafkaError.NOT_LEADER_FOR_PARTITION,  # NOT_LEADER_OR_FOLLOWER in Kafka
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.REPLICA_NOT_AVAILABLE,
        KafkaError.FENCED_LEADER_EPOCH,
        KafkaError.UNKNOWN_LEADER_EPOCH,
        KafkaError.OFFSET_NOT_AVAILABLE,
        KafkaError.KAFKA_STORAGE_ERROR,
        KafkaError.REQUEST_TIMED_OUT,
    }
)

#: How long a request that is not sent again meanwhile waits for its answer: a fetch
#: consumer's metadata refresh, and a Kafka group's commit waiting for its coordinator (the
#: driver's requests go out again after ``cluster.SEND_AGAIN_AFTER_S``).
SEND_TIMEOUT_S = 2.0

# Unanswered handles: a client handle whose request went unanswered is replaced by a fresh one
# (the driver's AdminClient, the consumer pool's AdminClient, a fetch consumer) instead of
# being asked to refresh its metadata. librdkafka sends metadata requests to the broker it
# sent to most recently, and a hung broker (paused, or a host that stopped answering without
# closing its connections) keeps accepting requests on a connection that looks up: every
# refresh goes to it and times out, and the handle goes on naming it as the leader until
# ``socket.timeout.ms`` closes that connection. A new handle connects to every bootstrap
# server and asks the first that answers, so it learns the new leader as soon as Kafka has
# elected one. Measured on three nodes with one paused, ListOffsets every 2.5 s: answered
# 10.1 s after the pause through a new handle per send, 9.2-14.7 s through the handle that
# had sent to the paused node.

# Errors after which retrying is pointless: wrong credentials or TLS setup.
_HOPELESS_ERRORS = frozenset(
    {
        KafkaError._SSL,
        KafkaError._AUTHENTICATION,
        KafkaError.SASL_AUTHENTICATION_FAILED,
        KafkaError.ILLEGAL_SASL_STATE,
        KafkaError.UNSUPPORTED_SASL_MECHANISM,
    }
)

# Consumer-only properties; dropped from the admin client's configuration so librdkafka does
# not warn that it ignores them (the reader passes the same ``kafka.*`` options to both).
_CONSUMER_ONLY_PREFIXES = (
    "group.",
    "fetch.",
    "queued.",
    "auto.",
    "enable.auto.",
    "enable.partition.eof",
    "isolation.level",
    "max.partition.fetch.bytes",
    "max.poll.interval.ms",
    "session.timeout.ms",
    "heartbeat.interval.ms",
    "partition.assignment.strategy",
    "check.crcs",
    "allow.auto.create.topics",
    "consume.callback.max.messages",
    "coordinator.query.interval.ms",
)


class _RdkafkaLogger:
    """Stands in for a ``logging.Logger``: confluent-kafka calls ``log(level, fmt, *args)``."""

    def __init__(self) -> None:
        self._logger = logging.getLogger(LIBRDKAFKA_LOGGER_NAME)

    def log(self, level: int, msg: str, *args: Any) -> None:
        facility = args[0] if args else ""
        if facility in _WARN_FACILITIES and level >= logging.WARNING:
            self._logger.warning(msg, *args)
        elif self._logger.isEnabledFor(logging.DEBUG):
            self._logger.debug(msg, *args)

    # confluent-kafka only uses ``log``; these keep the object duck-compatible with Logger.
    def debug(self, msg: str, *args: Any) -> None:
        self._logger.debug(msg, *args)

    def warning(self, msg: str, *args: Any) -> None:
        self._logger.warning(msg, *args)


RDKAFKA_LOGGER = _RdkafkaLogger()


class ErrorTracker:
    """``error_cb`` for a client: remembers client-level errors (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.last_error: KafkaError | None = None
        self.last_connectivity_error: KafkaError | None = None
        self.all_brokers_down_at: float | None = None
        self.hopeless: KafkaError | None = None
        #: Connectivity errors seen in all (a broker went down, a connection failed).
        self.connectivity_errors = 0

    def __call__(self, err: KafkaError) -> None:
        with self._lock:
            self.last_error = err
            code = err.code()
            if code == KafkaError._ALL_BROKERS_DOWN:
                if self.all_brokers_down_at is None:
                    self.all_brokers_down_at = time.monotonic()
            elif code in CONNECTIVITY_ERRORS:
                self.last_connectivity_error = err
                self.connectivity_errors += 1
            if code in _HOPELESS_ERRORS or err.fatal():
                self.hopeless = err
        log.debug("kafka client error: %s", err)

    def connected(self) -> None:
        """Record a successful round trip: previous 'all brokers down' no longer holds."""
        with self._lock:
            self.all_brokers_down_at = None

    def reason(self) -> str:
        """The most telling error seen so far, as text (empty if none)."""
        with self._lock:
            err = self.hopeless or self.last_connectivity_error or self.last_error
        return err.str() if err is not None else ""


@dataclass(frozen=True)
class OffsetFetchRetry:
    """The driver's budget for one Kafka request (metadata, ListOffsets, a Kafka group's
    offsets), as Spark's Kafka source has it on the Java client: up to ``num_retries``
    attempts (``fetchOffset.numRetries``), ``retry_interval_ms`` apart
    (``fetchOffset.retryIntervalMs``), each of which sends the request again, refreshing the
    metadata, for up to ``api_timeout_ms`` (``kafka.default.api.timeout.ms``)."""

    #: Attempts in all (Spark counts the first one too).
    num_retries: int = 3
    #: Pause between two attempts.
    retry_interval_ms: int = 1000
    #: How long one attempt keeps sending the request (the Java client's default).
    api_timeout_ms: int = 60_000

    @property
    def backoff(self) -> Backoff:
        """The pause between two attempts: a fixed interval, as Spark's."""
        interval_s = self.retry_interval_ms / 1000
        return Backoff(base_s=interval_s, cap_s=interval_s)


def client_config(
    bootstrap_servers: str,
    client_conf: Mapping[str, str],
    *,
    for_admin: bool = False,
) -> dict[str, Any]:
    """Base librdkafka configuration: the user's ``kafka.*`` options (Java client security
    keys translated) plus logging. Raises OptionError for a setting librdkafka cannot use."""
    # Connections to every broker, kept up with librdkafka's reconnect backoff. With sparse
    # connections (librdkafka's default) a request waiting for a dead leader makes its broker
    # thread reconnect without pause: measured, a core's worth of connect() calls refused
    # by the dead node, which starves the cluster that must elect the new leader.
    #
    # A request unanswered for socket.timeout.ms (librdkafka's default 60 s) closes its
    # connection (socket.max.fails is 1). A hung broker (paused, or a host that stopped
    # answering without closing its connections) keeps connections that look up, and
    # librdkafka sends metadata and admin requests to it until they time out; 10 s gets every
    # client off it about when Kafka fences it (broker.session.timeout.ms, 9 s). A fetch
    # answers within fetch.wait.max.ms plus the transfer of at most
    # max.partition.fetch.bytes (1 MiB) per partition, well inside it.
    conf: dict[str, Any] = {"enable.sparse.connections": False, "socket.timeout.ms": 10_000}
    for key, value in translate_java_settings(client_conf).items():
        if for_admin and key.startswith(_CONSUMER_ONLY_PREFIXES):
            continue
        conf[key] = value
    conf["bootstrap.servers"] = bootstrap_servers
    conf["logger"] = RDKAFKA_LOGGER
    return conf


def unreachable_message(bootstrap_servers: str, timeout_s: float, reason: str) -> str:
    """The text of a BrokerUnavailableError: what, how long, why, and the fix."""
    why = f" Last error: {reason}." if reason else ""
    return (
        f"Kafka bootstrap servers {bootstrap_servers!r} did not answer within "
        f"{timeout_s:g}s.{why} Check the address and port in kafka.bootstrap.servers, that "
        "the brokers are up and reachable from this machine (network, firewall, advertised "
        "listeners), and the security settings (kafka.security.protocol, kafka.sasl.*, "
        "kafka.ssl.*)."
    )


#: Errors meaning the cluster refused this client's SASL credentials or mechanism.
_SASL_REFUSED = frozenset(
    {
        KafkaError._AUTHENTICATION,
        KafkaError.SASL_AUTHENTICATION_FAILED,
        KafkaError.ILLEGAL_SASL_STATE,
        KafkaError.UNSUPPORTED_SASL_MECHANISM,
    }
)


def refused_message(bootstrap_servers: str, error: KafkaError) -> str:
    """The text of a BrokerUnavailableError when the cluster answered but refused this client
    (SASL credentials, TLS): the settings to fix. No retry can help, so none is made."""
    if error.code() in _SASL_REFUSED:
        check = (
            "the user name and password in kafka.sasl.jaas.config (or kafka.sasl.username "
            "and kafka.sasl.password), kafka.sasl.mechanism and kafka.security.protocol"
        )
    elif error.code() == KafkaError._SSL:
        check = (
            "kafka.ssl.truststore.location (or kafka.ssl.ca.location: the CA that signed the "
            "brokers' certificates), kafka.ssl.keystore.* (this client's certificate, when "
            "the brokers ask for one), kafka.ssl.endpoint.identification.algorithm and "
            "kafka.security.protocol"
        )
    else:
        check = "kafka.security.protocol, kafka.sasl.* and kafka.ssl.*"
    return (
        f"Kafka cluster {bootstrap_servers!r} refused this client: {error.str()}. Check "
        f"{check}; trying again cannot help. (kafka-group commands take the same settings "
        "without the kafka. prefix, in --command-config or --kafka-option.)"
    )


def error_text(exc: BaseException) -> str:
    """The broker's or librdkafka's words for ``exc`` (not the exception's repr)."""
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return str(exc.args[0].str())
    return str(exc) or type(exc).__name__


def error_code(exc: BaseException) -> int | None:
    """The ``KafkaError`` code of a confluent-kafka exception (None for anything else)."""
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return int(exc.args[0].code())
    return None
