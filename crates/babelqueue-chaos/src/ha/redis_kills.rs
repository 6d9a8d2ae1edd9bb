//! What the two Redis topology rows (`redis-sentinel`, `redis-cluster`) share: `redis-cli`
//! against one server, and a master SIGKILLed and remembered until the row starts it again.

use std::sync::Mutex;
use std::time::Duration;

use super::nodes;
use crate::brokers::{self, Env};

/// One row's servers: how to ask one, and which master it killed.
#[derive(Debug)]
pub(super) struct RedisKills {
    env: Env,
    /// The port of the master this row killed, until it runs again.
    killed: Mutex<Option<u16>>,
}

impl RedisKills {
    pub(super) fn new(env: Env) -> RedisKills {
        RedisKills {
            env,
            killed: Mutex::new(None),
        }
    }

    /// `redis-cli -p PORT ARGS…` against 127.0.0.1.
    pub(super) async fn cli(&self, port: u16, args: &[&str]) -> Result<String, String> {
        let mut cmd = self.env.command("redis-cli");
        cmd.args(["-h", "127.0.0.1", "-p", &port.to_string()])
            .args(args);
        brokers::run(cmd, Duration::from_secs(5)).await
    }

    /// SIGKILLs the server on `master` (its pid from `INFO server`) and remembers its port.
    pub(super) async fn kill(&self, master: u16) -> Result<(), String> {
        let info = self.cli(master, &["INFO", "server"]).await?;
        let pid = nodes::redis_pid(&info).ok_or_else(|| format!(":{master} gave no process_id"))?;
        *self.killed.lock().map_err(|e| e.to_string())? = Some(master);
        brokers::kill9(pid).await
    }

    /// The port of the master killed and not started again yet.
    pub(super) fn killed(&self) -> Result<Option<u16>, String> {
        Ok(*self.killed.lock().map_err(|e| e.to_string())?)
    }

    /// The killed master runs again.
    pub(super) fn restarted(&self) -> Result<(), String> {
        *self.killed.lock().map_err(|e| e.to_string())? = None;
        Ok(())
    }
}
