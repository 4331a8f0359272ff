//! The conformance suite's MRTR fixtures (SEP-2322): the `test_input_required_result_*`
//! tools and prompt, and the 2026-07-28 form of the tools that need the client
//! (`test_sampling`, `test_elicitation`, `test_missing_capability`,
//! `test_streaming_elicitation`).
//!
//! Each one is a small state machine, [`step`]: given the input responses and the state
//! the client echoed, it either needs more input (a set of keyed input requests and a new
//! state) or is done. A 2026-07-28 request gets the need as an `input_required` result and
//! retries; an older session is asked the same requests as server-to-client requests, so
//! the fixture serves both eras with one behaviour. `requestState` is signed with a key
//! made when the process starts, so a tampered state is refused (-32602).
// Server-to-client requests are deprecated by SEP-2577 but are what older sessions speak.
#![expect(
    deprecated,
    reason = "SEP-2577 deprecates logging, sampling and roots; peers still send them"
)]

use std::collections::BTreeMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::OnceLock;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientCapabilities, GetPromptRequestParams,
    GetPromptResponse, GetPromptResult, InputRequiredResult, ProtocolVersion,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::{json, Map, Value};

use super::{ask, parse, text};

/// The tools of this module, as listed.
pub(super) fn tools() -> Vec<Value> {
    let none = json!({"type": "object", "properties": {}});
    [
        (
            "test_input_required_result_elicitation",
            "Asks the user's name (MRTR)",
        ),
        (
            "test_input_required_result_sampling",
            "Asks the client to sample (MRTR)",
        ),
        (
            "test_input_required_result_list_roots",
            "Asks for the client's roots (MRTR)",
        ),
        (
            "test_input_required_result_request_state",
            "Asks for a confirmation and checks the echoed requestState (MRTR)",
        ),
        (
            "test_input_required_result_multiple_inputs",
            "Asks for elicitation, sampling and roots at once (MRTR)",
        ),
        (
            "test_input_required_result_multi_round",
            "Asks twice, in two rounds (MRTR)",
        ),
        (
            "test_input_required_result_tampered_state",
            "Refuses a requestState that was changed (MRTR)",
        ),
        (
            "test_input_required_result_capabilities",
            "Asks only for what the client declared (MRTR)",
        ),
        (
            "test_streaming_elicitation",
            "Asks the user a question during the call",
        ),
        ("multi_input", "Asks two questions at once, then answers"),
        (
            "test_tool_with_task",
            "Asks the user's name, then greets them from a task (needs the tasks extension at 2026-07-28)",
        ),
    ]
    .iter()
    .map(|(n, d)| json!({"name": n, "description": d, "inputSchema": none}))
    .chain([
        json!({"name": "confirm_delete", "description": "Asks to confirm, then answers",
        "inputSchema": {"type": "object", "properties": {"filename": {"type": "string"}}}}),
    ])
    .collect()
}

/// The prompt of this module, as listed.
pub(super) fn prompt_entry() -> Value {
    json!({"name": PROMPT, "description": "A prompt that first asks the user for context (MRTR)"})
}

/// The MRTR prompt's name.
pub(super) const PROMPT: &str = "test_input_required_result_prompt";

/// What a fixture needs next.
pub(super) enum Step {
    /// Input requests by key (each `{"method", "params"}`), and the state to echo.
    Need(Map<String, Value>, Option<String>),
    Done(String),
}

fn elicit(message: &str, field: &str, kind: &str) -> Value {
    json!({"method": "elicitation/create", "params": {"message": message, "requestedSchema": {
        "type": "object", "properties": {field: {"type": kind}}, "required": [field]}}})
}

fn sample(prompt: &str, max_tokens: u32) -> Value {
    json!({"method": "sampling/createMessage", "params": {
        "messages": [{"role": "user", "content": {"type": "text", "text": prompt}}], "maxTokens": max_tokens}})
}

fn roots() -> Value {
    json!({"method": "roots/list", "params": {}})
}

fn need(requests: Vec<(&str, Value)>, state: Option<String>) -> Step {
    let map = requests
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    Step::Need(map, state)
}

/// An accepted elicitation's `content.<field>`, if `responses[key]` is one.
fn accepted(responses: &BTreeMap<String, Value>, key: &str, field: &str) -> Option<String> {
    let r = responses.get(key)?.as_object()?;
    if r.get("action").and_then(Value::as_str) != Some("accept") {
        return None;
    }
    let v = r.get("content")?.get(field)?;
    Some(
        v.as_str()
            .map(str::to_string)
            .unwrap_or_else(|| v.to_string()),
    )
}

