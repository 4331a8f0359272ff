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
        .unwrap();
    assert!(e.contains("in use by another toolgate"), "{e}");
}
