//! Ports for the servers a test starts for itself (a second `redis-server`, a `nats-server`
//! with a password): never a fixed number, which whatever else runs on the machine may hold.

use std::future::Future;
use std::io;
use std::net::{Ipv4Addr, TcpListener};

/// A TCP port on 127.0.0.1 that was free a moment ago: the one the kernel picks for a bind to
/// port 0, released at once so the server can bind it.
///
/// Another process may take the port in between (a small race); [`on_free_port`] starts the
/// server again on another port when that happens.
///
/// ```
/// let port = babelqueue_testkit::free_port().expect("a free port");
/// assert_ne!(port, 0);
/// std::net::TcpListener::bind(("127.0.0.1", port)).expect("free a moment ago");
/// ```
pub fn free_port() -> io::Result<u16> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
    Ok(listener.local_addr()?.port())
}

/// Whether something holds `port` on 127.0.0.1 now (a bind to it fails with "address in use").
/// What a start that failed checks to tell a collision from any other failure.
///
/// ```
/// let held = std::net::TcpListener::bind("127.0.0.1:0").expect("a listener");
/// let port = held.local_addr().expect("its address").port();
/// assert!(babelqueue_testkit::port_taken(port));
/// drop(held);
/// assert!(!babelqueue_testkit::port_taken(port));
/// ```
pub fn port_taken(port: u16) -> bool {
    matches!(
        TcpListener::bind((Ipv4Addr::LOCALHOST, port)),
        Err(e) if e.kind() == io::ErrorKind::AddrInUse
    )
}

/// Why a server did not start on the port it was given. The message says which port and why
/// (the server's own words, its exit status): it is what the test or the harness reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartError {
    /// Another process holds the port: another port may work.
    PortTaken(String),
    /// Anything else (no binary, a bad option, a crash, no answer in time): another port would
    /// not help.
    Failed(String),
}

impl StartError {
    /// The message, whichever the kind.
    pub fn message(&self) -> &str {
        match self {
            StartError::PortTaken(m) | StartError::Failed(m) => m,
        }
    }
}

/// Starts a server with `start(port)` on a [`free_port`], and on a [`StartError::PortTaken`]
/// again on another one, `attempts` times at most (at least once). The error holds the message
/// of every attempt, each naming its port.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use babelqueue_testkit::{StartError, on_free_port};
///
/// let mut tries = 0;
/// let port = on_free_port(3, |port| {
///     tries += 1;
///     let taken = tries == 1; // the first port was taken in the meantime
///     async move {
///         if taken {
///             Err(StartError::PortTaken(format!("127.0.0.1:{port}: address in use")))
///         } else {
///             Ok(port)
///         }
///     }
/// })
/// .await
/// .expect("the second port");
/// assert_eq!(tries, 2);
/// assert_ne!(port, 0);
/// # }
/// ```
pub async fn on_free_port<T, F, Fut>(attempts: usize, mut start: F) -> Result<T, String>
where
    F: FnMut(u16) -> Fut,
    Fut: Future<Output = Result<T, StartError>>,
{
    let attempts = attempts.max(1);
    let mut why = Vec::new();
    for _ in 0..attempts {
        let port = free_port().map_err(|e| format!("no free port on 127.0.0.1: {e}"))?;
        match start(port).await {
            Ok(started) => return Ok(started),
            Err(StartError::PortTaken(m)) => why.push(m),
            Err(StartError::Failed(m)) => {
                why.push(m);
                break;
            }
        }
    }
    Err(why.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_taken_port_is_tried_again_and_any_other_failure_is_not() {
        let mut ports = Vec::new();
        let err = on_free_port(3, |port| {
            ports.push(port);
            async move { Err::<(), _>(StartError::PortTaken(format!("127.0.0.1:{port} taken"))) }
        })
        .await
        .unwrap_err();
        assert_eq!(ports.len(), 3);
        for port in &ports {
            assert!(err.contains(&format!("127.0.0.1:{port} taken")), "{err}");
        }

        let mut tries = 0;
        let err = on_free_port(3, |port| {
            tries += 1;
            async move { Err::<(), _>(StartError::Failed(format!("127.0.0.1:{port}: no binary"))) }
        })
        .await
        .unwrap_err();
        assert_eq!(tries, 1);
        assert!(err.ends_with(": no binary"), "{err}");

        let mut tries = 0;
        let started = on_free_port(0, |port| {
            tries += 1;
            async move { Ok::<_, StartError>(port) }
        })
        .await;
        assert!(started.is_ok_and(|port| port != 0));
        assert_eq!(tries, 1, "at least one attempt");
    }
}
