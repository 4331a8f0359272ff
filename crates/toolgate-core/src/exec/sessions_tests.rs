//! Tests of the handle store (owned by principals), with paused tokio time (no test sleeps in real time).

use super::limits::{IdKind, StoreError, StoreLimits, StoreStats};
use super::operations::OperationStatus;
use super::sessions::*;
use crate::call::Progress;
use crate::principal::Principal;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::advance;
use tokio_util::sync::CancellationToken;

const MIN: Duration = Duration::from_secs(60);

/// The principal holding the API key `name`.
fn p(name: &str) -> Principal {
    Principal::key(name)
}

fn store() -> SessionStore<String> {
    SessionStore::default()
}

fn pages(n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("page {i}\n")).collect()
}

#[tokio::test(start_paused = true)]
async fn cursor_round_trip_to_the_end_and_retries_repeat() {
    let s = store();
    let c1 = s.put_pages(&p("a"), pages(3)).unwrap();
    assert!(c1.starts_with("pg-") && c1.len() >= 3 + 32 + 2, "{c1}");
    let (p1, c2) = s.next_page(&p("a"), &c1).unwrap();
    assert_eq!(p1, "page 1\n");
    // A retried continue with the same cursor gets the same page.
    assert_eq!(s.next_page(&p("a"), &c1).unwrap(), (p1, c2.clone()));
    let (p2, c3) = s.next_page(&p("a"), &c2.unwrap()).unwrap();
    let (p3, end) = s.next_page(&p("a"), &c3.unwrap()).unwrap();
    assert_eq!(
        (p2.as_str(), p3.as_str(), end),
        ("page 2\n", "page 3\n", None)
    );
    // Cursors are unguessable: two results never share an id.
    assert_ne!(
        s.put_pages(&p("a"), pages(1)).unwrap(),
        s.put_pages(&p("a"), pages(1)).unwrap()
    );
}

