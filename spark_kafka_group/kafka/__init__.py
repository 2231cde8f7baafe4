"""Driver-side access to the Kafka cluster with confluent-kafka: metadata and ListOffsets
(:mod:`.cluster`), the topics a query reads (:mod:`.topics`), client settings
(:mod:`.config`, :mod:`.java_settings`), and a Kafka consumer group's committed offsets
(:mod:`.consumer_group_offsets`)."""

from spark_kafka_group.kafka.cluster import KafkaCluster

__all__ = ["KafkaCluster"]
