//! `[code.flows.NAME]`: where restored PII may go. A rule names the tokens it covers (by
//! PII class, by the servers whose results held the value, or both) and the only servers
//! that may receive those values restored; a call that would send one elsewhere is
//! refused with the rule's name.
//!
//! ```toml
//! [code.flows.crm-contacts]
//! classes = ["email", "phone"]   # email, phone, iban, card, field (code.pii_fields)
//! from = ["crm"]                 # values that came from these servers' results
//! to = ["mail"]                  # the only servers that may receive them ([] : none)
//! ```
//!
//! With both `classes` and `from`, a token must match both; at least one is required.

use super::{invalid, Result};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

/// The PII classes a rule may name, as tokens spell them (`[[EMAIL:...]]`).
pub(crate) const PII_CLASSES: [&str; 5] = ["EMAIL", "PHONE", "IBAN", "CARD", "FIELD"];

/// One validated rule.
#[derive(Debug, Clone, PartialEq)]
pub struct FlowRule {
    pub name: String,
    /// Upper-case classes (empty: any class).
    pub classes: Vec<String>,
    /// Servers whose results the value came from (empty: from anywhere).
    pub from: Vec<String>,
    /// The servers allowed to receive the restored value.
    pub to: Vec<String>,
}

impl FlowRule {
    /// Whether this rule covers a token of `class` whose value came from `origins`.
    pub fn covers(&self, class: &str, origins: &[String]) -> bool {
        (self.classes.is_empty() || self.classes.iter().any(|c| c == class))
            && (self.from.is_empty() || self.from.iter().any(|s| origins.contains(s)))
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawFlow {
    #[serde(default)]
    pub classes: Vec<String>,
    #[serde(default)]
    pub from: Vec<String>,
    pub to: Option<Vec<String>>,
}

/// Validates every rule; `servers` are the configured upstreams' names.
pub(crate) fn validate(
    raw: BTreeMap<String, RawFlow>,
    file: &Path,
    pii: bool,
    servers: &[&str],
) -> Result<Vec<FlowRule>> {
    let f = file.display();
    if !raw.is_empty() && !pii {
        invalid!("{f}: code.flows needs code.pii = true: flow rules apply to PII tokens, which only exist with pii on");
    }
    let mut rules = Vec::new();
    for (name, r) in raw {
        let Some(to) = r.to else {
            invalid!("{f}: code.flows.{name}.to is missing: list the servers that may receive these values (or [] for none)");
        };
        if r.classes.is_empty() && r.from.is_empty() {
            invalid!("{f}: code.flows.{name}: set classes (PII classes), from (servers), or both, to say which tokens the rule covers");
        }
        let mut classes = Vec::new();
        for c in &r.classes {
            let up = c.to_ascii_uppercase();
            if !PII_CLASSES.contains(&up.as_str()) {
                invalid!("{f}: code.flows.{name}.classes: {c:?} is not a PII class: use email, phone, iban, card or field");
            }
            classes.push(up);
        }
        for (key, list) in [("from", &r.from), ("to", &to)] {
            if let Some(s) = list.iter().find(|s| !servers.contains(&s.as_str())) {
                invalid!("{f}: code.flows.{name}.{key}: {s:?} is not an upstream: name one of [upstreams]");
            }
        }
        rules.push(FlowRule {
            name,
            classes,
            from: r.from,
            to,
        });
    }
    Ok(rules)
}

#[cfg(test)]
mod tests {
    use crate::config::Config;
    use std::path::Path;

    const UPS: &str = "[upstreams.crm]\ncommand = \"x\"\n[upstreams.mail]\ncommand = \"x\"\n";

    fn parse(s: &str) -> crate::config::Result<Config> {
        Config::from_toml_str(&format!("{UPS}{s}"), Path::new("toolgate.toml"))
    }

    #[test]
    fn rules_are_read_and_cover_what_they_name() {
        let c = parse("[code]\npii = true\n[code.flows.contacts]\nclasses = [\"email\"]\nfrom = [\"crm\"]\nto = [\"mail\"]\n")
            .unwrap()
            .code;
        let r = &c.flows[0];
        assert_eq!(
            (r.name.as_str(), r.classes.as_slice()),
            ("contacts", &["EMAIL".to_string()][..])
        );
        assert!(r.covers("EMAIL", &["crm".into()]));
        assert!(!r.covers("EMAIL", &["mail".into()]));
        assert!(!r.covers("PHONE", &["crm".into()]));
    }

    #[test]
    fn bad_rules_name_the_key_and_the_fix() {
        for (text, key) in [
            (
                "[code.flows.a]\nclasses = [\"email\"]\nto = []",
                "needs code.pii",
            ),
            (
                "[code]\npii = true\n[code.flows.a]\nclasses = [\"email\"]",
                "code.flows.a.to",
            ),
            (
                "[code]\npii = true\n[code.flows.a]\nto = []",
                "code.flows.a: set classes",
            ),
            (
                "[code]\npii = true\n[code.flows.a]\nclasses = [\"ssn\"]\nto = []",
                "code.flows.a.classes",
            ),
            (
                "[code]\npii = true\n[code.flows.a]\nfrom = [\"web\"]\nto = []",
                "code.flows.a.from",
            ),
            (
                "[code]\npii = true\n[code.flows.a]\nfrom = [\"crm\"]\nto = [\"web\"]",
                "code.flows.a.to",
            ),
            (
                "[code]\npii = true\n[code.flows.a]\nfrom = [\"crm\"]\nto = []\nnever = 1",
                "never",
            ),
        ] {
            let e = parse(text).unwrap_err().to_string();
            assert!(e.contains(key), "{text}: {e}");
        }
    }
}
