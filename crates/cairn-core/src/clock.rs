//! Time for the engine: [`Clock`] reads the current instant and sleeps until
//! a wall-clock instant. [`SystemClock`] is the machine's clock (the only
//! place cairn-core reads it); [`ManualClock`] follows tokio's (paused) time
//! and can be jumped; [`FixedClock`] stands still until set.

use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::{Mutex, MutexGuard};
use std::task::Poll;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use tokio::sync::watch;
use tokio::time::Instant;

/// The future [`Clock::sleep_until`] returns.
pub type Sleep<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// A source of the current instant and of sleeps until a wall-clock instant.
pub trait Clock: Send + Sync {
    /// The current instant.
    fn now(&self) -> DateTime<Utc>;

    /// Completes once [`now`](Clock::now) has reached `at` (at once if it has).
    fn sleep_until(&self, at: DateTime<Utc>) -> Sleep<'_>;

    /// [`sleep_until`](Clock::sleep_until) for a slot's start, woken as
    /// close to `at` as the system allows. The system clock's plain sleep
    /// may wake up to two milliseconds late (tokio's timer counts whole
    /// milliseconds, rounded up), and every run of the slot would start
    /// that late; this one sleeps its last milliseconds on a blocking
    /// thread, so it is for the engine's timer, not for the many sleeps of
    /// runs.
    fn sleep_until_exact(&self, at: DateTime<Utc>) -> Sleep<'_> {
        self.sleep_until(at)
    }
}

/// Longest a [`SystemClock`] sleep trusts tokio's timer before re-reading the
/// wall clock, where wall-clock jumps cannot be heard (see [`wall_jumps`]).
///
/// tokio sleeps on the monotonic clock, which on Linux stops while the
/// machine is suspended, and the wall clock can be stepped (NTP, the user):
/// a single 2-hour timer armed before a 2-hour suspend would fire 2 hours
/// late. Re-reading the wall clock at least this often bounds the lateness
/// to 10 s after a resume or a forward step.
pub const WALL_RECHECK: Duration = Duration::from_secs(10);

/// The operating system's clock.
///
/// On Linux a sleep is one tokio timer for the whole wait, woken early only
/// when the wall clock jumps: one process-wide timerfd armed on
/// `CLOCK_REALTIME` with `TFD_TIMER_CANCEL_ON_SET` is cancelled by the
/// kernel whenever the clock is set and on every resume from suspend, and a
/// thread blocked on it tells every sleeper to re-read the time. So an idle
/// daemon does not wake at all until its next slot, yet a slot is not late
/// after a suspend or a clock step. Elsewhere (or if the timerfd cannot be
/// made) sleeps re-read the wall clock every [`WALL_RECHECK`].
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }

    fn sleep_until(&self, at: DateTime<Utc>) -> Sleep<'_> {
        Box::pin(async move {
            if let Some(jumps) = wall_jumps() {
                sleep_hearing_jumps(at, jumps, Utc::now).await;
            }
            // No jump signal (or it stopped): re-check on a timer.
            while let Some(wait) = next_wait(Utc::now(), at) {
                tokio::time::sleep(wait).await;
            }
        })
    }

    fn sleep_until_exact(&self, at: DateTime<Utc>) -> Sleep<'_> {
        Box::pin(async move {
            // tokio's timer for all but the last stretch: it wakes late, never early.
            self.sleep_until(at - EXACT_TAIL).await;
            // The rest on a blocking thread's own sleep, which the kernel
            // ends within its timer slack (tens of microseconds).
            while let Some(left) = next_wait(Utc::now(), at) {
                let slept = tokio::task::spawn_blocking(move || std::thread::sleep(left)).await;
                if slept.is_err() {
                    // No blocking thread (the runtime is stopping): the plain way.
                    self.sleep_until(at).await;
                    return;
                }
            }
        })
    }
}

/// The end of an exact sleep that is slept on a thread rather than on
/// tokio's timer: more than the timer's lateness (up to two milliseconds).
const EXACT_TAIL: TimeDelta = TimeDelta::milliseconds(3);

/// Sleeps until `at` on one timer per wall-clock jump; returns early only
/// if the jump signal ends (the caller then re-checks on a timer).
async fn sleep_hearing_jumps(
    at: DateTime<Utc>,
    mut jumps: watch::Receiver<u64>,
    now: impl Fn() -> DateTime<Utc>,
) {
    loop {
        // Marked before reading the time, so a jump in between is seen.
        jumps.borrow_and_update();
        let Some(left) = (at - now()).to_std().ok().filter(|d| !d.is_zero()) else {
            return;
        };
        tokio::select! {
            () = tokio::time::sleep(left) => {}
            changed = jumps.changed() => if changed.is_err() { return },
        }
    }
}