/// A sampling result's text, if `responses[key]` is one.
fn sampled(responses: &BTreeMap<String, Value>, key: &str) -> Option<String> {
    let v = responses.get(key)?.pointer("/content/text")?;
    v.as_str().map(str::to_string)
}

/// A roots/list result's URIs, if `responses[key]` is one.
fn listed_roots(responses: &BTreeMap<String, Value>, key: &str) -> Option<Vec<String>> {
    let roots = responses.get(key)?.get("roots")?.as_array()?;
    Some(
        roots
            .iter()
            .filter_map(|r| r.get("uri").and_then(Value::as_str).map(str::to_string))
            .collect(),
    )
}

/// The fixture's key for signing states, made once per process.
fn key() -> &'static std::collections::hash_map::RandomState {
    static KEY: OnceLock<std::collections::hash_map::RandomState> = OnceLock::new();
    KEY.get_or_init(Default::default)
}

fn tag(payload: &str) -> u64 {
    let mut h = key().build_hasher();
    h.write(payload.as_bytes());
    h.finish()
}

/// `payload.<tag>`: opaque to the client, checked on the way back.
fn sign(payload: &str) -> String {
    format!("{payload}.{:016x}", tag(payload))
}

/// The payload of a state this process signed; an error for any other.
fn verify(state: &str) -> Result<String, ErrorData> {
    let bad = || {
        ErrorData::invalid_params(
            "requestState failed its integrity check: retry without it",
            None,
        )
    };
    let (payload, t) = state.rsplit_once('.').ok_or_else(bad)?;
    match u64::from_str_radix(t, 16) {
        Ok(t) if t == tag(payload) && format!("{t:016x}") == state[payload.len() + 1..] => {
            Ok(payload.to_string())
        }
        _ => Err(bad()),
    }
}

