//! PII at the gate (`code.pii`): tokens restored in a call's arguments on the way in
//! (unless a `[code.flows]` rule keeps the value from the tool's server), and PII in a
//! result tokenized on the way out, for every surface alike. Each token remembers the
//! server whose result held its value, so flow rules apply to tokens from any path.

use super::{Refusal, RefusalKind};
use crate::code::pii::{self, Decision, Origins, RestoreError, Vault};
use crate::engine::Engine;
use crate::policy::Caller;
use serde_json::{Map, Value};
use std::collections::BTreeSet;
use toolgate_core::call::CallOutcome;
use toolgate_core::principal::Principal;

/// The arguments with `owner`'s tokens put back (when PII is configured).
pub(super) fn inbound(
    engine: &Engine,
    caller: &Caller,
    owner: &Principal,
    tool: &toolgate_core::catalog::ToolRecord,
    arguments: Map<String, Value>,
) -> Result<Map<String, Value>, Refusal> {
    let code = engine.code_config();
    if !code.pii {
        return Ok(arguments);
    }
    let mut value = Value::Object(arguments);
    let server = tool.id.server.as_str();
    let mut rule = None;
    let mut decide =
        |token: &str, class: &str, origins: &BTreeSet<String>| match crate::code::flows::forbidden(
            &code.flows,
            class,
            origins,
            server,
            token,
        ) {
            Some((name, message)) => {
                rule = Some(name);
                Decision::Refuse(message)
            }
            None => Decision::Restore,
        };
    match engine.pii().restore_with(owner, &mut value, &mut decide) {
        Ok(()) => {}
        Err(RestoreError::Token(e)) => {
            let message = engine.refused(caller, "piiToken", &e.message.clone(), e);
            return Err(Refusal::new(RefusalKind::PiiToken, message));
        }
        Err(RestoreError::Flow(message)) => {
            return Err(super::flow_refusal(rule.unwrap_or_default(), message))
        }
    }
    let Value::Object(arguments) = value else {
        unreachable!("built from a map above")
    };
    Ok(arguments)
}

/// Tokenizes the PII in a result of `server`'s for `owner`: the structured part and
/// every text block, the values of `fields` (`code.pii_fields`) whole. Call it only when
/// PII is configured (`code.pii`).
pub(crate) fn outbound(
    vault: &Vault,
    fields: &[String],
    owner: &Principal,
    server: &str,
    outcome: &mut CallOutcome,
) {
    let mut origins = Origins::new();
    let mut note = |v: &Value| {
        for (class, value) in pii::found(v, fields) {
            let key = pii::canonical(class, &value);
            origins.entry(key).or_default().insert(server.to_string());
        }
    };
    if let Some(sc) = &outcome.structured_content {
        note(sc);
    }
    for block in &outcome.content {
        if let Some(text) = block.get("text").and_then(Value::as_str) {
            note(&serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.into())));
        }
    }
    if let Some(sc) = outcome.structured_content.as_mut() {
        vault.tokenize_from(owner, sc, fields, &origins);
    }
    for block in &mut outcome.content {
        if let Some(Value::String(text)) = block.get_mut("text") {
            *text = tokenize_line(vault, owner, text, fields, &origins);
        }
    }
}

/// PII in one line of text tokenized: a line that is JSON (an object or a list) has the
/// values of `fields` tokenized whole, as a result's would be; any line has its e-mails,
/// phone numbers, IBANs and cards tokenized.
pub(crate) fn tokenize_line(
    vault: &Vault,
    owner: &Principal,
    text: &str,
    fields: &[String],
    origins: &Origins,
) -> String {
    let trimmed = text.trim_start();
    if !fields.is_empty() && (trimmed.starts_with('{') || trimmed.starts_with('[')) {
        if let Ok(mut v) = serde_json::from_str::<Value>(text) {
            vault.tokenize_from(owner, &mut v, fields, origins);
            return v.to_string();
        }
    }
    vault.tokenize_text_from(owner, text, origins)
}
