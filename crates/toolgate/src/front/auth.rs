//! HTTP authentication: an axum middleware in front of every MCP endpoint. A bad, missing
//! or revoked key, or a refused access token (`[auth.oauth]`), gets its 401 (403 for a
//! missing scope) here, before rmcp (and so any upstream) sees the request; a good one is
//! resolved to its [`Grant`], inserted as a request extension. rmcp moves the request's
//! `http::request::Parts` into each MCP request's `RequestContext.extensions`, where the
//! session handler finds the grant (`Session::caller`). With no keys and no `[auth.oauth]`,
//! every request passes as the open identity (HTTP is loopback-only unless configured).
//!
//! With `[auth.oauth]`, every refusal carries `WWW-Authenticate: Bearer
//! resource_metadata="…"` (RFC 9728), from which an MCP client finds the authorization
//! server, and `/.well-known/oauth-protected-resource` serves that document.

use crate::policy::oauth::metadata;
use crate::policy::{AuthRejection, Grant, Policy};
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
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
    match policy.authenticate(presented).await {
        Ok(grant) => {
            super::conn::Authenticated::mark(request.extensions());
            request.extensions_mut().insert::<Arc<Grant>>(grant);
            next.run(request).await
        }
        Err(rejection) => {
            policy.audit_rejected_key(&rejection, request.uri().path());
            let body =
                serde_json::json!({"error": "unauthorized", "message": rejection.to_string()});
            let mut response = axum::Json(body).into_response();
            *response.status_mut() = status_of(&rejection);
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, challenge(&policy, &rejection));
            response
        }
    }
}

/// 401, or what a refused token says (403 for a missing scope, 503 when the issuer could
/// not be asked).
pub(super) fn status_of(rejection: &AuthRejection) -> StatusCode {
    match rejection {
        AuthRejection::Token(t) => {
            StatusCode::from_u16(t.status()).unwrap_or(StatusCode::UNAUTHORIZED)
        }
        _ => StatusCode::UNAUTHORIZED,
    }
}

/// `Bearer`, with the metadata hint and the token's error when `[auth.oauth]` is set.
pub(super) fn challenge(policy: &Policy, rejection: &AuthRejection) -> HeaderValue {
    let Some(oauth) = &policy.oauth else {
        return HeaderValue::from_static("Bearer");
    };
    let token = match rejection {
        AuthRejection::Token(t) => Some(t),
        _ => None,
    };
    HeaderValue::from_str(&metadata::challenge(&oauth.config, token))
        .unwrap_or_else(|_| HeaderValue::from_static("Bearer"))
}

/// `GET /.well-known/oauth-protected-resource[/<path>]`: the resource's metadata.
pub(super) async fn protected_resource(State(policy): State<Arc<Policy>>) -> Response {
    match &policy.oauth {
        Some(oauth) => (
            [(header::CACHE_CONTROL, "max-age=300")],
            axum::Json(metadata::document(&oauth.config)),
        )
            .into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

/// The grant an HTTP request was authenticated as (set by [`require_key`]).
pub(super) fn grant_of(extensions: &rmcp::model::Extensions) -> Option<Arc<Grant>> {
    extensions
        .get::<http::request::Parts>()
        .and_then(|p| p.extensions.get::<Arc<Grant>>())
        .cloned()
}
