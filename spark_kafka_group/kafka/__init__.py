"""Driver-side access to the Kafka cluster (metadata and ListOffsets) with confluent-kafka."""

from spark_kafka_group.kafka.cluster import KafkaCluster

__all__ = ["KafkaCluster"]
