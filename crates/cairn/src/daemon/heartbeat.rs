//! The state file's heartbeat as a kernel timer (`timerfd`) in the daemon's
//! reactor. tokio's timer wheel reaches a 15 s deadline in three steps (it
//! wakes at the start of the deadline's coarse slot, then of its finer one,
//! then at the deadline), so an idle daemon woke three times per heartbeat;
//! the kernel's timer wakes it once. Where a `timerfd` cannot be made, the
//! tokio timer is used.

use std::time::Duration;

/// A wake every period, from the first period on.
pub struct Heartbeat {
    every: Duration,
    #[cfg(target_os = "linux")]
    kernel: Option<tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>>,
}

impl Heartbeat {
    /// Starts beating every `every` (must be inside a tokio runtime).
    pub fn start(every: Duration) -> Heartbeat {
        Heartbeat {
            every,
            #[cfg(target_os = "linux")]
            kernel: match kernel_timer(every) {
                Ok(fd) => Some(fd),
                Err(e) => {
                    tracing::debug!(error = %e, "no timerfd for the heartbeat; using tokio's timer");
                    None
                }
            },
        }
    }

    /// Completes at the next beat (a beat missed while busy completes at once).
    pub async fn beat(&mut self) {
        #[cfg(target_os = "linux")]
        if let Some(fd) = self.kernel.as_ref() {
            loop {
                let Ok(mut ready) = fd.readable().await else {
                    break;
                };
                let mut expirations = [0u8; 8];
                match ready.try_io(|fd| {
                    rustix::io::read(fd.get_ref(), &mut expirations).map_err(std::io::Error::from)
                }) {
                    Ok(Ok(_)) => return,
                    Ok(Err(e)) => {
                        tracing::warn!(error = %e, "the heartbeat's timerfd failed; using tokio's timer");
                        break;
                    }
                    // Spurious readiness: wait again.
                    Err(_) => {}
                }
            }
            self.kernel = None;
        }
        tokio::time::sleep(self.every).await;
    }
}

#[cfg(target_os = "linux")]
#[expect(
    deprecated,
    reason = "its replacement is `unsafe` (forbidden here); the deprecation is about a `T` whose descriptor can change, and an `OwnedFd` owned by the `AsyncFd` cannot"
)]
fn kernel_timer(
    every: Duration,
) -> std::io::Result<tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>> {
    use rustix::time::{
        Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags, Timespec, timerfd_create,
        timerfd_settime,
    };
    let period = Timespec::try_from(every)
        .map_err(|_| std::io::Error::other("the heartbeat's period is out of range"))?;
    let fd = timerfd_create(
        TimerfdClockId::Monotonic,
        TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC,
    )?;
    let spec = Itimerspec {
        it_interval: period,
        it_value: period,
    };
    timerfd_settime(&fd, TimerfdTimerFlags::empty(), &spec)?;
    tokio::io::unix::AsyncFd::with_interest(fd, tokio::io::Interest::READABLE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn beats_at_its_period_and_not_before() {
        // Taken before the timer is armed: a test thread held up between
        // the two (a busy machine) would otherwise see the first beat
        // "early" (CI failed so once).
        let started = std::time::Instant::now();
        let mut heart = Heartbeat::start(Duration::from_millis(200));
        #[cfg(target_os = "linux")]
        assert!(heart.kernel.is_some(), "a timerfd is used on Linux");
        for n in 1..=3u32 {
            tokio::time::timeout(Duration::from_secs(10), heart.beat())
                .await
                .expect("a beat within 10 s");
            // The kernel may wake a little late, never early.
            assert!(started.elapsed() >= Duration::from_millis(200) * n);
        }
    }
}
