//! Client messages rmcp would answer wrongly or not at all, answered here first, on both
//! fronts: text that is not JSON (-32700 over HTTP; skipped on stdio), a request to a standard method whose params do
//! not fit it, such as a `tools/call` without a tool name (-32602, where rmcp would say
//! -32601), and a request rmcp cannot read at all, e.g. nested deeper than the JSON parser
//! allows (-32600), and JSON that is no JSON-RPC message at all: `null`, `42`, `[]` (no
//! batches), an object rmcp cannot read, such as one with a key twice (-32600, HTTP 400).
//! Each answer carries the request's own id whenever it can be found.

use rmcp::model::{ClientJsonRpcMessage, ClientRequest, JsonRpcMessage};
use serde_json::{json, Value};
use std::sync::Arc;

/// The methods rmcp reads into typed requests: one of these read as a custom request
/// means its params did not fit. Only methods of every protocol era: the ones 2026-07-28
/// removed (`initialize`, `ping`, `logging/setLevel`, `resources/subscribe` and
/// `unsubscribe`) must reach rmcp, which answers them method-not-found (HTTP 404) in that
/// era, whatever their params.
const TYPED: &[&str] = &[
    "server/discover",
    "tools/call",
    "tools/list",
    "resources/list",
    "resources/read",
    "resources/templates/list",
    "prompts/list",
    "prompts/get",
    "completion/complete",
];

/// The error answer for one client message (a JSON-RPC text), or `None` when rmcp can be
/// left to answer it. A batch (array) is refused: rmcp reads none.
#[cfg(test)]
pub(super) fn refusal(text: &[u8]) -> Option<Value> {
    check(text).err()
}

/// The method and id of a request `check` passed (both empty for a batch, a response or a
/// notification), kept in an HTTP request's extensions so that later layers
/// (`sessions::cap_sessions`) need not parse the body again.
#[derive(Clone, Debug, Default)]
pub(super) struct Method {
    pub(super) name: Option<String>,
    pub(super) id: Value,
}

/// [`refusal`], and when there is none, the message's method.
pub(super) fn check(text: &[u8]) -> Result<Method, Value> {
    // Most messages are tools/calls in their plainest form: nothing to answer.
    if let Some(method) = plain_call(text) {
        return Ok(method);
    }
    // Most others are requests that read as typed ones at once: nothing to answer either.
    if let Ok(JsonRpcMessage::Request(r)) = serde_json::from_slice::<ClientJsonRpcMessage>(text) {
        let name = r.request.method();
        let misread = matches!(r.request, ClientRequest::CustomRequest(_)) && TYPED.contains(&name);
        if !misread {
            return Ok(Method {
                name: Some(name.to_string()),
                id: serde_json::to_value(&r.id).unwrap_or_default(),
            });
        }
    }
    closely(text)
}

/// A `tools/call` in the form nearly every client sends (`jsonrpc`, an integer or string
/// `id`, `method`, and `params` with a string `name` and, optionally, object `arguments`
/// and `_meta`; no other key, none twice), read without building its arguments: rmcp's
/// typed read accepts every such message, so it needs no typed read here. Anything else,
/// `None`, goes the typed way. (A typed read costs as much as rmcp's own and was about 6%
/// of a direct call's CPU; a property test holds this path to [`closely`].)
fn plain_call(text: &[u8]) -> Option<Method> {
    use serde::Deserialize;
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Call<'a> {
        jsonrpc: &'a str,
        id: Value,
        method: &'a str,
        #[serde(rename = "params", borrow)]
        _params: Params<'a>,
    }
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Params<'a> {
        // Read only to prove their types.
        #[serde(rename = "name")]
        _name: &'a str,
        #[serde(rename = "arguments", default)]
        _arguments: Option<AnObject>,
        #[serde(rename = "_meta", default)]
        _meta: Option<AnObject>,
    }
    let call: Call = serde_json::from_slice(text).ok()?;
    let id_fits = match &call.id {
        Value::String(_) => true,
        Value::Number(n) => n.as_i64().is_some(),
        _ => false,
    };
    (call.jsonrpc == "2.0" && call.method == "tools/call" && id_fits).then(|| Method {
        name: Some("tools/call".into()),
        id: call.id,
    })
}

/// A JSON object, read through without keeping it (anything else fails to read).
struct AnObject;

impl<'de> serde::Deserialize<'de> for AnObject {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(Skip).map(|Skip| AnObject)
    }
}

/// Any JSON value, read through without keeping it, as strictly as a `Value` is read:
/// strings are decoded (a lone surrogate fails) and nesting counts against the parser's
/// depth limit (serde's `IgnoredAny` checks neither, and rmcp's typed read fails on both).
struct Skip;

