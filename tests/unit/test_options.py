"""Option parsing: every bad option set gives a clear message naming the option and the fix."""

from __future__ import annotations

import subprocess
import sys

import pytest

from spark_kafka_group.errors import OptionError
from spark_kafka_group.group.config import GroupConfig
from spark_kafka_group.group.messages import JoinRequest
from spark_kafka_group.group.metadata import MemberMetadata
from spark_kafka_group.kafka.config import OffsetFetchRetry
from spark_kafka_group.options import (
    EARLIEST,
    LATEST,
    OPTION_SPECS,
    AtTimestamp,
    GroupSettings,
    check_batch_options,
    check_stream_options,
    parse_options,
)
from spark_kafka_group.store import group_log_uri

BASE = {"kafka.bootstrap.servers": "b:9092", "subscribe": "t", "groupId": "g", "groupStore": "/s"}


def lower(options: dict[str, str]) -> dict[str, str]:
    """Spark hands Python data sources their options lower-cased."""
    return {k.lower(): v for k, v in options.items()}


def without(*keys: str, **extra: str) -> dict[str, str]:
    options = {k: v for k, v in BASE.items() if k not in keys}
    options.update(extra)
    return options


PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="alice" password="s3cret";'
)
SCRAM_JAAS = PLAIN_JAAS.replace("plain.PlainLoginModule", "scram.ScramLoginModule")

