# Apache ActiveMQ Artemis 2.40.0 (the `bin` distribution from Maven Central), one broker instance on
# loopback only: AMQP 1.0 on 127.0.0.1:5673 (RabbitMQ owns 5672), core on 127.0.0.1:61616, a
# TLS AMQP acceptor on 127.0.0.1:5674 (self-signed certificate, for artemis+ssl:// tests), no web
# console, a 256 MB heap, login required (user bq / password bq).
#
# Test-broker settings on top of the stock broker.xml (all in `configure_artemis_instance`):
# * auto-created addresses and queues are ANYCAST, so a message sent before any consumer exists is
#   kept (the stock default is MULTICAST, which drops it when no subscription queue exists yet);
# * journal writes are not fsync'ed (messages are still persisted, so they survive a broker
#   restart; only a power loss of the machine could lose them). This keeps the tests fast.
BROKERS+=(artemis)
BQA_VERSION=${BQ_ARTEMIS_VERSION:-2.40.0}
BQA_PORT=${BQ_ARTEMIS_PORT:-5673}
BQA_TLS_PORT=${BQ_ARTEMIS_TLS_PORT:-5674}
BQA_CORE_PORT=${BQ_ARTEMIS_CORE_PORT:-61616}
BQA_USER=${BQ_ARTEMIS_USER:-bq}
BQA_PASSWORD=${BQ_ARTEMIS_PASSWORD:-bq}
BQA_DIR=$BQ_BROKERS_DIR/artemis
BQA_HOME=$BQA_DIR/apache-artemis-$BQA_VERSION
BQA_INSTANCE=$BQA_DIR/instance
BQA_TLS_DIR=$BQA_DIR/tls

install_artemis() {
    command -v java >/dev/null || apt_install openjdk-17-jre-headless
    if [ ! -x "$BQA_HOME/bin/artemis" ]; then
        command -v mvn >/dev/null || apt_install maven
        log "fetching org.apache.activemq:apache-artemis:$BQA_VERSION:tar.gz:bin from Maven Central"
        maven_fetch "org.apache.activemq:apache-artemis:$BQA_VERSION:tar.gz:bin" "$BQA_DIR/download"
        tar -xzf "$BQA_DIR/download/apache-artemis-$BQA_VERSION-bin.tar.gz" -C "$BQA_DIR"
    fi
    if [ ! -f "$BQA_TLS_DIR/broker.p12" ]; then
        command -v openssl >/dev/null || apt_install openssl
        make_artemis_tls
    fi
    if [ ! -f "$BQA_INSTANCE/etc/broker.xml" ]; then
        log "creating the Artemis instance in $BQA_INSTANCE"
        "$BQA_HOME/bin/artemis" create --silent --force \
            --user "$BQA_USER" --password "$BQA_PASSWORD" --require-login \
            --host 127.0.0.1 --default-port "$BQA_CORE_PORT" --no-web --java-memory 256M --nio \
            --no-mqtt-acceptor --no-stomp-acceptor --no-hornetq-acceptor --no-autotune \
            "$BQA_INSTANCE" >/dev/null
        configure_artemis_instance
    fi
}

# A private CA and a server certificate for 127.0.0.1/localhost, as PEM (for clients) and as a
# PKCS#12 keystore (for the broker).
make_artemis_tls() {
    mkdir -p "$BQA_TLS_DIR"
    (
        cd "$BQA_TLS_DIR"
        openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=BabelQueue test CA" \
            -keyout ca.key -out ca.pem >/dev/null 2>&1
        openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" \
            -keyout broker.key -out broker.csr >/dev/null 2>&1
        printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n' > broker.ext
        openssl x509 -req -in broker.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 3650 \
            -extfile broker.ext -out broker.pem >/dev/null 2>&1
        openssl pkcs12 -export -in broker.pem -inkey broker.key -certfile ca.pem \
            -name broker -passout pass:artemis -out broker.p12 >/dev/null 2>&1
    )
}

configure_artemis_instance() {
    local xml=$BQA_INSTANCE/etc/broker.xml
    # A small heap: -Xms follows the -Xmx that --java-memory set.
    sed -i "s#-Xms512M#-Xms128M#" "$BQA_INSTANCE/etc/artemis.profile"
    # AMQP on 5673, and a TLS AMQP acceptor beside it.
    sed -i "s#tcp://127.0.0.1:5672?#tcp://127.0.0.1:$BQA_PORT?#" "$xml"
    sed -i "s#</acceptors>#   <acceptor name=\"amqps\">tcp://127.0.0.1:$BQA_TLS_PORT?sslEnabled=true;keyStorePath=$BQA_TLS_DIR/broker.p12;keyStorePassword=artemis;keyStoreType=PKCS12;protocols=AMQP;amqpCredits=1000;amqpLowCredits=300</acceptor>\n      </acceptors>#" "$xml"
    # Test-speed journal: persisted, not fsync'ed.
    sed -i "s#<journal-datasync>true</journal-datasync>#<journal-datasync>false</journal-datasync>\n      <journal-sync-transactional>false</journal-sync-transactional>\n      <journal-sync-non-transactional>false</journal-sync-non-transactional>#" "$xml"
    # Auto-created addresses/queues are ANYCAST (point-to-point queues).
    sed -i "0,/<address-setting match=\"#\">/s##<address-setting match=\"\#\">\n            <default-address-routing-type>ANYCAST</default-address-routing-type>\n            <default-queue-routing-type>ANYCAST</default-queue-routing-type>#" "$xml"
}

start_artemis() {
    # The test broker shares its disk with build caches: never block producers on disk usage
    # (the stock limit, 90 %, stalls every send once the disk is that full).
    sed -i "s#<max-disk-usage>[0-9-]*</max-disk-usage>#<max-disk-usage>100</max-disk-usage>#" \
        "$BQA_INSTANCE/etc/broker.xml"
    "$BQA_INSTANCE/bin/artemis-service" start >/dev/null
}
ready_artemis() {
    (exec 3<>"/dev/tcp/127.0.0.1/$BQA_PORT") 2>/dev/null &&
        (exec 3<>"/dev/tcp/127.0.0.1/$BQA_TLS_PORT") 2>/dev/null
}
stop_artemis() {
    [ -x "$BQA_INSTANCE/bin/artemis-service" ] || return 0
    local pid=""
    [ -f "$BQA_INSTANCE/data/artemis.pid" ] && pid=$(cat "$BQA_INSTANCE/data/artemis.pid")
    "$BQA_INSTANCE/bin/artemis-service" stop >/dev/null 2>&1 || true
    # A graceful stop flushes the journal; wait for the JVM to exit (it holds the journal lock),
    # and only then force it.
    local waited=0
    while [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && [ $waited -lt 300 ]; do
        sleep 0.2
        waited=$((waited + 1))
    done
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        log "artemis (pid $pid) did not stop within 60s; killing it"
        kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$BQA_INSTANCE/data/artemis.pid"
}
env_artemis() {
    echo "export BQ_ARTEMIS_URL=artemis://$BQA_USER:$BQA_PASSWORD@127.0.0.1:$BQA_PORT"
    echo "export BQ_ARTEMIS_TLS_URL=artemis+ssl://$BQA_USER:$BQA_PASSWORD@localhost:$BQA_TLS_PORT"
    echo "export BQ_ARTEMIS_CA=$BQA_TLS_DIR/ca.pem"
}
