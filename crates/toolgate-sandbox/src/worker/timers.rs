//! A run's timers (`setTimeout`, `setInterval`, `sleep`): due times kept by the worker's
//! loop, which waits for the earliest of them or a gateway answer, whichever comes first.
//! A waiting worker is blocked in the kernel, so time spent sleeping costs no CPU; every
//! timer still ends at the run's deadline.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Timers armed at once; past this `setTimeout` throws (a runaway loop, not a program).
pub(super) const MAX_TIMERS: usize = 1000;
/// The longest delay, as browsers and Node clamp it (2^31 - 1 ms).
const MAX_DELAY_MS: f64 = 2_147_483_647.0;

/// Armed timers: id -> (when it is due, its interval if it repeats).
#[derive(Default)]
pub(super) struct Timers {
    armed: HashMap<u64, (Instant, Option<Duration>)>,
    last_id: u64,
}

impl Timers {
    /// Arms a timer `ms` from now (NaN and negative mean 0; an interval waits at least
    /// 1 ms between runs) and returns its id. `Err` is the sentence the program's
    /// `setTimeout` throws: a string is the value.
    pub(super) fn arm(&mut self, ms: f64, repeat: bool) -> Result<u64, String> {
        if self.armed.len() >= MAX_TIMERS {
            return Err(format!(
                "a run may have at most {MAX_TIMERS} timers armed at once; clear some first"
            ));
        }
        let ms = if ms.is_finite() && ms > 0.0 {
            ms.min(MAX_DELAY_MS)
        } else {
            0.0
        };
        let delay = Duration::from_micros((ms * 1000.0) as u64);
        let interval = repeat.then(|| delay.max(Duration::from_millis(1)));
        self.last_id += 1;
        self.armed
            .insert(self.last_id, (Instant::now() + delay, interval));
        Ok(self.last_id)
    }

    pub(super) fn disarm(&mut self, id: u64) {
        self.armed.remove(&id);
    }

    /// The earliest due time (ties go to the timer armed first).
    pub(super) fn next_due(&self) -> Option<Instant> {
        self.earliest().map(|(_, due)| due)
    }

    /// The id of a timer due at `now`, the earliest first; an interval is armed again
    /// for its next run, a timeout is forgotten.
    pub(super) fn take_due(&mut self, now: Instant) -> Option<u64> {
        let (id, due) = self.earliest().filter(|(_, due)| *due <= now)?;
        match self.armed.get(&id).and_then(|(_, every)| *every) {
            Some(every) => {
                // From the time it was due, so an interval keeps its pace, but never in
                // the past (a slow callback skips runs rather than bunching them).
                let next = (due + every).max(now);
                self.armed.insert(id, (next, Some(every)));
            }
            None => {
                self.armed.remove(&id);
            }
        }
        Some(id)
    }

    fn earliest(&self) -> Option<(u64, Instant)> {
        self.armed
            .iter()
            .map(|(id, (due, _))| (*id, *due))
            .min_by_key(|(id, due)| (*due, *id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timers_fire_in_due_order_and_intervals_rearm() {
        let mut t = Timers::default();
        let late = t.arm(50.0, false).unwrap();
        let soon = t.arm(f64::NAN, false).unwrap();
        let every = t.arm(-5.0, true).unwrap();
        let now = Instant::now();
        assert_eq!(t.take_due(now), Some(soon));
        assert_eq!(t.take_due(now), Some(every));
        // The interval is armed again at least a millisecond on, the timeout is gone.
        assert_eq!(t.take_due(now), None);
        assert!(t.next_due().unwrap() > now);
        t.disarm(every);
        assert_eq!(t.take_due(now + Duration::from_secs(1)), Some(late));
        assert_eq!(t.next_due(), None);
    }

    #[test]
    fn timers_are_bounded() {
        let mut t = Timers::default();
        for _ in 0..MAX_TIMERS {
            t.arm(1e12, false).unwrap();
        }
        assert!(t.arm(1.0, false).unwrap_err().contains("at most"));
    }
}
