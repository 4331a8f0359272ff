//! The front: what MCP clients talk to, over stdio or Streamable HTTP. This is the only
//! place that speaks rmcp as a server.
//!
//! Each client session gets a `Session` handler bound to one surface (guided, direct).
//! Failures the model can fix come back as tool results with `isError: true`; protocol
//! misuse is a JSON-RPC error (rmcp produces those for malformed input).

mod convert;
mod direct;
mod guided;
mod http;

pub use http::{router, serve_http};

use crate::config::Mode;
use crate::gateway::Gateway;
use crate::guided::Engine;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, InitializeRequestParams,
    InitializeResult, ListToolsResult, PaginatedRequestParams, ProtocolVersion, ServerCapabilities,
    ServerConfig,
};
use rmcp::service::{NotificationContext, RequestContext, RoleServer};
use rmcp::{ErrorData as McpError, ServerHandler, ServiceExt};
use std::borrow::Cow;
use std::sync::{Arc, OnceLock};
use tokio_util::sync::{CancellationToken, DropGuard};

/// The surface a session actually gets (`auto` is resolved when the session starts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Surface {
    Guided,
    Direct,
}

/// One client session's handler.
#[derive(Clone)]
pub struct Session {
    engine: Arc<Engine>,
    /// The configured mode; `auto` is resolved at initialize.
    mode: Mode,
    state: Arc<SessionState>,
}

/// Per-session state shared by the handler's clones.
struct SessionState {
    /// An unguessable id: pages, operations and selections belong to it.
    id: String,
    /// The surface, fixed at initialize (for `auto`, once the catalog is known).
    surface: OnceLock<Surface>,
    /// Cancelled when the last handler clone is dropped (the session ended), which stops
    /// the session's background tasks.
    closed: CancellationToken,
    _guard: DropGuard,
    /// Tools this session lists beside the meta-tools.
    guided: guided::GuidedState,
    /// To forget the session's pages and operations when it ends.
    engine: Arc<Engine>,
}

impl Drop for SessionState {
    fn drop(&mut self) {
        self.engine.end_session(&self.id);
    }
}

impl Session {
    pub fn new(engine: Arc<Engine>, mode: Mode) -> Self {
        let closed = CancellationToken::new();
        let surface = OnceLock::new();
        match mode {
            Mode::Guided => drop(surface.set(Surface::Guided)),
            Mode::Direct => drop(surface.set(Surface::Direct)),
            Mode::Auto => {}
        }
        Self {
            state: Arc::new(SessionState {
                id: crate::guided::random_hex(16),
                surface,
                _guard: closed.clone().drop_guard(),
                closed,
                guided: guided::GuidedState::default(),
                engine: engine.clone(),
            }),
            engine,
            mode,
        }
    }

    fn gw(&self) -> &Arc<Gateway> {
        &self.engine.gw
    }

    fn id(&self) -> &str {
        &self.state.id
    }

    /// The session's surface; `auto` before initialize counts as guided.
    pub fn surface(&self) -> Surface {
        self.state.surface.get().copied().unwrap_or(Surface::Guided)
    }

    /// `auto`: direct while the catalog's definitions cost less than the threshold.
    fn resolve_auto(&self) {
        if self.mode == Mode::Auto {
            let small =
                self.engine.direct_tokens() < self.gw().config.gateway.auto_threshold_tokens;
            let _ = self.state.surface.set(if small {
                Surface::Direct
            } else {
                Surface::Guided
            });
        }
    }
}

impl ServerHandler for Session {
    fn get_info(&self) -> ServerConfig {
        let mut info = ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        );
        info.server_info = Implementation::new("toolgate", env!("CARGO_PKG_VERSION"));
        if self.surface() == Surface::Guided {
            let mut text = crate::guided::surface::INSTRUCTIONS.to_string();
            if self.gw().config.code.enabled {
                text.push_str(crate::guided::surface::CODE_INSTRUCTIONS);
            }
            info.instructions = Some(text);
        }
        info
    }

    /// Sessions carry state (pages, operations), so toolgate speaks the session-based
    /// protocol revisions; newer clients negotiate down to 2025-11-25.
    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(ProtocolVersion::known_up_to(&ProtocolVersion::V_2025_11_25))
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, McpError> {
        context.peer.set_peer_info(request.clone());
        if self.mode == Mode::Auto {
            self.gw()
                .wait_settled(self.gw().config.gateway.startup_wait)
                .await;
            self.resolve_auto();
        }
        self.negotiate_initialize(&request)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        self.gw()
            .wait_settled(self.gw().config.gateway.startup_wait)
            .await;
        let tools = match self.surface() {
            Surface::Direct => direct::list(&self.gw().catalog()),
            Surface::Guided => guided::list(self),
        };
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        // A client may call a name it remembers before listing: let the catalog settle.
        self.gw()
            .wait_settled(self.gw().config.gateway.startup_wait)
            .await;
        let args = request.arguments.unwrap_or_default();
        let result = match self.surface() {
            Surface::Direct => direct::call(self.gw(), &request.name, args, &context).await,
            Surface::Guided => guided::call(self, &request.name, args, &context).await,
        };
        Ok(result.into())
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        // Pass catalog changes on as tools/list_changed while the session lives (the
        // guided surface does not change with the catalog).
        if self.surface() != Surface::Direct {
            return;
        }
        let mut rx = self.gw().subscribe();
        let closed = self.state.closed.clone();
        let peer = context.peer;
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = closed.cancelled() => return,
                    r = rx.changed() => if r.is_err() { return },
                }
                if peer.notify_tool_list_changed().await.is_err() {
                    return;
                }
            }
        });
    }
}

/// Serves one session over stdin/stdout until the client closes it.
pub async fn serve_stdio(gw: Arc<Gateway>, mode: Mode) -> anyhow::Result<()> {
    let service = Session::new(Engine::new(gw), mode)
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| anyhow::anyhow!("the client did not complete initialize: {e}"))?;
    service.waiting().await?;
    Ok(())
}
