//! A scripted AMQP 1.0 peer on 127.0.0.1 that behaves like the parts of Artemis the client
//! meets: SASL (any mechanism passes), one queue per address, credit for senders, deliveries to
//! receivers within their credit, `accepted` / `released` from consumers. An address can be
//! *blocked*: a sender link attached to it gets no credit, as Artemis does while an address is
//! full, until it is unblocked; then every sender link to it gets credit at once, as Artemis
//! does when the address has room again.
//!
//! It records what reached it (complete messages per address, transfers that came without
//! credit, sender links detached per address, connections), so a test can tell whether a
//! message was transferred, and when.

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use fe2o3_amqp::types::definitions::{Handle, Role};
use fe2o3_amqp::types::messaging::{Accepted, DeliveryState, TargetArchetype};
use fe2o3_amqp::types::performatives::{
    Attach, Begin, Close, Detach, Disposition, End, Flow, Open, Performative, Transfer,
};
use fe2o3_amqp::types::primitives::{Binary, Symbol, Value};
use fe2o3_amqp::types::sasl::{SaslCode, SaslMechanisms, SaslOutcome};
use serde::Deserialize;
use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

const SASL_HEADER: [u8; 8] = *b"AMQP\x03\x01\x00\x00";
const AMQP_HEADER: [u8; 8] = *b"AMQP\x00\x01\x00\x00";
const FRAME_AMQP: u8 = 0;
const FRAME_SASL: u8 = 1;
/// The credit granted to a sender link at a time.
const CREDIT: u32 = 100;
const WINDOW: u32 = 65_535;

#[derive(Default)]
struct Broker {
    queues: HashMap<String, VecDeque<Vec<u8>>>,
    blocked: HashSet<String>,
    /// Complete messages received, per address.
    received: HashMap<String, Vec<Vec<u8>>>,
    /// Addresses that got a transfer on a link that had no credit.
    without_credit: Vec<String>,
    /// Sender links detached by the client, per address.
    detached: HashMap<String, usize>,
    connections: usize,
}

/// The peer: a listener and the shared broker state.
pub(crate) struct Peer {
    address: SocketAddr,
    state: Arc<Mutex<Broker>>,
    accept: tokio::task::JoinHandle<()>,
}

impl Drop for Peer {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

fn lock(state: &Mutex<Broker>) -> MutexGuard<'_, Broker> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

impl Peer {
    pub(crate) async fn start() -> Peer {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("local address");
        let state = Arc::new(Mutex::new(Broker::default()));
        let shared = state.clone();
        let accept = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                lock(&shared).connections += 1;
                tokio::spawn(serve(stream, shared.clone()));
            }
        });
        Peer {
            address,
            state,
            accept,
        }
    }

    /// An `artemis://` URL for this peer (SASL ANONYMOUS), with `options` as its query.
    pub(crate) fn url(&self, options: &str) -> String {
        format!("artemis://{}?{options}", self.address)
    }

    /// Sender links attached to `address` get no credit from now on.
    pub(crate) fn block(&self, address: &str) {
        lock(&self.state).blocked.insert(address.to_owned());
    }

    /// Sender links to `address` get credit again (those attached now included).
    pub(crate) fn unblock(&self, address: &str) {
        lock(&self.state).blocked.remove(address);
    }

    /// Queues a message whose body is `body` as one amqp-value string.
    pub(crate) fn push(&self, address: &str, body: &str) {
        lock(&self.state)
            .queues
            .entry(address.to_owned())
            .or_default()
            .push_back(amqp_value(body));
    }

    /// The bodies of the messages `address` received, in order.
    pub(crate) fn received(&self, address: &str) -> Vec<String> {
        lock(&self.state)
            .received
            .get(address)
            .map(|all| all.iter().filter_map(|p| body_of(p)).collect())
            .unwrap_or_default()
    }

    /// Messages waiting on `address` (not delivered, or given back).
    pub(crate) fn queued(&self, address: &str) -> Vec<String> {
        lock(&self.state)
            .queues
            .get(address)
            .map(|all| all.iter().filter_map(|p| body_of(p)).collect())
            .unwrap_or_default()
    }

    /// Addresses that got a transfer although their link had no credit (a protocol breach).
    pub(crate) fn without_credit(&self) -> Vec<String> {
        lock(&self.state).without_credit.clone()
    }

    /// How many sender links to `address` the client detached.
    pub(crate) fn detached(&self, address: &str) -> usize {
        lock(&self.state)
            .detached
            .get(address)
            .copied()
            .unwrap_or(0)
    }

    /// TCP connections accepted so far.
    pub(crate) fn connections(&self) -> usize {
        lock(&self.state).connections
    }
}

