//! `--conformance`: the fixture names and behaviours of the official MCP conformance suite
//! (`@modelcontextprotocol/conformance` server scenarios), plus two triggers toolgate's
//! own tests use to make the server send `resources/updated` and the list-changed notices.
// Logging and server-to-client requests are deprecated by SEP-2577 but are what the
// 2025-era scenarios check.
#![allow(deprecated)]

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientResult, CompleteRequestParams,
    CompleteResult, GetPromptRequestParams, GetPromptResponse, GetPromptResult, Implementation,
    ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult,
    LoggingLevel, LoggingMessageNotificationParam, PaginatedRequestParams,
    ProgressNotificationParam, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult,
    ResourceUpdatedNotificationParam, ServerCapabilities, ServerConfig, ServerRequest,
    SetLevelRequestParams, SubscribeRequestParams, UnsubscribeRequestParams,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{json, Value};

/// A 1x1 red PNG.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
/// A 44-byte WAV header with no samples: the smallest valid `audio/wav`.
const WAV: &str = "UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQAAAAA=";
/// The resource whose subscribers the `test_trigger_update` tool notifies.
pub const WATCHED: &str = "test://watched-resource";

/// The conformance fixture. Cloned per HTTP session; each clone is one session.
#[derive(Debug, Clone)]
pub struct ConformanceServer {
    /// `serverInfo.name`, so two instances behind one gateway can be told apart.
    name: String,
    /// URIs this session subscribed to: updates go only to subscribers.
    subscribed: Arc<Mutex<HashSet<String>>>,
    /// How many `test_cancellable` calls the client cancelled (`notifications/cancelled`).
    cancelled: Arc<std::sync::atomic::AtomicUsize>,
}

impl ConformanceServer {
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            subscribed: Arc::default(),
            cancelled: Arc::default(),
        }
    }
}

fn parse<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).expect("fixture JSON matches the MCP schema")
}

fn text(s: impl Into<String>) -> CallToolResult {
    parse(json!({"content": [{"type": "text", "text": s.into()}]}))
}

