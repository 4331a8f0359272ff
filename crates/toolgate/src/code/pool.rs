//! Workers started ahead of time: `code.pool_size` idle workers, each already started and
//! holding a fresh runtime, so a run does not wait for a process and QuickJS to start.
//!
//! Isolation is unchanged: a worker still serves exactly one run and is never handed out
//! again. Taking one wakes the filler, which starts its replacement in the background; so
//! does a worker that exits or is killed while idle. On shutdown every idle worker is killed
//! and waited for. With `pool_size = 0`, or when the pool is empty (a burst of runs), a run
//! starts its own worker as before.

use super::worker::{line_limit, Worker, WorkerError};
use crate::config::code::CodeConfig;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// How long a starting worker may take to say it is ready.
const READY_WITHIN: Duration = Duration::from_secs(10);
/// The longest pause between attempts when workers fail to start.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// The gateway's source of sandbox workers.
pub(crate) struct WorkerPool {
    /// The worker command; `None` when code mode has no worker (nothing is started).
    command: Option<Vec<String>>,
    /// Idle workers to keep.
    size: usize,
    /// The longest line a worker may write (from the configuration, fixed at start).
    line_limit: usize,
    /// Started, ready, never used; oldest first.
    idle: Mutex<VecDeque<Worker>>,
    /// Wakes the filler: a worker was taken, or one exited.
    wake: Arc<Notify>,
}

impl WorkerPool {
    pub(crate) fn new(cfg: &CodeConfig) -> Arc<Self> {
        Arc::new(Self {
            command: cfg.worker.clone().filter(|_| cfg.enabled),
            size: cfg.pool_size,
            line_limit: line_limit(cfg),
            idle: Mutex::new(VecDeque::new()),
            wake: Arc::new(Notify::new()),
        })
    }

    /// Whether the filler has anything to do (code mode on, a worker command, a size).
    pub(crate) fn keeps_workers(&self) -> bool {
        self.command.is_some() && self.size > 0
    }

    /// A worker for one run: a warm one if one is idle, else one started now.
    pub(crate) fn take(&self) -> Result<Worker, WorkerError> {
        let Some(command) = &self.command else {
            return Err(WorkerError::NoCommand);
        };
        loop {
            let Some(mut w) = self.idle.lock().expect("pool").pop_front() else {
                break;
            };
            // One that died while idle is dropped (and reaped); try the next.
            if w.alive() {
                self.wake.notify_one();
                return Ok(w);
            }
        }
        if self.size > 0 {
            self.wake.notify_one();
        }
        Worker::spawn(command, self.line_limit, None)
    }

    /// Idle workers now (for tests and reports).
    pub(crate) fn idle(&self) -> usize {
        self.idle.lock().expect("pool").len()
    }

    /// Keeps `size` workers idle until `stop` is cancelled, then kills every idle worker.
    pub(crate) async fn keep_filled(self: Arc<Self>, stop: CancellationToken) {
        let Some(command) = self.command.clone().filter(|_| self.size > 0) else {
            return;
        };
        let mut backoff = Duration::from_millis(100);
        loop {
            let missing = {
                let mut idle = self.idle.lock().expect("pool");
                idle.retain_mut(Worker::alive);
                self.size.saturating_sub(idle.len())
            };
            if missing == 0 {
                tokio::select! {
                    _ = stop.cancelled() => break,
                    _ = self.wake.notified() => continue,
                }
            }
            // One at a time: a refill never competes with the runs for every core at once.
            let started = tokio::select! {
                _ = stop.cancelled() => break,
                r = self.start(&command) => r,
            };
            match started {
                Ok(w) => {
                    backoff = Duration::from_millis(100);
                    let pid = w.pid().unwrap_or(0);
                    let n = {
                        let mut idle = self.idle.lock().expect("pool");
                        idle.push_back(w);
                        idle.len()
                    };
                    tracing::debug!("sandbox worker {pid} ready ({n} of {} idle)", self.size);
                }
                Err(e) => {
                    tracing::warn!(
                        "code mode: cannot keep a sandbox worker ready: {e}; retrying in {} ms",
                        backoff.as_millis()
                    );
                    tokio::select! {
                        _ = stop.cancelled() => break,
                        _ = tokio::time::sleep(backoff) => {}
                    }
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
        let idle: Vec<Worker> = self.idle.lock().expect("pool").drain(..).collect();
        futures::future::join_all(idle.into_iter().map(Worker::kill)).await;
    }

    async fn start(&self, command: &[String]) -> Result<Worker, WorkerError> {
        let mut w = Worker::spawn(command, self.line_limit, Some(self.wake.clone()))?;
        match w.ready(READY_WITHIN).await {
            Ok(()) => Ok(w),
            Err(e) => {
                w.kill().await;
                Err(e)
            }
        }
    }
}