/// One message: an amqp-value section holding `body` as a string.
fn amqp_value(body: &str) -> Vec<u8> {
    let section = Value::Described(Box::new(serde_amqp::described::Described {
        descriptor: serde_amqp::descriptor::Descriptor::Code(0x77),
        value: Value::String(body.to_owned()),
    }));
    serde_amqp::to_vec(&section).expect("encode a message")
}

/// The amqp-value string of an encoded message, when it has one.
fn body_of(payload: &[u8]) -> Option<String> {
    let mut de = serde_amqp::de::Deserializer::new(serde_amqp::read::SliceReader::new(payload));
    while let Ok(section) = Value::deserialize(&mut de) {
        if let Value::Described(d) = section
            && d.descriptor == serde_amqp::descriptor::Descriptor::Code(0x77)
            && let Value::String(s) = d.value
        {
            return Some(s);
        }
    }
    None
}

/// A link of one connection, as the peer sees it.
struct Link {
    address: String,
    /// The client sends on it (the peer receives).
    client_sends: bool,
    /// Deliveries counted on the link (the sender's delivery-count).
    delivery_count: u32,
    /// Credit the sending side may still use.
    credit: u32,
    /// A delivery being received in several frames.
    partial: Vec<u8>,
}

/// The state of one connection (one session, on the client's channel).
struct Conn {
    writer: OwnedWriteHalf,
    channel: u16,
    links: HashMap<u32, Link>,
    /// The transfer-id the next incoming transfer frame has.
    next_incoming_id: u32,
    next_outgoing_id: u32,
    /// Deliveries sent to the client and not settled: delivery-id -> (address, message).
    unsettled: HashMap<u32, (String, Vec<u8>)>,
    next_tag: u64,
}

fn frame(kind: u8, channel: u16, body: &impl Serialize, payload: &[u8]) -> Vec<u8> {
    let body = serde_amqp::to_vec(body).expect("encode a performative");
    let size = u32::try_from(8 + body.len() + payload.len()).expect("frame size");
    let mut out = Vec::with_capacity(size as usize);
    out.extend_from_slice(&size.to_be_bytes());
    out.extend_from_slice(&[2, kind]);
    out.extend_from_slice(&channel.to_be_bytes());
    out.extend_from_slice(&body);
    out.extend_from_slice(payload);
    out
}

/// Reads one frame: its type, channel and body (empty for a heartbeat).
async fn read_frame(
    stream: &mut (impl AsyncReadExt + Unpin),
) -> std::io::Result<(u8, u16, Vec<u8>)> {
    let size = stream.read_u32().await? as usize;
    let mut rest = vec![0; size.saturating_sub(4)];
    stream.read_exact(&mut rest).await?;
    let doff = usize::from(rest[0]) * 4;
    let channel = u16::from_be_bytes([rest[2], rest[3]]);
    Ok((rest[1], channel, rest[doff.saturating_sub(4)..].to_vec()))
}