/// The next step of fixture `name`, or `None` when `name` is not one of this module's.
pub(super) fn step(
    name: &str,
    responses: &BTreeMap<String, Value>,
    state: Option<&str>,
    caps: &ClientCapabilities,
    arguments: &Map<String, Value>,
) -> Option<Result<Step, ErrorData>> {
    let arg = |k: &str| arguments.get(k).and_then(Value::as_str).unwrap_or_default();
    let state = match state.map(verify).transpose() {
        Ok(s) => s,
        Err(e) => return Some(Err(e)),
    };
    let step = match name {
        "test_input_required_result_elicitation" => {
            match accepted(responses, "user_name", "name") {
                Some(n) => Step::Done(format!("Hello, {n}!")),
                None => need(
                    vec![("user_name", elicit("What is your name?", "name", "string"))],
                    None,
                ),
            }
        }
        "test_input_required_result_sampling" => match sampled(responses, "capital_question") {
            Some(t) => Step::Done(format!("The model answered: {t}")),
            None => need(
                vec![(
                    "capital_question",
                    sample("What is the capital of France?", 100),
                )],
                None,
            ),
        },
        "test_input_required_result_list_roots" => match listed_roots(responses, "client_roots") {
            Some(r) => Step::Done(format!("Roots: {}", r.join(", "))),
            None => need(vec![("client_roots", roots())], None),
        },
        "test_input_required_result_request_state"
        | "test_input_required_result_tampered_state" => {
            match (state.as_deref(), responses.contains_key("confirm")) {
                (Some("confirm"), true) => Step::Done("state-ok: confirmed".into()),
                _ => need(
                    vec![("confirm", elicit("Please confirm", "ok", "boolean"))],
                    Some(sign("confirm")),
                ),
            }
        }
        "test_input_required_result_multiple_inputs" => {
            let name = accepted(responses, "user_name", "name");
            let greeting = sampled(responses, "greeting");
            let roots_given = listed_roots(responses, "client_roots");
            match (state.as_deref(), name, greeting, roots_given) {
                (Some("multiple"), Some(n), Some(g), Some(r)) => {
                    Step::Done(format!("{g} {n} ({} roots)", r.len()))
                }
                _ => need(
                    vec![
                        ("user_name", elicit("What is your name?", "name", "string")),
                        ("greeting", sample("Generate a greeting", 50)),
                        ("client_roots", roots()),
                    ],
                    Some(sign("multiple")),
                ),
            }
        }
        "test_input_required_result_multi_round" => {
            let step1 = || {
                need(
                    vec![(
                        "step1",
                        elicit("Step 1: What is your name?", "name", "string"),
                    )],
                    Some(sign("round-1")),
                )
            };
            match state.as_deref() {
                Some("round-1") => match accepted(responses, "step1", "name") {
                    Some(n) => need(
                        vec![(
                            "step2",
                            elicit("Step 2: What is your favorite color?", "color", "string"),
                        )],
                        Some(sign(&format!("round-2:{n}"))),
                    ),
                    None => step1(),
                },
                Some(s) if s.starts_with("round-2:") => match accepted(responses, "step2", "color")
                {
                    Some(c) => Step::Done(format!("{} likes {c}", &s["round-2:".len()..])),
                    None => need(
                        vec![(
                            "step2",
                            elicit("Step 2: What is your favorite color?", "color", "string"),
                        )],
                        Some(s.to_string()).map(|s| sign(&s)),
                    ),
                },
                _ => step1(),
            }
        }
        "test_input_required_result_capabilities" => {
            if !responses.is_empty() {
                Step::Done(format!(
                    "answered: {}",
                    responses.keys().cloned().collect::<Vec<_>>().join(", ")
                ))
            } else {
                let mut asked = Vec::new();
                if caps.elicitation.is_some() {
                    asked.push(("user_name", elicit("What is your name?", "name", "string")));
                }
                if caps.sampling.is_some() {
                    asked.push(("greeting", sample("Generate a greeting", 50)));
                }
                if caps.roots.is_some() {
                    asked.push(("client_roots", roots()));
                }
                if asked.is_empty() {
                    Step::Done("the client declared nothing to ask".into())
                } else {
                    need(asked, None)
                }
            }
        }
        // The tasks scenarios' MRTR-then-task fixture: the name first, the task after.
        "test_tool_with_task" => match accepted(responses, "user_name", "name") {
            Some(n) => Step::Done(format!("Hello, {n}! (from a task)")),
            None => need(
                vec![("user_name", elicit("What is your name?", "name", "string"))],
                None,
            ),
        },
        // The tasks scenarios' input fixtures: one confirmation, or two questions at once.
        "confirm_delete" => match accepted(responses, "confirm", "confirm") {
            Some(yes) => Step::Done(format!("confirm_delete {}: confirm={yes}", arg("filename"))),
            None => need(
                vec![(
                    "confirm",
                    elicit(
                        &format!("Delete {}?", arg("filename")),
                        "confirm",
                        "boolean",
                    ),
                )],
                None,
            ),
        },
        "multi_input" => match (
            accepted(responses, "name", "name"),
            accepted(responses, "confirm", "confirm"),
        ) {
            (Some(n), Some(c)) => Step::Done(format!("multi_input: name={n}, confirm={c}")),
            _ => need(
                vec![
                    ("name", elicit("What is your name?", "name", "string")),
                    ("confirm", elicit("Go ahead?", "confirm", "boolean")),
                ],
                None,
            ),
        },
        "test_streaming_elicitation" | "test_elicitation" => {
            match accepted(responses, "answer", "username") {
                Some(u) => Step::Done(format!("Elicitation completed: username={u}")),
                None => need(
                    vec![(
                        "answer",
                        json!({"method": "elicitation/create", "params": {
                    "message": if arg("message").is_empty() { "Who are you?" } else { arg("message") },
                    "requestedSchema": {"type": "object", "properties": {
                        "username": {"type": "string", "description": "User's response"},
                        "email": {"type": "string", "description": "User's email address"}},
                        "required": ["username"]}}}),
                    )],
                    None,
                ),
            }
        }
        "test_sampling" | "test_missing_capability" => {
            if caps.sampling.is_none() {
                let needed = ClientCapabilities::builder().enable_sampling().build();
                return Some(Err(ErrorData::missing_required_client_capability(needed)));
            }
            match sampled(responses, "sample") {
                Some(t) => Step::Done(format!("LLM response: {t}")),
                None => need(vec![("sample", sample(arg("prompt"), 100))], None),
            }
        }
        PROMPT => match accepted(responses, "user_context", "context") {
            Some(c) => Step::Done(c),
            None => need(
                vec![(
                    "user_context",
                    elicit("What context should the prompt use?", "context", "string"),
                )],
                None,
            ),
        },
        _ => return None,
    };
    Some(Ok(step))
}

/// The tools the 2026-07-28 era serves here; older sessions keep `tools.rs`'s own for
/// `test_sampling`, `test_elicitation` and `test_missing_capability`.
fn handles(name: &str, modern: bool) -> bool {
    match name {
        "test_sampling" | "test_elicitation" | "test_missing_capability" => modern,
        _ => {
            name.starts_with("test_input_required_result_")
                || matches!(
                    name,
                    "test_streaming_elicitation"
                        | "confirm_delete"
                        | "multi_input"
                        | "test_tool_with_task"
                )
        }
    }
}

