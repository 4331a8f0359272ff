//! Approval of destructive calls: the policy decides when to ask; the front asks the user
//! through MCP elicitation (the client's own confirmation UI) behind the [`Approver`] trait,
//! so nothing outside `front/` speaks rmcp.

use futures::future::BoxFuture;

/// What the user answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    Accepted,
    Declined,
    Cancelled,
    /// The client did not declare the elicitation capability: there is nobody to ask.
    Unsupported,
    /// Asking failed (transport closed, timeout).
    Failed(String),
}

/// Asks the user of one session to confirm something.
pub trait Approver: Send + Sync {
    fn ask(&self, message: String) -> BoxFuture<'_, Answer>;
}

/// The question put to the user.
pub fn question(
    tool: &str,
    key: &str,
    arguments: &serde_json::Map<String, serde_json::Value>,
) -> String {
    let mut args = serde_json::Value::Object(arguments.clone()).to_string();
    if args.len() > 500 {
        let cut = (0..=500)
            .rev()
            .find(|&i| args.is_char_boundary(i))
            .unwrap_or(0);
        args.truncate(cut);
        args.push('…');
    }
    format!("Allow the destructive tool {tool} to run (key {key:?})?\nArguments: {args}")
}

/// The refusal the model sees when the answer was not an acceptance.
pub fn refusal(tool: &str, answer: &Answer) -> String {
    match answer {
        Answer::Accepted => String::new(),
        Answer::Declined => format!("{tool} was not run: the user declined it."),
        Answer::Cancelled => format!("{tool} was not run: the user dismissed the confirmation."),
        Answer::Unsupported => format!(
            "{tool} was not run: it is destructive and this gateway asks the user before such calls, but this client cannot show a confirmation (no elicitation capability). Use a client that supports elicitation, or ask an administrator to change the key's approval setting."
        ),
        Answer::Failed(e) => format!("{tool} was not run: the confirmation could not be obtained ({e})."),
    }
}
