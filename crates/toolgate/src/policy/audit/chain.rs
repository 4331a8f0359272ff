//! The audit log's tamper evidence: every record carries `seq`, the `prev` record's MAC and
//! its own `mac`, an HMAC-SHA256 under the log's secret over the record's exact text. An edit,
//! a deletion or an insertion anywhere but at the very end breaks the chain, and without the
//! secret no one can forge a record that fits. [`verify`] checks a file.

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The `prev` of a log's first record.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// What comes before the MAC in a sealed line: the record's text runs up to it.
const MAC_KEY: &str = ",\"mac\":\"";

/// HMAC-SHA256 of `data` under `secret`, as hex.
pub fn mac(secret: &[u8], data: &[u8]) -> String {
    let mut m = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes a key of any length");
    m.update(data);
    hex::encode(m.finalize().into_bytes())
}

/// Seals a record's JSON object text (which already holds `seq` and `prev`): the line to
/// write, without its newline, and the MAC the next record names as `prev`.
pub fn seal(secret: &[u8], record: &str) -> (String, String) {
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

/// What [`verify`] found.
#[derive(Debug, Default)]
pub struct Verified {
    /// Records whose MAC and link are right.
    pub records: u64,
    /// The first record's `prev`, when the file continues a chain begun in an earlier file
    /// (a rotated log); `None` when it starts from the beginning.
    pub continues_from: Option<String>,
    /// The MAC the next record must name as `prev`.
    pub last: Option<String>,
    /// Lines that are not whole records: a write that failed part-way (a full disk). They
    /// carry no MAC the chain depends on, so they are reported, not counted as tampering.
    pub torn: Vec<usize>,
    /// Where the chain breaks: line number (1-based) and why. Empty: the file is intact.
    pub broken: Vec<(usize, String)>,
}

impl Verified {
    pub fn intact(&self) -> bool {
        self.broken.is_empty()
    }
}

/// Checks every line of an audit log's text: each record's MAC under `secret`, that it names
/// the record before it as `prev`, and that `seq` counts up by one.
pub fn verify(secret: &[u8], text: &str) -> Verified {
    let mut v = Verified::default();
    let mut prev: Option<(String, u64)> = None;
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        let Ok(record) = serde_json::from_str::<serde_json::Value>(line) else {
            v.torn.push(n);
            continue;
        };
        let Some((body, tag)) = unseal(line) else {
            v.broken.push((n, "the record has no MAC".into()));
            continue;
        };
        if mac(secret, body.as_bytes()) != tag {
            v.broken.push((
                n,
                "the MAC does not match: the record was changed, or the secret is not this log's"
                    .into(),
            ));
            continue;
        }
        let named = record["prev"].as_str().unwrap_or_default().to_string();
        let seq = record["seq"].as_u64().unwrap_or(0);
        match &prev {
            None if named != GENESIS => v.continues_from = Some(named.clone()),
            None => {}
            Some((last, last_seq)) => {
                if &named != last {
                    v.broken.push((
                        n,
                        format!(
                            "the record before it is missing or was changed (expected prev {}…)",
                            &last[..12]
                        ),
                    ));
                } else if seq != last_seq + 1 {
                    v.broken
                        .push((n, format!("seq {seq} follows seq {last_seq}")));
                }
            }
        }
        v.records += 1;
        prev = Some((tag.to_string(), seq));
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
        let mut prev = GENESIS.to_string();
        let mut out = String::new();
        for seq in 1..=n {
            let body = format!("{{\"seq\":{seq},\"prev\":\"{prev}\",\"tool\":\"t{seq}\"}}");
            let (line, tag) = seal(secret, &body);
            out.push_str(&line);
            out.push('\n');
            prev = tag;
        }
        out
    }

    #[test]
    fn an_intact_chain_verifies() {
        let text = chain(b"k", 5);
        let v = verify(b"k", &text);
        assert!(v.intact(), "{:?}", v.broken);
        assert_eq!((v.records, v.continues_from), (5, None));
        assert_eq!(tail(&text).unwrap().1, 5);
    }

    #[test]
    fn an_edit_a_deletion_and_a_wrong_secret_are_found() {
        let text = chain(b"k", 5);
        let edited = text.replace("\"t3\"", "\"t9\"");
        assert_eq!(verify(b"k", &edited).broken[0].0, 3);
        let lines: Vec<&str> = text.lines().collect();
        let deleted = [lines[0], lines[1], lines[3], lines[4]].join("\n");
        assert_eq!(verify(b"k", &deleted).broken[0].0, 3);
        assert!(!verify(b"other", &text).intact());
    }

    #[test]
    fn a_torn_line_is_reported_not_counted_as_tampering() {
        let text = chain(b"k", 2);
        let (first, second) = text.split_once('\n').unwrap();
        let torn = format!("{first}\n{{\"seq\":2,\"pre\n{second}");
        let v = verify(b"k", &torn);
        assert!(v.intact(), "{:?}", v.broken);
        assert_eq!((v.records, v.torn), (2, vec![2]));
    }

    #[test]
    fn a_rotated_file_continues_an_earlier_chain() {
        let text = chain(b"k", 4);
        let rest: Vec<&str> = text.lines().skip(2).collect();
        let v = verify(b"k", &rest.join("\n"));
        assert!(v.intact());
        assert!(v.continues_from.is_some());
    }
}