impl<'de> serde::Deserialize<'de> for Skip {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(Skip)
    }
}

impl<'de> serde::de::Visitor<'de> for Skip {
    type Value = Skip;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_str<E>(self, _: &str) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_unit<E>(self) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Skip, A::Error> {
        while seq.next_element::<Skip>()?.is_some() {}
        Ok(Skip)
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Skip, A::Error> {
        while map.next_entry::<Skip, Skip>()?.is_some() {}
        Ok(Skip)
    }
}

/// [`check`] for a message that did not read as a typed request: found out why.
fn closely(text: &[u8]) -> Result<Method, Value> {
    let value: Value = match serde_json::from_slice(text) {
        Ok(v) => v,
        // Valid JSON the parser will not hold (nested too deep).
        Err(e) if e.to_string().contains("recursion limit") => {
            let id = crate::upstream::top_level_id(&String::from_utf8_lossy(text));
            return Err(error(
                id.unwrap_or(Value::Null),
                -32600,
                format!("Invalid request: {e}"),
            ));
        }
        Err(e) => return Err(error(Value::Null, -32700, format!("Parse error: {e}"))),
    };
    let Some(obj) = value.as_object() else {
        let got = match &value {
            Value::Array(_) => {
                "an array: JSON-RPC batches are not supported (MCP 2025-06-18 removed them)"
            }
            Value::Null => "null",
            Value::Bool(_) => "a boolean",
            Value::Number(_) => "a number",
            Value::String(_) => "a string",
            Value::Object(_) => unreachable!("not an object"),
        };
        return Err(error(
            Value::Null,
            -32600,
            format!("Invalid request: send one JSON-RPC message, an object with \"jsonrpc\": \"2.0\" and a \"method\"; got {got}"),
        ));
    };
    // The text itself, not the value: a value keeps one of two equal keys, where rmcp's
    // read of the text fails (a duplicate `id` or `method` could mean either).
    if let Err(e) = serde_json::from_slice::<ClientJsonRpcMessage>(text) {
        let id = obj.get("id").cloned().unwrap_or(Value::Null);
        let why = match twice(text) {
            Some(key) => format!("the key {key:?} appears more than once; send each key once"),
            None => e.to_string(),
        };
        return Err(error(id, -32600, format!("Invalid request: {why}")));
    }
    let (Some(id), Some(method)) = (obj.get("id").cloned(), obj.get("method")) else {
        return Ok(Method::default());
    };
    let Some(method) = method.as_str().map(str::to_string) else {
        return Ok(Method::default());
    };
    match serde_json::from_value::<ClientJsonRpcMessage>(value) {
        Ok(JsonRpcMessage::Request(r)) => match r.request {
            ClientRequest::CustomRequest(_) if TYPED.contains(&method.as_str()) => {
                let what = match method.as_str() {
                    "tools/call" => "a tools/call needs params.name, the tool's name (a string)",
                    _ => "its params do not have the fields and types this method takes",
                };
                Err(error(
                    id,
                    -32602,
                    format!("Invalid params for {method}: {what}"),
                ))
            }
            _ => Ok(Method {
                name: Some(method),
                id,
            }),
        },
        Ok(_) => Ok(Method {
            name: Some(method),
            id,
        }),
        Err(e) => Err(error(id, -32600, format!("Invalid request: {e}"))),
    }
}

/// A key the top-level object of `text` holds more than once, if any.
fn twice(text: &[u8]) -> Option<String> {
    struct Keys(Option<String>);
    impl<'de> serde::Deserialize<'de> for Keys {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            d.deserialize_map(Keys(None))
        }
    }
    impl<'de> serde::de::Visitor<'de> for Keys {
        type Value = Keys;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a JSON object")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Keys, A::Error> {
            let mut seen = std::collections::HashSet::new();
            let mut again = None;
            while let Some((key, Skip)) = map.next_entry::<String, Skip>()? {
                if !seen.insert(key.clone()) && again.is_none() {
                    again = Some(key);
                }
            }
            Ok(Keys(again))
        }
    }
    serde_json::from_slice::<Keys>(text).ok()?.0
}

type Reader = Box<dyn tokio::io::AsyncRead + Send + Unpin>;
type Writer = Box<dyn tokio::io::AsyncWrite + Send + Unpin>;

