//! Why a connection to an upstream did not open (`connect.rs`): [`ConnectError`].

/// Why a connection to an upstream did not open.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConnectError {
    /// The handshake failed: the process could not start or died, the server could not be
    /// dialed or did not answer. The text says what happened, with the process's last
    /// stderr lines.
    #[error("{0}")]
    Failed(String),
    /// The server refused the handshake, in the one era tried.
    #[error("{0}")]
    Refused(String),
    /// The server refused the handshake in both eras.
    #[error("{first}; then {then}")]
    RefusedBoth { first: String, then: String },
    /// Listing its tools failed.
    #[error("{0}")]
    List(#[from] super::listing::ListError),
    /// A caller's own session is asked of an upstream that is not HTTP.
    #[error("only an HTTP upstream acts for each caller")]
    NotHttp,
    /// A configured header name HTTP cannot carry.
    #[error("{0}")]
    HeaderName(#[from] http::header::InvalidHeaderName),
    /// A configured header value HTTP cannot carry.
    #[error("{0}")]
    HeaderValue(#[from] http::header::InvalidHeaderValue),
    /// reqwest could not build its client.
    #[error("cannot build the HTTP client: {0}")]
    HttpClient(#[source] reqwest::Error),
}
