//! Counting off the request path. An answer's exact token count (o200k BPE) costs a small
//! answer's call about a twentieth of the gateway's CPU; it runs here, on a thread of its
//! own, after the answer has gone, and adds its figures when done. Whoever reads those
//! figures (`/metrics`, the dashboard, a session's budget) calls [`Tally::settle`] first,
//! so a reader never sees a count that an answer already sent has not yet added.

use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, OnceLock};

type Job = Box<dyn FnOnce() + Send>;

#[derive(Default)]
pub struct Tally {
    /// To the counting thread, started with the first job; it ends when this is dropped.
    queue: OnceLock<Option<mpsc::Sender<Job>>>,
    pending: Arc<Pending>,
}

/// Jobs queued or running.
#[derive(Default)]
struct Pending {
    count: Mutex<usize>,
    done: Condvar,
}

impl Pending {
    fn finished(&self) {
        let mut count = self.count.lock().expect("tally");
        *count -= 1;
        if *count == 0 {
            self.done.notify_all();
        }
    }
}

impl Tally {
    /// Runs `job` on the counting thread (here, if that thread cannot be started).
    pub fn run(&self, job: impl FnOnce() + Send + 'static) {
        let queue = self.queue.get_or_init(|| self.start());
        let Some(queue) = queue else {
            return job();
        };
        *self.pending.count.lock().expect("tally") += 1;
        if let Err(mpsc::SendError(job)) = queue.send(Box::new(job)) {
            self.pending.finished();
            job();
        }
    }

    /// Waits until every job queued so far has run.
    pub fn settle(&self) {
        let count = self.pending.count.lock().expect("tally");
        let _idle = (self.pending.done)
            .wait_while(count, |n| *n > 0)
            .expect("tally");
    }

    fn start(&self) -> Option<mpsc::Sender<Job>> {
        let (tx, rx) = mpsc::channel::<Job>();
        let pending = self.pending.clone();
        let started = std::thread::Builder::new()
            .name("toolgate-tally".into())
            .spawn(move || {
                for job in rx {
                    // A job that panics still counts as done, so `settle` never hangs.
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
                    pending.finished();
                }
            });
        match started {
            Ok(_) => Some(tx),
            Err(e) => {
                tracing::warn!("token counts run on the request path: no thread for them ({e})");
                None
            }
        }
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
}