BAD_OPTION_SETS = [
    (
        "missing servers",
        without("kafka.bootstrap.servers"),
        ["kafka.bootstrap.servers", "required"],
    ),
    ("empty servers", without(**{"kafka.bootstrap.servers": " "}), ["kafka.bootstrap.servers"]),
    ("no subscription", without("subscribe"), ["Exactly one of", "none was given"]),
    (
        "two subscription modes",
        without(subscribePattern="t.*"),
        ["'subscribe'", "'subscribePattern'"],
    ),
    (
        "three subscription modes",
        without(subscribePattern="t.*", assign='{"t":[0]}'),
        ["Exactly one"],
    ),
    ("empty subscribe", without(subscribe=" , "), ["names no topic"]),
    (
        "bad regex",
        without("subscribe", subscribePattern="orders-("),
        ["subscribePattern", "regular expression"],
    ),
    ("assign not json", without("subscribe", assign="{t: 0}"), ["assign", "not valid JSON"]),
    (
        "assign negative partition",
        without("subscribe", assign='{"t": [-1]}'),
        ["assign", "partition numbers >= 0"],
    ),
    ("assign empty", without("subscribe", assign="{}"), ["non-empty JSON object"]),
    ("missing groupId", without("groupId"), ["'groupId' is required"]),
    ("groupId with slash", without(groupId="a/b"), ["groupId", "not valid"]),
    # the store's rule (the group id names the log's directory), not a looser one of its own
    ("hidden groupId", without(groupId=".g"), ["groupId", "not valid", "not starting with '.'"]),
    ("groupId too long", without(groupId="g" * 256), ["groupId", "not valid", "1-255"]),
    ("kafka.group.id", without(**{"kafka.group.id": "g"}), ["kafka.group.id", "groupId"]),
    (
        "kafka.auto.offset.reset",
        without(**{"kafka.auto.offset.reset": "earliest"}),
        ["startingOffsets"],
    ),
    (
        "kafka.enable.auto.commit",
        without(**{"kafka.enable.auto.commit": "true"}),
        ["not allowed", "group log"],
    ),
    (
        "typo in option",
        without(startingOffset="earliest"),
        ["Unknown option", "Did you mean 'startingOffsets'"],
    ),
    (
        "typo maxOffsetsPerTriger",
        without(maxOffsetsPerTriger="10"),
        ["Did you mean 'maxOffsetsPerTrigger'"],
    ),
    (
        "bad startingOffsets word",
        without(startingOffsets="earlyest"),
        ["startingOffsets", "did you mean 'earliest'"],
    ),
    (
        "bad startingOffsets json",
        without(startingOffsets='{"t": {"0": 1'),
        ["startingOffsets", "not valid JSON"],
    ),
    ("startingOffsets bad offset", without(startingOffsets='{"t": {"0": -7}}'), ["-2 (earliest)"]),
    (
        "startingOffsets partitions not object",
        without(startingOffsets='{"t": [0]}'),
        ["partition -> offset"],
    ),
    (
        "negative maxOffsetsPerTrigger",
        without(maxOffsetsPerTrigger="-5"),
        ["maxOffsetsPerTrigger", "positive"],
    ),
    ("zero minPartitions", without(minPartitions="0"), ["minPartitions", "positive"]),
    ("zero parallelism", without(parallelism="0"), ["parallelism", "positive"]),
    (
        "non-numeric maxRecordsPerPartition",
        without(maxRecordsPerPartition="lots"),
        ["whole number"],
    ),
    (
        "failOnDataLoss not bool",
        without(failOnDataLoss="yes"),
        ["failOnDataLoss", "'true' or 'false'"],
    ),
    ("includeHeaders not bool", without(includeHeaders="1"), ["includeHeaders"]),
    (
        "heartbeat >= session",
        without(heartbeatIntervalMs="50000"),
        ["heartbeatIntervalMs", "sessionTimeoutMs"],
    ),
    (
        "sessionTimeoutMs below the group's minimum",
        without(sessionTimeoutMs="5999", heartbeatIntervalMs="1000"),
        ["sessionTimeoutMs", "'5999'", "6000 to 1800000 ms"],
    ),
    (
        "sessionTimeoutMs above the group's maximum",
        without(sessionTimeoutMs="1800001"),
        ["sessionTimeoutMs", "'1800001'", "6000 to 1800000 ms"],
    ),
    (
        "groupLogRetention shorter than an hour",
        without(groupLogRetention="30m"),
        ["groupLogRetention", "'30m'", "1h"],
    ),
    ("groupLogRetention not a duration", without(groupLogRetention="a week"), ["'2d'"]),
    (
        "unknown strategy",
        without(assignmentStrategy="cooperative_sticky"),
        ["did you mean 'cooperative-sticky'"],
    ),
    ("bad listener", without(rebalanceListener="my_listener"), ["module:Class"]),
    (
        "startingTimestamp not a number",
        without(startingTimestamp="yesterday"),
        ["startingTimestamp", "'yesterday'", "whole number"],
    ),
    (
        "negative startingTimestamp",
        without(startingTimestamp="-1"),
        ["startingTimestamp", "'-1'", "0 or more"],
    ),
    (
        "startingOffsetsByTimestamp not json",
        without(startingOffsetsByTimestamp="{t: 1}"),
        ["startingOffsetsByTimestamp", "'{t: 1}'", "not valid JSON"],
    ),
    (
        "startingOffsetsByTimestamp negative",
        without(startingOffsetsByTimestamp='{"t": {"0": -2}}'),
        ["startingOffsetsByTimestamp", "-2", "epoch milliseconds"],
    ),
    (
        "startingOffsetsByTimestamp not object",
        without(startingOffsetsByTimestamp='{"t": [1]}'),
        ["startingOffsetsByTimestamp", "partition -> timestamp"],
    ),
    (
        "bad timestamp strategy",
        without(startingOffsetsByTimestampStrategy="earliest"),
        ["startingOffsetsByTimestampStrategy", "'earliest'", "'error'", "'latest'"],
    ),
    (
        "endingOffsets earliest",
        without(endingOffsets="earliest"),
        ["endingOffsets", "'earliest'", "use latest"],
    ),
    (
        "endingOffsets json -2",
        without(endingOffsets='{"t": {"0": -2}}'),
        ["endingOffsets", "-2 (earliest)"],
    ),
    ("endingOffsets bad json", without(endingOffsets='{"t"'), ["endingOffsets", "not valid JSON"]),
    ("endingTimestamp not a number", without(endingTimestamp="now"), ["endingTimestamp", "'now'"]),
    (
        "endingOffsetsByTimestamp bad",
        without(endingOffsetsByTimestamp='{"t": {"x": 1}}'),
        ["endingOffsetsByTimestamp", "'x'"],
    ),
    (
        "zero minOffsetsPerTrigger",
        without(minOffsetsPerTrigger="0"),
        ["minOffsetsPerTrigger", "'0'", "positive"],
    ),
    (
        "minOffsetsPerTrigger above maximum",
        without(minOffsetsPerTrigger="500", maxOffsetsPerTrigger="100"),
        ["minOffsetsPerTrigger", "500", "maxOffsetsPerTrigger", "100"],
    ),
    (
        "maxBytesPerTrigger not a size",
        without(maxBytesPerTrigger="64 megabytes"),
        ["maxBytesPerTrigger", "'64 megabytes'", "'64m'"],
    ),
    ("zero maxBytesPerTrigger", without(maxBytesPerTrigger="0"), ["maxBytesPerTrigger", "'0'"]),
    (
        "bad maxTriggerDelay",
        without(maxTriggerDelay="15 minutes"),
        ["maxTriggerDelay", "'15 minutes'", "'15m'"],
    ),
    (
        "negative delay",
        without(scheduledRebalanceMaxDelayMs="-1"),
        ["scheduledRebalanceMaxDelayMs", "0 or more"],
    ),
    # fetchOffset.* and the Java client's security settings (kafka.*).
    ("zero numRetries", without(**{"fetchOffset.numRetries": "0"}), ["numRetries", "'0'"]),
    ("text numRetries", without(**{"fetchOffset.numRetries": "3x"}), ["numRetries", "'3x'"]),
    (
        "negative retryIntervalMs",
        without(**{"fetchOffset.retryIntervalMs": "-10"}),
        ["fetchOffset.retryIntervalMs", "'-10'", "0 or more"],
    ),
    (
        "retryIntervalMs with unit",
        without(**{"fetchOffset.retryIntervalMs": "1s"}),
        ["fetchOffset.retryIntervalMs", "'1s'", "whole number"],
    ),
    (
        "PLAIN login module without mechanism",
        without(**{"kafka.sasl.jaas.config": PLAIN_JAAS}),
        ["kafka.sasl.jaas.config", "PlainLoginModule", "kafka.sasl.mechanism", "PLAIN"],
    ),
    (
        "SCRAM login module with PLAIN",
        without(**{"kafka.sasl.jaas.config": SCRAM_JAAS, "kafka.sasl.mechanism": "PLAIN"}),
        ["ScramLoginModule", "'PLAIN'", "SCRAM-SHA-256 or SCRAM-SHA-512"],
    ),
    (
        "Kerberos login module",
        without(
            **{
                "kafka.sasl.jaas.config": "com.sun.security.auth.module.Krb5LoginModule required "
                'useKeyTab=true keyTab="/etc/k.keytab" principal="me@REALM";'
            }
        ),
        ["Krb5LoginModule", "kafka.sasl.kerberos.keytab", "kafka.sasl.kerberos.principal"],
    ),
    (
        "OAUTHBEARER login module",
        without(
            **{
                "kafka.sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer."
                "OAuthBearerLoginModule required;"
            }
        ),
        ["OAuthBearerLoginModule", "kafka.sasl.oauthbearer.method=oidc"],
    ),
    (
        "JAAS without password",
        without(
            **{
                "kafka.sasl.mechanism": "PLAIN",
                "kafka.sasl.jaas.config": PLAIN_JAAS.replace(' password="s3cret"', ""),
            }
        ),
        ["kafka.sasl.jaas.config", "no password"],
    ),
    (
        "JAAS not parseable",
        without(**{"kafka.sasl.mechanism": "PLAIN", "kafka.sasl.jaas.config": "username=x"}),
        ["kafka.sasl.jaas.config", "not a JAAS entry"],
    ),
    (
        "endpoint identification http",
        without(**{"kafka.ssl.endpoint.identification.algorithm": "http"}),
        ["kafka.ssl.endpoint.identification.algorithm", "'http'", "'https'"],
    ),
    (
        "ssl.protocol",
        without(**{"kafka.ssl.protocol": "TLSv1.2"}),
        ["kafka.ssl.protocol", "kafka.ssl.cipher.suites"],
    ),
    (
        "JKS trust store",
        without(
            **{
                "kafka.ssl.truststore.location": "/certs/trust.jks",
                "kafka.ssl.truststore.type": "JKS",
            }
        ),
        ["'/certs/trust.jks'", "JKS", "keytool -importkeystore", "kafka.ssl.ca.location"],
    ),
    (
        "JKS key store",
        without(
            **{"kafka.ssl.keystore.location": "/certs/k.jks", "kafka.ssl.keystore.type": "jks"}
        ),
        ["'/certs/k.jks'", "-deststoretype PKCS12", "kafka.ssl.keystore.location=keystore.p12"],
    ),
]