fn is_modern(cx: &RequestContext<RoleServer>) -> bool {
    cx.protocol_version()
        .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

/// Runs `name`'s steps: a 2026-07-28 request gets `input_required` for a need; an older
/// session is asked each request in turn (at most five rounds).
async fn drive(
    name: &str,
    mut responses: BTreeMap<String, Value>,
    mut state: Option<String>,
    arguments: &Map<String, Value>,
    cx: &RequestContext<RoleServer>,
) -> Result<Result<String, InputRequiredResult>, ErrorData> {
    let modern = is_modern(cx);
    let caps = cx.client_capabilities().unwrap_or_default();
    for _ in 0..5 {
        let next = step(name, &responses, state.as_deref(), &caps, arguments)
            .expect("drive is called for this module's names")?;
        let (requests, next_state) = match next {
            Step::Done(text) => return Ok(Ok(text)),
            Step::Need(requests, next_state) => (requests, next_state),
        };
        if modern {
            let mut v = json!({"resultType": "input_required", "inputRequests": requests});
            if let Some(s) = next_state {
                v["requestState"] = json!(s);
            }
            return Ok(Err(parse(v)));
        }
        let asks = requests.into_iter().map(|(key, request)| async move {
            let method = request["method"].as_str().unwrap_or_default().to_string();
            let answer = ask(cx, &method, request["params"].clone()).await;
            let answer =
                answer.map_err(|e| ErrorData::internal_error(format!("{method}: {e}"), None))?;
            Ok::<_, ErrorData>((key, answer))
        });
        // `multi_input` fans its questions out at once, as the tasks scenario wants; the
        // others ask in turn, as an older server usually does.
        if name == "multi_input" {
            responses.extend(futures::future::try_join_all(asks).await?);
        } else {
            for ask in asks {
                let (key, answer) = ask.await?;
                responses.insert(key, answer);
            }
        }
        state = next_state;
    }
    Err(ErrorData::internal_error("too many rounds", None))
}

/// A tools/call of this module's, or `None` for any other tool.
pub(super) async fn call(
    request: &CallToolRequestParams,
    cx: &RequestContext<RoleServer>,
) -> Option<Result<CallToolResponse, ErrorData>> {
    if !handles(&request.name, is_modern(cx)) {
        return None;
    }
    let responses = request.input_responses.clone().unwrap_or_default();
    let arguments = request.arguments.clone().unwrap_or_default();
    let out = drive(
        &request.name,
        responses,
        request.request_state.clone(),
        &arguments,
        cx,
    )
    .await;
    Some(out.map(|r| match r {
        Ok(t) => CallToolResponse::from(text(t)),
        Err(asked) => asked.into(),
    }))
}

/// prompts/get of [`PROMPT`].
pub(super) async fn prompt(
    request: &GetPromptRequestParams,
    cx: &RequestContext<RoleServer>,
) -> Result<GetPromptResponse, ErrorData> {
    let responses = request.input_responses.clone().unwrap_or_default();
    let out = drive(
        PROMPT,
        responses,
        request.request_state.clone(),
        &Map::new(),
        cx,
    )
    .await?;
    Ok(match out {
        Ok(context) => {
            let text = format!("Use this context: {context}");
            parse::<GetPromptResult>(
                json!({"messages": [{"role": "user", "content": {"type": "text", "text": text}}]}),
            )
            .into()
        }
        Err(asked) => asked.into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signed_state_verifies_and_a_changed_one_does_not() {
        let s = sign("round-1");
        assert_eq!(verify(&s).unwrap(), "round-1");
        assert!(verify(&format!("{s}-TAMPERED")).is_err());
        assert!(verify("round-1").is_err());
        assert!(verify(&s.replace("round-1", "round-2")).is_err());
    }

    #[test]
    fn multi_round_asks_twice_then_finishes() {
        let caps = ClientCapabilities::default();
        let args = Map::new();
        let name = "test_input_required_result_multi_round";
        let Some(Ok(Step::Need(r1, Some(s1)))) = step(name, &BTreeMap::new(), None, &caps, &args)
        else {
            panic!("round 1 asks");
        };
        assert!(r1.contains_key("step1"));
        let answers = BTreeMap::from([(
            "step1".to_string(),
            json!({"action": "accept", "content": {"name": "Alice"}}),
        )]);
        let Some(Ok(Step::Need(r2, Some(s2)))) = step(name, &answers, Some(&s1), &caps, &args)
        else {
            panic!("round 2 asks again");
        };
        assert!(r2.contains_key("step2") && s2 != s1);
        let answers = BTreeMap::from([(
            "step2".to_string(),
            json!({"action": "accept", "content": {"color": "blue"}}),
        )]);
        let Some(Ok(Step::Done(t))) = step(name, &answers, Some(&s2), &caps, &args) else {
            panic!("round 3 is done");
        };
        assert_eq!(t, "Alice likes blue");
    }
}
