//! The conformance fixture's tools: the suite's `test_*` names and toolgate's triggers.
// Logging and server-to-client requests are deprecated by SEP-2577 but are what the
// 2025-era scenarios check.
#![expect(
    deprecated,
    reason = "SEP-2577 deprecates logging, sampling and roots; peers still send them"
)]

use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResult, LoggingLevel, LoggingMessageNotificationParam,
    ProgressNotificationParam, ResourceUpdatedNotificationParam,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::{json, Value};

use super::{ask, parse, text, ConformanceServer, PNG, WATCHED, WAV};

/// The `json-schema-2020-12` scenario's tool, whose schema must reach the client unchanged.
pub(super) const JSON_SCHEMA_TOOL: &str = "json_schema_2020_12_tool";
/// A tool with `x-mcp-header` markings, for `http-custom-header-server-validation`
/// (SEP-2243): a client mirrors those arguments into `Mcp-Param-*` headers, and a server
/// (the fixture over HTTP, the gateway) refuses a call whose headers disagree with them.
pub(super) const CUSTOM_HEADERS_TOOL: &str = "test_custom_headers";

/// The scenario's schema, as the suite writes it: `$schema`, `$defs` with an `$anchor`, a
/// `$ref`, `allOf`/`anyOf`, `if`/`then`/`else` and `additionalProperties: false`.
fn json_schema_2020_12() -> Value {
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {"address": {"$anchor": "addressDef", "type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
        "properties": {
            "name": {"type": "string"},
            "address": {"$ref": "#/$defs/address"},
            "contactMethod": {"type": "string", "enum": ["phone", "email"]},
            "phone": {"type": "string"},
            "email": {"type": "string"}
        },
        "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
        "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
        "then": {"required": ["phone"]},
        "else": {"required": ["email"]},
        "additionalProperties": false
    })
}

pub(super) fn tools(toggled: bool) -> Value {
    let none = json!({"type": "object", "properties": {}});
    let string_arg = |name: &str, what: &str| json!({"type": "object", "properties": {name: {"type": "string", "description": what}}, "required": [name]});
    let simple = [
        ("test_simple_text", "Returns a simple text block"),
        ("test_image_content", "Returns a PNG image block"),
        ("test_audio_content", "Returns a WAV audio block"),
        (
            "test_embedded_resource",
            "Returns an embedded text resource",
        ),
        (
            "test_multiple_content_types",
            "Returns text, image and resource blocks",
        ),
        (
            "test_tool_with_logging",
            "Sends three info log messages while it runs",
        ),
        ("test_error_handling", "Always answers isError: true"),
        (
            "test_tool_with_progress",
            "Reports progress 0, 50, 100 of 100",
        ),
        (
            "test_elicitation_sep1034_defaults",
            "Elicits a form whose fields have defaults",
        ),
        (
            "test_elicitation_sep1330_enums",
            "Elicits a form with every enum variant",
        ),
        ("test_reconnection", "Answers after a short pause"),
        (
            "test_trigger_update",
            "Sends resources/updated for test://watched-resource to subscribers",
        ),
        (
            "test_trigger_list_changed",
            "Sends resources/list_changed and prompts/list_changed",
        ),
        (
            "test_cancellable",
            "Waits up to 30 s for the client to cancel it",
        ),
        (
            "test_cancelled_count",
            "How many test_cancellable calls were cancelled",
        ),
        (
            "test_logging_tool",
            "Sends one info log message (only to a request that set a log level)",
        ),
        (
            "test_trigger_tool_change",
            "Adds or removes the tool test_toggled_tool, and says so (tools/list_changed)",
        ),
        ("test_trigger_prompt_change", "Sends prompts/list_changed"),
    ];
    let mut out: Vec<Value> = simple
        .iter()
        .map(|(n, d)| json!({"name": n, "description": d, "inputSchema": none}))
        .collect();
    out.push(json!({"name": "test_sampling", "description": "Asks the client to sample an LLM", "inputSchema": string_arg("prompt", "The prompt to send to the LLM")}));
    out.push(json!({"name": "test_elicitation", "description": "Asks the user for a username and email", "inputSchema": string_arg("message", "The message to show the user")}));
    out.push(json!({"name": "test_missing_capability", "description": "Needs the client's sampling capability (asks the client to sample)", "inputSchema": {"type": "object"}}));
    out.push(json!({"name": JSON_SCHEMA_TOOL, "description": "Tool with JSON Schema 2020-12 features", "inputSchema": json_schema_2020_12()}));
    out.push(json!({"name": CUSTOM_HEADERS_TOOL, "description": "Echoes its arguments; region and priority travel as the Mcp-Param-Region and Mcp-Param-Priority headers too (SEP-2243)", "inputSchema": {
        "type": "object",
        "properties": {
            "region": {"type": "string", "description": "Where to run", "x-mcp-header": "Region"},
            "priority": {"type": "integer", "description": "How urgent", "x-mcp-header": "Priority"},
            "note": {"type": "string", "description": "Free text (body only)"}
        },
        "required": ["region"]
    }}));
    out.extend(super::mrtr::tools());
    out.extend(task_tools());
    if toggled {
        out.push(json!({"name": "test_toggled_tool", "description": "Listed after test_trigger_tool_change", "inputSchema": none}));
    }
    Value::Array(out)
}