/// A receiver bumped on every wall-clock step and resume from suspend, when
/// the platform can tell (Linux); `None` otherwise.
fn wall_jumps() -> Option<watch::Receiver<u64>> {
    static JUMPS: std::sync::OnceLock<Option<watch::Sender<u64>>> = std::sync::OnceLock::new();
    JUMPS
        .get_or_init(jump_signal)
        .as_ref()
        .map(watch::Sender::subscribe)
}

#[cfg(target_os = "linux")]
fn jump_signal() -> Option<watch::Sender<u64>> {
    use rustix::time::{
        Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags, Timespec, timerfd_create,
        timerfd_settime,
    };
    let fd = timerfd_create(TimerfdClockId::Realtime, TimerfdFlags::CLOEXEC).ok()?;
    // Far away (2200-01-01): it only ever fires by being cancelled.
    let far = Itimerspec {
        it_interval: Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        },
        it_value: Timespec {
            tv_sec: 7_258_118_400,
            tv_nsec: 0,
        },
    };
    let arm = move |fd: &rustix::fd::OwnedFd| {
        timerfd_settime(
            fd,
            TimerfdTimerFlags::ABSTIME | TimerfdTimerFlags::CANCEL_ON_SET,
            &far,
        )
        .map(|_| ())
    };
    arm(&fd).ok()?;
    let sender = watch::Sender::new(0u64);
    let tell = sender.clone();
    std::thread::Builder::new()
        .name("cairn-clock".into())
        .spawn(move || {
            let mut buf = [0u8; 8];
            loop {
                // Blocks until the clock is set or the machine resumes.
                match rustix::io::read(&fd, &mut buf) {
                    Err(rustix::io::Errno::CANCELED) => {
                        tell.send_modify(|n| *n = n.wrapping_add(1));
                        if arm(&fd).is_err() {
                            return;
                        }
                    }
                    Err(rustix::io::Errno::INTR) => {}
                    // Year 2200, or an error: sleepers fall back to re-checking.
                    _ => return,
                }
            }
        })
        .ok()?;
    Some(sender)
}

#[cfg(not(target_os = "linux"))]
fn jump_signal() -> Option<watch::Sender<u64>> {
    None
}

/// How long a [`SystemClock`] sleeper waits before looking at the wall clock
/// again; `None` once `at` is reached.
fn next_wait(now: DateTime<Utc>, at: DateTime<Utc>) -> Option<Duration> {
    let left = (at - now).to_std().ok().filter(|d| !d.is_zero())?;
    Some(left.min(WALL_RECHECK))
}

/// A clock for tests that follows tokio's time: under a paused runtime,
/// `tokio::time::advance` (or auto-advance) moves [`now`](Clock::now) and
/// wakes sleepers at exactly their instant, so days of schedules run in
/// milliseconds. [`set`](ManualClock::set) is a wall-clock jump (the machine
/// slept, NTP stepped): sleepers wake and re-check.
///
/// Create it inside the runtime whose time it should follow.
#[derive(Debug)]
pub struct ManualClock(Dial);

impl ManualClock {
    /// A clock reading `at` now, moving with tokio's time from here.
    pub fn new(at: DateTime<Utc>) -> Self {
        Self(Dial::new(at))
    }

    /// Jumps the clock to `at` (forward or back) and wakes every sleeper.
    pub fn set(&self, at: DateTime<Utc>) {
        self.0.set(at);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        let anchor = *self.0.anchor();
        anchor.wall + delta(anchor.instant.elapsed())
    }

    fn sleep_until(&self, at: DateTime<Utc>) -> Sleep<'_> {
        Box::pin(self.0.sleep_until(at, || self.now(), true))
    }
}

/// A clock for tests that stands still until [`set`](FixedClock::set);
/// sleepers wake when a `set` reaches their instant.
#[derive(Debug)]
pub struct FixedClock(Dial);

impl FixedClock {
    /// A clock stopped at `at`.
    pub fn new(at: DateTime<Utc>) -> Self {
        Self(Dial::new(at))
    }

    /// Moves the clock to `at` and wakes every sleeper.
    pub fn set(&self, at: DateTime<Utc>) {
        self.0.set(at);
    }
}

impl Clock for FixedClock {
    fn now(&self) -> DateTime<Utc> {
        self.0.anchor().wall
    }

    fn sleep_until(&self, at: DateTime<Utc>) -> Sleep<'_> {
        Box::pin(self.0.sleep_until(at, || self.now(), false))
    }
}

/// The wall-clock reading at a tokio instant.
#[derive(Debug, Clone, Copy)]
struct Anchor {
    wall: DateTime<Utc>,
    instant: Instant,
}

