//! Receiver link credit that follows the runtime's `concurrency`.
//!
//! The runtime asks for a delivery (`pop`) only when one of its `concurrency` handler slots is
//! free, and settles every delivery it took. So the deliveries this consumer holds unsettled
//! (`in_flight`) never exceed `concurrency`, and a `pop` while `in_flight` deliveries are
//! unsettled proves the runtime can run `in_flight + 1` at once. The window is the largest such
//! demand seen (never below the configured floor, 1 by default): it starts at 1 and reaches the
//! runtime's `concurrency` as soon as the runtime runs that many handlers at once.
//!
//! Link credit is topped up to the room left in the window (`window - in_flight`), so the broker
//! never has more than `window` deliveries out to this consumer (in flight, buffered, or on the
//! way): a second worker on the same queue gets everything else. AMQP credit counts from the
//! receiver's position, and the client counts a delivery when it is taken, so setting the
//! credit to the room never over-grants, however many deliveries are buffered. A `pop` that
//! finds nothing leaves its credit open (revoking it could strand a delivery already on its
//! way); a delivery that arrives later waits for the next `pop`, or goes back to the queue when
//! the connection closes.

/// The credit bookkeeping of one receiver link (pure; the AMQP client applies its grants).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreditWindow {
    floor: u32,
    window: u32,
    in_flight: u32,
    outstanding: u32,
}

impl CreditWindow {
    /// A window that never goes below `floor` (at least 1).
    pub fn new(floor: u32) -> CreditWindow {
        let floor = floor.max(1);
        CreditWindow {
            floor,
            window: floor,
            in_flight: 0,
            outstanding: 0,
        }
    }

    /// Called before waiting for a delivery. Widens the window to the demand this call shows
    /// and returns the link credit to set (the number of further deliveries the broker may send
    /// from now on), when the window has room the open credit does not cover yet.
    pub fn before_receive(&mut self) -> Option<u32> {
        self.window = self
            .window
            .max(self.in_flight.saturating_add(1))
            .max(self.floor);
        let room = self.window - self.in_flight.min(self.window);
        if room <= self.outstanding {
            return None;
        }
        self.outstanding = room;
        Some(room)
    }

    /// A delivery arrived (it used one credit and is now held unsettled).
    pub fn on_received(&mut self) {
        self.outstanding = self.outstanding.saturating_sub(1);
        self.in_flight = self.in_flight.saturating_add(1);
    }

    /// A held delivery was settled (accepted or released).
    pub fn on_settled(&mut self) {
        self.in_flight = self.in_flight.saturating_sub(1);
    }

    /// The current window: the most deliveries the broker may have out to this consumer.
    pub fn window(&self) -> u32 {
        self.window
    }

    /// Deliveries received and not settled yet.
    pub fn in_flight(&self) -> u32 {
        self.in_flight
    }

    /// Credit granted and not used yet.
    pub fn outstanding(&self) -> u32 {
        self.outstanding
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The runtime's loop: pop while fewer than `concurrency` are running.
    #[test]
    fn window_reaches_concurrency_and_never_exceeds_it() {
        for concurrency in [1_u32, 2, 3, 8] {
            let mut w = CreditWindow::new(1);
            let mut running = 0;
            for step in 0..200 {
                if running < concurrency {
                    if let Some(grant) = w.before_receive() {
                        assert!(grant >= 1);
                    }
                    w.on_received();
                    running += 1;
                } else {
                    w.on_settled();
                    running -= 1;
                }
                assert!(
                    w.in_flight() + w.outstanding() <= concurrency,
                    "step {step}"
                );
                assert!(w.window() <= concurrency);
            }
            assert_eq!(w.window(), concurrency);
        }
    }

    #[test]
    fn default_is_one_at_a_time() {
        let mut w = CreditWindow::new(1);
        assert_eq!(w.before_receive(), Some(1));
        // A pop that times out keeps its credit open; the next pop does not add more.
        assert_eq!(w.before_receive(), None);
        w.on_received();
        w.on_settled();
        assert_eq!(w.before_receive(), Some(1));
        assert_eq!(w.window(), 1);
    }

    #[test]
    fn floor_prefetches() {
        let mut w = CreditWindow::new(10);
        assert_eq!(w.before_receive(), Some(10));
        for _ in 0..3 {
            w.on_received();
            w.on_settled();
        }
        assert_eq!(w.before_receive(), Some(10), "topped up: nothing is held");
        for _ in 0..7 {
            w.on_received();
        }
        assert_eq!(
            w.before_receive(),
            None,
            "7 in flight + 3 open = the window"
        );
        w.on_settled();
        assert_eq!(
            w.before_receive(),
            Some(4),
            "6 in flight + 4 open = the window"
        );
        assert_eq!(w.window(), 10);
        assert_eq!(CreditWindow::new(0).window(), 1);
    }
}
