//! Faults: what a row does to a topology, how long it lasts, and the bounds a row is judged by.
//!
//! The network faults are Toxiproxy toxics on the proxy in front of a broker; a topology with
//! nodes of its own (a failover, a leader kill) declares its faults as [`Action::Topology`] and
//! carries them out in its [`super::Deployment`].

use std::time::Duration;

use serde_json::{Map, Value, json};

/// The direction a toxic acts on: `upstream` is client → broker, `downstream` broker → client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stream {
    Upstream,
    Downstream,
}

impl Stream {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Stream::Upstream => "upstream",
            Stream::Downstream => "downstream",
        }
    }
}

/// One Toxiproxy toxic: its type, direction and integer attributes (every attribute of the
/// toxics used here is an integer: milliseconds or KB/s).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Toxic {
    pub(crate) kind: &'static str,
    pub(crate) stream: Stream,
    pub(crate) attributes: Vec<(&'static str, i64)>,
}

impl Toxic {
    pub(crate) fn new(
        kind: &'static str,
        stream: Stream,
        attributes: &[(&'static str, i64)],
    ) -> Toxic {
        Toxic {
            kind,
            stream,
            attributes: attributes.to_vec(),
        }
    }

    /// Its name on the proxy (unique per type and direction, so a row can remove exactly it).
    pub(crate) fn name(&self) -> String {
        format!("chaos_{}_{}", self.kind, self.stream.name())
    }

    /// The body of `POST /proxies/{proxy}/toxics`.
    pub(crate) fn to_json(&self) -> Value {
        let attributes: Map<String, Value> = self
            .attributes
            .iter()
            .map(|(k, v)| ((*k).to_owned(), json!(v)))
            .collect();
        json!({
            "name": self.name(),
            "type": self.kind,
            "stream": self.stream.name(),
            "toxicity": 1.0,
            "attributes": attributes,
        })
    }
}

/// What injecting a fault does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Action {
    /// These toxics on the row's proxy, added in order and removed in reverse order.
    Toxics(Vec<Toxic>),
    /// Something only the topology knows how to do (freeze its connections, kill a leader, fail
    /// a primary over): its deployment's `inject` and `clear` act on this name.
    Topology(&'static str),
}

/// Where the recovery clock starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RecoveryFrom {
    /// When the fault was cleared (a toxic removed): the network faults.
    Clear,
    /// When the fault was in place (a killed node's process gone): the recovery is the end of
    /// the longest pause in handling that began within 2 s of the kill (the messages a
    /// worker already held are handled right after a kill, before the topology answers again:
    /// the first call after the injection would say nothing about the failover).
    Inject,
    /// From the injection to the first handler call of a message the broker confirmed after it:
    /// a fault that silences the worker's connections without closing them (calls already under
    /// way may still end after it; a message published after it only reaches the worker over a
    /// connection opened since).
    InjectFresh,
}

/// One fault of a row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Fault {
    /// The name in the table (`latency`, `reset`, `blackhole`, `bandwidth`, `failover` …).
    pub(crate) name: &'static str,
    /// What it does, in words, for the row's notes.
    pub(crate) what: String,
    pub(crate) action: Action,
    /// How long it stays before it is cleared.
    pub(crate) hold: Duration,
    pub(crate) recovery_from: RecoveryFrom,
    /// The row fails when the first handler call after the fault comes later than this.
    pub(crate) recovery_bound: Duration,
    /// The row fails when the worker opens more connections than this from the fault on.
    pub(crate) storm_threshold: u64,
    /// Whether the fault must break the worker's connections (then a row in which the worker
    /// opened none says so: the fault may not have landed).
    pub(crate) breaks_connections: bool,
}

impl Fault {
    /// A fault of a topology with nodes of its own (`action`: what its deployment's `inject` and
    /// `clear` act on), its recovery clock started at the injection, held `hold` before it is
    /// cleared (zero: at once), failing above `recovery_bound` or [`STORM_THRESHOLD`] connections.
    pub(crate) fn topology(
        name: &'static str,
        what: impl Into<String>,
        action: &'static str,
        hold: Duration,
        recovery_bound: Duration,
    ) -> Fault {
        Fault {
            name,
            what: what.into(),
            action: Action::Topology(action),
            hold,
            recovery_from: RecoveryFrom::Inject,
            recovery_bound,
            storm_threshold: STORM_THRESHOLD,
            breaks_connections: true,
        }
    }
}

