//! The session store over the embedded store, reopened as a restart would: handles keep
//! their owner, their pages and their endings.

use super::{OperationStatus, SessionStore, StoreError, StoreLimits};
use crate::principal::Principal;
use crate::store::EmbeddedStore;
use crate::store::Sealer;
use crate::store::Store;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

fn open(dir: &Path) -> SessionStore<String> {
    let db: Arc<dyn Store> =
        Arc::new(EmbeddedStore::open(&dir.join("s.redb"), Sealer::new([3; 32])).unwrap());
    SessionStore::new(StoreLimits::default()).with_durable(Some(db), CancellationToken::new())
}

fn pages(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("page {i}")).collect()
}

#[test]
fn after_a_restart_pages_keep_their_owner_and_order() {
    let dir = tempfile::tempdir().unwrap();
    let (alice, bob) = (Principal::key("alice"), Principal::key("bob"));
    let cursor = {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let _in = rt.enter();
        let s = open(dir.path());
        let c = s.put_pages(&alice, pages(3)).unwrap();
        let (page, next) = s.next_page(&alice, &c).unwrap();
        assert_eq!(page, "page 0");
        next.unwrap()
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let _in = rt.enter();
    let s = open(dir.path());
    assert!(matches!(
        s.next_page(&bob, &cursor),
        Err(StoreError::Foreign { .. })
    ));
    let (page, next) = s.next_page(&alice, &cursor).unwrap();
    assert_eq!(page, "page 1");
    let (page, next) = s.next_page(&alice, &next.unwrap()).unwrap();
    assert_eq!((page.as_str(), next), ("page 2", None));
}

#[test]
fn after_a_restart_an_ending_is_delivered_and_a_running_call_is_lost() {
    let dir = tempfile::tempdir().unwrap();
    let me = Principal::local();
    let (done, running) = {
        // The first process: its runtime (and the call still running in it) goes with it.
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async {
            let s = open(dir.path());
            let done = s
                .start(&me, |_, _| async { Ok::<_, String>("result".to_string()) })
                .unwrap();
            let ended = s.wait(&me, &done, Duration::from_secs(30)).await.unwrap();
            assert_eq!(ended, OperationStatus::Done("result".into()));
            let running = s
                .start(&me, |_, _| async {
                    std::future::pending::<Result<String, String>>().await
                })
                .unwrap();
            (done, running)
        })
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let s = open(dir.path());
        assert_eq!(
            s.wait(&me, &done, Duration::from_secs(1)).await.unwrap(),
            OperationStatus::Done("result".into())
        );
        assert!(matches!(
            s.status(&Principal::key("other"), &done),
            Err(StoreError::Foreign { .. })
        ));
        let lost = s.status(&me, &running).unwrap_err();
        assert!(matches!(lost, StoreError::Lost { .. }), "{lost}");
        assert!(lost.to_string().contains("call execute again"));
        assert!(matches!(
            s.cancel(&me, &running),
            Err(StoreError::Lost { .. })
        ));
    });
}

#[test]
fn a_listing_shows_the_owners_operations_from_before_a_restart_without_delivering_them() {
    use super::OperationState;
    let dir = tempfile::tempdir().unwrap();
    let (me, other) = (Principal::local(), Principal::key("other"));
    let (done, failed, running, started) = {
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async {
            let s = open(dir.path());
            let done = s
                .start(&me, |_, _| async { Ok::<_, String>("result".to_string()) })
                .unwrap();
            let started = s.started_ms(&me, &done).unwrap();
            assert_eq!(s.started_ms(&other, &done), None);
            s.wait(&me, &done, Duration::from_secs(30)).await.unwrap();
            let failed = s
                .start(&me, |_, _| async { Err::<String, _>("it broke") })
                .unwrap();
            s.wait(&me, &failed, Duration::from_secs(30)).await.unwrap();
            let running = s
                .start(&me, |_, _| async {
                    std::future::pending::<Result<String, String>>().await
                })
                .unwrap();
            s.start(&other, |_, _| async { Ok::<_, String>("theirs".into()) })
                .unwrap();
            // Listed here (this process holds them) before the restart, too.
            let here = s.list(&me).unwrap();
            assert_eq!(here.len(), 3, "{here:?}");
            assert_eq!(here[0].id, done);
            assert_eq!(here[0].started_ms, started);
            (done, failed, running, started)
        })
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let s = open(dir.path());
        let listed = s.list(&me).unwrap();
        let states: Vec<(&str, &OperationState)> =
            listed.iter().map(|l| (l.id.as_str(), &l.state)).collect();
        assert_eq!(states.len(), 3, "{listed:?}");
        assert_eq!(states[0], (done.as_str(), &OperationState::Done));
        assert_eq!(listed[0].started_ms, started);
        assert_eq!(
            states[1],
            (failed.as_str(), &OperationState::Failed("it broke".into()))
        );
        assert_eq!(states[2].0, running);
        assert!(matches!(states[2].1, OperationState::Lost(m) if m.contains("call execute again")));
        // Listing delivered nothing: the result is still there, twice.
        for _ in 0..2 {
            assert_eq!(
                s.status(&me, &done).unwrap(),
                OperationStatus::Done("result".into())
            );
        }
        assert_eq!(s.list(&other).unwrap().len(), 1);
    });
}

