//! The embedded store: values, owners, expiry and tombstones; faults of its file
//! (damaged pages, truncation, an empty file, a missing key) and healing without a restart.
use super::*;

fn open(dir: &Path) -> EmbeddedStore {
    EmbeddedStore::open(&dir.join("state.redb"), Sealer::new([1; 32])).unwrap()
}

fn record(owner: &str, expires_ms: u64, value: &[u8]) -> Record {
    Record {
        owner: owner.into(),
        expires_ms,
        value: value.to_vec(),
    }
}

#[test]
fn a_value_survives_reopening_and_is_checked_for_owner_and_expiry() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = open(dir.path());
        s.put(Kind::Pages, "a", &record("alice", 1_000, b"pages"))
            .unwrap();
    }
    let s = open(dir.path());
    assert_eq!(
        s.lookup(Kind::Pages, "a", "alice", 500).unwrap(),
        Lookup::Found(record("alice", 1_000, b"pages"))
    );
    assert_eq!(
        s.lookup(Kind::Pages, "a", "bob", 500).unwrap(),
        Lookup::Foreign
    );
    assert_eq!(
        s.lookup(Kind::Pages, "a", "alice", 1_000).unwrap(),
        Lookup::Expired
    );
    assert_eq!(
        s.lookup(Kind::Operation, "a", "alice", 500).unwrap(),
        Lookup::Unknown
    );
    s.touch(Kind::Pages, "a", 2_000).unwrap();
    assert!(matches!(
        s.lookup(Kind::Pages, "a", "alice", 1_500).unwrap(),
        Lookup::Found(_)
    ));
}

#[test]
fn values_are_not_stored_in_plain_text() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    s.put(
        Kind::Pages,
        "a",
        &record("alice", u64::MAX, b"the-secret-result"),
    )
    .unwrap();
    drop(s);
    let raw = std::fs::read(dir.path().join("state.redb")).unwrap();
    assert!(!raw.windows(10).any(|w| w == b"the-secret"));
}

#[test]
fn a_removed_or_swept_value_leaves_a_tombstone_then_goes() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    s.put(Kind::Operation, "gone", &record("o", 10_000, b"v"))
        .unwrap();
    s.put(Kind::Operation, "old", &record("o", 100, b"v"))
        .unwrap();
    s.remove(Kind::Operation, "gone", 50).unwrap();
    assert_eq!(s.sweep(200, Duration::from_secs(1)).unwrap(), 1);
    for id in ["gone", "old"] {
        assert_eq!(
            s.lookup(Kind::Operation, id, "o", 300).unwrap(),
            Lookup::Expired
        );
        assert_eq!(
            s.lookup(Kind::Operation, id, "x", 300).unwrap(),
            Lookup::Foreign
        );
    }
    s.sweep(5_000, Duration::from_secs(1)).unwrap();
    assert_eq!(
        s.lookup(Kind::Operation, "old", "o", 5_000).unwrap(),
        Lookup::Unknown
    );
}

#[test]
fn a_second_process_on_the_same_file_is_refused_with_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let _first = open(dir.path());
    let e = EmbeddedStore::open(&dir.path().join("state.redb"), Sealer::new([1; 32]))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("in use by another toolgate"), "{e}");
}

/// Overwrites `len` bytes at each of several offsets past redb's header with garbage.
fn damage(path: &Path) {
    use std::io::{Seek, SeekFrom, Write};
    let size = std::fs::metadata(path).unwrap().len();
    let mut f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    let mut at = 4096;
    while at < size {
        f.seek(SeekFrom::Start(at)).unwrap();
        f.write_all(&[0xA5; 4096]).unwrap();
        at += 8192;
    }
    f.sync_all().unwrap();
}

fn filled(dir: &Path) -> PathBuf {
    let path = dir.join("state.redb");
    let s = open(dir);
    for i in 0..50 {
        s.put(
            Kind::Pages,
            &format!("p{i}"),
            &record("alice", u64::MAX, &[i as u8; 3000]),
        )
        .unwrap();
    }
    path
}

#[test]
fn a_damaged_file_is_refused_at_start_with_its_path_and_how_to_move_it_aside() {
    let dir = tempfile::tempdir().unwrap();
    let path = filled(dir.path());
    damage(&path);
    let e = EmbeddedStore::open(&path, Sealer::new([1; 32]))
        .err()
        .expect("a damaged file is refused")
        .to_string();
    assert!(
        e.contains("damaged") && e.contains("state.redb") && e.contains("toolgate store reset"),
        "{e}"
    );
    let report = super::super::check_file(&path, None);
    assert!(!report.ok() && report.fault.is_some(), "{report:?}");
}

#[test]
fn a_truncated_file_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let path = filled(dir.path());
    let size = std::fs::metadata(&path).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(size / 2)
        .unwrap();
    let e = EmbeddedStore::open(&path, Sealer::new([1; 32]))
        .err()
        .expect("a truncated file is refused")
        .to_string();
    assert!(e.contains("state.redb") && e.contains("store reset"), "{e}");
}