/// The tools the suite's `tasks-*` scenarios call (SEP-2663). They run like any tool: the
/// gateway decides which calls become tasks (those still running after a moment), so these
/// need only take their time: `slow_compute` sleeps (cancellable), `failing_job` fails as a
/// tool after about a second, `protocol_error_job` fails as a protocol error after as long.
fn task_tools() -> Vec<Value> {
    let name =
        json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]});
    let seconds = json!({"type": "object", "properties": {
        "seconds": {"type": "number", "minimum": 0, "description": "How long to work"},
        "label": {"type": "string", "description": "Echoed in the result"}
    }});
    let none = json!({"type": "object"});
    vec![
        json!({"name": "greet", "description": "Answers Hello, {name}! at once", "inputSchema": name}),
        json!({"name": "slow_compute", "description": "Works for `seconds` seconds, then answers; cancellable", "inputSchema": seconds}),
        json!({"name": "failing_job", "description": "Fails as a tool (isError) after about a second", "inputSchema": none}),
        json!({"name": "protocol_error_job", "description": "Fails with a JSON-RPC error after about a second", "inputSchema": none}),
    ]
}

fn arg(request: &CallToolRequestParams, key: &str) -> String {
    request
        .arguments
        .as_ref()
        .and_then(|a| a.get(key))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn elicit_result(r: Result<Value, String>) -> CallToolResult {
    match r {
        Ok(v) => text(format!(
            "Elicitation completed: action={}, content={}",
            v.get("action").and_then(Value::as_str).unwrap_or("?"),
            v.get("content").cloned().unwrap_or(Value::Null)
        )),
        Err(e) => parse(
            json!({"isError": true, "content": [{"type": "text", "text": format!("elicitation failed: {e}")}]}),
        ),
    }
}

impl ConformanceServer {
    pub(super) async fn call(
        &self,
        request: CallToolRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let peer = &cx.peer;
        Ok(match request.name.as_ref() {
            "test_simple_text" => text("This is a simple text response for testing."),
            "test_image_content" => {
                parse(json!({"content": [{"type": "image", "data": PNG, "mimeType": "image/png"}]}))
            }
            "test_audio_content" => {
                parse(json!({"content": [{"type": "audio", "data": WAV, "mimeType": "audio/wav"}]}))
            }
            "test_embedded_resource" => {
                parse(json!({"content": [{"type": "resource", "resource": {
                "uri": "test://embedded-resource", "mimeType": "text/plain", "text": "This is an embedded resource content."}}]}))
            }
            "test_multiple_content_types" => parse(json!({"content": [
                {"type": "text", "text": "Multiple content types test:"},
                {"type": "image", "data": PNG, "mimeType": "image/png"},
                {"type": "resource", "resource": {"uri": "test://mixed-content-resource", "mimeType": "application/json", "text": "{\"test\":\"data\",\"value\":123}"}}]})),
            "test_tool_with_logging" => {
                for (i, msg) in [
                    "Tool execution started",
                    "Tool processing data",
                    "Tool execution completed",
                ]
                .iter()
                .enumerate()
                {
                    if i > 0 {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    let mut p =
                        LoggingMessageNotificationParam::new(LoggingLevel::Info, json!(msg));
                    p.logger = Some(self.name.clone());
                    let _ = peer.notify_logging_message(p).await;
                }
                text("Tool with logging executed successfully")
            }
            "test_error_handling" => parse(
                json!({"isError": true, "content": [{"type": "text", "text": "This tool intentionally returns an error for testing"}]}),
            ),
            "test_tool_with_progress" => {
                let token = cx.meta.get_progress_token();
                for (i, step) in [0.0, 50.0, 100.0].into_iter().enumerate() {
                    if i > 0 {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    if let Some(t) = &token {
                        let mut p = ProgressNotificationParam::new(t.clone(), step);
                        p.total = Some(100.0);
                        let _ = peer.notify_progress(p).await;
                    }
                }
                text("Tool with progress executed successfully")
            }
            "test_sampling" | "test_missing_capability" => {
                // `_delay_ms` (not in the schema, as the other fixture's knobs): wait this
                // long before asking, so a test can have other calls start meanwhile.
                let delay = (request.arguments.as_ref())
                    .and_then(|a| a.get("_delay_ms"))
                    .and_then(Value::as_u64);
                if let Some(ms) = delay {
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                }
                let params = json!({"messages": [{"role": "user", "content": {"type": "text", "text": arg(&request, "prompt")}}], "maxTokens": 100});
                match ask(&cx, "sampling/createMessage", params).await {
                    Ok(v) => text(format!(
                        "LLM response: {}",
                        v.pointer("/content/text")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                    )),
                    Err(e) => parse(
                        json!({"isError": true, "content": [{"type": "text", "text": format!("sampling failed: {e}")}]}),
                    ),
                }
            }
            "test_elicitation" => {
                let params = json!({"message": arg(&request, "message"), "requestedSchema": {"type": "object", "properties": {
                    "username": {"type": "string", "description": "User's response"},
                    "email": {"type": "string", "description": "User's email address"}}, "required": ["username", "email"]}});
                elicit_result(ask(&cx, "elicitation/create", params).await)
            }
            "test_elicitation_sep1034_defaults" => {
                let params = json!({"message": "Please review your information", "requestedSchema": {"type": "object", "properties": {
                    "name": {"type": "string", "default": "John Doe"},
                    "age": {"type": "integer", "default": 30},
                    "score": {"type": "number", "default": 95.5},
                    "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
                    "verified": {"type": "boolean", "default": true}}}});
                elicit_result(ask(&cx, "elicitation/create", params).await)
            }
            "test_elicitation_sep1330_enums" => {
                let params = json!({"message": "Please choose", "requestedSchema": {"type": "object", "properties": {
                    "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
                    "titledSingle": {"type": "string", "oneOf": [{"const": "value1", "title": "First Option"}, {"const": "value2", "title": "Second Option"}, {"const": "value3", "title": "Third Option"}]},
                    "legacyEnum": {"type": "string", "enum": ["opt1", "opt2", "opt3"], "enumNames": ["Option One", "Option Two", "Option Three"]},
                    "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
                    "titledMulti": {"type": "array", "items": {"anyOf": [{"const": "value1", "title": "First Choice"}, {"const": "value2", "title": "Second Choice"}, {"const": "value3", "title": "Third Choice"}]}}}}});
                elicit_result(ask(&cx, "elicitation/create", params).await)
            }
            "test_reconnection" => {
                tokio::time::sleep(Duration::from_millis(100)).await;
                text("Reconnection test completed")
            }
            JSON_SCHEMA_TOOL | CUSTOM_HEADERS_TOOL => text(format!(
                "received {}",
                Value::Object(request.arguments.clone().unwrap_or_default())
            )),
            "test_trigger_update" => {
                let subscribed = self
                    .subscribed
                    .lock()
                    .expect("subscriptions")
                    .contains(WATCHED);
                if subscribed {
                    let _ = peer
                        .notify_resource_updated(ResourceUpdatedNotificationParam::new(WATCHED))
                        .await;
                }
                text(format!("subscribed={subscribed}"))
            }
            "test_cancellable" => {
                tokio::select! {
                    _ = cx.ct.cancelled() => {
                        self.cancelled.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        text("cancelled")
                    }
                    _ = tokio::time::sleep(Duration::from_secs(30)) => text("not cancelled"),
                }
            }
            "greet" => text(format!("Hello, {}!", arg(&request, "name"))),
            "slow_compute" => {
                let args = request.arguments.clone().unwrap_or_default();
                let secs = args.get("seconds").and_then(Value::as_f64).unwrap_or(1.0);
                let label = args.get("label").and_then(Value::as_str).unwrap_or("");
                tokio::select! {
                    _ = cx.ct.cancelled() => text(format!("slow_compute {label} cancelled")),
                    _ = tokio::time::sleep(Duration::from_secs_f64(secs.clamp(0.0, 600.0))) => {
                        text(format!("slow_compute {label} done after {secs} s"))
                    }
                }
            }
            "failing_job" => {
                tokio::time::sleep(Duration::from_secs(1)).await;
                parse(
                    json!({"isError": true, "content": [{"type": "text", "text": "failing_job failed, as it always does"}]}),
                )
            }
            "protocol_error_job" => {
                tokio::time::sleep(Duration::from_secs(1)).await;
                return Err(ErrorData::internal_error(
                    "protocol_error_job: a protocol-level failure, as it always does",
                    None,
                ));
            }
            "test_cancelled_count" => text(
                self.cancelled
                    .load(std::sync::atomic::Ordering::SeqCst)
                    .to_string(),
            ),
            "test_logging_tool" | "test_toggled_tool" => {
                let mut p = LoggingMessageNotificationParam::new(
                    LoggingLevel::Info,
                    json!("test_logging_tool ran"),
                );
                p.logger = Some(self.name.clone());
                let _ = peer.notify_logging_message(p).await;
                text("Logged one message")
            }
            "test_trigger_tool_change" => {
                let was = self
                    .toggled
                    .fetch_xor(true, std::sync::atomic::Ordering::SeqCst);
                let _ = peer.notify_tool_list_changed().await;
                text(format!("test_toggled_tool listed: {}", !was))
            }
            "test_trigger_prompt_change" => {
                let _ = peer.notify_prompt_list_changed().await;
                text("prompts/list_changed sent")
            }
            "test_trigger_list_changed" => {
                let _ = peer.notify_resource_list_changed().await;
                let _ = peer.notify_prompt_list_changed().await;
                text("list_changed sent")
            }
            other => {
                return Err(ErrorData::invalid_params(
                    format!("unknown tool {other:?}"),
                    None,
                ))
            }
        })
    }
}