@pytest.mark.parametrize(
    ("options", "expected"),
    [(o, e) for _, o, e in BAD_OPTION_SETS],
    ids=[n for n, _, _ in BAD_OPTION_SETS],
)
def test_bad_options_give_clear_errors(options: dict[str, str], expected: list[str]) -> None:
    with pytest.raises(OptionError) as raised:
        parse_options(lower(options))
    message = str(raised.value)
    assert "s3cret" not in message  # secrets never appear in a message
    for fragment in expected:
        assert fragment in message, f"{fragment!r} not in {message!r}"


def test_option_error_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        parse_options({})


def test_defaults() -> None:
    opts = parse_options(lower(BASE))
    assert opts.subscribe == ("t",)
    assert opts.starting_offsets.mode == "latest"  # a stream's, as Spark's Kafka source
    assert parse_options(lower(BASE), read="batch").starting_offsets.mode == "earliest"
    assert opts.fail_on_data_loss is True
    assert opts.include_headers is False
    assert opts.max_offsets_per_trigger is None
    assert opts.max_bytes_per_trigger is None


def test_max_bytes_per_trigger_takes_spark_size_strings() -> None:
    """Powers of 1024, with or without a trailing ``b``, as Spark's byte strings."""
    for text, expected in (
        ("1048576", 1 << 20),
        ("512k", 512 << 10),
        ("64m", 64 << 20),
        ("64MB", 64 << 20),
        (" 1g ", 1 << 30),
        ("100b", 100),
    ):
        opts = parse_options(lower(without(maxBytesPerTrigger=text)))
        assert opts.max_bytes_per_trigger == expected, text
    assert opts.group.protocol_names == ("cooperative-sticky",)
    assert opts.group.heartbeat_interval_ms == 3000
    assert opts.group.session_timeout_ms == 45000
    assert opts.group.log_retention_ms == 3_600_000
    assert parse_options(without(groupLogRetention="7d")).group.log_retention_ms == 7 * 86_400_000
    assert opts.group.store == "/s"
    assert opts.fetch_offset_retry == OffsetFetchRetry(
        num_retries=3, retry_interval_ms=1000, api_timeout_ms=60_000
    )