/// stdin and stdout through the IO reactor whenever they are pipes (rmcp's `stdio_pipes`)
/// or sockets (what a Node client's `child_process` gives): tokio's own stdin and stdout
/// hand every read and write to a blocking thread, which costs more than the rest of a
/// small call. The fixture does the same (`toolgate_fixture::stdio`); the two crates do
/// not depend on each other.
fn stdio() -> (Reader, Writer) {
    use std::os::fd::AsFd;
    let sockets = (
        socket(std::io::stdin().as_fd()),
        socket(std::io::stdout().as_fd()),
    );
    if let (Some(r), Some(w)) = sockets {
        return (Box::new(r), Box::new(w));
    }
    let (r, w) = rmcp::transport::stdio_pipes();
    (Box::new(r), Box::new(w))
}

/// `fd` as a non-blocking tokio socket, if it is a Unix socket. Unlike a pipe, a socket
/// cannot be reopened privately: `O_NONBLOCK` is set on the process's own descriptor,
/// which nothing else in the gateway reads or writes (logs go to stderr).
fn socket(fd: std::os::fd::BorrowedFd<'_>) -> Option<tokio::net::UnixStream> {
    use std::os::unix::fs::FileTypeExt;
    let file = std::fs::File::from(fd.try_clone_to_owned().ok()?);
    if !file.metadata().ok()?.file_type().is_socket() {
        return None;
    }
    let stream = std::os::unix::net::UnixStream::from(std::os::fd::OwnedFd::from(file));
    stream.set_nonblocking(true).ok()?;
    tokio::net::UnixStream::from_std(stream).ok()
}

/// stdin and stdout for rmcp, with every line from the client checked first: a line
/// `refusal` answers is answered on stdout (between rmcp's own lines, never inside one)
/// and not passed on; a line that is not JSON is skipped (there is no id to answer).
pub(super) fn checked_stdio() -> (tokio::io::DuplexStream, tokio::io::DuplexStream) {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let (mut to_rmcp, rmcp_in) = tokio::io::duplex(1 << 20);
    let (rmcp_out, from_rmcp) = tokio::io::duplex(1 << 20);
    let (replies, mut pending) = tokio::sync::mpsc::unbounded_channel::<String>();
    let (stdin, mut out) = stdio();
    // The ids of `initialize` and `tools/list` requests in flight: their answers get what
    // a 2025-11-25 client reads about tasks (`augmented::amend`).
    let amending = Arc::new(super::augmented::Amending::default());
    let watched = amending.clone();
    tokio::spawn(async move {
        let mut stdin = BufReader::new(stdin);
        let mut line = Vec::new();
        loop {
            line.clear();
            match stdin.read_until(b'\n', &mut line).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            let text = line.trim_ascii();
            if text.is_empty() {
                continue;
            }
            // A request of 2025-11-25's task form (once the session agreed on that
            // revision) goes to rmcp under a name it hands on.
            let renamed = watched.agreed().then(|| super::augmented::renamed(text));
            if let Some(renamed) = renamed.flatten() {
                line = renamed;
                line.push(b'\n');
            }
            let text = line.trim_ascii();
            let checked = check(text);
            if let Ok(Method {
                name: Some(name),
                id,
            }) = &checked
            {
                watched.asked(name, id);
            }
            if let Err(answer) = checked {
                // A line that is not JSON has no id to answer: skipped, as rmcp does.
                if answer["error"]["code"] == -32700 {
                    tracing::warn!("stdio: skipped a line that is not JSON-RPC");
                } else {
                    let _ = replies.send(format!("{answer}\n"));
                }
                continue;
            }
            if to_rmcp.write_all(&line).await.is_err() {
                break;
            }
        }
        // Dropping `to_rmcp` ends rmcp's input: the session closes as it would on EOF.
    });
    tokio::spawn(async move {
        let mut from_rmcp = BufReader::new(from_rmcp);
        let mut line = Vec::new();
        let (mut rmcp_open, mut replies_open) = (true, true);
        while rmcp_open || replies_open {
            tokio::select! {
                read = from_rmcp.read_until(b'\n', &mut line), if rmcp_open => {
                    rmcp_open = matches!(read, Ok(n) if n > 0);
                    if let Some(amended) = amending.answered(&line) {
                        line = amended;
                    }
                    if !line.is_empty() && out.write_all(&line).await.is_err() {
                        break;
                    }
                    line.clear();
                }
                reply = pending.recv(), if replies_open => match reply {
                    Some(r) => {
                        if out.write_all(r.as_bytes()).await.is_err() {
                            break;
                        }
                    }
                    None => replies_open = false,
                },
            }
            let _ = out.flush().await;
        }
    });
    (rmcp_in, rmcp_out)
}

fn error(id: Value, code: i32, message: String) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

