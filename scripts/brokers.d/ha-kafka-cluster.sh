# A three-node Apache Kafka cluster (KRaft, every node both broker and controller: a quorum of
# three voters) on 127.0.0.1, for the replication and failover tests. Opt-in (an `ha-` file):
# `scripts/brokers.sh up kafka-cluster` starts it, a plain `up` does not. It runs the jars of
# 40-kafka.sh ($BQ_BROKERS_DIR/kafka/libs) and never touches the shared broker on 9092.
#
# Replication as a production cluster would set it: default.replication.factor=3 (every topic
# the brokers create, the transport's retry tiers and dead-letter topics included),
# min.insync.replicas=2, the group offsets and transaction logs on three replicas, unclean
# leader election off. Sized for a 2-core test machine: heaps of 384 MiB (-Xms128m -Xmx384m),
# two network and two I/O threads per node.
#
# The nodes are n1, n2 and n3 (node.id 1, 2, 3), each with two ports (broker, controller),
# free ones probed on a fresh start and written into its config, and its own directory
# $KAFKAC_DIR/<name>/ with server.properties, kafka.pid, kafka.log and data/. A fresh start (no
# node running) formats empty storage under a new cluster id; a start while some nodes still
# run starts only the missing ones, with their old config and data, so a node a test killed
# comes back as itself.
#
# A test that kills a partition leader reads the leader's node id from the metadata, then
# $BQ_KAFKA_CLUSTER_DIR/n<id>/kafka.pid, and brings it back with `up kafka-cluster`.
#
# Ready: every node's broker listener answers a Metadata request listing all three brokers
# (registered with the active controller and unfenced), and every node's quorum state names
# a leader.
HA+=(kafka-cluster)
KAFKAC_DIR="$BQ_BROKERS_DIR/kafka-cluster"
KAFKAC_NAMES=(n1 n2 n3)

install_kafka-cluster() { install_kafka; }

# kafkac_port NAME KIND : the port of KIND (broker, controller) in NAME's config.
kafkac_port() {
    sed -n "s/^# $2=//p" "$KAFKAC_DIR/$1/server.properties" 2>/dev/null
}

# kafkac_pid NAME : the pid of node NAME when it runs (a JVM started with its config), else
# nothing.
kafkac_pid() {
    local pid
    pid=$(cat "$KAFKAC_DIR/$1/kafka.pid" 2>/dev/null) || return 1
    [ -n "$pid" ] && { tr "\\0" " " < "/proc/$pid/cmdline"; } 2>/dev/null |
        grep -qF -- "$KAFKAC_DIR/$1/server.properties" && echo "$pid"
}

