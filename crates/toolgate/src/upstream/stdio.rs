//! A stdio upstream's messages as rmcp's transport: JSON lines read straight from the
//! child's stdout (bounded, `lines`), written to its stdin, one line a message.
//!
//! Reading here instead of through rmcp's own line transport saves a call a task hop and a
//! second pass over each line, and lets the answer to a `tools/call` be read as what it
//! is: rmcp's untagged `ServerResult` tries fifteen other result types against a buffered
//! copy of the message before it reaches `CallToolResult` (`docs/performance.md`).

use super::lines::{lines, Lines};
use super::listing::capture_tools;
use rmcp::model::{
    CallToolResult, ClientJsonRpcMessage, ClientRequest, ErrorCode, ErrorData, JsonRpcError,
    JsonRpcResponse, JsonRpcVersion2_0, RequestId, ServerJsonRpcMessage, ServerResult,
};
use rmcp::service::RoleClient;
use serde_json::Value;
use std::collections::HashSet;
use std::future::Future;
use std::sync::{Arc, Mutex};
use tokio::io::AsyncWriteExt;
use tokio::process::{ChildStdin, ChildStdout};

/// `tools/call` requests remembered at most while they wait for their answers. One that
/// is never answered (cancelled, timed out) stays until the set is full and is cleared
/// with the rest: an answer not remembered is read the general way, never lost.
const CALLS_KEPT: usize = 4096;

pub(super) struct StdioTransport {
    name: String,
    stdout: Lines<ChildStdout>,
    max_line: usize,
    stdin: Arc<tokio::sync::Mutex<Option<ChildStdin>>>,
    /// Ids of the `tools/call` requests sent and not yet answered.
    calls: Arc<Mutex<HashSet<RequestId>>>,
    /// The id of the last `tools/list` request sent: only its answer is captured.
    list: Arc<Mutex<Option<RequestId>>>,
    raw_tools: super::RawTools,
}

impl StdioTransport {
    pub(super) fn new(
        name: &str,
        stdout: ChildStdout,
        stdin: ChildStdin,
        max_line: usize,
        raw_tools: super::RawTools,
    ) -> Self {
        Self {
            name: name.to_string(),
            stdout: lines(stdout, max_line),
            max_line,
            stdin: Arc::new(tokio::sync::Mutex::new(Some(stdin))),
            calls: Arc::default(),
            list: Arc::default(),
            raw_tools,
        }
    }

    /// One line of stdout as a message: `None` for a line that is not one (logged).
    fn read(&self, line: &str) -> Option<ServerJsonRpcMessage> {
        if line.contains("\"tools\"") {
            let list = self.list.lock().expect("list").clone();
            capture_tools(line, list.as_ref(), &self.raw_tools);
        }
        if let Some(answer) = self.call_answer(line) {
            return Some(answer);
        }
        match serde_json::from_str::<ServerJsonRpcMessage>(line) {
            Ok(message) => Some(message),
            Err(e) => self.unreadable(line, e),
        }
    }

    /// The answer to one of our `tools/call` requests, read as a `CallToolResult`. `None`
    /// sends the line the general way: any other message, an error, or a result of another
    /// kind (a task, input required).
    fn call_answer(&self, line: &str) -> Option<ServerJsonRpcMessage> {
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Answer {
            jsonrpc: JsonRpcVersion2_0,
            id: RequestId,
            result: CallToolResult,
        }
        // Nothing to read twice when no call waits (a list's answer, a notification).
        if !line.contains("\"result\"") || self.calls.lock().expect("calls").is_empty() {
            return None;
        }
        let answer: Answer = serde_json::from_str(line).ok()?;
        if !self.calls.lock().expect("calls").remove(&answer.id) {
            return None;
        }
        Some(ServerJsonRpcMessage::Response(JsonRpcResponse {
            jsonrpc: answer.jsonrpc,
            id: answer.id,
            result: ServerResult::CallToolResult(answer.result),
        }))
    }

    /// A JSON line that is not an MCP message. Non-standard notifications are ignored, as
    /// rmcp's own transport ignores them; an unreadable answer to a request of ours fails
    /// that request now (not at its timeout), saying why.
    fn unreadable(&self, line: &str, e: serde_json::Error) -> Option<ServerJsonRpcMessage> {
        let name = &self.name;
        let Ok(value) = serde_json::from_str::<Value>(line) else {
            tracing::warn!(upstream = %name, "skipped a line on stdout that is not JSON: {}", super::child::clip(line));
            return None;
        };
        let id = value.get("id").cloned().filter(|id| !id.is_null());
        let method = value
            .get("method")
            .map(|m| m.as_str().unwrap_or("(not a string)"));
        match (id, method) {
            (Some(id), None) => {
                let id: RequestId = serde_json::from_value(id).ok()?;
                self.calls.lock().expect("calls").remove(&id);
                let why = format!(
                    "upstream {name:?} answered with a message that is not valid MCP ({e}): {}",
                    super::child::clip(line)
                );
                tracing::warn!(upstream = %name, "{why}");
                Some(failed(id, why))
            }
            (id, Some(method)) => {
                tracing::debug!(upstream = %name, method, "ignored a message that is not valid MCP: {e}");
                // A request of the server's is answered, so it does not wait for ever.
                let id = id.and_then(|id| serde_json::from_value::<RequestId>(id).ok());
                if let Some(id) = id {
                    let error =
                        ErrorData::invalid_request(format!("not a valid MCP request: {e}"), None);
                    let reply = ClientJsonRpcMessage::Error(JsonRpcError {
                        jsonrpc: JsonRpcVersion2_0,
                        id: Some(id),
                        error,
                    });
                    tokio::spawn(write(self.stdin.clone(), serde_json::to_vec(&reply)));
                }
                None
            }
            (None, None) => {
                tracing::warn!(upstream = %name, "skipped a message on stdout that is not valid MCP ({e}): {}", super::child::clip(line));
                None
            }
        }
    }