#[cfg(test)]
mod tests {
    use super::refusal;
    use serde_json::json;

    fn code_and_id(text: &str) -> Option<(i64, serde_json::Value)> {
        refusal(text.as_bytes()).map(|e| (e["error"]["code"].as_i64().unwrap(), e["id"].clone()))
    }

    #[test]
    fn broken_requests_get_their_own_id_and_the_right_code() {
        assert_eq!(code_and_id("{not json"), Some((-32700, json!(null))));
        let call = r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{}}"#;
        assert_eq!(code_and_id(call), Some((-32602, json!(4))));
        let typed = r#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":5}}"#;
        assert_eq!(code_and_id(typed), Some((-32602, json!("a"))));
        let deep = format!(
            r#"{{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{}{}}}"#,
            "[".repeat(200),
            "]".repeat(200)
        );
        assert_eq!(code_and_id(&deep), Some((-32600, json!(9))));
        for not_a_message in ["null", "42", "[]", "\"x\"", "{}"] {
            assert_eq!(
                code_and_id(not_a_message),
                Some((-32600, json!(null))),
                "{not_a_message}"
            );
        }
        let twice = r#"{"jsonrpc":"2.0","id":3,"method":"tools/list","method":"tools/call"}"#;
        let e = refusal(twice.as_bytes()).unwrap();
        assert_eq!(e["error"]["code"], -32600);
        assert!(
            e["error"]["message"]
                .as_str()
                .unwrap()
                .contains("\"method\" appears more than once"),
            "{e}"
        );
        // Well-formed ones, notifications and unknown methods are rmcp's to answer.
        let ok = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}"#;
        assert_eq!(code_and_id(ok), None);
        assert_eq!(
            code_and_id(r#"{"jsonrpc":"2.0","id":2,"method":"nope"}"#),
            None
        );
        assert_eq!(
            code_and_id(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
            None
        );
        // rmcp reads no batches (MCP 2025-06-18 removed them): refused here, saying so.
        assert_eq!(
            code_and_id(r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#),
            Some((-32600, json!(null)))
        );
    }

    #[test]
    fn a_passed_request_keeps_its_method_and_id_for_the_layers_after() {
        let m = super::check(br#"{"jsonrpc":"2.0","id":"x7","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}"#).unwrap();
        assert_eq!((m.name.as_deref(), m.id), (Some("initialize"), json!("x7")));
        let m = super::check(br#"{"jsonrpc":"2.0","id":3,"method":"nope"}"#).unwrap();
        assert_eq!((m.name.as_deref(), m.id), (Some("nope"), json!(3)));
        let m = super::check(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).unwrap();
        assert_eq!(m.name, None);
    }

    #[test]
    fn the_plain_call_path_takes_only_plain_calls() {
        let plain = |t: &str| super::plain_call(t.as_bytes()).map(|m| m.id);
        let call = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x","arguments":{"a":[1,{"b":null}]},"_meta":{"progressToken":1}}}"#;
        assert_eq!(plain(call), Some(json!(7)));
        assert_eq!(
            plain(r#"{"method":"tools/call","params":{"name":"x"},"id":"q","jsonrpc":"2.0"}"#),
            Some(json!("q"))
        );
        for other in [
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x","arguments":[1]}}"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x","requestState":"s"}}"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x","name":"y"}}"#,
            r#"{"jsonrpc":"2.0","id":7.5,"method":"tools/call","params":{"name":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"name":"x"}}"#,
            r#"{"jsonrpc":"1.0","id":7,"method":"tools/call","params":{"name":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x"},"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x"}} trailing"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x","arguments":{"s":"\ud800"}}}"#,
        ] {
            assert_eq!(plain(other), None, "{other}");
        }
        // Deeper than the parser allows: rmcp cannot read it, so neither may this path.
        let deep = format!(
            r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"x","arguments":{{"a":{}{}}}}}}}"#,
            "[".repeat(300),
            "]".repeat(300)
        );
        assert_eq!(plain(&deep), None);
        assert!(super::closely(deep.as_bytes()).is_err());
    }

    mod props {
        use super::refusal;
        use proptest::prelude::*;
        use serde_json::{json, Value};

        /// Any JSON value, small.
        fn any_value() -> impl Strategy<Value = Value> {
            let leaf = prop_oneof![
                Just(Value::Null),
                any::<bool>().prop_map(Value::Bool),
                any::<i64>().prop_map(|n| json!(n)),
                any::<u64>().prop_map(|n| json!(n)),
                (-1e6f64..1e6).prop_map(|f| json!(f)),
                "[a-z\\\"é]{0,4}".prop_map(Value::String),
            ];
            leaf.prop_recursive(3, 12, 3, |inner| {
                prop_oneof![
                    prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
                    prop::collection::btree_map("[a-z_]{1,3}", inner, 0..3)
                        .prop_map(|m| Value::Object(m.into_iter().collect())),
                ]
            })
        }

        /// A JSON object, small.
        fn object() -> impl Strategy<Value = Value> {
            prop::collection::btree_map("[a-z_]{1,3}", any_value(), 0..3)
                .prop_map(|m| Value::Object(m.into_iter().collect()))
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

            /// Whatever the plain-call path passes, the close look passes too, with the same
            /// method and id (the path is sound; what it leaves goes the typed way).
            #[test]
            fn the_plain_call_path_agrees_with_the_close_look(
                id in prop_oneof![3 => any::<i64>().prop_map(|n| json!(n)), 2 => "[a-z]{0,4}".prop_map(|s| json!(s)), 1 => any_value()],
                jsonrpc in prop_oneof![8 => Just(json!("2.0")), 1 => Just(json!("1.0")), 1 => Just(json!(2))],
                method in prop_oneof![8 => Just("tools/call"), 1 => Just("tools/list"), 1 => Just("x")],
                name in prop_oneof![4 => Just(json!("t")), 1 => Just(json!("a\\b")), 1 => any_value()],
                arguments in prop::option::of(prop_oneof![3 => object(), 1 => any_value()]),
                meta in prop::option::of(prop_oneof![3 => object(), 1 => any_value()]),
                more in prop::option::weighted(0.2, (prop_oneof![Just("requestState"), Just("inputResponses"), Just("task"), Just("other"), Just("name")], any_value())),
                extra in prop::option::weighted(0.1, ("[a-z]{1,6}", any_value())),
            ) {
                let mut text_params = vec![format!("\"name\":{name}")];
                if let Some(a) = arguments {
                    text_params.push(format!("\"arguments\":{a}"));
                }
                if let Some(m) = meta {
                    text_params.push(format!("\"_meta\":{m}"));
                }
                // Written by hand, so that a key may come twice.
                if let Some((k, v)) = more {
                    text_params.push(format!("\"{k}\":{v}"));
                }
                let params_text = format!("{{{}}}", text_params.join(","));
                let mut top = vec![format!("\"jsonrpc\":{jsonrpc}"), format!("\"id\":{id}"), format!("\"method\":\"{method}\""), format!("\"params\":{params_text}")];
                if let Some((k, v)) = extra {
                    top.push(format!("\"{k}\":{v}"));
                }
                let text = format!("{{{}}}", top.join(","));
                if let Some(plain) = super::super::plain_call(text.as_bytes()) {
                    let slow = super::super::closely(text.as_bytes());
                    prop_assert!(slow.is_ok(), "{text}: {slow:?}");
                    let slow = slow.unwrap();
                    prop_assert_eq!((&plain.name, &plain.id), (&slow.name, &slow.id));
                }
                let (fast, slow) = (super::super::check(text.as_bytes()), super::super::closely(text.as_bytes()));
                prop_assert_eq!(fast.is_ok(), slow.is_ok(), "{}", text);
            }
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

            /// Any bytes: no panic; an answer is JSON-RPC 2.0 and carries the message's own
            /// id whenever the message is an object with one.
            #[test]
            fn any_message_is_left_to_rmcp_or_answered_with_its_own_id(
                id in prop_oneof![any::<i64>().prop_map(|n| json!(n)), "[a-z]{1,6}".prop_map(|s| json!(s))],
                method in prop_oneof![Just("tools/call"), Just("resources/read"), Just("ping"), Just("x")],
                params in prop_oneof![Just(json!({})), Just(json!({"name": 5})), Just(json!([1])), Just(json!(null)), Just(json!({"name": "t", "arguments": 3}))],
                noise in prop::collection::vec(any::<u8>(), 0..40),
            ) {
                let _ = refusal(&noise);
                let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
                // The typed fast path and the close look agree on every message.
                let text = msg.to_string();
                let (fast, slow) = (super::super::check(text.as_bytes()), super::super::closely(text.as_bytes()));
                prop_assert_eq!(fast.is_ok(), slow.is_ok());
                if let (Ok(f), Ok(s)) = (&fast, &slow) {
                    prop_assert_eq!((&f.name, &f.id), (&s.name, &s.id));
                }
                if let Some(answer) = refusal(text.as_bytes()) {
                    prop_assert_eq!(&answer["jsonrpc"], "2.0");
                    prop_assert_eq!(&answer["id"], &id);
                }
            }
        }
    }
}
