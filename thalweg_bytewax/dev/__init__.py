"""What development runs on: sample orders, sample sources, a local broker and database.

Nothing here is needed in production; it is what makes a flow runnable with no Kafka,
registry or database: :mod:`~thalweg_bytewax.dev.samples` (deterministic sample orders,
encoded as a topic carries them), the generated sample sources of the flagship flow,
the local brokers of ``thalweg dev broker`` (librdkafka's mock cluster, or Apache Kafka
from the jars ``apache_kafka_pom.xml`` pins) and the local PostgreSQL of
``thalweg dev postgres``.
"""