/// Follows a note by answering what it says, after `delay`; counts the takeovers.
struct Echo(Arc<std::sync::atomic::AtomicUsize>);

impl super::Resume<String> for Echo {
    fn resume(
        &self,
        owner: &Principal,
        note: serde_json::Value,
        _cancel: CancellationToken,
    ) -> futures::future::BoxFuture<'static, Result<String, String>> {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let answer = format!(
            "{} for {}",
            note["say"].as_str().unwrap_or("?"),
            owner.label()
        );
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            match note["fail"].as_bool() {
                Some(true) => Err(answer),
                _ => Ok(answer),
            }
        })
    }
}

#[test]
fn after_a_restart_a_call_that_kept_a_note_is_taken_over_once_and_ends_here() {
    let dir = tempfile::tempdir().unwrap();
    let me = Principal::local();
    let (noted, plain, quick) = {
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async {
            let s = open(dir.path());
            let noted = s
                .start_resumable(&me, |_, _, resumable| async move {
                    resumable.keep(serde_json::json!({"say": "followed"}));
                    std::future::pending::<Result<String, String>>().await
                })
                .unwrap();
            let plain = s
                .start(&me, |_, _| async {
                    std::future::pending::<Result<String, String>>().await
                })
                .unwrap();
            // A call that keeps a note and then ends: its ending stands over the note.
            let quick = s
                .start_resumable(&me, |_, _, resumable| async move {
                    resumable.keep(serde_json::json!({"say": "never"}));
                    Ok::<_, String>("ended here".to_string())
                })
                .unwrap();
            s.wait(&me, &quick, Duration::from_secs(30)).await.unwrap();
            // The note is written by the call's own task: let it run.
            tokio::time::sleep(Duration::from_millis(100)).await;
            (noted, plain, quick)
        })
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let s = open(dir.path());
        let taken = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        // Without a resumer, a noted call is lost like any other.
        assert!(matches!(
            s.status(&me, &noted),
            Err(StoreError::Lost { .. })
        ));
        s.set_resumer(Arc::new(Echo(taken.clone())));
        // Another principal cannot make it run, nor learn that it exists.
        assert!(matches!(
            s.status(&Principal::key("other"), &noted),
            Err(StoreError::Foreign { .. })
        ));
        assert!(s.status(&me, &noted).unwrap().is_running());
        assert!(s.status(&me, &noted).unwrap().is_running());
        let ended = s.wait(&me, &noted, Duration::from_secs(30)).await.unwrap();
        let label = me.label();
        assert_eq!(
            ended,
            OperationStatus::Done(format!("followed for {label}"))
        );
        assert_eq!(taken.load(std::sync::atomic::Ordering::SeqCst), 1);
        assert!(matches!(
            s.status(&me, &plain),
            Err(StoreError::Lost { .. })
        ));
        let quick = s.wait(&me, &quick, Duration::from_secs(1)).await.unwrap();
        assert_eq!(quick, OperationStatus::Done("ended here".into()));
        assert_eq!(taken.load(std::sync::atomic::Ordering::SeqCst), 1);
    });
    // A third process finds the ending the second recorded, and takes nothing over.
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let s = open(dir.path());
        let taken = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        s.set_resumer(Arc::new(Echo(taken.clone())));
        let label = me.label();
        assert_eq!(
            s.status(&me, &noted).unwrap(),
            OperationStatus::Done(format!("followed for {label}"))
        );
        assert_eq!(taken.load(std::sync::atomic::Ordering::SeqCst), 0);
    });
}
