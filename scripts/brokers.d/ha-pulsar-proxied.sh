# A second Apache Pulsar standalone meant to sit behind a Toxiproxy proxy, for the network-fault
# rows of `cargo xtask chaos --ha`. Opt-in (an `ha-` file): `scripts/brokers.sh up
# pulsar-proxied` starts it, a plain `up` does not. It runs the jars of 60-pulsar.sh
# ($PULSAR_LIB) with a data directory of its own and never touches the shared broker on 6650.
#
# Why a broker of its own: a Pulsar client looks the topic up on its service URL and is then
# sent on to the address the owning broker advertises. A proxy in front of the shared broker
# would see the lookup only. So this broker has two named listeners (advertisedListeners,
# bindAddresses; a lookup that names no listener is answered with the listener of the port it
# came in on):
#   proxied  binds port B and advertises pulsar://127.0.0.1:P, a port no one listens on until
#            the harness creates a Toxiproxy proxy there (listen P, upstream B): a client that
#            connects to P is sent to P again, and every byte it sends goes through the proxy;
#   direct   binds port D (brokerServicePort) and advertises D: the publisher, the backlog
#            count and the probe, which must not go through the fault. It is the internal
#            listener, so the broker's own client (health check, namespace bundles) uses D too.
# P is probed free with the others at each start and written into the config; `env` exports it
# (BQ_PULSAR_PROXIED_LISTEN) with its upstream B (BQ_PULSAR_PROXIED_UPSTREAM), the direct URL
# (BQ_PULSAR_PROXIED_URL) and the admin REST API (BQ_PULSAR_PROXIED_ADMIN_URL). Nothing else may
# take P while the broker runs; the harness's rows of this topology run one after another and
# each recreates the proxy on P.
#
# Every port the standalone opens is probed free: B, D, the web service W (admin REST) and the
# in-process bookie's (--bookkeeper-port); metadata in RocksDB (no ZooKeeper port), no stream
# storage (-nss), no functions worker (-nfw), no bookie HTTP server, no TLS port. A heap of
# 256-512 MiB and 256 MiB of direct memory; data wiped at each start.
#
# Ready: the admin API answers on W, the public/default namespace exists and the broker's
# health check passes (it goes through D), and B accepts connections.
HA+=(pulsar-proxied)
PULSARP_DIR="$BQ_BROKERS_DIR/pulsar-proxied"

install_pulsar-proxied() { install_pulsar; }

# pulsarp_port KIND : the port of KIND (proxied, direct, web, bookie, proxy) in the config.
pulsarp_port() { ha_conf_port "$PULSARP_DIR/standalone.conf" "$1"; }

# pulsarp_pid : the pid of the broker when it runs (a JVM started with its config), else
# nothing.
pulsarp_pid() { ha_jvm_pid "$PULSARP_DIR/pulsar.pid" "$PULSARP_DIR/standalone.conf"; }

pulsarp_configure() {
    local p
    read -r -a p <<< "$(ha_free_ports 5)"
    mkdir -p "$PULSARP_DIR"
    # The settings of 60-pulsar.sh's broker (the transport's tests expect them), plus the
    # listeners and the ports.
    cat > "$PULSARP_DIR/standalone.conf" <<CONF
# proxied=${p[0]}
# direct=${p[1]}
# web=${p[2]}
# bookie=${p[3]}
# proxy=${p[4]}
clusterName=standalone
bindAddress=127.0.0.1
advertisedAddress=127.0.0.1
brokerServicePort=${p[1]}
webServicePort=${p[2]}
bindAddresses=proxied:pulsar://127.0.0.1:${p[0]}
advertisedListeners=direct:pulsar://127.0.0.1:${p[1]},proxied:pulsar://127.0.0.1:${p[4]}
internalListenerName=direct
managedLedgerDefaultEnsembleSize=1
managedLedgerDefaultWriteQuorum=1
managedLedgerDefaultAckQuorum=1
managedLedgerCacheSizeMB=32
allowAutoTopicCreation=true
allowAutoTopicCreationType=non-partitioned
brokerDeleteInactiveTopicsEnabled=false
authenticationEnabled=false
authorizationEnabled=false
functionsWorkerEnabled=false
systemTopicEnabled=false
topicLevelPoliciesEnabled=false
loadBalancerEnabled=false
delayedDeliveryEnabled=true
delayedDeliveryTickTimeMillis=100
isDelayedDeliveryDeliverAtTimeStrict=true
numIOThreads=2
numHttpServerThreads=4
bookkeeperClientNumIoThreads=2
listeningInterface=lo
allowLoopback=true
# the bookie takes --bookkeeper-port only with this (else any free port, maybe an ephemeral one)
allowEphemeralPorts=true
httpServerEnabled=false
journalSyncData=false
dbStorage_writeCacheMaxSizeMb=32
dbStorage_readAheadCacheMaxSizeMb=32
diskUsageThreshold=0.999
diskUsageWarnThreshold=0.999
diskUsageLwmThreshold=0.998
CONF
}

start_pulsar-proxied() {
    [ -n "$(pulsarp_pid)" ] && return 0
    rm -rf "$PULSARP_DIR"
    pulsarp_configure
    (cd "$PULSARP_DIR" || exit 1
     nohup java -Xms256m -Xmx512m -XX:MaxDirectMemorySize=256m -XX:+UseG1GC \
        -cp "$PULSAR_LIB/*" org.apache.pulsar.PulsarStandaloneStarter \
        -c "$PULSARP_DIR/standalone.conf" -nfw -nss -a 127.0.0.1 \
        --bookkeeper-port "$(pulsarp_port bookie)" \
        --bookkeeper-dir data/bookkeeper --metadata-dir data/metadata --wipe-data \
        >"$PULSARP_DIR/standalone.log" 2>&1 </dev/null &
     echo $! >"$PULSARP_DIR/pulsar.pid")
}

ready_pulsar-proxied() {
    [ -n "$(pulsarp_pid)" ] || return 1
    local admin
    admin="http://127.0.0.1:$(pulsarp_port web)/admin/v2"
    curl -sf --max-time 5 "$admin/namespaces/public" 2>/dev/null | grep -q 'public/default' &&
        curl -sf --max-time 10 "$admin/brokers/health" 2>/dev/null | grep -q ok &&
        (exec 3<>"/dev/tcp/127.0.0.1/$(pulsarp_port proxied)") 2>/dev/null
}

stop_pulsar-proxied() {
    local pid
    pid=$(pulsarp_pid) || return 0
    ha_stop_pid "$pid" "$PULSARP_DIR/pulsar.pid"
}

# Nothing while the broker is down: its recorded ports would point the tests at nothing.
env_pulsar-proxied() {
    [ -n "$(pulsarp_pid || true)" ] || return 0
    echo "export BQ_PULSAR_PROXIED_URL=pulsar://127.0.0.1:$(pulsarp_port direct)"
    echo "export BQ_PULSAR_PROXIED_ADMIN_URL=http://127.0.0.1:$(pulsarp_port web)"
    echo "export BQ_PULSAR_PROXIED_LISTEN=127.0.0.1:$(pulsarp_port proxy)"
    echo "export BQ_PULSAR_PROXIED_UPSTREAM=127.0.0.1:$(pulsarp_port proxied)"
}
