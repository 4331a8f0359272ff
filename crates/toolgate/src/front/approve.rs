//! Asks a session's user to confirm a destructive call, through MCP elicitation.

use crate::policy::approval::{Answer, Approver};
use futures::future::BoxFuture;
use rmcp::model::{
    ClientResult, ElicitRequestParams, ElicitationAction, ElicitationSchema, Request, ServerRequest,
};
use rmcp::service::{Peer, RoleServer};
use std::time::Duration;

/// How long a confirmation may stay open before the call is refused.
const APPROVAL_WAIT: Duration = Duration::from_secs(300);

/// Elicitation over the peer of the request being served: rmcp then sends the question on
/// that request's own stream (which Streamable HTTP needs).
pub struct ElicitApprover {
    pub peer: Peer<RoleServer>,
}

impl Approver for ElicitApprover {
    fn ask(&self, message: String) -> BoxFuture<'_, Answer> {
        Box::pin(async move {
            let capable = self
                .peer
                .peer_info()
                .is_some_and(|i| i.capabilities.elicitation.is_some());
            if !capable {
                return Answer::Unsupported;
            }
            // No fields: accepting the form is the confirmation.
            let params = ElicitRequestParams::FormElicitationParams {
                meta: None,
                message,
                requested_schema: ElicitationSchema::new(Default::default()),
            };
            let request = ServerRequest::ElicitRequest(Request::new(params));
            match tokio::time::timeout(APPROVAL_WAIT, self.peer.send_request(request)).await {
                Ok(Ok(ClientResult::ElicitResult(r))) => match r.action {
                    ElicitationAction::Accept => Answer::Accepted,
                    ElicitationAction::Decline => Answer::Declined,
                    _ => Answer::Cancelled,
                },
                Ok(Ok(_)) => Answer::Failed("the client answered something else".into()),
                Ok(Err(e)) => Answer::Failed(e.to_string()),
                Err(_) => Answer::Failed(format!("no answer within {} s", APPROVAL_WAIT.as_secs())),
            }
        })
    }
}