/// More connections than this from one fault on is a reconnect storm. A worker holds two to four
/// connections (Redis: a command and a blocking connection; RabbitMQ: a consuming and a publishing
/// one), each of which may fail a few times while the fault lasts and reconnect once after it.
pub(crate) const STORM_THRESHOLD: u64 = 20;

/// How a Toxiproxy row is sized.
#[derive(Debug, Clone, Copy)]
struct Holds {
    latency: Duration,
    reset: Duration,
    blackhole: Duration,
    bandwidth: Duration,
}

/// Added latency on every reply (ms).
pub(crate) const LATENCY_MS: i64 = 200;
/// Its jitter (ms).
pub(crate) const JITTER_MS: i64 = 20;
/// The bandwidth cap, each way (KB/s): a chaos message is about 400 bytes, so this passes about
/// ten messages a second, below the rate the rows publish at.
pub(crate) const BANDWIDTH_KBPS: i64 = 4;
/// The black hole lasts this long in both modes.
pub(crate) const BLACKHOLE: Duration = Duration::from_secs(30);

/// The four network faults, through Toxiproxy, in the order a lane runs them.
///
/// The recovery bounds come from the rows measured on the 2-core test machine (docs/ha.md):
/// about three times the slowest recovery seen, and never below 3 s (a loaded machine stalls a
/// process for a second now and then). A reset leaves both transports in their reconnect
/// back-off (capped at 5 s), so its slowest measured recovery was 2.9 s and its bound is 10 s;
/// the black hole ends with the proxy closing the connections and an immediate reconnect
/// (1.1 s at most), bound 5 s; latency and the bandwidth cap break nothing (0.06 s at most),
/// bound 3 s. A back-off that grows past its cap, or a worker that waits out a long timeout
/// after the fault, fails the row.
pub(crate) fn network(short: bool) -> Vec<Fault> {
    let holds = if short {
        Holds {
            latency: Duration::from_secs(8),
            reset: Duration::from_secs(2),
            blackhole: BLACKHOLE,
            bandwidth: Duration::from_secs(8),
        }
    } else {
        Holds {
            latency: Duration::from_secs(20),
            reset: Duration::from_secs(3),
            blackhole: BLACKHOLE,
            bandwidth: Duration::from_secs(20),
        }
    };
    let both = |kind: &'static str, attributes: &[(&'static str, i64)]| {
        vec![
            Toxic::new(kind, Stream::Upstream, attributes),
            Toxic::new(kind, Stream::Downstream, attributes),
        ]
    };
    vec![
        Fault {
            name: "latency",
            what: format!(
                "+{LATENCY_MS} ms (jitter {JITTER_MS} ms) on every reply for {}s",
                holds.latency.as_secs()
            ),
            action: Action::Toxics(vec![Toxic::new(
                "latency",
                Stream::Downstream,
                &[("latency", LATENCY_MS), ("jitter", JITTER_MS)],
            )]),
            hold: holds.latency,
            recovery_from: RecoveryFrom::Clear,
            recovery_bound: Duration::from_secs(3),
            storm_threshold: STORM_THRESHOLD,
            breaks_connections: false,
        },
        Fault {
            name: "reset",
            what: format!(
                "reset_peer both ways for {}s while messages flow: every connection that \
                 carries data (and every new one) is reset (RST)",
                holds.reset.as_secs()
            ),
            action: Action::Toxics(both("reset_peer", &[("timeout", 0)])),
            hold: holds.reset,
            recovery_from: RecoveryFrom::Clear,
            recovery_bound: Duration::from_secs(10),
            storm_threshold: STORM_THRESHOLD,
            breaks_connections: true,
        },
        Fault {
            name: "blackhole",
            what: format!(
                "timeout 0 both ways for {}s: the connections stay open and every byte is \
                 dropped; removing the toxic closes them",
                holds.blackhole.as_secs()
            ),
            action: Action::Toxics(both("timeout", &[("timeout", 0)])),
            hold: holds.blackhole,
            recovery_from: RecoveryFrom::Clear,
            recovery_bound: Duration::from_secs(5),
            storm_threshold: STORM_THRESHOLD,
            breaks_connections: true,
        },
        Fault {
            name: "bandwidth",
            what: format!(
                "{BANDWIDTH_KBPS} KB/s each way for {}s",
                holds.bandwidth.as_secs()
            ),
            action: Action::Toxics(both("bandwidth", &[("rate", BANDWIDTH_KBPS)])),
            hold: holds.bandwidth,
            recovery_from: RecoveryFrom::Clear,
            recovery_bound: Duration::from_secs(3),
            storm_threshold: STORM_THRESHOLD,
            breaks_connections: false,
        },
    ]
}

