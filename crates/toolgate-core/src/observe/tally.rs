//! Counting off the request path. An answer's exact token count (o200k BPE) costs a small
//! answer's call about a twentieth of the gateway's CPU; it runs here, on a thread of its
//! own, after the answer has gone, and adds its figures when done. Whoever reads those
//! figures (`/metrics`, the dashboard, a session's budget) calls [`Tally::settle`] first,
//! so a reader never sees a count that an answer already sent has not yet added.
//!
//! Jobs are counted in batches: the thread wakes at most once a [`TICK`] while answers keep
//! coming (sooner when a reader settles), not once an answer. Woken for every answer, on
//! a machine with few cores it took a core from the next call (a thread wake-up, then the
//! count itself between a call's two hops): about 60 µs of a 220 µs call at one connection.
//! A longer tick makes longer bursts of counting that the calls behind them wait for: at 8
//! connections p99/p50 was 2.5–2.8 with 20 ms, 2.0–2.4 with 2–5 ms and 1.8–2.0 with 1 ms
//! (`docs/performance.md`).

use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::Duration;

type Job = Box<dyn FnOnce() + Send>;

/// How long an answer's count may wait to be counted while others keep coming.
const TICK: Duration = Duration::from_millis(1);

/// The thread that counts answers' tokens after they have gone, in batches.
#[derive(Default)]
pub struct Tally {
    /// Whether the counting thread started (it starts with the first job; without it,
    /// jobs run where they are queued).
    thread: OnceLock<bool>,
    shared: Arc<Shared>,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    /// Wakes the counting thread: a job while it sleeps, a reader settling, the end.
    wake: Condvar,
    /// Wakes readers when a batch is done.
    done: Condvar,
}

#[derive(Default)]
struct State {
    jobs: Vec<Job>,
    /// Jobs ever queued, and ever finished (run, or failed): a reader waits for the first
    /// figure as it was when it came.
    queued: u64,
    finished: u64,
    /// The thread waits for a job (not for a tick): the next job must wake it.
    asleep: bool,
    /// A reader waits: count now, without waiting for the tick.
    urgent: bool,
    /// The tally is dropped: the thread counts what is left and ends.
    closed: bool,
}

impl Tally {
    /// Runs `job` on the counting thread (here, if that thread cannot be started).
    pub fn run(&self, job: impl FnOnce() + Send + 'static) {
        if !*self.thread.get_or_init(|| self.start()) {
            return job();
        }
        let mut s = self.shared.state.lock().expect("tally");
        s.jobs.push(Box::new(job));
        s.queued += 1;
        if s.asleep {
            s.asleep = false;
            self.shared.wake.notify_one();
        }
    }

    /// Waits until every job queued so far has run.
    pub fn settle(&self) {
        let mut s = self.shared.state.lock().expect("tally");
        let target = s.queued;
        if s.finished >= target {
            return;
        }
        s.urgent = true;
        self.shared.wake.notify_one();
        let _done = (self.shared.done)
            .wait_while(s, |s| s.finished < target)
            .expect("tally");
    }

    fn start(&self) -> bool {
        let shared = self.shared.clone();
        let started = std::thread::Builder::new()
            .name("toolgate-tally".into())
            .spawn(move || count(&shared));
        match started {
            Ok(_) => true,
            Err(e) => {
                tracing::warn!("token counts run on the request path: no thread for them ({e})");
                false
            }
        }
    }
}

impl Drop for Tally {
    fn drop(&mut self) {
        if let Ok(mut s) = self.shared.state.lock() {
            s.closed = true;
            self.shared.wake.notify_one();
        }
    }
}

/// The counting thread: a batch a tick while jobs keep coming; asleep when none do.
fn count(shared: &Shared) {
    loop {
        let batch = {
            let mut s = shared.state.lock().expect("tally");
            while s.jobs.is_empty() && !s.closed {
                s.asleep = true;
                s = shared.wake.wait(s).expect("tally");
            }
            if s.jobs.is_empty() {
                return; // closed, nothing left
            }
            s.asleep = false;
            if !s.urgent && !s.closed {
                // Let the answers of the next tick join this batch (a reader or the end
                // cuts the wait short; `run` does not wake a thread that is not asleep).
                s = (shared.wake)
                    .wait_timeout_while(s, TICK, |s| !s.urgent && !s.closed)
                    .expect("tally")
                    .0;
            }
            s.urgent = false;
            std::mem::take(&mut s.jobs)
        };
        let n = batch.len() as u64;
        for job in batch {
            // A job that panics still counts as done, so `settle` never hangs.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
        }
        let mut s = shared.state.lock().expect("tally");
        s.finished += n;
        shared.done.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn settle_waits_for_every_job_queued_before_it() {
        let tally = Tally::default();
        let sum = Arc::new(AtomicUsize::new(0));
        for n in 1..=100 {
            let sum = sum.clone();
            tally.run(move || {
                std::thread::sleep(std::time::Duration::from_micros(50));
                sum.fetch_add(n, Ordering::SeqCst);
            });
        }
        tally.settle();
        assert_eq!(sum.load(Ordering::SeqCst), 5050);
        // A job that panics is done too.
        tally.run(|| panic!("a job that fails"));
        tally.settle();
        tally.settle(); // and with nothing queued it returns at once
    }

    #[test]
    fn a_job_runs_without_a_reader_settling() {
        let tally = Tally::default();
        let (tx, rx) = std::sync::mpsc::channel();
        for n in 0..3 {
            let tx = tx.clone();
            tally.run(move || tx.send(n).expect("the test waits"));
        }
        // No settle: the thread counts them on its own (the bound is generous: a tick is
        // 1 ms, and a loaded test machine may not run the thread at once).
        let got: Vec<i32> = (0..3)
            .map(|_| rx.recv_timeout(Duration::from_secs(30)).expect("counted"))
            .collect();
        assert_eq!(got, [0, 1, 2]);
    }

    #[test]
    fn dropping_the_tally_counts_what_is_queued_and_ends_the_thread() {
        let tally = Tally::default();
        let (tx, rx) = std::sync::mpsc::channel();
        tally.run({
            let tx = tx.clone();
            move || tx.send(1).expect("the test waits")
        });
        drop(tally);
        assert_eq!(rx.recv_timeout(Duration::from_secs(30)), Ok(1));
    }
}
