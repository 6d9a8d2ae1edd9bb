//! Tests of the real AMQP client ([`AmqpClient`](babelqueue_transport_artemis::AmqpClient))
//! that need no broker: it talks to a scripted AMQP 1.0 peer on 127.0.0.1 (`offline/peer.rs`)
//! that can do what a test needs from Artemis on demand, such as withholding link credit from
//! a full address.

#![allow(missing_docs, clippy::print_stdout, clippy::print_stderr)]

#[path = "offline/blocked.rs"]
mod blocked;
#[path = "offline/peer.rs"]
mod peer;
