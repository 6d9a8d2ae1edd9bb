# Apache Kafka 4.4 (single-node KRaft: broker + controller in one JVM), from the Maven Central
# artifacts, on 127.0.0.1:9092 (PLAINTEXT; controller 127.0.0.1:9093) and 127.0.0.1:9094
# (SASL_PLAINTEXT, mechanism PLAIN, one user: bq / bq-secret, for the wrong-credentials tests).
# Data under $BQ_BROKERS_DIR/kafka.
#
# Tuned for tests, not production: one partition per auto-created topic, replication factor 1,
# no initial rebalance delay, and a group session timeout that may go down to 1 s so a test can
# watch a killed consumer's partitions move to another member quickly.
BROKERS+=(kafka)
KAFKA_VERSION=${BQ_KAFKA_VERSION:-4.4.0}
KAFKA_PORT=${BQ_KAFKA_PORT:-9092}
KAFKA_CONTROLLER_PORT=${BQ_KAFKA_CONTROLLER_PORT:-9093}
KAFKA_SASL_PORT=${BQ_KAFKA_SASL_PORT:-9094}
# The one SASL/PLAIN user of the test broker (a throwaway test credential, not a secret).
KAFKA_SASL_USER=bq
KAFKA_SASL_PASSWORD=bq-secret
KAFKA_DIR=$BQ_BROKERS_DIR/kafka

_kafka_cp() { echo "$KAFKA_DIR/libs/*"; }

install_kafka() {
    # The Rust client (rdkafka-sys with `ssl` + `zstd`) builds librdkafka from source and links
    # OpenSSL: it needs these headers and pkg-config. The broker itself needs Java 17 + Maven.
    apt_install pkg-config libssl-dev
    command -v java >/dev/null || apt_install openjdk-17-jre-headless
    command -v mvn >/dev/null || apt_install maven
    mkdir -p "$KAFKA_DIR"
    if [ -f "$KAFKA_DIR/libs/kafka_2.13-$KAFKA_VERSION.jar" ] \
        && [ -f "$KAFKA_DIR/libs/.complete-$KAFKA_VERSION" ]; then
        return 0
    fi
    log "fetching org.apache.kafka:kafka_2.13:$KAFKA_VERSION and its runtime dependencies"
    cat >"$KAFKA_DIR/pom.xml" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>io.babelqueue.brokers</groupId>
  <artifactId>kafka-broker</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka_2.13</artifactId>
      <version>$KAFKA_VERSION</version>
    </dependency>
    <!-- the broker logs through slf4j 1.7; route it to the log4j2 core it already ships -->
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-slf4j-impl</artifactId>
      <version>2.25.5</version>
    </dependency>
  </dependencies>
</project>
EOF
    rm -rf "$KAFKA_DIR/libs"
    if ! (cd "$KAFKA_DIR" && mvn -q -B -Dstyle.color=never dependency:copy-dependencies \
        -DincludeScope=runtime -DoutputDirectory="$KAFKA_DIR/libs" \
        -Dmaven.repo.local="$BQ_CACHE/m2" >"$KAFKA_DIR/maven.log" 2>&1); then
        cat "$KAFKA_DIR/maven.log" >&2
        return 1
    fi
    touch "$KAFKA_DIR/libs/.complete-$KAFKA_VERSION"
}

_kafka_config() {
    cat >"$KAFKA_DIR/server.properties" <<EOF
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$KAFKA_CONTROLLER_PORT
listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT,CONTROLLER://127.0.0.1:$KAFKA_CONTROLLER_PORT,SASL_PLAINTEXT://127.0.0.1:$KAFKA_SASL_PORT
advertised.listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT,SASL_PLAINTEXT://127.0.0.1:$KAFKA_SASL_PORT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT
sasl.enabled.mechanisms=PLAIN
listener.name.sasl_plaintext.sasl.enabled.mechanisms=PLAIN
listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_$KAFKA_SASL_USER="$KAFKA_SASL_PASSWORD";
log.dirs=$KAFKA_DIR/data
auto.create.topics.enable=true
num.partitions=1
default.replication.factor=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=3
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
group.min.session.timeout.ms=1000
log.retention.hours=2
log.segment.bytes=67108864
EOF
    cat >"$KAFKA_DIR/log4j2.properties" <<EOF
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = $KAFKA_DIR/kafka.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.file.ref = file
logger.kafka.name = kafka
logger.kafka.level = info
logger.org.name = org.apache.kafka
logger.org.level = warn
EOF
}

start_kafka() {
    # A broker that runs but is not ready by today's check (e.g. started by an older version of
    # this script, without the SASL listener) is stopped first: two JVMs cannot share the ports.
    stop_kafka
    _kafka_config
    local java_opts=(-Xms256m -Xmx512m -XX:+UseG1GC -Djava.awt.headless=true
        "-Dlog4j2.configurationFile=$KAFKA_DIR/log4j2.properties")
    if [ ! -f "$KAFKA_DIR/data/meta.properties" ]; then
        log "formatting the KRaft storage in $KAFKA_DIR/data"
        local cluster_id
        cluster_id=$(java -cp "$(_kafka_cp)" "${java_opts[@]}" kafka.tools.StorageTool random-uuid)
        java -cp "$(_kafka_cp)" "${java_opts[@]}" kafka.tools.StorageTool format \
            -t "$cluster_id" -c "$KAFKA_DIR/server.properties" >"$KAFKA_DIR/format.log" 2>&1
    fi
    : >"$KAFKA_DIR/kafka.log"
    nohup java -cp "$(_kafka_cp)" "${java_opts[@]}" kafka.Kafka "$KAFKA_DIR/server.properties" \
        >"$KAFKA_DIR/stdout.log" 2>&1 &
    echo $! >"$KAFKA_DIR/kafka.pid"
}

ready_kafka() {
    # The broker listener accepts connections once the broker is running; the log line says the
    # KRaft server (controller and broker) finished starting.
    (exec 3<>"/dev/tcp/127.0.0.1/$KAFKA_PORT") 2>/dev/null || return 1
    (exec 3<>"/dev/tcp/127.0.0.1/$KAFKA_SASL_PORT") 2>/dev/null || return 1
    grep -q "started (kafka.server.KafkaRaftServer)" "$KAFKA_DIR/kafka.log" 2>/dev/null
}

stop_kafka() {
    local pid
    pid=$(cat "$KAFKA_DIR/kafka.pid" 2>/dev/null) || return 0
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        kill "$pid"
        local waited=0
        while kill -0 "$pid" 2>/dev/null && [ $waited -lt 150 ]; do
            sleep 0.2
            waited=$((waited + 1))
        done
        kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
    fi
    rm -f "$KAFKA_DIR/kafka.pid"
}

env_kafka() {
    echo "export BQ_KAFKA_URL=kafka://127.0.0.1:$KAFKA_PORT"
    # The SASL listener with the right credentials; the tests swap the password for a wrong one.
    echo "export BQ_KAFKA_SASL_URL='kafka://$KAFKA_SASL_USER:$KAFKA_SASL_PASSWORD@127.0.0.1:$KAFKA_SASL_PORT?security.protocol=SASL_PLAINTEXT&sasl.mechanism=PLAIN'"
}
