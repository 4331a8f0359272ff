//! Asks the user to confirm a destructive call: through MCP elicitation for clients of the
//! older revisions, by an `input_required` answer and the client's retry (MRTR) for
//! 2026-07-28 clients.

use crate::policy::approval::{Answer, Approver, Question};
use crate::policy::Policy;
use futures::future::BoxFuture;
use rmcp::model::{
    CallToolRequestParams, ClientResult, ElicitRequestParams, ElicitResult, ElicitationAction,
    ElicitationSchema, InputRequest, InputRequests, InputRequiredResult, Request, ServerRequest,
};
use rmcp::service::{Peer, RoleServer};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use toolgate_core::principal::Principal;

/// How long a confirmation may stay open before the call is refused.
const APPROVAL_WAIT: Duration = Duration::from_secs(300);

/// Elicitation over the peer of the request being served: rmcp then sends the question on
/// that request's own stream (which Streamable HTTP needs).
pub(super) struct ElicitApprover {
    pub peer: Peer<RoleServer>,
}

impl Approver for ElicitApprover {
    fn ask(&self, question: Question) -> BoxFuture<'_, Answer> {
        Box::pin(async move {
            // Asked and answered within this call: the arguments shown are the ones run.
            let message = question.text;
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

/// Approval the 2026-07-28 way (MRTR): that revision has no requests from server to client,
/// so the first round answers `input_required` with the question, and the client's retry
/// of the same call brings the user's answer and the `requestState` it was given. The
/// state is good for one retry of the same call (the same tool and arguments) by the
/// same principal, so one approval runs the call once; another principal's retry is
/// refused before anything runs (`inputs::request_for`) and leaves the state to its owner.
pub(super) struct MrtrApprover {
    policy: Arc<Policy>,
    owner: Principal,
    /// The client declared elicitation (in the request's `_meta`): it can show the question.
    capable: bool,
    /// On a retry: its `requestState`, and the answer found in its `inputResponses`.
    retry: Option<(String, Answer)>,
    /// Set when this round asked: the `requestState` handed out and the question.
    asked: Mutex<Option<(String, String)>>,
}

/// The key of the approval question in `inputRequests` / `inputResponses`.
pub(super) const APPROVAL_INPUT: &str = "approval";

impl MrtrApprover {
    pub(super) fn new(
        policy: Arc<Policy>,
        owner: Principal,
        capable: bool,
        request: &CallToolRequestParams,
    ) -> Self {
        let retry = request.request_state.as_ref().map(|state| {
            let answer = request
                .input_responses
                .as_ref()
                .and_then(|r| r.get(APPROVAL_INPUT))
                .map(
                    |v| match serde_json::from_value::<ElicitResult>(v.clone()) {
                        Ok(r) if r.action == ElicitationAction::Accept => Answer::Accepted,
                        Ok(r) if r.action == ElicitationAction::Decline => Answer::Declined,
                        Ok(_) => Answer::Cancelled,
                        Err(e) => Answer::Failed(format!(
                            "inputResponses.{APPROVAL_INPUT} is not an elicitation result: {e}"
                        )),
                    },
                )
                .unwrap_or_else(|| {
                    Answer::Failed(format!(
                        "the retry carries no inputResponses.{APPROVAL_INPUT}"
                    ))
                });
            (state.clone(), answer)
        });
        Self {
            policy,
            owner,
            capable,
            retry,
            asked: Mutex::new(None),
        }
    }

    /// The `input_required` answer, when this round asked for approval.
    pub(super) fn input_required(&self) -> Option<InputRequiredResult> {
        let (state, question) = self.asked.lock().expect("asked").take()?;
        let params = ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: question,
            requested_schema: ElicitationSchema::new(Default::default()),
        };
        let mut requests = InputRequests::new();
        requests.insert(
            APPROVAL_INPUT.to_string(),
            InputRequest::Elicitation(Request::new(params)),
        );
        Some(InputRequiredResult::new(Some(requests), Some(state)))
    }
}

impl Approver for MrtrApprover {
    fn ask(&self, question: Question) -> BoxFuture<'_, Answer> {
        Box::pin(async move {
            if !self.capable {
                return Answer::Unsupported;
            }
            // The state binds the tool and the exact arguments (their digest), not the
            // text shown, which folds long values.
            match &self.retry {
                Some((state, answer)) => {
                    match self
                        .policy
                        .approvals
                        .take(&self.owner, state, &question.binding)
                    {
                        Ok(()) => answer.clone(),
                        Err(e) => Answer::Failed(e.to_string()),
                    }
                }
                None => {
                    let state = self.policy.approvals.ask(&self.owner, &question.binding);
                    *self.asked.lock().expect("asked") = Some((state, question.text));
                    Answer::InputRequired
                }
            }
        })
    }
}
