//! RFC 8693 token exchange, for an upstream that acts for each caller
//! (`[upstreams.NAME.oauth] grant = "token_exchange"`): the gateway, as its own client of
//! the authorization server, presents the caller's validated access token as the
//! `subject_token` and asks for an access token for the upstream (`resource`, `audience`,
//! `scope`). The upstream then sees the caller as its subject, and never the caller's own
//! token (no token passthrough). Neither token is ever logged; a refusal says the issuer's
//! `error` and `error_description`, nothing else of its answer.

use crate::policy::oauth::keys::reqwest_reason;
use std::time::Duration;
use toolgate_core::call::AccessToken;

/// RFC 8693 §2.1: the grant type of a token exchange.
pub(crate) const GRANT_TYPE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
/// RFC 8693 §3: an OAuth 2.0 access token, what is given and what is asked for.
pub(crate) const ACCESS_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";
/// The most of an issuer's `error_description` repeated in a message.
const DESCRIPTION_CHARS: usize = 300;

/// Why a caller's call could not get a token for a user-delegated upstream. Each message
/// names the caller and what to do; none repeats a token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ExchangeError {
    /// The caller authenticated without an access token (an API key, stdio, the local
    /// identity): there is nothing to exchange, and the gateway's own identity is not used.
    #[error("it acts for each caller with a token exchanged from the caller's own access token (RFC 8693), and {caller} presented no access token: call it with an access token from the gateway's authorization server ([auth.oauth]), not an API key")]
    NoCallerToken { caller: String },
    /// The authorization server answered the exchange with an error (RFC 6749 §5.2).
    #[error("the authorization server refused to exchange the access token of {caller} for one of this upstream: {status} {error}{}", description_part(.description))]
    Refused {
        caller: String,
        status: u16,
        error: String,
        description: String,
    },
    /// No usable answer: the server could not be reached, or answered without a token.
    #[error("the token exchange for {caller} at {endpoint} failed: {reason}")]
    Failed {
        caller: String,
        endpoint: String,
        reason: String,
    },
    /// Too many callers hold a session with the upstream at once.
    #[error("{active} callers are using it at once, the most it is given sessions for: try again shortly")]
    Busy { active: usize },
}

fn description_part(description: &str) -> String {
    match description {
        "" => String::new(),
        d => format!(" ({d})"),
    }
}

/// What the exchange asks for, besides the caller's token.
pub(crate) struct Request<'a> {
    pub endpoint: &'a str,
    pub client_id: &'a str,
    pub client_secret: &'a str,
    pub resource: &'a str,
    pub audience: Option<&'a str>,
    pub scope: &'a str,
}

/// Exchanges `subject` (the access token of `caller`, named in errors) at the token
/// endpoint; returns the issued access token and its lifetime.
pub(crate) async fn exchange(
    http: &reqwest::Client,
    request: &Request<'_>,
    subject: &AccessToken,
    caller: &str,
) -> Result<(AccessToken, Duration), ExchangeError> {
    let mut form = vec![
        ("grant_type", GRANT_TYPE),
        ("subject_token", subject.secret()),
        ("subject_token_type", ACCESS_TOKEN_TYPE),
        ("requested_token_type", ACCESS_TOKEN_TYPE),
        ("resource", request.resource),
    ];
    if let Some(a) = request.audience {
        form.push(("audience", a));
    }
    if !request.scope.is_empty() {
        form.push(("scope", request.scope));
    }
    let failed = |reason: String| ExchangeError::Failed {
        caller: caller.to_string(),
        endpoint: request.endpoint.to_string(),
        reason,
    };
    let response = http
        .post(request.endpoint)
        .basic_auth(request.client_id, Some(request.client_secret))
        .form(&form)
        .send()
        .await
        .map_err(|e| failed(reqwest_reason(&e)))?;
    let status = response.status();
    let body: serde_json::Value = response
        .json()
        .await
        .map_err(|e| failed(format!("it answered {status} with no JSON ({e})")))?;
    if !status.is_success() {
        return Err(ExchangeError::Refused {
            caller: caller.to_string(),
            status: status.as_u16(),
            error: body["error"].as_str().unwrap_or("?").to_string(),
            description: (body["error_description"].as_str().unwrap_or(""))
                .chars()
                .take(DESCRIPTION_CHARS)
                .collect(),
        });
    }
    issued(&body).map_err(|why| failed(why.to_string()))
}

