//! Following a Sentinel failover at once. The client finds the master through the sentinels when
//! it connects, and again whenever its connection drops or a command answers `READONLY`; it does
//! not listen to the sentinels. A master that is demoted while still reachable keeps its
//! clients' connections until the sentinels reconfigure it, seconds later (about 10 s measured
//! here), and accepts their writes meanwhile: writes a failover then drops. So a connection
//! through Sentinel also subscribes to `+switch-master` on a sentinel, and reconnects its clients
//! to the new master as soon as one announces it.

use fred::clients::Client;
use fred::interfaces::{ClientLike, EventInterface, PubsubInterface};
use fred::types::config::{Config, ReconnectPolicy, ServerConfig};
use tokio::task::JoinHandle;

/// The sentinel channel a master change is announced on:
/// `<service> <old ip> <old port> <new ip> <new port>`.
pub(crate) const SWITCH_MASTER: &str = "+switch-master";

/// Whether a `+switch-master` message announces a new master of `service`.
pub(crate) fn names_service(message: &str, service: &str) -> bool {
    message.split(' ').next() == Some(service)
}

/// A subscription to `+switch-master` and the task that acts on it.
pub(crate) struct Watcher {
    /// The connection to the sentinel.
    pub(crate) client: Client,
    /// The task reading its messages.
    pub(crate) task: JoinHandle<()>,
}

/// Subscribes to `+switch-master` on the first sentinel of `config` that answers, and
/// reconnects `clients` when `service` switches; `None` when no sentinel answers (the clients
/// then find the new master when their connections drop).
pub(crate) async fn switch_master(config: &Config, clients: Vec<Client>) -> Option<Watcher> {
    let ServerConfig::Sentinel {
        hosts,
        service_name,
        username,
        password,
    } = &config.server
    else {
        return None;
    };
    for host in hosts {
        let sentinel = Config {
            server: ServerConfig::Centralized {
                server: host.clone(),
            },
            username: username.clone(),
            password: password.clone(),
            tls: config.tls.clone(),
            ..Config::default()
        };
        let mut builder = fred::types::Builder::from_config(sentinel);
        builder.set_policy(ReconnectPolicy::new_exponential(0, 50, 5_000, 2));
        let Ok(watcher) = builder.build() else {
            continue;
        };
        if watcher.init().await.is_err() {
            continue;
        }
        let mut messages = watcher.message_rx();
        let mut reconnects = watcher.reconnect_rx();
        if watcher.subscribe(SWITCH_MASTER).await.is_err() {
            let _ = watcher.quit().await;
            continue;
        }
        let service = service_name.clone();
        let subscribed = watcher.clone();
        let task = tokio::spawn(async move {
            let watcher = subscribed;
            loop {
                tokio::select! {
                    message = messages.recv() => {
                        let Ok(message) = message else { break };
                        let text = message.value.as_string().unwrap_or_default();
                        if names_service(&text, &service) {
                            tracing::warn!(target: "babelqueue::redis", service = %service, switch = %text,
                                "Sentinel announced a new master: reconnecting");
                            for client in &clients {
                                let _ = client.force_reconnection().await;
                            }
                        }
                    }
                    reconnected = reconnects.recv() => {
                        if reconnected.is_err() {
                            break;
                        }
                        // A new connection to the sentinel has no subscription yet.
                        let _ = watcher.subscribe(SWITCH_MASTER).await;
                    }
                }
            }
        });
        return Some(Watcher {
            client: watcher,
            task,
        });
    }
    None
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_switch_names_its_service_first() {
        for (message, service, names) in [
            ("mymaster 127.0.0.1 6379 127.0.0.1 6380", "mymaster", true),
            ("mymaster2 127.0.0.1 6379 127.0.0.1 6380", "mymaster", false),
            ("other 127.0.0.1 1 127.0.0.1 2", "mymaster", false),
            ("", "mymaster", false),
        ] {
            assert_eq!(super::names_service(message, service), names, "{message}");
        }
    }
}