#[tokio::test(start_paused = true)]
async fn cursors_expire_unless_read_and_last_page_keeps_a_grace() {
    let s = store();
    let c = s.put_pages(&p("a"), pages(3)).unwrap();
    advance(9 * MIN).await;
    let (_, next) = s.next_page(&p("a"), &c).unwrap();
    advance(9 * MIN).await;
    let (_, last) = s.next_page(&p("a"), &next.unwrap()).unwrap();
    let last = last.unwrap();
    s.next_page(&p("a"), &last).unwrap();
    advance(30 * Duration::from_secs(1)).await;
    s.next_page(&p("a"), &last).expect("retry within the grace");
    advance(MIN).await;
    let e = s.next_page(&p("a"), &last).unwrap_err();
    assert!(
        matches!(
            e,
            StoreError::Expired {
                kind: IdKind::Cursor,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("expired") && e.to_string().contains("call execute again"));

    let unread = s.put_pages(&p("a"), pages(2)).unwrap();
    advance(10 * MIN + Duration::from_secs(1)).await;
    s.sweep();
    assert_eq!(s.stats().cursors, 0, "purged");
    // The tombstone still says expired, not unknown.
    assert!(matches!(
        s.next_page(&p("a"), &unread),
        Err(StoreError::Expired { .. })
    ));
}

#[tokio::test(start_paused = true)]
async fn foreign_and_unknown_cursors_are_told_apart() {
    let s = store();
    let c = s.put_pages(&p("a"), pages(2)).unwrap();
    let e = s.next_page(&p("b"), &c).unwrap_err();
    assert!(matches!(
        e,
        StoreError::Foreign {
            kind: IdKind::Cursor,
            ..
        }
    ));
    assert!(e.to_string().contains("another caller"), "{e}");
    // Still foreign (not expired) once purged.
    advance(11 * MIN).await;
    s.sweep();
    assert!(matches!(
        s.next_page(&p("b"), &c),
        Err(StoreError::Foreign { .. })
    ));
    let fresh = s.put_pages(&p("a"), pages(2)).unwrap();
    let forged = fresh.replace("-0", "-9");
    for bad in [
        "pg-0123456789abcdef0123456789abcdef-0",
        "hello",
        "",
        forged.as_str(),
    ] {
        let e = s.next_page(&p("a"), bad).unwrap_err();
        assert!(matches!(e, StoreError::Unknown { .. }), "{bad}: {e:?}");
        assert!(e.to_string().contains("call execute again"));
    }
}

#[tokio::test(start_paused = true)]
async fn cursor_bounds_evict_oldest_and_refuse_huge_results() {
    let limits = StoreLimits {
        max_cursors_per_owner: 2,
        max_cursors: 3,
        max_bytes: 400,
        ..Default::default()
    };
    let s: SessionStore<String> = SessionStore::new(limits);
    let a1 = s.put_pages(&p("a"), pages(1)).unwrap();
    advance(Duration::from_secs(1)).await;
    let a2 = s.put_pages(&p("a"), pages(1)).unwrap();
    advance(Duration::from_secs(1)).await;
    let a3 = s.put_pages(&p("a"), pages(1)).unwrap();
    assert!(
        matches!(s.next_page(&p("a"), &a1), Err(StoreError::Expired { .. })),
        "per-session cap"
    );
    s.next_page(&p("a"), &a2).unwrap();
    advance(Duration::from_secs(1)).await;
    s.next_page(&p("a"), &a3).unwrap();
    advance(Duration::from_secs(1)).await;
    s.put_pages(&p("b"), pages(1)).unwrap();
    advance(Duration::from_secs(1)).await;
    s.put_pages(&p("c"), pages(1)).unwrap();
    assert_eq!(s.stats().cursors, 3, "total cap");
    assert!(
        s.next_page(&p("a"), &a2).is_err(),
        "the least recently used went"
    );
    let e = s.put_pages(&p("a"), vec!["x".repeat(101)]).unwrap_err();
    assert_eq!(
        e,
        StoreError::TooLarge {
            bytes: 101,
            limit: 100
        }
    );
}

#[tokio::test(start_paused = true)]
async fn cursor_bytes_are_bounded_per_session_and_in_all() {
    let limits = StoreLimits {
        max_bytes: 400,
        ..Default::default()
    };
    let s: SessionStore<String> = SessionStore::new(limits);
    let e_page = s.put_pages(&p("e"), vec!["z".repeat(10)]).unwrap();
    for _ in 0..10 {
        advance(Duration::from_secs(1)).await;
        s.put_pages(&p("d"), vec!["y".repeat(45)]).unwrap();
        assert!(s.stats().bytes <= 400);
    }
    // "d" keeps to its quarter of the bytes (two pages of 45), so "e"'s page survives.
    assert_eq!(
        s.stats(),
        StoreStats {
            cursors: 3,
            bytes: 100,
            ..Default::default()
        }
    );
    s.next_page(&p("e"), &e_page).unwrap();
    for session in ["f", "g", "h", "i"] {
        advance(Duration::from_secs(1)).await;
        s.put_pages(&p(session), vec!["w".repeat(100)]).unwrap();
        assert!(s.stats().bytes <= 400);
    }
}

type BoxedCall =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<String, String>> + Send>>;

/// A call that finishes when told to, reporting progress first.
fn gated_call(
    gate: tokio::sync::oneshot::Receiver<Result<String, String>>,
    seen: Arc<Mutex<Option<CancellationToken>>>,
) -> impl FnOnce(CancellationToken, tokio::sync::mpsc::UnboundedSender<Progress>) -> BoxedCall {
    move |cancel, progress| {
        *seen.lock().unwrap() = Some(cancel);
        Box::pin(async move {
            let _ = progress.send(Progress {
                progress: 1.0,
                total: Some(4.0),
                message: Some("cloning".into()),
            });
            gate.await.unwrap_or_else(|_| Err("gate dropped".into()))
        })
    }
}

#[tokio::test(start_paused = true)]
async fn operation_reports_progress_then_delivers_its_result() {
    let s = store();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let id = s
        .start(&p("a"), gated_call(rx, Default::default()))
        .unwrap();
    assert!(id.starts_with("op-"));
    advance(Duration::from_secs(3)).await;
    match s.wait(&p("a"), &id, Duration::from_secs(2)).await.unwrap() {
        OperationStatus::Running { progress, elapsed } => {
            assert_eq!(progress.unwrap().message.as_deref(), Some("cloning"));
            assert_eq!(elapsed, Duration::from_secs(5));
        }
        other => panic!("{other:?}"),
    }
    tx.send(Ok("the result".into())).unwrap();
    let done = s.wait(&p("a"), &id, MIN).await.unwrap();
    assert_eq!(done, OperationStatus::Done("the result".to_string()));
    // Delivered once, then kept briefly for a retry, then gone.
    advance(Duration::from_secs(30)).await;
    assert_eq!(s.status(&p("a"), &id).unwrap(), done);
    advance(2 * MIN).await;
    assert!(matches!(
        s.status(&p("a"), &id),
        Err(StoreError::Expired {
            kind: IdKind::Operation,
            ..
        })
    ));
}

#[tokio::test(start_paused = true)]
async fn failed_and_uncollected_operations() {
    let s = store();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let id = s
        .start(&p("a"), gated_call(rx, Default::default()))
        .unwrap();
    tx.send(Err("upstream \"git\" rejected the call: bad ref".into()))
        .unwrap();
    let st = s.wait(&p("a"), &id, MIN).await.unwrap();
    assert_eq!(
        st,
        OperationStatus::Failed("upstream \"git\" rejected the call: bad ref".into())
    );

    let (tx, rx) = tokio::sync::oneshot::channel();
    let id = s
        .start(&p("a"), gated_call(rx, Default::default()))
        .unwrap();
    tx.send(Ok("never read".into())).unwrap();
    tokio::task::yield_now().await;
    advance(10 * MIN + Duration::from_secs(1)).await;
    assert!(matches!(
        s.status(&p("a"), &id),
        Err(StoreError::Expired { .. })
    ));
}

#[tokio::test(start_paused = true)]
async fn cancel_fires_the_token_and_drops_the_call() {
    let s = store();
    let seen = Arc::new(Mutex::new(None));
    let (_tx, rx) = tokio::sync::oneshot::channel();
    let id = s.start(&p("a"), gated_call(rx, seen.clone())).unwrap();
    let token = seen.lock().unwrap().clone().unwrap();
    assert!(matches!(
        s.cancel(&p("b"), &id),
        Err(StoreError::Foreign { .. })
    ));
    assert!(!token.is_cancelled());
    assert_eq!(s.cancel(&p("a"), &id).unwrap(), OperationStatus::Cancelled);
    assert!(token.is_cancelled());
    // The task ends without the gate ever opening, and the status stays cancelled.
    assert_eq!(
        s.wait(&p("a"), &id, MIN).await.unwrap(),
        OperationStatus::Cancelled
    );
    assert_eq!(s.stats().running, 0);
    // Cancelling a finished operation changes nothing.
    let (tx, rx) = tokio::sync::oneshot::channel();
    let id = s
        .start(&p("a"), gated_call(rx, Default::default()))
        .unwrap();
    tx.send(Ok("done".into())).unwrap();
    s.wait(&p("a"), &id, MIN).await.unwrap();
    assert_eq!(
        s.cancel(&p("a"), &id).unwrap(),
        OperationStatus::Done("done".into())
    );
}

#[tokio::test(start_paused = true)]
async fn operation_ids_are_checked_like_cursors() {
    let s = store();
    let (_tx, rx) = tokio::sync::oneshot::channel();
    let id = s
        .start(&p("a"), gated_call(rx, Default::default()))
        .unwrap();
    let e = s.status(&p("b"), &id).unwrap_err();
    assert!(matches!(
        e,
        StoreError::Foreign {
            kind: IdKind::Operation,
            ..
        }
    ));
    assert!(e.to_string().starts_with("operation \"op-"), "{e}");
    assert!(matches!(
        s.status(&p("a"), "op-feed"),
        Err(StoreError::Unknown { .. })
    ));
    assert!(matches!(
        s.wait(&p("a"), "nope", MIN).await,
        Err(StoreError::Unknown { .. })
    ));
    // Nothing about a connection ends it: its owner can still follow it.
    assert!(matches!(
        s.status(&p("a"), &id),
        Ok(OperationStatus::Running { .. })
    ));
}

#[tokio::test(start_paused = true)]
async fn operation_bounds_are_enforced() {
    let limits = StoreLimits {
        max_operations_per_owner: 2,
        max_operations: 3,
        ..Default::default()
    };
    let s: SessionStore<String> = SessionStore::new(limits);
    let mut gates = Vec::new();
    let mut start = |owner: &str| {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let id = s.start(&p(owner), gated_call(rx, Default::default()))?;
        gates.push(tx);
        Ok::<_, StoreError>(id)
    };
    start("a").unwrap();
    start("a").unwrap();
    assert_eq!(
        start("a").unwrap_err(),
        StoreError::TooManyOperations { limit: 2 }
    );
    let b = start("b").unwrap();
    assert_eq!(start("c").unwrap_err(), StoreError::Busy { limit: 3 });
    gates.remove(2).send(Ok("b done".into())).unwrap();
    s.wait(&p("b"), &b, MIN).await.unwrap();
    // A finished operation makes room for a new one.
    let (_tx, rx) = tokio::sync::oneshot::channel();
    s.start(&p("c"), gated_call(rx, Default::default()))
        .unwrap();
    assert_eq!(
        s.stats(),
        StoreStats {
            operations: 3,
            running: 3,
            ..Default::default()
        }
    );
}

#[tokio::test(start_paused = true)]
async fn the_sweeper_frees_quiet_sessions() {
    let s = Arc::new(store());
    let stop = CancellationToken::new();
    let sweeper = s.spawn_sweeper(MIN, stop.clone());
    s.put_pages(&p("a"), pages(2)).unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let id = s
        .start(&p("a"), gated_call(rx, Default::default()))
        .unwrap();
    tx.send(Ok("x".into())).unwrap();
    s.wait(&p("a"), &id, MIN).await.unwrap();
    assert_eq!(s.stats().cursors, 1);
    advance(12 * MIN).await;
    tokio::task::yield_now().await;
    assert_eq!(s.stats(), StoreStats::default());
    stop.cancel();
    sweeper.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_call_that_panics_fails_instead_of_running_forever() {
    let s = store();
    let id = s
        .start(&p("a"), |_, _| async {
            if true {
                panic!("boom (expected by this test)");
            }
            Ok::<String, String>(String::new())
        })
        .unwrap();
    match s.wait(&p("a"), &id, MIN).await.unwrap() {
        OperationStatus::Failed(msg) => assert!(msg.contains("stopped unexpectedly"), "{msg}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(s.stats().running, 0);
}

#[test]
fn the_store_is_shareable() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<SessionStore>();
}