/// The access token of a successful exchange answer (RFC 8693 §2.2.1), and its lifetime.
fn issued(body: &serde_json::Value) -> Result<(AccessToken, Duration), &'static str> {
    let token = (body["access_token"].as_str())
        .filter(|t| !t.is_empty())
        .ok_or("it answered without an access_token")?;
    match body["issued_token_type"].as_str() {
        None | Some(ACCESS_TOKEN_TYPE) => {}
        Some(_) => return Err("it issued another kind of token than an access token"),
    }
    match body["token_type"].as_str() {
        None => {}
        Some(t) if t.eq_ignore_ascii_case("bearer") => {}
        Some(_) => return Err("it issued a token that is not a bearer token"),
    }
    let lifetime = Duration::from_secs(body["expires_in"].as_u64().unwrap_or(300));
    Ok((AccessToken::new(token), lifetime))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_answer_is_an_access_token_or_says_what_is_wrong() {
        let ok = json!({"access_token": "t", "issued_token_type": ACCESS_TOKEN_TYPE, "token_type": "Bearer", "expires_in": 60});
        let (token, lifetime) = issued(&ok).unwrap();
        assert_eq!((token.secret(), lifetime), ("t", Duration::from_secs(60)));
        assert_eq!(format!("{token:?}"), "AccessToken(..)");
        let plain = json!({"access_token": "t"});
        assert_eq!(issued(&plain).unwrap().1, Duration::from_secs(300));
        let id_token = json!({"access_token": "t", "issued_token_type": "urn:ietf:params:oauth:token-type:id_token"});
        assert!(issued(&id_token).unwrap_err().contains("another kind"));
        let na = json!({"access_token": "t", "token_type": "N_A"});
        assert!(issued(&na).unwrap_err().contains("not a bearer"));
        assert!(issued(&json!({"access_token": ""})).is_err());
    }

    #[test]
    fn a_refusal_says_the_issuers_error_and_names_the_caller() {
        let e = ExchangeError::Refused {
            caller: "\"bob\" of https://idp".into(),
            status: 400,
            error: "invalid_target".into(),
            description: "bob may not act there".into(),
        };
        let text = e.to_string();
        assert!(
            text.contains("\"bob\" of https://idp")
                && text.contains("400 invalid_target (bob may not act there)"),
            "{text}"
        );
        let e = ExchangeError::NoCallerToken {
            caller: "API key \"ops\"".into(),
        };
        assert!(e
            .to_string()
            .contains("API key \"ops\" presented no access token"));
    }

    /// A token endpoint served here: what the exchange sends, and its answers.
    #[tokio::test]
    async fn the_exchange_sends_the_subject_token_and_the_client_and_reads_the_answer() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("http://{}/token", listener.local_addr().unwrap());
        let served = tokio::spawn(async move {
            let mut seen = Vec::new();
            for answer in [
                (
                    200,
                    r#"{"access_token":"up-1","issued_token_type":"urn:ietf:params:oauth:token-type:access_token","token_type":"Bearer","expires_in":90}"#,
                ),
                (
                    400,
                    r#"{"error":"invalid_grant","error_description":"no delegation for carol"}"#,
                ),
            ] {
                let (mut conn, _) = listener.accept().await.unwrap();
                let mut buf = vec![0u8; 16384];
                let mut n = 0;
                loop {
                    n += conn.read(&mut buf[n..]).await.unwrap();
                    let text = String::from_utf8_lossy(&buf[..n]).to_string();
                    if let Some((head, body)) = text.split_once("\r\n\r\n") {
                        let len = (head.lines())
                            .find_map(|l| {
                                l.to_ascii_lowercase()
                                    .strip_prefix("content-length: ")
                                    .map(|v| v.trim().parse::<usize>().unwrap())
                            })
                            .unwrap_or(0);
                        if body.len() >= len {
                            seen.push(text);
                            break;
                        }
                    }
                }
                let reply = format!(
                    "HTTP/1.1 {} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{}",
                    answer.0,
                    answer.1.len(),
                    answer.1
                );
                conn.write_all(reply.as_bytes()).await.unwrap();
            }
            seen
        });
        let http = reqwest::Client::new();
        let request = Request {
            endpoint: &endpoint,
            client_id: "gateway",
            client_secret: "gateway-secret",
            resource: "https://up.example/mcp",
            audience: Some("up"),
            scope: "mcp",
        };
        let subject = AccessToken::new("caller-token");
        let (token, lifetime) = exchange(&http, &request, &subject, "alice").await.unwrap();
        assert_eq!(
            (token.secret(), lifetime),
            ("up-1", Duration::from_secs(90))
        );
        let refused = exchange(&http, &request, &subject, "carol")
            .await
            .unwrap_err();
        assert_eq!(
            refused,
            ExchangeError::Refused {
                caller: "carol".into(),
                status: 400,
                error: "invalid_grant".into(),
                description: "no delegation for carol".into(),
            }
        );
        let seen = served.await.unwrap();
        let first = seen[0].to_ascii_lowercase();
        // The gateway authenticates as its own client, with HTTP Basic.
        assert!(
            first.contains("authorization: basic z2f0zxdhetpnyxrld2f5lxnly3jlda=="),
            "{first}"
        );
        let body = seen[0].split_once("\r\n\r\n").unwrap().1;
        let url = reqwest::Url::parse(&format!("http://x/?{body}")).unwrap();
        let form: std::collections::HashMap<String, String> =
            url.query_pairs().into_owned().collect();
        assert_eq!(form["grant_type"], GRANT_TYPE);
        assert_eq!(form["subject_token"], "caller-token");
        assert_eq!(form["subject_token_type"], ACCESS_TOKEN_TYPE);
        assert_eq!(form["requested_token_type"], ACCESS_TOKEN_TYPE);
        assert_eq!(form["resource"], "https://up.example/mcp");
        assert_eq!(form["audience"], "up");
        assert_eq!(form["scope"], "mcp");
    }
}