def test_the_driver_request_budget_is_the_java_clients_default_api_timeout() -> None:
    opts = parse_options(without(**{"kafka.default.api.timeout.ms": "15000"}))
    assert opts.fetch_offset_retry.api_timeout_ms == 15_000
    # Ours, not librdkafka's (which has no such property and would refuse it).
    assert "default.api.timeout.ms" not in opts.kafka_params
    with pytest.raises(OptionError, match=r"kafka\.default\.api\.timeout\.ms"):
        parse_options(without(**{"kafka.default.api.timeout.ms": "0"}))


def test_passthrough_and_storage_options_keep_their_values() -> None:
    opts = parse_options(
        lower(
            without(
                **{
                    "kafka.security.protocol": "SASL_SSL",
                    "kafka.fetch.max.bytes": "1048576",
                    "groupStore.AWS_REGION": "eu-west-1",
                }
            )
        )
    )
    assert opts.kafka_params == {"security.protocol": "SASL_SSL", "fetch.max.bytes": "1048576"}
    assert opts.group.storage_options == {"aws_region": "eu-west-1"}


def test_subscriptions() -> None:
    assert parse_options(lower(without(subscribe="a, b ,c"))).subscribe == ("a", "b", "c")
    opts = parse_options(lower(without("subscribe", assign='{"a": [2, 0, 2]}')))
    assert opts.assign == {"a": (0, 2)}
    assert (
        parse_options(lower(without("subscribe", subscribePattern="a.*"))).subscribe_pattern
        == "a.*"
    )


def test_starting_offsets_json() -> None:
    opts = parse_options(lower(without(startingOffsets='{"t": {"0": 5, "1": -2}}')))
    starting = opts.starting_offsets
    assert starting.for_partition("t", 0) == 5
    assert starting.for_partition("t", 1) == EARLIEST
    assert starting.for_partition("t", 2) == LATEST
    assert (
        parse_options(lower(without(startingOffsets="NONE"))).starting_offsets.for_partition("t", 0)
        is None
    )


