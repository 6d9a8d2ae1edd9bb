# A real browser for the web console's end-to-end test (crates/babelqueue-console/tests/browser.rs):
# Debian's chromium and chromium-driver, installed with apt-get when missing. Nothing runs in
# the background: the test starts chromedriver itself on a free port.
BROKERS+=(chromium)
install_chromium() {
    if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
        return 0
    fi
    if ! command -v apt-get >/dev/null 2>&1; then
        log "chromium: no apt-get here; install chromium and chromium-driver by hand"
        return 0
    fi
    log "apt-get install chromium chromium-driver"
    local sudo=()
    [ "$(id -u)" = 0 ] || sudo=(sudo)
    "${sudo[@]}" apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq chromium chromium-driver >/dev/null
}
start_chromium() { :; }
ready_chromium() { command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; }
stop_chromium() { :; }
env_chromium() {
    if command -v chromedriver >/dev/null 2>&1; then echo "export BQ_CHROMEDRIVER=$(command -v chromedriver)"; fi
    if command -v chromium >/dev/null 2>&1; then echo "export BQ_CHROMIUM=$(command -v chromium)"; fi
}
