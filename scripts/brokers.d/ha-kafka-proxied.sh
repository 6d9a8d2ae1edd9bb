# One Apache Kafka node (KRaft, broker and controller in one JVM) meant to sit behind a
# Toxiproxy proxy, for the network-fault rows of `cargo xtask chaos --ha`. Opt-in (an `ha-`
# file): `scripts/brokers.sh up kafka-proxied` starts it, a plain `up` does not. It runs the
# jars of 40-kafka.sh ($BQ_BROKERS_DIR/kafka/libs) and never touches the shared broker on 9092
# or the kafka-cluster.
#
# Why a broker of its own: a Kafka client bootstraps on one address and is then sent on to the
# address the broker advertises for the listener it came in on. A proxy in front of the shared
# broker would see the bootstrap request only. So this node has two named listeners:
#   PROXIED  binds port B and advertises 127.0.0.1:P, a port no one listens on until the
#            harness creates a Toxiproxy proxy there (listen P, upstream B): a client that
#            bootstraps on P is told P again, and every byte it sends goes through the proxy;
#   DIRECT   binds port D and advertises D: the publisher, the lag count and the probe, which
#            must not go through the fault.
# P is probed free with the others at each start and written into the config; `env` exports it
# (BQ_KAFKA_PROXIED_LISTEN) with its upstream B (BQ_KAFKA_PROXIED_UPSTREAM) and the direct URL
# (BQ_KAFKA_PROXIED_URL). Nothing else may take P while the node runs; the harness's rows of
# this topology run one after another and each recreates the proxy on P.
#
# Replication factor 1 (one node), one partition per topic, the group settings of 40-kafka.sh;
# a heap of 256-384 MiB, two network and two I/O threads. Storage is formatted afresh at each
# start (nothing of a previous run is kept).
#
# Ready: the DIRECT listener answers a Metadata request listing node 1 and the PROXIED port
# accepts connections.
HA+=(kafka-proxied)
KAFKAP_DIR="$BQ_BROKERS_DIR/kafka-proxied"

install_kafka-proxied() { install_kafka; }

# kafkap_port KIND : the port of KIND (broker, direct, controller, proxy) in the config.
kafkap_port() { ha_conf_port "$KAFKAP_DIR/server.properties" "$1"; }

# kafkap_pid : the pid of the node when it runs (a JVM started with its config), else nothing.
kafkap_pid() { ha_jvm_pid "$KAFKAP_DIR/kafka.pid" "$KAFKAP_DIR/server.properties"; }

kafkap_configure() {
    local p
    read -r -a p <<< "$(ha_free_ports 4)"
    mkdir -p "$KAFKAP_DIR/data"
    cat > "$KAFKAP_DIR/server.properties" <<EOF
# broker=${p[0]}
# direct=${p[1]}
# controller=${p[2]}
# proxy=${p[3]}
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:${p[2]}
listeners=PROXIED://127.0.0.1:${p[0]},DIRECT://127.0.0.1:${p[1]},CONTROLLER://127.0.0.1:${p[2]}
advertised.listeners=PROXIED://127.0.0.1:${p[3]},DIRECT://127.0.0.1:${p[1]}
controller.listener.names=CONTROLLER
inter.broker.listener.name=DIRECT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PROXIED:PLAINTEXT,DIRECT:PLAINTEXT
log.dirs=$KAFKAP_DIR/data
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
num.network.threads=2
num.io.threads=2
log.retention.hours=2
log.segment.bytes=67108864
EOF
    cat > "$KAFKAP_DIR/log4j2.properties" <<EOF
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = $KAFKAP_DIR/kafka.log
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

kafkap_java_opts() {
    echo "-Xms256m -Xmx384m -XX:+UseG1GC -Djava.awt.headless=true \
-Dlog4j2.configurationFile=$KAFKAP_DIR/log4j2.properties"
}

start_kafka-proxied() {
    [ -n "$(kafkap_pid)" ] && return 0
    rm -rf "$KAFKAP_DIR"
    kafkap_configure
    log "formatting the KRaft storage in $KAFKAP_DIR"
    local id
    # shellcheck disable=SC2046 # the options are words
    id=$(java -cp "$(_kafka_cp)" $(kafkap_java_opts) kafka.tools.StorageTool random-uuid)
    # shellcheck disable=SC2046
    java -cp "$(_kafka_cp)" $(kafkap_java_opts) kafka.tools.StorageTool format \
        -t "$id" -c "$KAFKAP_DIR/server.properties" >"$KAFKAP_DIR/format.log" 2>&1
    # shellcheck disable=SC2046
    nohup java -cp "$(_kafka_cp)" $(kafkap_java_opts) kafka.Kafka \
        "$KAFKAP_DIR/server.properties" >"$KAFKAP_DIR/stdout.log" 2>&1 &
    echo $! > "$KAFKAP_DIR/kafka.pid"
}

ready_kafka-proxied() {
    [ -n "$(kafkap_pid)" ] || return 1
    # kafkac_brokers (ha-kafka-cluster.sh): the node ids a Metadata answer lists.
    [ "$(kafkac_brokers "$(kafkap_port direct)" 2>/dev/null)" = "1" ] || return 1
    (exec 3<>"/dev/tcp/127.0.0.1/$(kafkap_port broker)") 2>/dev/null
}

stop_kafka-proxied() {
    local pid
    pid=$(kafkap_pid) || return 0
    ha_stop_pid "$pid" "$KAFKAP_DIR/kafka.pid"
}

# Nothing while the node is down: its recorded ports would point the tests at nothing.
env_kafka-proxied() {
    [ -n "$(kafkap_pid || true)" ] || return 0
    echo "export BQ_KAFKA_PROXIED_URL=kafka://127.0.0.1:$(kafkap_port direct)"
    echo "export BQ_KAFKA_PROXIED_LISTEN=127.0.0.1:$(kafkap_port proxy)"
    echo "export BQ_KAFKA_PROXIED_UPSTREAM=127.0.0.1:$(kafkap_port broker)"
}
