//! `--conformance`: the fixture names and behaviours of the official MCP conformance suite
//! (`@modelcontextprotocol/conformance` server scenarios), plus tools toolgate's own tests
//! use: `test_trigger_update` (`resources/updated` to subscribers), `test_trigger_list_changed`,
//! and `test_cancellable` / `test_cancelled_count` (did `notifications/cancelled` arrive);
//! `test_custom_headers` has `x-mcp-header` markings, checked against a call's
//! `Mcp-Param-*` headers over HTTP (`get_tool`).
//! The MRTR fixtures (SEP-2322) are in `mrtr.rs`.
// Logging and server-to-client requests are deprecated by SEP-2577 but are what the
// 2025-era scenarios check.
#![expect(
    deprecated,
    reason = "SEP-2577 deprecates logging, sampling and roots; peers still send them"
)]

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, CompleteRequestParams,
    CompleteResult, GetPromptRequestParams, GetPromptResponse, GetPromptResult, GetTaskParams,
    GetTaskResult, Implementation, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, ProtocolVersion,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, ServerCapabilities,
    ServerConfig, SetLevelRequestParams, SubscribeRequestParams, Tool, UnsubscribeRequestParams,
    UpdateTaskParams,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{json, Value};

mod mrtr;
mod tasks;
mod tools;
use tools::tools;

/// A 1x1 red PNG.
pub(super) const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
/// A 44-byte WAV header with no samples: the smallest valid `audio/wav`.
pub(super) const WAV: &str = "UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQAAAAA=";
/// The resource whose subscribers the `test_trigger_update` tool notifies.
pub const WATCHED: &str = "test://watched-resource";

/// The conformance fixture. Cloned per HTTP session; each clone is one session.
#[derive(Debug, Clone)]
pub struct ConformanceServer {
    /// `serverInfo.name`, so two instances behind one gateway can be told apart.
    name: String,
    /// URIs this session subscribed to: updates go only to subscribers.
    subscribed: Arc<Mutex<HashSet<String>>>,
    /// How many `test_cancellable` calls the client cancelled (`notifications/cancelled`),
    /// and tasks it cancelled (`tasks/cancel`).
    cancelled: Arc<std::sync::atomic::AtomicUsize>,
    /// The newest revision to negotiate (`--max-protocol`), to play an old server.
    max_protocol: Option<ProtocolVersion>,
    /// Speak only 2026-07-28 (`--modern-only`): `initialize` is refused.
    modern_only: bool,
    /// `test_toggled_tool` is listed (flipped by `test_trigger_tool_change`); shared by
    /// every session of the process, as a server's tool list is.
    toggled: Arc<std::sync::atomic::AtomicBool>,
    /// The tasks this process made (2026-07-28 requests that declared the extension).
    tasks: Arc<tasks::Tasks>,
}

