# Apache Pulsar 4.0.7 standalone, from the Maven Central artifacts (org.apache.pulsar:pulsar-broker
# and its runtime dependencies; no Pulsar distribution tarball), on 127.0.0.1:6650 (binary
# protocol), 127.0.0.1:6651 (the same over TLS, a private test CA's certificate) and
# 127.0.0.1:8080 (admin HTTP). Metadata in RocksDB, one in-process bookie bound to
# the loopback interface, no functions worker, no stream storage, data wiped at each start.
# install_pulsar also installs protoc, which the Rust `pulsar` crate's build script needs.
BROKERS+=(pulsar)
PULSAR_VERSION=${BQ_PULSAR_VERSION:-4.0.7}
PULSAR_PORT=${BQ_PULSAR_PORT:-6650}
PULSAR_HTTP_PORT=${BQ_PULSAR_HTTP_PORT:-8080}
PULSAR_TLS_PORT=${BQ_PULSAR_TLS_PORT:-6651}
PULSAR_DIR=$BQ_BROKERS_DIR/pulsar
PULSAR_LIB=$PULSAR_DIR/lib-$PULSAR_VERSION
PULSAR_RUN=$PULSAR_DIR/run
PULSAR_TLS=$PULSAR_DIR/tls

# A private test CA and a broker certificate for 127.0.0.1/localhost (for pulsar+ssl://).
pulsar_tls_material() {
    [ -f "$PULSAR_TLS/broker.key-pk8.pem" ] && return 0
    command -v openssl >/dev/null || apt_install openssl
    mkdir -p "$PULSAR_TLS"
    (cd "$PULSAR_TLS" &&
        openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -keyout ca.key.pem -out ca.cert.pem \
            -subj "/CN=babelqueue test CA" -addext "basicConstraints=critical,CA:TRUE" \
            -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null &&
        openssl req -newkey rsa:2048 -nodes -keyout broker.key.pem -out broker.csr \
            -subj "/CN=127.0.0.1" 2>/dev/null &&
        printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n' >broker.ext &&
        openssl x509 -req -in broker.csr -CA ca.cert.pem -CAkey ca.key.pem -CAcreateserial \
            -days 3650 -out broker.cert.pem -extfile broker.ext 2>/dev/null &&
        openssl pkcs8 -topk8 -nocrypt -in broker.key.pem -out broker.key-pk8.pem)
}

install_pulsar() {
    command -v protoc >/dev/null || apt_install protobuf-compiler
    command -v curl >/dev/null || apt_install curl
    command -v java >/dev/null || apt_install openjdk-17-jre-headless
    # The reference SDK's Pulsar driver, for the interop tests and the benchmark.
    if [ -x "${BQ_VENV:-}/bin/python" ] && ! "$BQ_VENV/bin/python" -c 'import pulsar' >/dev/null 2>&1; then
        log "pip install pulsar-client"
        "$BQ_VENV/bin/pip" install -q --disable-pip-version-check "pulsar-client==3.*"
    fi
    if [ ! -f "$PULSAR_LIB/.complete" ]; then
        command -v mvn >/dev/null || apt_install maven
        mkdir -p "$PULSAR_DIR"
        # Pulsar's poms name extra repositories this machine cannot reach: route everything
        # to Maven Central.
        cat > "$PULSAR_DIR/settings.xml" <<XML
<settings><mirrors><mirror><id>central-only</id><mirrorOf>*</mirrorOf>
<url>https://repo.maven.apache.org/maven2</url></mirror></mirrors></settings>
XML
        cat > "$PULSAR_DIR/pom.xml" <<XML
<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>
<groupId>babelqueue.local</groupId><artifactId>pulsar-standalone-classpath</artifactId>
<version>1</version><packaging>pom</packaging><dependencies><dependency>
<groupId>org.apache.pulsar</groupId><artifactId>pulsar-broker</artifactId>
<version>$PULSAR_VERSION</version></dependency></dependencies></project>
XML
        log "mvn: fetching pulsar-broker $PULSAR_VERSION and its runtime classpath (about 235 MB)"
        rm -rf "$PULSAR_LIB"
        (cd "$PULSAR_DIR" && mvn -q -B -s settings.xml dependency:copy-dependencies \
            -DoutputDirectory="$PULSAR_LIB" -DincludeScope=runtime \
            -Dmaven.repo.local="$BQ_CACHE/m2" >"$PULSAR_DIR/mvn.log" 2>&1) || {
            log "pulsar: mvn failed, see $PULSAR_DIR/mvn.log"; return 1; }
        touch "$PULSAR_LIB/.complete"
    fi
}