fn tools() -> Value {
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
    ];
    let mut out: Vec<Value> = simple
        .iter()
        .map(|(n, d)| json!({"name": n, "description": d, "inputSchema": none}))
        .collect();
    out.push(json!({"name": "test_sampling", "description": "Asks the client to sample an LLM", "inputSchema": string_arg("prompt", "The prompt to send to the LLM")}));
    out.push(json!({"name": "test_elicitation", "description": "Asks the user for a username and email", "inputSchema": string_arg("message", "The message to show the user")}));
    out.push(json!({"name": "json_schema_2020_12_tool", "description": "Tool with JSON Schema 2020-12 features", "inputSchema": {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {"address": {"type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
        "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
        "additionalProperties": false
    }}));
    Value::Array(out)
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

/// Sends a server-to-client request and returns the client's answer as JSON.
async fn ask(
    context: &RequestContext<RoleServer>,
    method: &str,
    params: Value,
) -> Result<Value, String> {
    let request: ServerRequest =
        serde_json::from_value(json!({"method": method, "params": params}))
            .map_err(|e| e.to_string())?;
    match context.peer.send_request(request).await {
        Ok(ClientResult::EmptyResult(_)) => Ok(json!({})),
        Ok(r) => serde_json::to_value(r).map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    }
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
    async fn call(
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
            "test_sampling" => {
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
            "json_schema_2020_12_tool" => text(format!(
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
            "test_cancelled_count" => text(
                self.cancelled
                    .load(std::sync::atomic::Ordering::SeqCst)
                    .to_string(),
            ),
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

fn resource_contents(uri: &str) -> Option<Value> {
    let one = |v: Value| Some(json!({"contents": [v]}));
    match uri {
        "test://static-text" => one(
            json!({"uri": uri, "mimeType": "text/plain", "text": "This is the content of the static text resource."}),
        ),
        "test://static-binary" => one(json!({"uri": uri, "mimeType": "image/png", "blob": PNG})),
        WATCHED => {
            one(json!({"uri": uri, "mimeType": "text/plain", "text": "Watched resource content."}))
        }
        _ => {
            let id = uri
                .strip_prefix("test://template/")?
                .strip_suffix("/data")?;
            let body =
                json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")});
            one(json!({"uri": uri, "mimeType": "application/json", "text": body.to_string()}))
        }
    }
}

impl ServerHandler for ConformanceServer {
    fn get_info(&self) -> ServerConfig {
        let caps: ServerCapabilities = parse(json!({
            "logging": {}, "completions": {},
            "tools": {"listChanged": true},
            "resources": {"subscribe": true, "listChanged": true},
            "prompts": {"listChanged": true}
        }));
        ServerConfig::new(caps)
            .with_server_info(Implementation::new(&self.name, env!("CARGO_PKG_VERSION")))
    }

    async fn list_tools(
        &self,
        _r: Option<PaginatedRequestParams>,
        _c: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(parse(json!({"tools": tools()})))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.call(request, context).await.map(Into::into)
    }

    async fn set_level(
        &self,
        _r: SetLevelRequestParams,
        _c: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        Ok(())
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        _c: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let prefix = request.argument.value.clone();
        let values: Vec<&str> = ["paris", "park", "party", "test", "testing"]
            .into_iter()
            .filter(|v| v.starts_with(&prefix))
            .collect();
        Ok(parse(
            json!({"completion": {"values": values, "total": values.len(), "hasMore": false}}),
        ))
    }

    async fn list_resources(
        &self,
        _r: Option<PaginatedRequestParams>,
        _c: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        Ok(parse(json!({"resources": [
            {"uri": "test://static-text", "name": "static-text", "description": "A static text resource", "mimeType": "text/plain"},
            {"uri": "test://static-binary", "name": "static-binary", "description": "A static binary resource (PNG)", "mimeType": "image/png"},
            {"uri": WATCHED, "name": "watched-resource", "description": "A resource for subscription tests", "mimeType": "text/plain"}
        ]})))
    }

    async fn list_resource_templates(
        &self,
        _r: Option<PaginatedRequestParams>,
        _c: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(parse(json!({"resourceTemplates": [
            {"uriTemplate": "test://template/{id}/data", "name": "template-data", "description": "Data for an id", "mimeType": "application/json"}
        ]})))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _c: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        match resource_contents(&request.uri) {
            Some(v) => Ok(parse::<ReadResourceResult>(v).into()),
            None => Err(ErrorData::resource_not_found(
                format!("no resource {}", request.uri),
                None,
            )),
        }
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        _c: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.subscribed
            .lock()
            .expect("subscriptions")
            .insert(request.uri);
        Ok(())
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _c: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.subscribed
            .lock()
            .expect("subscriptions")
            .remove(&request.uri);
        Ok(())
    }

    async fn list_prompts(
        &self,
        _r: Option<PaginatedRequestParams>,
        _c: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        Ok(parse(json!({"prompts": [
            {"name": "test_simple_prompt", "description": "A simple prompt without arguments"},
            {"name": "test_prompt_with_arguments", "description": "A prompt with two arguments", "arguments": [
                {"name": "arg1", "description": "First test argument", "required": true},
                {"name": "arg2", "description": "Second test argument", "required": true}]},
            {"name": "test_prompt_with_embedded_resource", "description": "A prompt embedding a resource", "arguments": [
                {"name": "resourceUri", "description": "URI of the resource to embed", "required": true}]},
            {"name": "test_prompt_with_image", "description": "A prompt with an image"}
        ]})))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _c: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        let a = |k: &str| {
            args.get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let user = |content: Value| json!({"role": "user", "content": content});
        let messages = match request.name.as_str() {
            "test_simple_prompt" => vec![user(
                json!({"type": "text", "text": "This is a simple prompt for testing."}),
            )],
            "test_prompt_with_arguments" => vec![user(
                json!({"type": "text", "text": format!("Prompt with arguments: arg1='{}', arg2='{}'", a("arg1"), a("arg2"))}),
            )],
            "test_prompt_with_embedded_resource" => vec![
                user(
                    json!({"type": "resource", "resource": {"uri": a("resourceUri"), "mimeType": "text/plain", "text": "Embedded resource content for testing."}}),
                ),
                user(
                    json!({"type": "text", "text": "Please process the embedded resource above."}),
                ),
            ],
            "test_prompt_with_image" => vec![
                user(json!({"type": "image", "data": PNG, "mimeType": "image/png"})),
                user(json!({"type": "text", "text": "Please analyze the image above."})),
            ],
            other => {
                return Err(ErrorData::invalid_params(
                    format!("unknown prompt {other:?}"),
                    None,
                ))
            }
        };
        Ok(parse::<GetPromptResult>(json!({"messages": messages})).into())
    }
}

/// Serves the conformance fixture over stdio, or Streamable HTTP at `http://ADDR/mcp`
/// (printing `listening http://IP:PORT/mcp` as the only stdout line), until `shutdown`.
pub async fn serve(
    name: String,
    http: Option<std::net::SocketAddr>,
    shutdown: tokio_util::sync::CancellationToken,
) -> anyhow::Result<()> {
    use rmcp::ServiceExt;
    let Some(addr) = http else {
        let (stdin, stdout) = rmcp::transport::stdio_pipes();
        let running = ConformanceServer::new(name).serve((stdin, stdout)).await?;
        tokio::select! {
            r = running.waiting() => { r?; }
            _ = shutdown.cancelled() => {}
        }
        return Ok(());
    };
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
    use tokio::io::AsyncWriteExt;
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    let service = StreamableHttpService::new(
        move || Ok(ConformanceServer::new(name.clone())),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default().with_cancellation_token(shutdown.child_token()),
    );
    let router = axum::Router::new().nest_service("/mcp", service);
    let mut stdout = tokio::io::stdout();
    stdout
        .write_all(format!("listening http://{local}/mcp\n").as_bytes())
        .await?;
    stdout.flush().await?;
    axum::serve(listener, router)
        .with_graceful_shutdown(shutdown.cancelled_owned())
        .await?;
    Ok(())
}