/// A settable anchor and a signal that it was set, shared by the test clocks.
#[derive(Debug)]
struct Dial {
    anchor: Mutex<Anchor>,
    /// Bumped on every `set`, so sleepers re-check.
    jumps: watch::Sender<u64>,
}

impl Dial {
    fn new(at: DateTime<Utc>) -> Self {
        Self {
            anchor: Mutex::new(Anchor {
                wall: at,
                instant: Instant::now(),
            }),
            jumps: watch::Sender::new(0),
        }
    }

    fn anchor(&self) -> MutexGuard<'_, Anchor> {
        // A poisoned lock still holds a valid anchor; keep using it.
        self.anchor.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn set(&self, at: DateTime<Utc>) {
        *self.anchor() = Anchor {
            wall: at,
            instant: Instant::now(),
        };
        self.jumps.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Waits until `now()` reaches `at`: on tokio's timer when the clock
    /// follows tokio time (`timed`), and in any case until a jump gets there.
    async fn sleep_until(&self, at: DateTime<Utc>, now: impl Fn() -> DateTime<Utc>, timed: bool) {
        loop {
            // Subscribed before reading the time, so a jump in between is seen.
            let mut jumps = self.jumps.subscribe();
            let Some(left) = (at - now()).to_std().ok().filter(|d| !d.is_zero()) else {
                return;
            };
            let mut jumped = pin!(jumps.changed());
            let mut timer = pin!(tokio::time::sleep(left));
            std::future::poll_fn(|cx| {
                let timer_done = timed && timer.as_mut().poll(cx).is_ready();
                // `Err` (no sender) cannot happen: the sender lives in `self`.
                if timer_done || jumped.as_mut().poll(cx).is_ready() {
                    Poll::Ready(())
                } else {
                    Poll::Pending
                }
            })
            .await;
        }
    }
}

/// A std duration as chrono's, saturating (tests never run for 292 000 years).
fn delta(d: Duration) -> TimeDelta {
    TimeDelta::from_std(d).unwrap_or(TimeDelta::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use std::sync::Arc;

    #[cfg(target_os = "linux")]
    #[test]
    fn linux_hears_wall_clock_jumps_through_a_timerfd() {
        assert!(wall_jumps().is_some());
    }

    /// A resume from suspend: the wall clock moved 2 h while tokio's
    /// monotonic timer did not. The jump wakes the sleeper, which re-reads
    /// the wall clock and returns, instead of sleeping 2 h more.
    #[tokio::test(start_paused = true)]
    async fn a_wall_clock_jump_ends_a_long_sleep_that_is_now_due() {
        let start = Utc.with_ymd_and_hms(2026, 11, 25, 12, 0, 0).unwrap();
        let wall = Arc::new(Mutex::new(start));
        let jumps = watch::Sender::new(0u64);
        let at = start + TimeDelta::hours(2);
        let sleeper = tokio::spawn({
            let (wall, rx) = (Arc::clone(&wall), jumps.subscribe());
            async move { sleep_hearing_jumps(at, rx, move || *wall.lock().unwrap()).await }
        });
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert!(!sleeper.is_finished(), "still an hour and 59 minutes to go");
        *wall.lock().unwrap() = at + TimeDelta::seconds(1);
        jumps.send_modify(|n| *n += 1);
        tokio::time::timeout(Duration::from_secs(1), sleeper)
            .await
            .expect("woken by the jump, not by its 2-hour timer")
            .unwrap();
    }

    /// Without a jump signal any more, the sleeper hands back to re-checking.
    #[tokio::test(start_paused = true)]
    async fn a_sleeper_returns_when_the_jump_signal_ends() {
        let start = Utc.with_ymd_and_hms(2026, 11, 25, 12, 0, 0).unwrap();
        let jumps = watch::Sender::new(0u64);
        let rx = jumps.subscribe();
        let sleeper = tokio::spawn(async move {
            sleep_hearing_jumps(start + TimeDelta::hours(2), rx, move || start).await
        });
        tokio::task::yield_now().await;
        drop(jumps);
        tokio::time::timeout(Duration::from_secs(1), sleeper)
            .await
            .expect("returned at once")
            .unwrap();
    }

    const DAY: Duration = Duration::from_secs(24 * 3600);

    fn t0() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 3, 27, 9, 0, 0).unwrap()
    }

    /// Spawns a sleeper that reports the clock's reading when it wakes.
    fn sleeper(
        clock: &Arc<ManualClock>,
        at: DateTime<Utc>,
    ) -> tokio::task::JoinHandle<DateTime<Utc>> {
        let clock = Arc::clone(clock);
        tokio::spawn(async move {
            clock.sleep_until(at).await;
            clock.now()
        })
    }

