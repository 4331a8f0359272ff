//! Shutdown of tool calls: once a drain begins no new call starts, the calls in flight get
//! up to a bound to finish, and the ones still running then end with [`ShuttingDown`], so
//! every caller gets an answer that says so (and the audit log its `end` record). Depends on
//! nothing else in the crate.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// Why a call did not run, or did not finish: the gateway is stopping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShuttingDown {
    /// Asked after the drain began: nothing was run.
    NotStarted,
    /// Still running when the grace period ended: it was cancelled, and may or may not
    /// have taken effect upstream.
    Cut,
}

/// The calls in flight, and the drain's two moments.
#[derive(Default)]
pub struct Drain {
    /// Calls admitted and not yet returned.
    in_flight: AtomicUsize,
    /// Woken whenever a call returns, so `drain` sees the count reach zero.
    returned: Notify,
    /// Cancelled when the drain begins: no call is admitted after it.
    closing: CancellationToken,
    /// Cancelled when the grace period ends: calls still running end with `Cut`.
    cut: CancellationToken,
}

/// What a drain found: how many calls finished within the grace, and how many were cut.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Drained {
    /// Calls that finished within the grace.
    pub finished: usize,
    /// Calls still running at its end, cut.
    pub cut: usize,
}

impl Drain {
    /// A drain whose cut also comes when `stop` is cancelled (the gateway stopping without a
    /// drain, or after one): a call still running then is cut the same way.
    pub fn under(stop: &CancellationToken) -> Self {
        Self {
            cut: stop.child_token(),
            ..Self::default()
        }
    }

    /// Cancelled when calls still running are cut: the end of the grace, or the gateway
    /// stopping. Whatever ends after it ended because of the shutdown.
    pub fn cutting(&self) -> CancellationToken {
        self.cut.clone()
    }

    /// Runs `call` unless the drain has begun; ends it with `Cut` when the grace ends first.
    pub async fn run<F: Future>(&self, call: F) -> Result<F::Output, ShuttingDown> {
        if self.closing.is_cancelled() {
            return Err(ShuttingDown::NotStarted);
        }
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        // A drain that began between the check and the count still waits for this call.
        let _returned = Returned(self);
        tokio::select! {
            biased;
            out = call => Ok(out),
            _ = self.cut.cancelled() => Err(ShuttingDown::Cut),
        }
    }

    /// Calls running now.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Acquire)
    }

    /// Whether the drain has begun.
    #[cfg(test)]
    pub(crate) fn is_closing(&self) -> bool {
        self.closing.is_cancelled()
    }

    /// Stops admitting calls (also the first step of [`Drain::drain`]).
    pub fn close(&self) {
        self.closing.cancel();
    }

    /// Stops admitting calls, waits up to `grace` for the running ones, then cuts the rest
    /// and waits (briefly) until they have returned their error.
    pub async fn drain(&self, grace: Duration) -> Drained {
        self.close();
        let at_start = self.in_flight();
        let _ = tokio::time::timeout(grace, self.until_idle()).await;
        let cut = self.in_flight();
        self.cut.cancel();
        // A cut call returns at its next poll; the bound only guards against a stuck one.
        let _ = tokio::time::timeout(Duration::from_secs(5), self.until_idle()).await;
        Drained {
            finished: at_start.saturating_sub(cut),
            cut,
        }
    }

    async fn until_idle(&self) {
        loop {
            let woken = self.returned.notified();
            if self.in_flight() == 0 {
                return;
            }
            woken.await;
        }
    }
}

/// Counts a call out however it ends (answered, cut, or its future dropped).
struct Returned<'a>(&'a Drain);

impl Drop for Returned<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
        self.0.returned.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[tokio::test(start_paused = true)]
    async fn a_call_that_finishes_within_the_grace_keeps_its_answer() {
        let d = Arc::new(Drain::default());
        let d2 = d.clone();
        let call = tokio::spawn(async move {
            d2.run(async {
                tokio::time::sleep(Duration::from_secs(2)).await;
                7
            })
            .await
        });
        tokio::task::yield_now().await;
        assert_eq!(d.in_flight(), 1);
        let drained = d.drain(Duration::from_secs(10)).await;
        assert_eq!(call.await.unwrap(), Ok(7));
        assert_eq!(
            drained,
            Drained {
                finished: 1,
                cut: 0
            }
        );
        assert_eq!(d.run(async { 1 }).await, Err(ShuttingDown::NotStarted));
    }

    #[tokio::test]
    async fn once_closed_no_call_runs_and_the_drain_still_counts_the_running_ones() {
        let d = Arc::new(Drain::default());
        let (d2, (tx, rx)) = (d.clone(), tokio::sync::oneshot::channel::<()>());
        let call = tokio::spawn(async move { d2.run(rx).await });
        tokio::task::yield_now().await;
        d.close();
        assert!(d.is_closing());
        assert_eq!(d.run(async { 1 }).await, Err(ShuttingDown::NotStarted));
        tx.send(()).unwrap();
        let drained = d.drain(Duration::from_secs(10)).await;
        assert!(call.await.unwrap().is_ok());
        assert_eq!(drained.cut, 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_still_running_at_the_end_of_the_grace_is_cut() {
        let d = Arc::new(Drain::default());
        let d2 = d.clone();
        let call = tokio::spawn(async move { d2.run(std::future::pending::<()>()).await });
        tokio::task::yield_now().await;
        let drained = d.drain(Duration::from_secs(3)).await;
        assert_eq!(call.await.unwrap(), Err(ShuttingDown::Cut));
        assert_eq!(
            drained,
            Drained {
                finished: 0,
                cut: 1
            }
        );
        assert_eq!(d.in_flight(), 0);
    }
}