    /// The error answering a request whose answer was over `max_line`, so its call fails
    /// now with the limit named.
    fn too_long(&self, dropped: super::lines::Dropped) -> Option<ServerJsonRpcMessage> {
        let (name, max) = (&self.name, self.max_line);
        let why = format!(
            "upstream {name:?} answered with a message of more than {max} bytes, over its limit (upstreams.{name}.max_message_bytes = {max}); the answer was dropped: ask for less, or raise the limit"
        );
        tracing::warn!(upstream = %name, "{why}");
        let id: RequestId = serde_json::from_value(dropped.id()?).ok()?;
        self.calls.lock().expect("calls").remove(&id);
        Some(failed(id, why))
    }
}

/// The error answer that fails our request `id`, saying `why`.
pub(super) fn failed(id: RequestId, why: String) -> ServerJsonRpcMessage {
    ServerJsonRpcMessage::Error(JsonRpcError {
        jsonrpc: JsonRpcVersion2_0,
        id: Some(id),
        error: ErrorData::new(ErrorCode::INTERNAL_ERROR, why, None),
    })
}

/// Writes one message (serialized, without its newline) to the server's stdin.
async fn write(
    stdin: Arc<tokio::sync::Mutex<Option<ChildStdin>>>,
    message: serde_json::Result<Vec<u8>>,
) -> std::io::Result<()> {
    let mut line = message.map_err(std::io::Error::other)?;
    line.push(b'\n');
    let mut stdin = stdin.lock().await;
    let Some(stdin) = stdin.as_mut() else {
        let closed = std::io::ErrorKind::NotConnected;
        return Err(std::io::Error::new(
            closed,
            "the upstream's stdin is closed",
        ));
    };
    stdin.write_all(&line).await?;
    stdin.flush().await
}

