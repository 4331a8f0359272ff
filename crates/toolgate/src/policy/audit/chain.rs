//! The audit log's tamper evidence: every record carries `seq`, the `prev` record's MAC and
//! its own `mac`, an HMAC-SHA256 under the log's secret over the record's exact text. An edit,
//! a deletion or an insertion anywhere but at the very end breaks the chain, and without the
//! secret no one can forge a record that fits. [`verify`] checks a file.

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The `prev` of a log's first record.
pub(crate) const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// What comes before the MAC in a sealed line: the record's text runs up to it.
const MAC_KEY: &str = ",\"mac\":\"";

/// HMAC-SHA256 of `data` under `secret`, as hex.
pub(crate) fn mac(secret: &[u8], data: &[u8]) -> String {
    let mut m = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes a key of any length");
    m.update(data);
    hex::encode(m.finalize().into_bytes())
}

/// Seals a record's JSON object text (which already holds `seq` and `prev`): the line to
/// write, without its newline, and the MAC the next record names as `prev`.
pub(crate) fn seal(secret: &[u8], record: &str) -> (String, String) {
    debug_assert!(record.ends_with('}'));
    let tag = mac(secret, record.as_bytes());
    let line = format!("{}{MAC_KEY}{tag}\"}}", &record[..record.len() - 1]);
    (line, tag)
}

/// A sealed line split back into the text its MAC covers and the MAC, or `None` when the line
/// is not a sealed record.
fn unseal(line: &str) -> Option<(String, &str)> {
    let at = line.rfind(MAC_KEY)?;
    let tag = line[at + MAC_KEY.len()..].strip_suffix("\"}")?;
    Some((format!("{}}}", &line[..at]), tag))
}

/// Where a line is: the file's index among those verified (0 for the first) and its line
/// number (1-based).
pub type At = (usize, usize);

/// The `type` of the record a log's file begins with when the gateway reopened the log
/// (SIGHUP) and found a new, empty file: it names the file the chain continues (the log's
/// path before it was moved away) and the last `seq` written there.
pub(crate) const ROTATION: &str = "rotation";

/// The key a record carries when the write before it failed part-way (`true`): the lines
/// between it and the record before are what that write left, and only those are torn.
pub(crate) const AFTER_TORN: &str = "afterTorn";

/// What [`verify`] found.
#[derive(Debug, Default)]
pub struct Verified {
    /// Records whose MAC and link are right.
    pub records: u64,
    /// When the first file begins at a rotation record: the file that record says the
    /// chain continues, and its last `seq` there. Accepted only with `from_rotation`.
    pub continues_from: Option<String>,
    /// The MAC the next record must name as `prev`.
    pub last: Option<String>,
    /// Lines that are not whole records, left by a write that failed part-way (a full
    /// disk): the record after them says so (`afterTorn`), or they end the last file with no
    /// newline (a write cut off at the end). They carry no MAC the chain depends on, so they
    /// are reported, not counted as tampering. Any other line that is not a sealed record is
    /// in `broken`.
    pub torn: Vec<At>,
    /// Where the chain breaks, and why. Empty: the files are intact.
    pub broken: Vec<(At, String)>,
}

impl Verified {
    /// Whether no link is broken.
    pub fn intact(&self) -> bool {
        self.broken.is_empty()
    }
}