async fn serve(stream: TcpStream, state: Arc<Mutex<Broker>>) {
    let (mut reader, mut writer) = stream.into_split();
    // SASL: offer the mechanisms, pass whatever the client picks.
    let mut header = [0; 8];
    if reader.read_exact(&mut header).await.is_err() {
        return;
    }
    if header == SASL_HEADER {
        let mechanisms = SaslMechanisms {
            sasl_server_mechanisms: vec![Symbol::from("ANONYMOUS"), Symbol::from("PLAIN")].into(),
        };
        let _ = writer.write_all(&SASL_HEADER).await;
        let _ = writer
            .write_all(&frame(FRAME_SASL, 0, &mechanisms, &[]))
            .await;
        if read_frame(&mut reader).await.is_err() {
            return;
        }
        let outcome = SaslOutcome {
            code: SaslCode::Ok,
            additional_data: None,
        };
        let _ = writer.write_all(&frame(FRAME_SASL, 0, &outcome, &[])).await;
        if reader.read_exact(&mut header).await.is_err() {
            return;
        }
    }
    if header != AMQP_HEADER || writer.write_all(&AMQP_HEADER).await.is_err() {
        return;
    }
    // Frames come through a task of their own, so the loop below can also wake on a timer.
    let (tx, mut rx) = mpsc::channel(1024);
    let read = tokio::spawn(async move {
        while let Ok(f) = read_frame(&mut reader).await {
            if tx.send(f).await.is_err() {
                break;
            }
        }
    });
    let mut conn = Conn {
        writer,
        channel: 0,
        links: HashMap::new(),
        next_incoming_id: 0,
        next_outgoing_id: 0,
        unsettled: HashMap::new(),
        next_tag: 0,
    };
    let mut tick = tokio::time::interval(Duration::from_millis(20));
    // Not at once: an empty frame before the peer's `open` would be out of order.
    let every = Duration::from_secs(5);
    let mut heartbeat = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    loop {
        tokio::select! {
            f = rx.recv() => {
                let Some((kind, channel, body)) = f else { break };
                if kind != FRAME_AMQP || body.is_empty() {
                    continue;
                }
                let Ok(performative) = serde_amqp::from_slice::<Performative>(&body) else {
                    break;
                };
                let payload = transfer_payload(&performative, &body);
                if !conn.on_frame(&state, channel, performative, payload).await {
                    break;
                }
            }
            _ = tick.tick() => {}
            _ = heartbeat.tick() => {
                // An empty frame now and then keeps the client's idle timeout happy.
                if conn.writer.write_all(&[0, 0, 0, 8, 2, 0, 0, 0]).await.is_err() {
                    break;
                }
            }
        }
        if !conn.pump(&state).await {
            break;
        }
    }
    read.abort();
    // What the client held unsettled goes back to its queue, as on a broker.
    let mut broker = lock(&state);
    for (_, (address, message)) in conn.unsettled.drain() {
        broker
            .queues
            .entry(address)
            .or_default()
            .push_front(message);
    }
}

/// The payload of a transfer frame: the bytes after the performative (the reader stops
/// right after the value it decodes, as the client's own frame decoder relies on).
fn transfer_payload(performative: &Performative, body: &[u8]) -> Vec<u8> {
    if !matches!(performative, Performative::Transfer(_)) {
        return Vec::new();
    }
    let mut cursor = std::io::Cursor::new(body);
    let mut de = serde_amqp::de::Deserializer::new(serde_amqp::read::IoReader::new(&mut cursor));
    if Performative::deserialize(&mut de).is_err() {
        return Vec::new();
    }
    drop(de);
    let at = usize::try_from(cursor.position()).unwrap_or(body.len());
    body.get(at..).unwrap_or_default().to_vec()
}

impl Conn {
    async fn send(&mut self, body: &impl Serialize, payload: &[u8]) -> bool {
        self.writer
            .write_all(&frame(FRAME_AMQP, self.channel, body, payload))
            .await
            .is_ok()
    }

