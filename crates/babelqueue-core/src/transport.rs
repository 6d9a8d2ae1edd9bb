//! The broker contract: [`babelqueue_transport::transport`], re-exported whole. What of an
//! outgoing request reaches a transport is the runtime's rule, in `send`.

pub use babelqueue_transport::transport::*;