def test_timestamp_options_take_precedence_as_in_spark() -> None:
    by_ts = parse_options(
        lower(without(startingOffsets="earliest", startingOffsetsByTimestamp='{"t": {"0": 1000}}'))
    )
    assert by_ts.starting_offsets.for_partition("t", 0) == AtTimestamp(1000)
    assert by_ts.starting_offsets.for_partition("t", 1) == EARLIEST  # unlisted: startingOffsets
    assert by_ts.starting_offsets.no_match_latest is False
    both = parse_options(
        lower(
            without(
                startingTimestamp="5",
                startingOffsetsByTimestamp='{"t": {"0": 1000}}',
                startingOffsetsByTimestampStrategy="LATEST",
            )
        )
    )
    assert both.starting_offsets.for_partition("t", 0) == AtTimestamp(5)
    assert both.starting_offsets.no_match_latest is True
    assert both.ending_offsets is None


def test_ending_offsets_and_trigger_options() -> None:
    opts = parse_options(
        lower(
            without(
                endingOffsets='{"t": {"0": 9, "1": -1}}',
                minOffsetsPerTrigger="10",
                maxTriggerDelay="90s",
            )
        )
    )
    assert opts.ending_offsets is not None
    assert opts.ending_offsets.for_partition("t", 0) == 9
    assert opts.ending_offsets.for_partition("t", 1) == LATEST
    assert opts.ending_offsets.for_partition("t", 2) == LATEST
    assert opts.min_offsets_per_trigger == 10
    assert opts.max_trigger_delay_ms == 90_000
    assert parse_options(lower(BASE)).max_trigger_delay_ms == 15 * 60_000  # Spark's default
    ending_ts = parse_options(lower(without(endingTimestamp="77"))).ending_offsets
    assert ending_ts is not None and ending_ts.for_partition("t", 3) == AtTimestamp(77)


def test_ending_offsets_earliest_suggests_only_what_it_takes() -> None:
    """endingOffsets refuses -2 (earliest), so its error's JSON example must not offer it."""
    with pytest.raises(OptionError) as refused:
        parse_options(lower(without(endingOffsets="earliest")))
    message = str(refused.value)
    assert "'endingOffsets'" in message and "latest" in message, message
    assert "-2" not in message, message
    assert '{"orders": {"0": 23, "1": -1}}' in message, message


STREAM_ONLY_AND_BATCH_ONLY = [
    ("stream", without(endingOffsets="latest"), ["endingOffsets", "not valid in streaming"]),
    ("stream", without(endingTimestamp="5"), ["endingTimestamp", "not valid in streaming"]),
    ("stream", without(startingOffsets="group"), ["'group' is for batch reads"]),
    ("batch", without(startingOffsets="latest"), ["'latest' is not valid for batch reads"]),
    ("batch", without(startingOffsets="none"), ["'none' is not valid for batch reads"]),
    ("batch", without(startingOffsets='{"t": {"0": -1}}'), ["t-0 -> -1 (latest)", "batch"]),
]


@pytest.mark.parametrize(("kind", "options", "expected"), STREAM_ONLY_AND_BATCH_ONLY)
def test_stream_and_batch_refuse_what_spark_refuses(kind, options, expected) -> None:
    parsed = parse_options(lower(options), read=kind)
    check = check_stream_options if kind == "stream" else check_batch_options
    with pytest.raises(OptionError) as raised:
        check(parsed)
    for fragment in expected:
        assert fragment in str(raised.value), str(raised.value)
    if "group" not in str(options.get("startingOffsets")):
        # the same options are fine for the other kind of query
        if kind == "stream":
            check_batch_options(parse_options(lower(options), read="batch"))
        else:
            check_stream_options(parse_options(lower(options), read="stream"))


def test_without_starting_offsets_streams_start_at_latest_and_batch_reads_at_earliest() -> None:
    """Spark's Kafka source defaults: a new stream reads what arrives after it starts; a
    blank value is the default too."""
    for options in (BASE, without(startingOffsets=" ")):
        stream = parse_options(lower(options))
        assert stream.starting_offsets.for_partition("t", 0) == LATEST
        check_stream_options(stream)
        batch = parse_options(lower(options), read="batch")
        assert batch.starting_offsets.for_partition("t", 0) == EARLIEST
        check_batch_options(batch)
    given = parse_options(lower(without(startingOffsets="earliest")))
    assert given.starting_offsets.for_partition("t", 0) == EARLIEST