    fn flow(&self, handle: u32, link: &Link) -> Flow {
        Flow {
            next_incoming_id: Some(self.next_incoming_id),
            incoming_window: WINDOW,
            next_outgoing_id: self.next_outgoing_id,
            outgoing_window: WINDOW,
            handle: Some(Handle(handle)),
            delivery_count: Some(link.delivery_count),
            link_credit: Some(link.credit),
            available: None,
            drain: false,
            echo: false,
            properties: None,
        }
    }

    /// Handles one frame; `false` ends the connection.
    async fn on_frame(
        &mut self,
        state: &Mutex<Broker>,
        channel: u16,
        performative: Performative,
        payload: Vec<u8>,
    ) -> bool {
        match performative {
            Performative::Open(_) => {
                let open = Open {
                    container_id: "bq-test-peer".into(),
                    hostname: None,
                    max_frame_size: 65_536.into(),
                    channel_max: 0.into(),
                    idle_time_out: None,
                    outgoing_locales: None,
                    incoming_locales: None,
                    offered_capabilities: None,
                    desired_capabilities: None,
                    properties: None,
                };
                self.send(&open, &[]).await
            }
            Performative::Begin(begin) => {
                self.channel = channel;
                self.next_incoming_id = begin.next_outgoing_id;
                let reply = Begin {
                    remote_channel: Some(channel),
                    next_outgoing_id: self.next_outgoing_id,
                    incoming_window: WINDOW,
                    outgoing_window: WINDOW,
                    handle_max: Handle(1024),
                    offered_capabilities: None,
                    desired_capabilities: None,
                    properties: None,
                };
                self.send(&reply, &[]).await
            }
            Performative::Attach(attach) => self.on_attach(state, attach).await,
            Performative::Flow(flow) => {
                if let Some(Handle(h)) = flow.handle
                    && let Some(link) = self.links.get_mut(&h)
                    && !link.client_sends
                {
                    // The client's credit, counted from its view of the delivery-count.
                    let base = flow.delivery_count.unwrap_or(link.delivery_count);
                    let credit = flow.link_credit.unwrap_or(0);
                    link.credit = base.wrapping_add(credit).wrapping_sub(link.delivery_count);
                }
                true
            }
            Performative::Transfer(transfer) => self.on_transfer(state, transfer, payload).await,
            Performative::Disposition(d) => {
                let last = d.last.unwrap_or(d.first);
                let mut broker = lock(state);
                for id in d.first..=last {
                    let Some((address, message)) = self.unsettled.remove(&id) else {
                        continue;
                    };
                    match d.state {
                        Some(DeliveryState::Accepted(_)) | Some(DeliveryState::Rejected(_)) => {}
                        _ => broker
                            .queues
                            .entry(address)
                            .or_default()
                            .push_front(message),
                    }
                }
                true
            }
            Performative::Detach(detach) => {
                let Handle(h) = detach.handle;
                if let Some(link) = self.links.remove(&h)
                    && link.client_sends
                {
                    *lock(state).detached.entry(link.address).or_default() += 1;
                }
                let reply = Detach {
                    handle: Handle(h),
                    closed: detach.closed,
                    error: None,
                };
                self.send(&reply, &[]).await
            }
            Performative::End(_) => self.send(&End { error: None }, &[]).await,
            Performative::Close(_) => {
                let _ = self.send(&Close { error: None }, &[]).await;
                false
            }
        }
    }

    async fn on_attach(&mut self, state: &Mutex<Broker>, attach: Attach) -> bool {
        let client_sends = attach.role == Role::Sender;
        let address = if client_sends {
            match attach.target.as_deref() {
                Some(TargetArchetype::Target(t)) => t.address.clone(),
                _ => None,
            }
        } else {
            attach.source.as_ref().and_then(|s| s.address.clone())
        }
        .unwrap_or_default();
        let Handle(h) = attach.handle.clone();
        let reply = Attach {
            name: attach.name.clone(),
            handle: Handle(h),
            role: if client_sends {
                Role::Receiver
            } else {
                Role::Sender
            },
            snd_settle_mode: attach.snd_settle_mode.clone(),
            rcv_settle_mode: attach.rcv_settle_mode.clone(),
            source: attach.source.clone(),
            target: attach.target.clone(),
            unsettled: None,
            incomplete_unsettled: false,
            initial_delivery_count: (!client_sends).then_some(0),
            max_message_size: None,
            offered_capabilities: None,
            desired_capabilities: None,
            properties: None,
        };
        let link = Link {
            address,
            client_sends,
            delivery_count: attach.initial_delivery_count.unwrap_or(0),
            credit: 0,
            partial: Vec::new(),
        };
        self.links.insert(h, link);
        let attached = self.send(&reply, &[]).await;
        // Credit for a sender comes from `pump`, unless its address is blocked.
        attached && self.pump(state).await
    }

