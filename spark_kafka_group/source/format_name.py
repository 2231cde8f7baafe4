"""The source's name, on its own so that the package root and the DataSource share it without
importing each other (the root loads pyspark only when it registers the source)."""

#: The name passed to ``spark.readStream.format(...)``.
FORMAT_NAME = "kafka-group"