    #[tokio::test(start_paused = true)]
    async fn a_sleeper_three_days_ahead_wakes_exactly_then() {
        let clock = Arc::new(ManualClock::new(t0()));
        let start = Instant::now();
        let at = t0() + delta(3 * DAY);
        let woke = sleeper(&clock, at).await.unwrap();
        assert_eq!(woke, at);
        assert_eq!(start.elapsed(), 3 * DAY);
    }

    #[tokio::test(start_paused = true)]
    async fn now_follows_tokio_advance() {
        let clock = ManualClock::new(t0());
        tokio::time::advance(Duration::from_secs(90 * 60)).await;
        assert_eq!(clock.now(), t0() + TimeDelta::minutes(90));
        clock.set(t0());
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(clock.now(), t0() + TimeDelta::seconds(1));
    }

    #[tokio::test(start_paused = true)]
    async fn a_jump_wakes_sleepers_to_re_check() {
        let clock = Arc::new(ManualClock::new(t0()));
        let start = Instant::now();
        let at = t0() + delta(3 * DAY);
        let first = sleeper(&clock, at);
        let second = sleeper(&clock, at);
        tokio::task::yield_now().await;

        // Two days pass in an instant (the machine slept): one day is left.
        clock.set(t0() + delta(2 * DAY));
        tokio::task::yield_now().await;
        assert!(!first.is_finished());
        assert_eq!(first.await.unwrap(), at);
        assert_eq!(
            start.elapsed(),
            DAY,
            "slept only the day left after the jump"
        );

        // A jump past the instant wakes at once, with no tokio time passing.
        let third = sleeper(&clock, at + delta(DAY));
        tokio::task::yield_now().await;
        let jumped_at = Instant::now();
        clock.set(at + delta(2 * DAY));
        assert_eq!(third.await.unwrap(), at + delta(2 * DAY));
        assert_eq!(jumped_at.elapsed(), Duration::ZERO);
        assert_eq!(second.await.unwrap(), at);
    }

    #[tokio::test(start_paused = true)]
    async fn a_jump_back_keeps_the_sleeper_asleep() {
        let clock = Arc::new(ManualClock::new(t0()));
        let start = Instant::now();
        let at = t0() + TimeDelta::hours(1);
        let woke = sleeper(&clock, at);
        tokio::task::yield_now().await;
        clock.set(t0() - TimeDelta::hours(1));
        assert_eq!(woke.await.unwrap(), at);
        assert_eq!(start.elapsed(), 2 * Duration::from_secs(3600));
    }

    #[tokio::test(start_paused = true)]
    async fn a_fixed_clock_wakes_sleepers_only_when_set() {
        let clock = Arc::new(FixedClock::new(t0()));
        let at = t0() + TimeDelta::minutes(5);
        let waiting = {
            let clock = Arc::clone(&clock);
            tokio::spawn(async move { clock.sleep_until(at).await })
        };
        tokio::time::advance(DAY).await;
        assert_eq!(clock.now(), t0(), "tokio time does not move it");
        clock.set(t0() + TimeDelta::minutes(4));
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        clock.set(at);
        waiting.await.unwrap();
        clock.sleep_until(t0()).await; // already past: returns at once
    }

    #[test]
    fn system_sleeps_re_read_the_wall_clock_at_least_every_recheck() {
        let now = t0();
        // Two hours ahead: never one 2-hour timer that a suspend would stretch.
        assert_eq!(
            next_wait(now, now + TimeDelta::hours(2)),
            Some(WALL_RECHECK)
        );
        assert_eq!(
            next_wait(now, now + TimeDelta::seconds(3)),
            Some(Duration::from_secs(3))
        );
        assert_eq!(next_wait(now, now), None);
        assert_eq!(next_wait(now, now - TimeDelta::hours(1)), None);
    }

    #[tokio::test]
    async fn a_system_sleep_until_the_past_returns_at_once() {
        SystemClock
            .sleep_until(Utc::now() - TimeDelta::hours(1))
            .await;
        assert!(SystemClock.now() > t0() - delta(DAY * 365 * 30));
    }

    #[tokio::test]
    async fn an_exact_system_sleep_never_wakes_before_its_instant() {
        // Past the tail (the timer's part), and one only as long as the tail.
        for ahead in [TimeDelta::milliseconds(25), TimeDelta::milliseconds(2)] {
            let at = Utc::now() + ahead;
            SystemClock.sleep_until_exact(at).await;
            let woke = Utc::now();
            assert!(
                woke >= at,
                "woke {} µs early",
                (at - woke).num_microseconds().unwrap_or(0)
            );
        }
        // The past: at once.
        SystemClock
            .sleep_until_exact(Utc::now() - TimeDelta::hours(1))
            .await;
    }
}