impl rmcp::transport::Transport<RoleClient> for StdioTransport {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: ClientJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        if let ClientJsonRpcMessage::Request(r) = &item {
            if matches!(r.request, ClientRequest::CallToolRequest(_)) {
                let mut calls = self.calls.lock().expect("calls");
                if calls.len() >= CALLS_KEPT {
                    calls.clear();
                }
                calls.insert(r.id.clone());
            } else if lists_tools(&r.request) {
                *self.list.lock().expect("list") = Some(r.id.clone());
            }
        }
        write(self.stdin.clone(), serde_json::to_vec(&item))
    }

    async fn receive(&mut self) -> Option<ServerJsonRpcMessage> {
        // Cancel-safe: `Lines` keeps a partial line across a dropped read, and nothing
        // after it awaits.
        loop {
            let line = match self.stdout.next_line().await? {
                Ok(line) => line,
                Err(e) => match self.stdout.dropped.take() {
                    Some(dropped) => match self.too_long(dropped) {
                        Some(message) => return Some(message),
                        None => continue,
                    },
                    None => {
                        tracing::warn!(upstream = %self.name, "stdout: {e}");
                        continue;
                    }
                },
            };
            let t = line.trim_start();
            if t.starts_with('{') || t.starts_with('[') {
                if let Some(message) = self.read(&line) {
                    return Some(message);
                }
            } else if !t.is_empty() {
                let clipped = super::child::clip(&line);
                tracing::warn!(upstream = %self.name, "skipped a non-JSON line on stdout: {clipped}");
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        // Dropping stdin is the end of input the server sees.
        drop(self.stdin.lock().await.take());
        Ok(())
    }
}

/// A `tools/list` request: rmcp's own, or the raw one `listing::list_tools` sends.
fn lists_tools(request: &ClientRequest) -> bool {
    match request {
        ClientRequest::ListToolsRequest(_) => true,
        ClientRequest::CustomRequest(c) => c.method == "tools/list",
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{CallToolRequest, CallToolRequestParams, JsonRpcRequest, NumberOrString};
    use rmcp::transport::Transport;

    /// A real child speaking in lines: each step waits for one request on stdin, then
    /// writes what it was told to; what the transport wrote back ends up on stderr.
    const SCRIPT: &str = r#"
read req
echo 'a banner, not JSON'
echo '[fixture] garbage {this is not json'
echo '{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hi"}]}}'
read req
echo '{"jsonrpc":"2.0","id":2,"result":{"resultType":"input_required","inputRequests":{}}}'
read req
echo '{"jsonrpc":"2.0","id":3,"result":{"content":[]},"error":{"code":1,"message":"both"}}'
echo '{"jsonrpc":"2.0","id":9,"method":5}'
read reply
echo "$reply" >&2
"#;

    fn call(id: i64) -> ClientJsonRpcMessage {
        let params = CallToolRequestParams::new("echo".to_string());
        ClientJsonRpcMessage::Request(JsonRpcRequest {
            jsonrpc: JsonRpcVersion2_0,
            id: NumberOrString::Number(id),
            request: ClientRequest::CallToolRequest(CallToolRequest::new(params)),
        })
    }

    #[tokio::test]
    async fn answers_are_read_as_what_they_answer_and_bad_ones_fail_their_call() {
        let mut child = tokio::process::Command::new("sh")
            .args(["-c", SCRIPT])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("sh");
        let (stdin, stdout) = (child.stdin.take().unwrap(), child.stdout.take().unwrap());
        let mut t = StdioTransport::new("up", stdout, stdin, 1 << 20, Default::default());

        // Lines that are not messages are skipped; the answer is a CallToolResult.
        t.send(call(1)).await.unwrap();
        let Some(ServerJsonRpcMessage::Response(r)) = t.receive().await else {
            panic!("no answer to call 1")
        };
        assert_eq!(r.id, NumberOrString::Number(1));
        let ServerResult::CallToolResult(result) = r.result else {
            panic!("not a CallToolResult: {:?}", r.result)
        };
        assert_eq!(result.content[0].as_text().unwrap().text, "hi");
        assert!(
            t.calls.lock().unwrap().is_empty(),
            "answered calls are forgotten"
        );

        // A result of another kind is read the general way.
        t.send(call(2)).await.unwrap();
        let Some(ServerJsonRpcMessage::Response(r)) = t.receive().await else {
            panic!("no answer to call 2")
        };
        assert!(
            matches!(r.result, ServerResult::InputRequiredResult(_)),
            "{:?}",
            r.result
        );

        // An answer that is not valid MCP fails its call at once, saying so.
        t.send(call(3)).await.unwrap();
        let got = t.receive().await;
        let Some(ServerJsonRpcMessage::Error(e)) = got else {
            panic!("no error for call 3: {got:?}")
        };
        assert_eq!(e.id, Some(NumberOrString::Number(3)));
        assert!(
            e.error
                .message
                .contains("upstream \"up\" answered with a message that is not valid MCP"),
            "{}",
            e.error.message
        );

        // A request of the server's that cannot be read is answered, and then the end.
        let last = t.receive().await;
        assert!(last.is_none(), "the child's stdout ended: {last:?}");
        let out = child.wait_with_output().await.unwrap();
        let reply: Value = serde_json::from_slice(&out.stderr).expect("the reply, as JSON");
        assert_eq!(reply["id"], 9, "{reply}");
        assert_eq!(reply["error"]["code"], -32600, "{reply}");
    }

    #[test]
    fn tools_list_results_are_kept_as_written() {
        let raw: super::super::RawTools = Default::default();
        let line = r#"{"jsonrpc":"2.0","id":3,"result":{"tools":[{"name":"a","inputSchema":{"type":"object"},"execution":{"taskSupport":"optional"},"annotations":{"category":"x"}}]}}"#;
        let three = RequestId::Number(3);
        capture_tools(line, Some(&three), &raw);
        let kept = raw.lock().unwrap();
        assert_eq!(kept["a"]["execution"]["taskSupport"], "optional");
        assert_eq!(kept["a"]["annotations"]["category"], "x");
        drop(kept);
        // Anything else is ignored.
        let four = RequestId::Number(4);
        capture_tools(
            r#"{"jsonrpc":"2.0","id":4,"result":{"content":[{"type":"text","text":"\"tools\""}]}}"#,
            Some(&four),
            &raw,
        );
        capture_tools("not json \"tools\"", Some(&four), &raw);
        assert_eq!(raw.lock().unwrap().len(), 1);
    }

    /// A refresh that timed out can still be answered later, after the next refresh has
    /// cleared the cache and sent its own request: that late answer is not the list.
    #[test]
    fn a_late_answer_to_an_earlier_list_is_not_kept() {
        let raw: super::super::RawTools = Default::default();
        let late = r#"{"jsonrpc":"2.0","id":7,"result":{"tools":[{"name":"a","description":"old","inputSchema":{"type":"object"}}]}}"#;
        let fresh = r#"{"jsonrpc":"2.0","id":8,"result":{"tools":[{"name":"a","description":"new","inputSchema":{"type":"object"}}]}}"#;
        let eight = RequestId::Number(8);
        capture_tools(late, Some(&eight), &raw);
        assert!(raw.lock().unwrap().is_empty(), "the late answer was kept");
        capture_tools(fresh, Some(&eight), &raw);
        assert_eq!(raw.lock().unwrap()["a"]["description"], "new");
        // No list asked for: nothing is kept.
        let other: super::super::RawTools = Default::default();
        capture_tools(fresh, None, &other);
        assert!(other.lock().unwrap().is_empty());
    }
}