    async fn on_transfer(
        &mut self,
        state: &Mutex<Broker>,
        transfer: Transfer,
        payload: Vec<u8>,
    ) -> bool {
        self.next_incoming_id = self.next_incoming_id.wrapping_add(1);
        let Handle(h) = transfer.handle;
        let Some(link) = self.links.get_mut(&h) else {
            return true;
        };
        link.partial.extend_from_slice(&payload);
        if transfer.more {
            return true;
        }
        let message = std::mem::take(&mut link.partial);
        let address = link.address.clone();
        {
            let mut broker = lock(state);
            if link.credit == 0 {
                broker.without_credit.push(address.clone());
            }
            broker
                .received
                .entry(address.clone())
                .or_default()
                .push(message.clone());
            broker.queues.entry(address).or_default().push_back(message);
        }
        link.credit = link.credit.saturating_sub(1);
        link.delivery_count = link.delivery_count.wrapping_add(1);
        if transfer.settled == Some(true) {
            return true;
        }
        let Some(id) = transfer.delivery_id else {
            return true;
        };
        let accepted = Disposition {
            role: Role::Receiver,
            first: id,
            last: None,
            settled: true,
            state: Some(DeliveryState::Accepted(Accepted {})),
            batchable: false,
        };
        self.send(&accepted, &[]).await
    }

    /// Grants credit to sender links whose address is not blocked and whose credit ran out,
    /// and delivers queued messages to receiver links within their credit.
    async fn pump(&mut self, state: &Mutex<Broker>) -> bool {
        let mut frames = Vec::new();
        {
            let mut broker = lock(state);
            let mut handles: Vec<u32> = self.links.keys().copied().collect();
            handles.sort_unstable();
            for h in handles {
                let Some(link) = self.links.get_mut(&h) else {
                    continue;
                };
                if link.client_sends {
                    if link.credit == 0 && !broker.blocked.contains(&link.address) {
                        link.credit = CREDIT;
                        let link = &self.links[&h];
                        frames.push(frame(FRAME_AMQP, self.channel, &self.flow(h, link), &[]));
                    }
                    continue;
                }
                while link.credit > 0 {
                    let Some(message) = broker
                        .queues
                        .get_mut(&link.address)
                        .and_then(VecDeque::pop_front)
                    else {
                        break;
                    };
                    let id = self.next_outgoing_id;
                    self.next_outgoing_id = self.next_outgoing_id.wrapping_add(1);
                    self.next_tag += 1;
                    link.credit -= 1;
                    link.delivery_count = link.delivery_count.wrapping_add(1);
                    let transfer = Transfer {
                        handle: Handle(h),
                        delivery_id: Some(id),
                        delivery_tag: Some(Binary::from(self.next_tag.to_be_bytes().to_vec())),
                        message_format: Some(0),
                        settled: Some(false),
                        more: false,
                        rcv_settle_mode: None,
                        state: None,
                        resume: false,
                        aborted: false,
                        batchable: false,
                    };
                    frames.push(frame(FRAME_AMQP, self.channel, &transfer, &message));
                    self.unsettled.insert(id, (link.address.clone(), message));
                }
            }
        }
        for f in frames {
            if self.writer.write_all(&f).await.is_err() {
                return false;
            }
        }
        true
    }
}