#[test]
fn an_empty_file_is_not_taken_for_a_new_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.redb");
    std::fs::write(&path, b"").unwrap();
    let e = EmbeddedStore::open(&path, Sealer::new([1; 32]))
        .err()
        .expect("an empty file is refused")
        .to_string();
    assert!(
        e.contains("empty (0 bytes)") && e.contains("store reset"),
        "{e}"
    );
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 0, "left as it was");
}

#[test]
fn a_store_without_its_key_file_is_refused_and_a_shared_key_file_is_warned_about() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.redb");
    let env = "TOOLGATE_TEST_KEY_UNSET_EMBEDDED";
    drop(EmbeddedStore::open_with_key(&path, env).unwrap());
    let key = key_file(&path);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert!(super::super::seal::key_file_warning(&key).is_none());
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
        let w = super::super::seal::key_file_warning(&key).unwrap();
        assert!(w.contains("chmod 600") && w.contains("644"), "{w}");
    }
    std::fs::rename(&key, dir.path().join("kept")).unwrap();
    let e = EmbeddedStore::open_with_key(&path, env)
        .err()
        .expect("refused without its key")
        .to_string();
    assert!(
        e.contains("key file") && e.contains("missing") && e.contains("state.redb.key"),
        "{e}"
    );
    assert!(!key.exists(), "no new key was made");
}

#[test]
fn a_store_whose_file_fails_reopens_by_itself_once_the_file_is_good_again() {
    let dir = tempfile::tempdir().unwrap();
    let path = filled(dir.path());
    let good = dir.path().join("good.redb");
    let s = open(dir.path());
    drop(s);
    std::fs::copy(&path, &good).unwrap();
    let s = open(dir.path());
    // The store is closed by a fault (as a panic inside redb does), the file is damaged
    // meanwhile: calls that need it get the clear fault, none panics.
    let fault = StoreFault::Damaged {
        place: path.display().to_string(),
        detail: "test".into(),
    };
    let db = s.handle().unwrap();
    s.close(db, &fault);
    damage(&path);
    std::thread::sleep(BACKOFF_MAX);
    let e = s.lookup(Kind::Pages, "p1", "alice", 0).unwrap_err();
    assert!(matches!(e, StoreFault::Damaged { .. }), "{e}");
    assert!(!e.retryable());
    assert!(e.to_string().contains("state.redb"), "{e}");
    let e = s
        .put(Kind::State, "x", &record("alice", u64::MAX, b"v"))
        .unwrap_err();
    assert!(e.to_string().contains("toolgate store check"), "{e}");
    // The good file back: the next call after the backoff is served, no restart.
    std::fs::copy(&good, &path).unwrap();
    std::thread::sleep(BACKOFF_MAX);
    assert_eq!(
        s.lookup(Kind::Pages, "p1", "alice", 0).unwrap(),
        Lookup::Found(record("alice", u64::MAX, &[1; 3000]))
    );
}

#[test]
fn a_panic_inside_redb_becomes_a_fault_of_that_call_and_closes_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let e = s
        .run(|_| -> Result<(), redb::Error> { panic!("redb assertion failed: page") })
        .unwrap_err();
    assert!(
        matches!(&e, StoreFault::Damaged { detail, .. } if detail.contains("assertion failed")),
        "{e}"
    );
    // The file itself is good: reopened after the backoff, the store serves again.
    std::thread::sleep(BACKOFF_MAX);
    s.put(Kind::State, "x", &record("alice", u64::MAX, b"v"))
        .unwrap();
}

#[test]
fn a_moved_aside_store_is_started_anew_by_the_running_process() {
    let dir = tempfile::tempdir().unwrap();
    let path = filled(dir.path());
    let s = open(dir.path());
    let e = super::super::move_aside(&path, None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("running toolgate"), "{e}");
    let db = s.handle().unwrap();
    s.close(
        db,
        &StoreFault::Damaged {
            place: String::new(),
            detail: "test".into(),
        },
    );
    let aside = super::super::move_aside(&path, Some(&key_file(&path))).unwrap();
    assert!(aside.exists() && !path.exists());
    std::thread::sleep(BACKOFF_MAX);
    assert_eq!(
        s.lookup(Kind::Pages, "p1", "alice", 0).unwrap(),
        Lookup::Unknown
    );
    s.put(Kind::State, "x", &record("alice", u64::MAX, b"v"))
        .unwrap();
}

#[test]
fn an_owner_lists_only_its_own_live_ids() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    s.put(Kind::Operation, "a1", &record("alice", 1_000, b"x"))
        .unwrap();
    s.put(Kind::Operation, "a2", &record("alice", 3_000, b"x"))
        .unwrap();
    s.put(Kind::Operation, "a3", &record("alice", 3_000, b"x"))
        .unwrap();
    s.put(Kind::Operation, "b1", &record("bob", 3_000, b"x"))
        .unwrap();
    s.put(Kind::Pages, "a4", &record("alice", 3_000, b"x"))
        .unwrap();
    s.remove(Kind::Operation, "a3", 500).unwrap();
    let mut ids = s.owned(Kind::Operation, "alice", 1_500).unwrap();
    ids.sort();
    // a1 expired, a3 removed, b1 bob's, a4 another kind.
    assert_eq!(ids, ["a2"]);
    assert!(s.owned(Kind::Operation, "carol", 0).unwrap().is_empty());
}