/// What a row measured about the fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Measured {
    /// From the start of the recovery clock to the first handler call after it (`None`: no call
    /// came before the drain ended).
    pub(crate) recovery: Option<Duration>,
    /// Connections the worker had opened when the fault was injected (`None`: the topology
    /// cannot count them).
    pub(crate) connects_before: Option<u64>,
    /// Connections it had opened just before the fault was cleared.
    pub(crate) connects_at_clear: Option<u64>,
    /// Connections it had opened by the end of the row.
    pub(crate) connects_total: Option<u64>,
}

impl Measured {
    /// Connections opened from the injection to the end of the row.
    pub(crate) fn reconnects(&self) -> Option<u64> {
        Some(self.connects_total?.saturating_sub(self.connects_before?))
    }

    /// `2 before, 5 during, 2 after`.
    pub(crate) fn connects_split(&self) -> Option<String> {
        let (before, clear, total) = (
            self.connects_before?,
            self.connects_at_clear?,
            self.connects_total?,
        );
        Some(format!(
            "{before} before the fault, {} while it lasted, {} from its clearing on",
            clear.saturating_sub(before),
            total.saturating_sub(clear)
        ))
    }
}

/// The failures a fault's bounds give for what was measured (empty: within bounds).
pub(crate) fn judge(fault: &Fault, measured: &Measured) -> Vec<String> {
    let mut failures = Vec::new();
    let clock = match fault.recovery_from {
        RecoveryFrom::Clear => "cleared",
        RecoveryFrom::Inject => "was injected (after the longest pause in handling)",
        RecoveryFrom::InjectFresh => "was injected",
    };
    match measured.recovery {
        None => failures.push(format!(
            "no message was handled after the fault {clock}: the worker did not recover within \
             the drain"
        )),
        Some(took) if took > fault.recovery_bound => failures.push(format!(
            "slow recovery: the first message was handled {:.1}s after the fault {clock}, above \
             the bound of {}s",
            took.as_secs_f64(),
            fault.recovery_bound.as_secs()
        )),
        Some(_) => {}
    }
    if let Some(n) = measured.reconnects().filter(|n| *n > fault.storm_threshold) {
        failures.push(format!(
            "reconnect storm: the worker opened {n} connections from the fault on (more than \
             {})",
            fault.storm_threshold
        ));
    }
    failures
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fault(name: &str, short: bool) -> Fault {
        network(short)
            .into_iter()
            .find(|f| f.name == name)
            .expect("a network fault")
    }

    #[test]
    fn toxics_are_the_bodies_toxiproxy_takes() {
        let Action::Toxics(toxics) = fault("latency", true).action else {
            panic!("a toxic fault");
        };
        assert_eq!(
            toxics[0].to_json(),
            json!({
                "name": "chaos_latency_downstream",
                "type": "latency",
                "stream": "downstream",
                "toxicity": 1.0,
                "attributes": {"latency": 200, "jitter": 20},
            })
        );
        let Action::Toxics(toxics) = fault("blackhole", true).action else {
            panic!("a toxic fault");
        };
        let bodies: Vec<Value> = toxics.iter().map(Toxic::to_json).collect();
        assert_eq!(bodies.len(), 2, "both ways");
        assert_eq!(bodies[0]["type"], "timeout");
        assert_eq!(bodies[0]["stream"], "upstream", "client → broker first");
        assert_eq!(bodies[1]["stream"], "downstream");
        assert_eq!(
            bodies[0]["attributes"],
            json!({"timeout": 0}),
            "never closes by itself"
        );
        assert_ne!(bodies[0]["name"], bodies[1]["name"]);
        let Action::Toxics(toxics) = fault("reset", true).action else {
            panic!("a toxic fault");
        };
        assert!(toxics.iter().all(|t| t.kind == "reset_peer"));
        let Action::Toxics(toxics) = fault("bandwidth", false).action else {
            panic!("a toxic fault");
        };
        assert_eq!(toxics[1].to_json()["attributes"], json!({"rate": 4}));
    }

    #[test]
    fn the_network_faults_are_bounded_and_the_black_hole_lasts_30_s() {
        for short in [true, false] {
            let faults = network(short);
            let names: Vec<&str> = faults.iter().map(|f| f.name).collect();
            assert_eq!(names, ["latency", "reset", "blackhole", "bandwidth"]);
            for f in &faults {
                assert!(f.hold <= Duration::from_secs(30), "{}", f.name);
                assert!(f.recovery_bound >= Duration::from_secs(3), "{}", f.name);
                assert_eq!(f.recovery_from, RecoveryFrom::Clear);
                assert_eq!(f.storm_threshold, STORM_THRESHOLD);
            }
            assert_eq!(fault("blackhole", short).hold, Duration::from_secs(30));
        }
        let total = |short| network(short).iter().map(|f| f.hold).sum::<Duration>();
        assert!(
            total(true) <= Duration::from_secs(50),
            "the CI subset stays light"
        );
        assert!(total(true) < total(false));
    }

    #[test]
    fn a_row_within_its_bounds_passes() {
        let f = fault("reset", true);
        let m = Measured {
            recovery: Some(Duration::from_millis(900)),
            connects_before: Some(2),
            connects_at_clear: Some(6),
            connects_total: Some(8),
        };
        assert!(judge(&f, &m).is_empty(), "{:?}", judge(&f, &m));
        assert_eq!(m.reconnects(), Some(6));
        assert_eq!(
            m.connects_split().as_deref(),
            Some("2 before the fault, 4 while it lasted, 2 from its clearing on")
        );
    }

    #[test]
    fn slow_recovery_no_recovery_and_storms_fail() {
        let f = fault("blackhole", true);
        let ok = Measured {
            recovery: Some(Duration::from_secs(1)),
            connects_before: Some(2),
            connects_at_clear: Some(2),
            connects_total: Some(4),
        };
        let slow = Measured {
            recovery: Some(f.recovery_bound + Duration::from_millis(1)),
            ..ok
        };
        let failures = judge(&f, &slow);
        assert_eq!(failures.len(), 1);
        assert!(failures[0].starts_with("slow recovery"), "{failures:?}");
        let at_bound = Measured {
            recovery: Some(f.recovery_bound),
            ..ok
        };
        assert!(judge(&f, &at_bound).is_empty(), "the bound itself passes");
        let never = Measured {
            recovery: None,
            ..ok
        };
        assert!(judge(&f, &never)[0].contains("did not recover"));
        let storm = Measured {
            connects_total: Some(2 + STORM_THRESHOLD + 1),
            ..ok
        };
        let failures = judge(&f, &storm);
        assert_eq!(failures.len(), 1);
        assert!(
            failures[0].contains("reconnect storm") && failures[0].contains("21 connections"),
            "{failures:?}"
        );
        let at_threshold = Measured {
            connects_total: Some(2 + STORM_THRESHOLD),
            ..ok
        };
        assert!(judge(&f, &at_threshold).is_empty());
        // A topology that cannot count connections is judged on recovery alone.
        let uncounted = Measured {
            recovery: Some(Duration::from_secs(1)),
            ..Measured::default()
        };
        assert_eq!(uncounted.reconnects(), None);
        assert_eq!(uncounted.connects_split(), None);
        assert!(judge(&f, &uncounted).is_empty());
    }

    #[test]
    fn a_topology_fault_starts_its_clock_at_the_injection() {
        let f = Fault::topology(
            "failover",
            "kill the primary",
            "kill-primary",
            Duration::ZERO,
            Duration::from_secs(30),
        );
        assert_eq!(f.action, Action::Topology("kill-primary"));
        assert_eq!(f.recovery_from, RecoveryFrom::Inject);
        let failures = judge(&f, &Measured::default());
        assert!(
            failures[0].contains("after the fault was injected"),
            "{failures:?}"
        );
    }
}