impl ConformanceServer {
    /// A server named `name` (its `serverInfo.name`) speaking both eras, with no
    /// subscriptions, tasks or toggled tool yet.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            subscribed: Arc::default(),
            cancelled: Arc::default(),
            max_protocol: None,
            modern_only: false,
            toggled: Arc::default(),
            tasks: Arc::default(),
        }
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
    fn supported_protocol_versions(&self) -> std::borrow::Cow<'static, [ProtocolVersion]> {
        if self.modern_only {
            return std::borrow::Cow::Owned(vec![ProtocolVersion::V_2026_07_28]);
        }
        std::borrow::Cow::Borrowed(match &self.max_protocol {
            Some(max) => ProtocolVersion::known_up_to(max),
            None => ProtocolVersion::KNOWN_VERSIONS,
        })
    }

    fn get_info(&self) -> ServerConfig {
        let caps: ServerCapabilities = parse(json!({
            "logging": {}, "completions": {},
            "tools": {"listChanged": true},
            "resources": {"subscribe": true, "listChanged": true},
            "prompts": {"listChanged": true},
            "extensions": {(rmcp::model::TASKS_EXTENSION_ID): {}}
        }));
        ServerConfig::new(caps)
            .with_server_info(Implementation::new(&self.name, env!("CARGO_PKG_VERSION")))
    }

    async fn list_tools(
        &self,
        _r: Option<PaginatedRequestParams>,
        _c: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let toggled = self.toggled.load(std::sync::atomic::Ordering::SeqCst);
        Ok(parse(json!({"tools": tools(toggled)})))
    }

    /// A listed tool's definition: over HTTP, rmcp checks a 2026-07-28 call's `Mcp-Param-*`
    /// headers against the `x-mcp-header` markings of its schema (`test_custom_headers`),
    /// answering 400 with -32020 when they disagree.
    fn get_tool(&self, name: &str) -> Option<Tool> {
        let toggled = self.toggled.load(std::sync::atomic::Ordering::SeqCst);
        let Value::Array(tools) = tools(toggled) else {
            return None;
        };
        let tool = tools.into_iter().find(|t| t["name"] == name)?;
        serde_json::from_value(tool).ok()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if let Some(answer) = self.tasks.call(self, &request, &context).await {
            return answer;
        }
        if let Some(answer) = mrtr::call(&request, &context).await {
            return answer;
        }
        self.call(request, context).await.map(Into::into)
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _c: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        self.tasks.get(&request.task_id)
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        _c: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.tasks.update(&request.task_id, request.input_responses)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _c: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.tasks.cancel(&request.task_id)?;
        // Counted with the cancelled calls: the tests see their upstream's task cancelled.
        self.cancelled
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(())
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
            {"name": "test_prompt_with_image", "description": "A prompt with an image"},
            mrtr::prompt_entry()
        ]})))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        if request.name == mrtr::PROMPT {
            return mrtr::prompt(&request, &context).await;
        }
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
    max_protocol: Option<String>,
    modern_only: bool,
    http: Option<std::net::SocketAddr>,
    shutdown: tokio_util::sync::CancellationToken,
) -> anyhow::Result<()> {
    use rmcp::ServiceExt;
    let max_protocol: Option<ProtocolVersion> = match max_protocol {
        Some(v) => Some(serde_json::from_value(json!(v))?),
        None => None,
    };
    let server = ConformanceServer {
        max_protocol,
        modern_only,
        ..ConformanceServer::new(name)
    };
    let Some(addr) = http else {
        let (stdin, stdout) = rmcp::transport::stdio_pipes();
        let running = server.serve((stdin, stdout)).await?;
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
        // Each session its own subscriptions and counters, the same protocol ceiling.
        move || {
            Ok(ConformanceServer {
                max_protocol: server.max_protocol.clone(),
                modern_only: server.modern_only,
                toggled: server.toggled.clone(),
                // Tasks outlive the request (2026-07-28 has no session) that made them.
                tasks: server.tasks.clone(),
                ..ConformanceServer::new(server.name.clone())
            })
        },
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

/// A fixture value read as an MCP type (the fixture's own JSON always matches).
pub(super) fn parse<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).expect("fixture JSON matches the MCP schema")
}

pub(super) fn text(s: impl Into<String>) -> rmcp::model::CallToolResult {
    parse(json!({"content": [{"type": "text", "text": s.into()}]}))
}

/// Sends a server-to-client request and returns the client's answer as JSON.
pub(super) async fn ask(
    context: &RequestContext<RoleServer>,
    method: &str,
    params: Value,
) -> Result<Value, String> {
    let request: rmcp::model::ServerRequest =
        serde_json::from_value(json!({"method": method, "params": params}))
            .map_err(|e| e.to_string())?;
    match context.peer.send_request(request).await {
        Ok(rmcp::model::ClientResult::EmptyResult(_)) => Ok(json!({})),
        Ok(r) => serde_json::to_value(r).map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    }
}
