"""The Python SDK (babelqueue 1.24.0) side of `cargo xtask bench cli`, and the Kafka topic
set-up of `cargo xtask bench scale`.

  publish URL QUEUE N
      publishes N envelopes with `BabelQueue.publish`, one by one as an application does (on
      Kafka, then flushes the producer: the time until the broker has them all); prints
      `BQ-FIGURE python_publish_s SECONDS` (the publish loop alone, imports and connecting
      excluded)
  topic BROKERS TOPIC PARTITIONS
      creates TOPIC with PARTITIONS partitions (confluent_kafka's admin client), replacing
      nothing: an existing topic is an error
  delete-topic BROKERS TOPIC
      deletes TOPIC
"""

import sys
import time
from urllib.parse import parse_qs, urlsplit, urlunsplit

from babelqueue import BabelQueue

URN = "urn:babel:bench:cli"
DATA = {"order_id": 1, "total": 99.9, "currency": "EUR"}


def app_for(url, queue):
    parts = urlsplit(url)
    if parts.scheme == "redis":
        # The SDK passes its own query keys on to redis-py, which rejects them.
        from babelqueue.redis_transport import RedisTransport

        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        laravel = query.get("laravel", "").lower() in ("1", "true", "yes", "on")
        clean = urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))
        return BabelQueue(transport=RedisTransport(clean, laravel_compat=laravel), queue=queue), None
    if parts.scheme == "kafka":
        from babelqueue.kafka_transport import KafkaTransport

        t = KafkaTransport("kafka://" + parts.netloc, group_id="bq-bench-cli")
        return BabelQueue(transport=t, queue=queue), t
    return BabelQueue(url, queue=queue), None


def publish(url, queue, n):
    app, kafka = app_for(url, queue)
    started = time.perf_counter()
    for _ in range(int(n)):
        app.publish(URN, DATA)
    if kafka is not None:
        left = kafka._producer_().flush(60)
        if left:
            raise SystemExit("%d records still queued after the flush" % left)
    print("BQ-FIGURE python_publish_s %.6f" % (time.perf_counter() - started), flush=True)


def topic(brokers, name, partitions):
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": brokers})
    futures = admin.create_topics([NewTopic(name, num_partitions=int(partitions), replication_factor=1)])
    for f in futures.values():
        f.result(30)


def delete_topic(brokers, name):
    from confluent_kafka.admin import AdminClient

    for f in AdminClient({"bootstrap.servers": brokers}).delete_topics([name]).values():
        f.result(30)


if __name__ == "__main__":
    {"publish": publish, "topic": topic, "delete-topic": delete_topic}[sys.argv[1]](*sys.argv[2:])
