"""The ``groupStore.*`` family: delta-rs storage options of the group store."""

from __future__ import annotations

from collections.abc import Mapping

from spark_kafka_group.options.spec import OptionSpec
from spark_kafka_group.options.values import STRING, ValueType

#: Options starting with this (any case) are delta-rs storage options of the group store.
STORE_OPTION_PREFIX = "groupstore."

STORE_FAMILY = OptionSpec(
    "groupStore.<key>",
    ValueType("delta-rs storage option", STRING.parse),
    None,
    "Storage options for delta-rs without the prefix, e.g. `groupStore.AWS_REGION`.\n\n"
    "Give the same options (without the prefix) to "
    "`spark_kafka_group.register(spark, storage_options={...})`: the listener that commits "
    "each completed batch runs in the driver, which does not see the source's options. "
    "See [Object stores](object-stores.md).",
    default_doc="—",
)


def storage_options_from(raw: Mapping[str, str]) -> dict[str, str]:
    """The ``groupStore.<key>`` options of ``raw`` as delta-rs storage options ``{key: value}``
    (what :func:`spark_kafka_group.register` and ``leave_group`` need on an object store)."""
    return {
        key[len(STORE_OPTION_PREFIX) :]: str(value)
        for key, value in raw.items()
        if key.lower().startswith(STORE_OPTION_PREFIX)
    }