/// True when `line` ends as a sealed line does (`,"mac":"<64 hex>"}`): whatever else it
/// holds, it claims to be a whole record, so it is judged by its MAC, never as torn.
fn looks_sealed(line: &str) -> bool {
    unseal(line)
        .is_some_and(|(_, tag)| tag.len() == 64 && tag.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Checks the lines of an audit log's files, oldest first: each record's MAC under
/// `secret`, that it names the record before it as `prev`, and that `seq` counts up by one.
/// The chain must begin at its genesis (`seq` 1, `prev` all zeros), or at a rotation
/// record (type `"rotation"`) whose earlier file is given before it, or, with
/// `from_rotation`, is knowingly left out. A file may also begin a new chain at its
/// genesis (a gateway started on a new file). A line that is not a sealed record is torn
/// only where a failed write left it (see [`Verified::torn`]); anywhere else it is an error.
pub fn verify(secret: &[u8], files: &[&str], from_rotation: bool) -> Verified {
    let mut v = Verified::default();
    let mut prev: Option<(String, u64)> = None;
    // Lines that are not records, until the next record says whether a failed write left them.
    let mut pending: Vec<At> = Vec::new();
    for (f, text) in files.iter().enumerate() {
        let mut first_of_file = true;
        for (i, line) in text.lines().enumerate() {
            let at = (f, i + 1);
            if line.trim().is_empty() {
                continue;
            }
            if !looks_sealed(line) {
                match serde_json::from_str::<serde_json::Value>(line) {
                    Ok(_) => v.broken.push((at, "the record has no MAC".into())),
                    Err(_) => pending.push(at),
                }
                continue;
            }
            let (body, tag) = unseal(line).expect("looks sealed");
            if mac(secret, body.as_bytes()) != tag {
                v.broken.push((
                    at,
                    "the MAC does not match: the record was changed, or the secret is not this log's"
                        .into(),
                ));
                continue;
            }
            let Ok(record) = serde_json::from_str::<serde_json::Value>(line) else {
                v.broken
                    .push((at, "the line's MAC matches but it is not valid JSON".into()));
                continue;
            };
            let after_torn = record[AFTER_TORN] == serde_json::Value::Bool(true);
            for p in pending.drain(..) {
                if after_torn {
                    v.torn.push(p);
                } else {
                    v.broken.push((
                        p,
                        "not a record, and no failed write was recorded here: a line was added or damaged"
                            .into(),
                    ));
                }
            }
            let named = record["prev"].as_str().unwrap_or_default().to_string();
            let seq = record["seq"].as_u64().unwrap_or(0);
            let genesis = named == GENESIS && seq == 1;
            let rotation = record["type"] == ROTATION;
            match &prev {
                _ if genesis && (first_of_file || prev.is_none()) => {}
                None if rotation => {
                    let file = record["continues"].as_str().unwrap_or("an earlier file");
                    let through = record["continuesSeq"].as_u64().unwrap_or(0);
                    let from = format!("{file} (through seq {through})");
                    if !from_rotation {
                        v.broken.push((
                            at,
                            format!(
                                "the log begins at a rotation record: it continues {from}; give that file (as rotated, e.g. {file}.1) before this one, or pass --from-rotation to check from here on"
                            ),
                        ));
                    }
                    v.continues_from = Some(from);
                }
                None => v.broken.push((
                    at,
                    format!(
                        "the chain does not begin at its genesis (seq 1) or at a rotation record: the records before seq {seq} are missing (the head of the log was cut)"
                    ),
                )),
                Some((last, last_seq)) => {
                    if &named != last {
                        v.broken.push((
                            at,
                            format!(
                                "the record before it is missing or was changed (expected prev {}…)",
                                &last[..12]
                            ),
                        ));
                    } else if seq != last_seq + 1 {
                        v.broken.push((at, format!("seq {seq} follows seq {last_seq}")));
                    }
                }
            }
            first_of_file = false;
            v.records += 1;
            prev = Some((tag.to_string(), seq));
        }
    }
    // Left at the very end: torn if the last file ends inside a line (a write cut off).
    let cut_off = files
        .last()
        .is_some_and(|t| !t.is_empty() && !t.ends_with('\n'));
    for p in pending {
        if cut_off {
            v.torn.push(p);
        } else {
            v.broken.push((
                p,
                "not a record, and no failed write was recorded here: a line was added or damaged"
                    .into(),
            ));
        }
    }
    v.last = prev.map(|(t, _)| t);
    v
}

/// Where an existing log's chain ends: the last sealed record's MAC and `seq`, read from the
/// file's tail so a restarted gateway continues the chain. A torn last line is skipped.
pub fn tail(text: &str) -> Option<(String, u64)> {
    text.lines().rev().find_map(|line| {
        let record: serde_json::Value = serde_json::from_str(line).ok()?;
        let (_, tag) = unseal(line)?;
        Some((tag.to_string(), record["seq"].as_u64()?))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain(secret: &[u8], n: u64) -> String {
        chain_with(secret, n, |_| String::new())
    }

    /// `n` records; `extra(seq)` adds fields (`,"k":v`) to a record.
    fn chain_with(secret: &[u8], n: u64, extra: impl Fn(u64) -> String) -> String {
        let mut prev = GENESIS.to_string();
        let mut out = String::new();
        for seq in 1..=n {
            let more = extra(seq);
            let body = format!("{{\"seq\":{seq},\"prev\":\"{prev}\",\"tool\":\"t{seq}\"{more}}}");
            let (line, tag) = seal(secret, &body);
            out.push_str(&line);
            out.push('\n');
            prev = tag;
        }
        out
    }

    fn one(secret: &[u8], text: &str) -> Verified {
        verify(secret, &[text], false)
    }

    #[test]
    fn an_intact_chain_verifies() {
        let text = chain(b"k", 5);
        let v = one(b"k", &text);
        assert!(v.intact(), "{:?}", v.broken);
        assert_eq!((v.records, v.continues_from), (5, None));
        assert_eq!(tail(&text).unwrap().1, 5);
    }

    #[test]
    fn an_edit_a_deletion_and_a_wrong_secret_are_found() {
        let text = chain(b"k", 5);
        let edited = text.replace("\"t3\"", "\"t9\"");
        assert_eq!(one(b"k", &edited).broken[0].0, (0, 3));
        let lines: Vec<&str> = text.lines().collect();
        let deleted = [lines[0], lines[1], lines[3], lines[4]].join("\n");
        assert_eq!(one(b"k", &deleted).broken[0].0, (0, 3));
        assert!(!one(b"other", &text).intact());
    }

    #[test]
    fn a_line_torn_by_a_failed_write_is_reported_not_counted_as_tampering() {
        // The record after the failed write says so.
        let text = chain_with(b"k", 2, |seq| {
            if seq == 2 {
                ",\"afterTorn\":true".into()
            } else {
                String::new()
            }
        });
        let (first, second) = text.split_once('\n').unwrap();
        let torn = format!("{first}\n{{\"seq\":2,\"pre\n{second}");
        let v = one(b"k", &torn);
        assert!(v.intact(), "{:?}", v.broken);
        assert_eq!((v.records, v.torn), (2, vec![(0, 2)]));
        // A write cut off at the very end: no newline after it.
        let end = format!("{text}{{\"seq\":3,\"pr");
        let v = one(b"k", &end);
        assert!(v.intact(), "{:?}", v.broken);
        assert_eq!(v.torn, vec![(0, 3)]);
    }

    #[test]
    fn a_line_that_is_not_a_record_where_no_write_failed_is_an_error() {
        let text = chain(b"k", 3);
        let lines: Vec<&str> = text.lines().collect();
        // A forged record: valid-looking but for NaN, with a MAC-shaped tail.
        let forged = lines[1].replacen("\"tool\"", "\"latencyMs\":NaN,\"tool\"", 1);
        let text2 = [lines[0], &forged, lines[2]].join("\n") + "\n";
        let v = one(b"k", &text2);
        assert!(!v.intact() && v.torn.is_empty(), "{v:?}");
        assert_eq!(v.broken[0].0, (0, 2));
        // Garbage inserted between two records (no failed write recorded there).
        let text3 = [lines[0], "{\"seq\":2,\"pre", lines[1], lines[2]].join("\n") + "\n";
        let v = one(b"k", &text3);
        assert!(!v.intact() && v.torn.is_empty(), "{v:?}");
        assert_eq!(v.broken[0].0, (0, 2));
    }

    #[test]
    fn a_log_whose_head_was_cut_is_broken() {
        let text = chain(b"k", 6);
        let rest: Vec<&str> = text.lines().skip(2).collect();
        let v = one(b"k", &rest.join("\n"));
        assert!(!v.intact());
        assert!(
            v.broken[0].1.contains("head of the log was cut"),
            "{:?}",
            v.broken
        );
        // Waiving rotation does not help: there is no rotation record.
        assert!(!verify(b"k", &[&rest.join("\n")], true).intact());
    }

    #[test]
    fn a_rotated_file_needs_its_earlier_file_or_an_explicit_waiver() {
        let text = chain_with(b"k", 4, |seq| {
            if seq == 3 {
                ",\"type\":\"rotation\",\"continues\":\"/var/log/a.jsonl\",\"continuesSeq\":2"
                    .into()
            } else {
                String::new()
            }
        });
        let lines: Vec<&str> = text.lines().collect();
        let (old, new) = (lines[..2].join("\n") + "\n", lines[2..].join("\n") + "\n");
        let v = verify(b"k", &[&old, &new], false);
        assert!(v.intact(), "{:?}", v.broken);
        assert_eq!(v.records, 4);
        let v = verify(b"k", &[&new], false);
        assert!(!v.intact());
        assert!(
            v.broken[0].1.contains("/var/log/a.jsonl (through seq 2)"),
            "{:?}",
            v.broken
        );
        let v = verify(b"k", &[&new], true);
        assert!(v.intact(), "{:?}", v.broken);
        assert_eq!(
            v.continues_from.as_deref(),
            Some("/var/log/a.jsonl (through seq 2)")
        );
    }
}
