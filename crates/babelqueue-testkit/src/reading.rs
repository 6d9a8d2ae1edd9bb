//! What the runtime makes of a delivery a transport reports: for a transport's own projection
//! tests ("a record with these headers reads as a poison body counted 3 times, bound for
//! `payments`").
//!
//! The runtime's classifier and its `attempts` reconciliation are not part of the runtime's
//! API (a transport reports facts and never applies these rules); they are reached here, from
//! the kit a transport's tests already depend on, so a test can check its facts against the
//! one implementation of the rules instead of a copy of them.

pub use babelqueue_core::attempts::reconcile;
pub use babelqueue_core::classify::{Cause, Class, Poison, classify};
