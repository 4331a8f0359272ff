//! Protected Resource Metadata (RFC 9728) and the `WWW-Authenticate` challenges (RFC 6750)
//! that point clients to it: how an MCP client finds the authorization server from a 401.

use super::{OAuthConfig, TokenRejection};
use serde_json::{json, Value};

/// The path of the metadata document: `/.well-known/oauth-protected-resource`, plus the
/// resource's own path (RFC 9728 §3.1), e.g. `.../oauth-protected-resource/mcp`.
pub(crate) const WELL_KNOWN: &str = "/.well-known/oauth-protected-resource";

/// The metadata document's URL for the configured resource.
pub(crate) fn document_url(config: &OAuthConfig) -> String {
    let (origin, path) = split_origin(&config.resource);
    format!("{origin}{WELL_KNOWN}{path}")
}

/// The document served at [`WELL_KNOWN`] (and under it, for any path).
pub(crate) fn document(config: &OAuthConfig) -> Value {
    let mut doc = json!({
        "resource": config.resource,
        "authorization_servers": [config.issuer],
        "bearer_methods_supported": ["header"],
        "resource_name": "toolgate",
    });
    if !config.required_scopes.is_empty() {
        doc["scopes_supported"] = json!(config.required_scopes);
    }
    doc
}

/// The `WWW-Authenticate` value of a 401 or 403: the metadata hint, and for a token that
/// was refused, why (RFC 6750 §3: no error code when none was presented).
pub(crate) fn challenge(config: &OAuthConfig, rejection: Option<&TokenRejection>) -> String {
    let mut text = format!("Bearer resource_metadata=\"{}\"", document_url(config));
    if !config.required_scopes.is_empty() {
        text.push_str(&format!(
            ", scope=\"{}\"",
            quoted(&config.required_scopes.join(" "))
        ));
    }
    if let Some(r) = rejection {
        text.push_str(&format!(
            ", error=\"{}\", error_description=\"{}\"",
            r.code(),
            quoted(&r.to_string())
        ));
    }
    text
}

/// Text safe inside a quoted header parameter.
fn quoted(s: &str) -> String {
    s.chars()
        .filter(|c| (' '..='~').contains(c) && *c != '"' && *c != '\\')
        .collect()
}

/// `https://host:port/path` as (`https://host:port`, `/path`), the path without a trailing `/`.
fn split_origin(url: &str) -> (&str, &str) {
    let start = url.find("://").map_or(0, |i| i + 3);
    match url[start..].find('/') {
        Some(p) => {
            let (origin, path) = url.split_at(start + p);
            (origin, path.trim_end_matches('/'))
        }
        None => (url, ""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_document_url_inserts_the_well_known_path_before_the_resource_path() {
        assert_eq!(
            split_origin("https://mcp.example.com/mcp/"),
            ("https://mcp.example.com", "/mcp")
        );
        assert_eq!(
            split_origin("http://127.0.0.1:8377"),
            ("http://127.0.0.1:8377", "")
        );
    }

    #[test]
    fn header_parameters_drop_quotes_and_control_characters() {
        assert_eq!(quoted("a \"b\"\n\\c"), "a bc");
    }
}