start_pulsar() {
    pulsar_tls_material
    mkdir -p "$PULSAR_RUN"
    cat > "$PULSAR_RUN/standalone.conf" <<CONF
clusterName=standalone
bindAddress=127.0.0.1
advertisedAddress=127.0.0.1
brokerServicePort=$PULSAR_PORT
webServicePort=$PULSAR_HTTP_PORT
brokerServicePortTls=$PULSAR_TLS_PORT
tlsCertificateFilePath=$PULSAR_TLS/broker.cert.pem
tlsKeyFilePath=$PULSAR_TLS/broker.key-pk8.pem
tlsTrustCertsFilePath=$PULSAR_TLS/ca.cert.pem
managedLedgerDefaultEnsembleSize=1
managedLedgerDefaultWriteQuorum=1
managedLedgerDefaultAckQuorum=1
allowAutoTopicCreation=true
allowAutoTopicCreationType=non-partitioned
brokerDeleteInactiveTopicsEnabled=false
authenticationEnabled=false
authorizationEnabled=false
functionsWorkerEnabled=false
systemTopicEnabled=false
topicLevelPoliciesEnabled=false
loadBalancerEnabled=false
# the retry back-off is sent as deliver_at_time: keep delayed delivery on (the broker default),
# checked every 100 ms, and never release a held message early (by default the broker may hand
# it out up to one tick before its time)
delayedDeliveryEnabled=true
delayedDeliveryTickTimeMillis=100
isDelayedDeliveryDeliverAtTimeStrict=true
# read by the in-process bookie too: bind it to the loopback interface only
listeningInterface=lo
allowLoopback=true
httpServerEnabled=false
# a throw-away test broker: no fsync per journal entry (like redis --save "")
journalSyncData=false
# the disk is shared with build caches: the bookie must not turn read-only at 95 % usage
diskUsageThreshold=0.999
diskUsageWarnThreshold=0.999
diskUsageLwmThreshold=0.998
CONF
    (cd "$PULSAR_RUN" || exit 1
     nohup java -Xms256m -Xmx1g -XX:+UseG1GC -cp "$PULSAR_LIB/*" \
        org.apache.pulsar.PulsarStandaloneStarter -c standalone.conf -nfw -nss -a 127.0.0.1 \
        --bookkeeper-dir data/bookkeeper --metadata-dir data/metadata --wipe-data \
        >"$PULSAR_RUN/standalone.log" 2>&1 </dev/null &
     echo $! >"$PULSAR_RUN/pulsar.pid")
}

# Ready once the broker answers its health check and the public/default namespace exists.
ready_pulsar() {
    curl -sf "http://127.0.0.1:$PULSAR_HTTP_PORT/admin/v2/brokers/health" 2>/dev/null | grep -q ok &&
        curl -sf "http://127.0.0.1:$PULSAR_HTTP_PORT/admin/v2/namespaces/public" 2>/dev/null | grep -q 'public/default'
}

stop_pulsar() {
    local pid
    pid=$(cat "$PULSAR_RUN/pulsar.pid" 2>/dev/null) || return 0
    if kill "$pid" 2>/dev/null; then
        for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
        kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$PULSAR_RUN/pulsar.pid"
}

env_pulsar() {
    echo "export BQ_PULSAR_URL=pulsar://127.0.0.1:$PULSAR_PORT"
    echo "export BQ_PULSAR_SSL_URL=pulsar+ssl://127.0.0.1:$PULSAR_TLS_PORT"
    echo "export BQ_PULSAR_TLS_TRUST_CERTS=$PULSAR_TLS/ca.cert.pem"
    # The admin REST API: the transport browses a subscription's backlog with it (dlq list).
    echo "export BQ_PULSAR_ADMIN_URL=http://127.0.0.1:$PULSAR_HTTP_PORT"
}
