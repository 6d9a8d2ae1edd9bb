//! CPU time of this process and of one thread, for the benchmarks' CPU-per-message figures.

use std::time::Duration;

use nix::sys::resource::{UsageWho, getrusage};

/// User plus system CPU time this process has used so far, every thread (also those that
/// have exited) included: `getrusage(RUSAGE_SELF)`. Zero where it cannot be read.
pub fn cpu_time() -> Duration {
    used(UsageWho::RUSAGE_SELF)
}

/// User plus system CPU time the calling thread has used so far: `getrusage(RUSAGE_THREAD)`,
/// for a cost measured on one thread while a client's own threads run beside it. Zero where it
/// cannot be read.
pub fn thread_cpu_time() -> Duration {
    used(UsageWho::RUSAGE_THREAD)
}

fn used(who: UsageWho) -> Duration {
    getrusage(who).map_or(Duration::ZERO, |usage| {
        let tv = |t: nix::sys::time::TimeVal| {
            Duration::from_secs(u64::try_from(t.tv_sec()).unwrap_or(0))
                + Duration::from_micros(u64::try_from(t.tv_usec()).unwrap_or(0))
        };
        tv(usage.user_time()) + tv(usage.system_time())
    })
}

/// The `BQ-FIGURE broker <row> cpu <who> <s>` line: CPU-seconds per 1 000 messages of the
/// consuming side, `cpu` having been spent on `messages`.
pub fn cpu_figure(row: &str, who: &str, cpu: Duration, messages: u64) -> String {
    format!(
        "BQ-FIGURE broker {row} cpu {who} {:.4}",
        cpu.as_secs_f64() * 1000.0 / messages.max(1) as f64
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_grows_with_work() {
        let before = cpu_time();
        let mut x = 0u64;
        while cpu_time() < before + Duration::from_millis(20) {
            x = x.wrapping_mul(31).wrapping_add(7);
        }
        assert!(cpu_time() >= before + Duration::from_millis(20), "{x}");
    }

    #[test]
    fn thread_cpu_time_counts_this_thread_only() {
        let before = thread_cpu_time();
        let other = std::thread::spawn(|| {
            let start = thread_cpu_time();
            let mut x = 0u64;
            while thread_cpu_time() < start + Duration::from_millis(50) {
                x = x.wrapping_mul(31).wrapping_add(7);
            }
            x
        });
        let _ = other.join();
        // The other thread's 50 ms are not this one's.
        assert!(thread_cpu_time() < before + Duration::from_millis(40));
        let mut x = 0u64;
        while thread_cpu_time() < before + Duration::from_millis(20) {
            x = x.wrapping_mul(31).wrapping_add(7);
        }
        assert!(
            thread_cpu_time() >= before + Duration::from_millis(20),
            "{x}"
        );
    }

    #[test]
    fn the_cpu_figure_is_per_thousand_messages() {
        assert_eq!(
            cpu_figure("redis", "raw", Duration::from_millis(250), 5000),
            "BQ-FIGURE broker redis cpu raw 0.0500"
        );
    }
}