# kafkac_configure : fresh ports, a config and a log4j config for each node.
kafkac_configure() {
    local ports i n voters=""
    read -r -a ports <<< "$(ha_free_ports 6)"
    for i in 0 1 2; do
        voters="$voters,$((i + 1))@127.0.0.1:${ports[$((i + 3))]}"
    done
    for i in 0 1 2; do
        n=${KAFKAC_NAMES[$i]}
        mkdir -p "$KAFKAC_DIR/$n/data"
        cat > "$KAFKAC_DIR/$n/server.properties" <<EOF
# broker=${ports[$i]}
# controller=${ports[$((i + 3))]}
process.roles=broker,controller
node.id=$((i + 1))
controller.quorum.voters=${voters#,}
listeners=PLAINTEXT://127.0.0.1:${ports[$i]},CONTROLLER://127.0.0.1:${ports[$((i + 3))]}
advertised.listeners=PLAINTEXT://127.0.0.1:${ports[$i]}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$KAFKAC_DIR/$n/data
auto.create.topics.enable=true
num.partitions=1
default.replication.factor=3
min.insync.replicas=2
unclean.leader.election.enable=false
offsets.topic.replication.factor=3
offsets.topic.num.partitions=3
transaction.state.log.replication.factor=3
transaction.state.log.min.isr=2
share.coordinator.state.topic.replication.factor=3
share.coordinator.state.topic.min.isr=2
group.initial.rebalance.delay.ms=0
group.min.session.timeout.ms=1000
num.network.threads=2
num.io.threads=2
num.replica.fetchers=1
log.retention.hours=2
log.segment.bytes=67108864
EOF
        cat > "$KAFKAC_DIR/$n/log4j2.properties" <<EOF
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = $KAFKAC_DIR/$n/kafka.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.file.ref = file
logger.kafka.name = kafka
logger.kafka.level = info
logger.org.name = org.apache.kafka
logger.org.level = warn
EOF
    done
}

kafkac_java_opts() {
    echo "-Xms128m -Xmx384m -XX:+UseG1GC -Djava.awt.headless=true \
-Dlog4j2.configurationFile=$KAFKAC_DIR/$1/log4j2.properties"
}

# kafkac_format : formats every node's storage under one new cluster id (in parallel).
kafkac_format() {
    local n id pids=()
    # shellcheck disable=SC2046 # the options are words
    id=$(java -cp "$(_kafka_cp)" $(kafkac_java_opts n1) kafka.tools.StorageTool random-uuid)
    echo "$id" > "$KAFKAC_DIR/cluster.id"
    for n in "${KAFKAC_NAMES[@]}"; do
        # shellcheck disable=SC2046
        java -cp "$(_kafka_cp)" $(kafkac_java_opts "$n") kafka.tools.StorageTool format \
            -t "$id" -c "$KAFKAC_DIR/$n/server.properties" >"$KAFKAC_DIR/$n/format.log" 2>&1 &
        pids+=($!)
    done
    for n in "${pids[@]}"; do wait "$n"; done
}

start_kafka-cluster() {
    local n running=0
    for n in "${KAFKAC_NAMES[@]}"; do
        [ -n "$(kafkac_pid "$n")" ] && running=$((running + 1))
    done
    if [ "$running" -eq 0 ]; then
        rm -rf "$KAFKAC_DIR"
        kafkac_configure
        log "formatting the KRaft storage of three nodes in $KAFKAC_DIR"
        kafkac_format
    fi
    for n in "${KAFKAC_NAMES[@]}"; do
        [ -n "$(kafkac_pid "$n")" ] && continue
        # shellcheck disable=SC2046
        nohup java -cp "$(_kafka_cp)" $(kafkac_java_opts "$n") kafka.Kafka \
            "$KAFKAC_DIR/$n/server.properties" >"$KAFKAC_DIR/$n/stdout.log" 2>&1 &
        echo $! > "$KAFKAC_DIR/$n/kafka.pid"
    done
}

# kafkac_brokers PORT : the node ids of the brokers the node on PORT lists in its answer to a
# Metadata request (v4), one line, sorted.
kafkac_brokers() {
    python3 - "$1" <<'EOF'
import socket, struct, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=2)
client = b"bq-ready"
# header v1 (api key 3 Metadata, version 4, correlation id, client id), then an empty topic
# list and allow_auto_topic_creation=false
body = struct.pack(">hhih", 3, 4, 1, len(client)) + client + struct.pack(">ib", 0, 0)
s.sendall(struct.pack(">i", len(body)) + body)
def read(n):
    out = b""
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            raise SystemExit(1)
        out += chunk
    return out
size, = struct.unpack(">i", read(4))
data = read(size)
at = 8  # correlation id, throttle time
count, = struct.unpack_from(">i", data, at)
at += 4
ids = []
for _ in range(count):
    node, host_len = struct.unpack_from(">ih", data, at)
    at += 6 + host_len + 4
    rack_len, = struct.unpack_from(">h", data, at)
    at += 2 + max(rack_len, 0)
    ids.append(node)
print(" ".join(str(i) for i in sorted(ids)))
EOF
}

ready_kafka-cluster() {
    local n port
    for n in "${KAFKAC_NAMES[@]}"; do
        [ -n "$(kafkac_pid "$n")" ] || return 1
        port=$(kafkac_port "$n" broker)
        [ "$(kafkac_brokers "$port" 2>/dev/null)" = "1 2 3" ] || return 1
        grep -qE '"leaderId":[1-9]' \
            "$KAFKAC_DIR/$n/data/__cluster_metadata-0/quorum-state" 2>/dev/null || return 1
    done
}

stop_kafka-cluster() {
    local n pid pids=() waited=0
    # All at once: a node stopped alone waits for a controlled shutdown that a quorum of the
    # others must grant, and the last one would wait for a quorum that is gone.
    for n in "${KAFKAC_NAMES[@]}"; do
        pid=$(kafkac_pid "$n") || continue
        kill "$pid" && pids+=("$pid")
    done
    for pid in "${pids[@]}"; do
        while kill -0 "$pid" 2>/dev/null && [ $waited -lt 150 ]; do
            sleep 0.2
            waited=$((waited + 1))
        done
        kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
    done
    for n in "${KAFKAC_NAMES[@]}"; do rm -f "$KAFKAC_DIR/$n/kafka.pid"; done
    return 0
}

# Nothing while none of the cluster's nodes runs.
env_kafka-cluster() {
    local n hosts="" running=""
    for n in "${KAFKAC_NAMES[@]}"; do
        running="$running$(kafkac_pid "$n" || true)"
    done
    [ -n "$running" ] || return 0
    for n in "${KAFKAC_NAMES[@]}"; do
        hosts="$hosts,127.0.0.1:$(kafkac_port "$n" broker)"
    done
    echo "export BQ_KAFKA_CLUSTER_URL=kafka://${hosts#,}"
    echo "export BQ_KAFKA_CLUSTER_DIR=$KAFKAC_DIR"
}
