//! HTTP authentication: an axum middleware in front of every MCP endpoint. A bad, missing
//! or revoked key gets 401 here, before rmcp (and so any upstream) sees the request; a good
//! one is resolved to its [`Grant`], inserted as a request extension. rmcp moves the
//! request's `http::request::Parts` into each MCP request's `RequestContext.extensions`,
//! where the session handler finds the grant (`Session::caller`). With no keys configured,
//! every request passes as the open identity (HTTP is loopback-only unless configured).

use crate::policy::{Grant, Policy};
use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

pub(super) async fn require_key(
    State(policy): State<Arc<Policy>>,
    mut request: Request,
    next: Next,
) -> Response {
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    match policy.authenticate(presented) {
        Ok(grant) => {
            super::conn::Authenticated::mark(request.extensions());
            request.extensions_mut().insert::<Arc<Grant>>(grant);
            next.run(request).await
        }
        Err(rejection) => {
            policy.audit_rejected_key(&rejection, request.uri().path());
            let body =
                serde_json::json!({"error": "unauthorized", "message": rejection.to_string()});
            (
                StatusCode::UNAUTHORIZED,
                [(header::WWW_AUTHENTICATE, "Bearer")],
                axum::Json(body),
            )
                .into_response()
        }
    }
}

/// The grant an HTTP request was authenticated as (set by [`require_key`]).
pub(super) fn grant_of(extensions: &rmcp::model::Extensions) -> Option<Arc<Grant>> {
    extensions
        .get::<http::request::Parts>()
        .and_then(|p| p.extensions.get::<Arc<Grant>>())
        .cloned()
}