def test_group_store_is_never_implied(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same groupId in two stores is two groups that each read every partition, and a
    query cannot see another machine's store: the store is required, the error names the
    group and the fix. $SPARK_KAFKA_GROUP_STORE on the driver counts as given."""
    monkeypatch.delenv("SPARK_KAFKA_GROUP_STORE", raising=False)
    with pytest.raises(OptionError) as raised:
        parse_options(lower(without("groupStore", groupId="events-ingest")))
    message = str(raised.value)
    for fragment in (
        "Option 'groupStore' is required for group 'events-ingest'",
        "$SPARK_KAFKA_GROUP_STORE",
        "<groupStore>/events-ingest",
        "each reads every partition",
        "s3://my-bucket/kafka-groups",
        "~/.spark-kafka-group/groups",
    ):
        assert fragment in message, message
    monkeypatch.setenv("SPARK_KAFKA_GROUP_STORE", "s3://shared/groups")
    assert parse_options(lower(without("groupStore"))).group.store == "s3://shared/groups"
    assert parse_options(lower(BASE)).group.store == "/s"  # the option wins


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        (
            without(groupIdPrefix="spark-kafka-source"),
            ["'groupidprefix' is not supported", "generated consumer group", "use 'groupId'"],
        ),
        (
            without(**{"kafka.group.id": "ingest"}),
            [
                "'kafka.group.id' is not allowed",
                "use the option 'groupId'",
                "group log",
                "would be ignored",
                "commitToKafka",
            ],
        ),
        (
            without(**{"kafka.max.poll.records": "500"}),
            ["kafka.max.poll.records is a Java Kafka client setting", "maxOffsetsPerTrigger"],
        ),
        (
            without(**{"kafka.interceptor.classes": "com.acme.Audit"}),
            ["kafka.interceptor.classes", "Java classes"],
        ),
        (
            without(**{"kafka.fetch.max.wait.ms": "100", "kafka.fetch.wait.max.ms": "200"}),
            ["kafka.fetch.max.wait.ms and kafka.fetch.wait.max.ms are both set"],
        ),
    ],
)
def test_options_copied_from_sparks_kafka_source_say_what_to_use(
    options: dict[str, str], expected: list[str]
) -> None:
    with pytest.raises(OptionError) as raised:
        parse_options(lower(options))
    for fragment in expected:
        assert fragment in str(raised.value), str(raised.value)


def test_java_consumer_settings_with_a_librdkafka_equivalent_are_translated() -> None:
    java = {
        "kafka.fetch.max.wait.ms": "100",
        "kafka.receive.buffer.bytes": "65536",
        "kafka.send.buffer.bytes": "131072",
        "kafka.request.timeout.ms": "30000",
        "kafka.fetch.min.bytes": "1",  # the same name in librdkafka
    }
    assert parse_options(lower(without(**java))).kafka_params == {
        "fetch.wait.max.ms": "100",
        "socket.receive.buffer.bytes": "65536",
        "socket.send.buffer.bytes": "131072",
        "socket.timeout.ms": "30000",
        "fetch.min.bytes": "1",
    }


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        (r"orders-\p{javaLowerCase}+", r"\p{...}"),
        (r"\Qorders.v1\E", r"\Q...\E"),
        ("orders-[a-z&&[^aeiou]]+", "&& inside [...]"),  # Python would read it otherwise
        ("(?<kind>orders|payments)", "(?P<name>...)"),
    ],
)
def test_subscribe_pattern_refuses_java_only_regex_syntax(pattern: str, expected: str) -> None:
    with pytest.raises(OptionError) as raised:
        parse_options(lower(without("subscribe", subscribePattern=pattern)))
    message = str(raised.value)
    assert expected in message and "a Python regular expression" in message, message


def test_subscribe_pattern_is_python_regex_syntax() -> None:
    pattern = r"(orders|payments)\.v[0-9]+"
    parsed = parse_options(lower(without("subscribe", subscribePattern=pattern)))
    assert parsed.subscribe_pattern == pattern


def test_group_id_is_checked_by_the_store_rule() -> None:
    long_id = "g" * 255  # the longest directory name the group store accepts
    assert parse_options(lower(without(groupId=long_id))).group.group_id == long_id
    assert group_log_uri("/s", long_id) == f"/s/{long_id}"


def test_options_check_group_ids_without_loading_the_store() -> None:
    code = (
        "import sys, spark_kafka_group.options; "
        "print(sorted({'deltalake', 'pyarrow'} & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_assignment_strategy_is_a_preference_list_of_built_ins_and_classes() -> None:
    opts = parse_options(
        lower(
            without(
                assignmentStrategy=" Cooperative-Sticky , "
                "tests.custom_assignors:OneAndRestAssignor,range"
            )
        )
    )
    assert opts.group.protocol_names == ("cooperative-sticky", "one-and-rest", "range")
    # The leader can run every built-in and this member's own assignors.
    assert set(opts.group.assignors) == {
        "cooperative-sticky", "one-and-rest", "range", "roundrobin", "sticky",
    }  # fmt: skip
    by_class = parse_options(
        lower(without(assignmentStrategy="spark_kafka_group.group.assignors.range:RangeAssignor"))
    )
    assert by_class.group.protocol_names == ("range",)
    assert parse_options(lower(BASE)) == parse_options(lower(BASE))  # settings compare equal


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("cooperative_sticky", ["'cooperative_sticky' is not a built-in", "did you mean"]),
        (" , ", ["names no assignor", "cooperative-sticky,range"]),
        ("range,Range", ["lists the assignor 'range' twice"]),
        ("no_such_module_xyz:Cls", ["cannot import module 'no_such_module_xyz'", "PYTHONPATH"]),
        ("tests.custom_assignors:Missing", ["has no 'Missing'"]),
        ("tests.custom_assignors:NotAnAssignor", ["is not an assignor", "subclass"]),
        ("spark_kafka_group.group.assignors:Assignor", ["is not an assignor"]),
        ("tests.custom_assignors:RangeLookalike", ["name = 'range'", "of its own"]),
        ("tests.custom_assignors:NeedsArguments", ["no constructor arguments"]),
        ("my module:Cls", ["is not 'module:Class'"]),
    ],
)
def test_assignment_strategy_errors_name_the_value_and_the_fix(
    value: str, expected: list[str]
) -> None:
    with pytest.raises(OptionError) as err:
        parse_options(lower(without(assignmentStrategy=value)))
    message = str(err.value)
    assert f"Option 'assignmentStrategy' = {value!r}" in message
    for fragment in expected:
        assert fragment in message, f"{fragment!r} not in {message!r}"


def test_every_layer_defaults_to_what_the_options_document() -> None:
    """GroupSettings, the group core's requests and configuration, and the Kafka retry policy
    take their defaults from one place each: what a query without those options gets."""
    parsed = parse_options(lower(BASE))
    assert GroupSettings(group_id="g", store="/s") == parsed.group
    documented = {spec.name: spec.default for spec in OPTION_SPECS}
    group = parsed.group
    assert str(group.session_timeout_ms) == documented["sessionTimeoutMs"]
    assert str(group.rebalance_timeout_ms) == documented["rebalanceTimeoutMs"]
    assert str(group.initial_rebalance_delay_ms) == documented["initialRebalanceDelayMs"]
    join = JoinRequest("m", ["range"])
    assert (join.session_timeout_ms, join.rebalance_timeout_ms) == (
        group.session_timeout_ms,
        group.rebalance_timeout_ms,
    )
    member = MemberMetadata("m")
    assert (member.profile.session_timeout_ms, member.profile.rebalance_timeout_ms) == (
        group.session_timeout_ms,
        group.rebalance_timeout_ms,
    )
    config = GroupConfig()
    assert config.initial_rebalance_delay_ms == group.initial_rebalance_delay_ms
    assert config.scheduled_rebalance_max_delay_ms == group.scheduled_rebalance_max_delay_ms
    assert parsed.fetch_offset_retry == OffsetFetchRetry()


def test_session_timeout_bounds_are_the_group_configs() -> None:
    lowest, highest = GroupConfig().min_session_timeout_ms, GroupConfig().max_session_timeout_ms
    for ok in (lowest, highest):
        opts = without(sessionTimeoutMs=str(ok), heartbeatIntervalMs="1000")
        assert parse_options(lower(opts)).group.session_timeout_ms == ok
    for bad in (lowest - 1, highest + 1):
        with pytest.raises(OptionError, match=f"{lowest} to {highest} ms"):
            parse_options(lower(without(sessionTimeoutMs=str(bad), heartbeatIntervalMs="1000")))
