//! A TCP forwarder on 127.0.0.1 whose connections can be frozen: what a firewall or a NAT that
//! forgot its flows does. Every connection open at the freeze drops each byte from then on, both
//! ways, and is never closed (until the forwarder is dropped); connections opened after it pass
//! as before. Toxiproxy cannot do this: its toxics act on every connection of a proxy, new ones
//! too, and removing its black hole (`timeout`) closes the connections, which tells the client.
//!
//! The dropped bytes are read, not left unread: the sender's TCP stack sees them acknowledged,
//! so a request looks delivered and only its reply never comes (the case the operating system
//! never ends by itself, where a client's own bound is all there is).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// The forwarder: its address, the connections it accepted, and their freeze flags.
#[derive(Debug)]
pub(crate) struct Freezer {
    listen: String,
    state: Arc<State>,
    acceptor: JoinHandle<()>,
}

#[derive(Debug, Default)]
struct State {
    accepted: AtomicU64,
    conns: Mutex<Vec<Conn>>,
}

/// One connection accepted so far: its freeze flag and its two forwarding tasks.
type Conn = (Arc<AtomicBool>, Vec<JoinHandle<()>>);

impl Freezer {
    /// Listens on a free port of 127.0.0.1, forwarding to `upstream` (`host:port`).
    pub(crate) async fn start(upstream: &str) -> Result<Freezer, String> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| format!("freezer: bind: {e}"))?;
        let listen = listener
            .local_addr()
            .map_err(|e| format!("freezer: {e}"))?
            .to_string();
        let state = Arc::new(State::default());
        let upstream = upstream.to_owned();
        let accepting = Arc::clone(&state);
        let acceptor = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                accepting.accepted.fetch_add(1, Ordering::SeqCst);
                let Ok(server) = TcpStream::connect(&upstream).await else {
                    continue; // the client sees its connection closed, as with no broker
                };
                let frozen = Arc::new(AtomicBool::new(false));
                let (cr, cw) = client.into_split();
                let (sr, sw) = server.into_split();
                let tasks = vec![
                    tokio::spawn(pipe(cr, sw, Arc::clone(&frozen))),
                    tokio::spawn(pipe(sr, cw, Arc::clone(&frozen))),
                ];
                accepting
                    .conns
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push((frozen, tasks));
            }
        });
        Ok(Freezer {
            listen,
            state,
            acceptor,
        })
    }

    /// `127.0.0.1:port`.
    pub(crate) fn listen(&self) -> &str {
        &self.listen
    }

    /// Connections accepted so far.
    pub(crate) fn accepted(&self) -> u64 {
        self.state.accepted.load(Ordering::SeqCst)
    }

    /// Freezes every connection open now; returns how many.
    pub(crate) fn freeze(&self) -> usize {
        let conns = self
            .state
            .conns
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for (frozen, _) in conns.iter() {
            frozen.store(true, Ordering::SeqCst);
        }
        conns.len()
    }
}

impl Drop for Freezer {
    fn drop(&mut self) {
        self.acceptor.abort();
        let conns = self
            .state
            .conns
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for (_, tasks) in conns.iter() {
            for task in tasks {
                task.abort();
            }
        }
    }
}

/// Copies `from` to `to` until either ends; once `frozen`, reads and drops. A frozen pipe never
/// shuts its write side down, even when its reader ends (the other side must hear nothing).
async fn pipe(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    frozen: Arc<AtomicBool>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if frozen.load(Ordering::SeqCst) {
            continue;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    if frozen.load(Ordering::SeqCst) {
        // Held open (and silent) until the forwarder is dropped.
        std::future::pending::<()>().await;
    }
    let _ = to.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// An echo server on 127.0.0.1; its address.
    async fn echo() -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr").to_string();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut buf = [0u8; 1024];
                    while let Ok(n) = s.read(&mut buf).await {
                        if n == 0 || s.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
        addr
    }

    async fn round_trip(s: &mut TcpStream) -> Option<Vec<u8>> {
        s.write_all(b"ping").await.ok()?;
        let mut buf = [0u8; 4];
        tokio::time::timeout(Duration::from_millis(300), s.read_exact(&mut buf))
            .await
            .ok()?
            .ok()?;
        Some(buf.to_vec())
    }

    #[tokio::test]
    async fn a_frozen_connection_goes_silent_and_stays_open_while_new_ones_pass() {
        let freezer = Freezer::start(&echo().await).await.expect("start");
        let mut old = TcpStream::connect(freezer.listen()).await.expect("connect");
        assert_eq!(round_trip(&mut old).await.as_deref(), Some(&b"ping"[..]));
        assert_eq!(freezer.freeze(), 1);
        assert_eq!(round_trip(&mut old).await, None, "silent");
        // Not closed either: a read still waits (no EOF, no reset).
        let mut buf = [0u8; 1];
        let read = tokio::time::timeout(Duration::from_millis(200), old.read(&mut buf)).await;
        assert!(read.is_err(), "still open and silent: {read:?}");
        let mut new = TcpStream::connect(freezer.listen()).await.expect("connect");
        assert_eq!(round_trip(&mut new).await.as_deref(), Some(&b"ping"[..]));
        assert_eq!(freezer.accepted(), 2);
    }
}
