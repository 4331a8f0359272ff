//! HTTP/1.1 by hand over one keep-alive connection, with no socket options of its own: for
//! tests that look at the wire itself (socket options, how an answer is framed), which a
//! client library would hide.

use serde_json::Value;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Generous bound for any one step on a loaded machine; never reached when things work.
pub const STEP: Duration = Duration::from_secs(60);

pub struct RawClient {
    pub stream: TcpStream,
    host: String,
    buf: Vec<u8>,
    /// Sent with every request (the session id, the protocol version).
    pub headers: Vec<(String, String)>,
}

/// A response's status line and headers (names lower-cased).
pub struct Head {
    pub status: u16,
    pub headers: Vec<(String, String)>,
}

impl Head {
    pub fn header(&self, name: &str) -> Option<&str> {
        (self.headers.iter())
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn chunked(&self) -> bool {
        self.header("transfer-encoding")
            .is_some_and(|v| v.contains("chunked"))
    }
}

pub struct Answer {
    pub head: Head,
    pub body: String,
}

impl RawClient {
    pub async fn connect(addr: SocketAddr) -> Self {
        let stream = TcpStream::connect(addr)
            .await
            .expect("connect to the front");
        Self {
            stream,
            host: addr.to_string(),
            buf: Vec::new(),
            headers: Vec::new(),
        }
    }

    /// Writes a POST /mcp of `body`; the answer is read with `read_head` and `read_chunk`,
    /// or `post` does both.
    pub async fn send(&mut self, body: &Value) {
        let body = body.to_string();
        let mut req = format!(
            "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n",
            self.host,
            body.len()
        );
        for (k, v) in &self.headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str("\r\n");
        req.push_str(&body);
        self.stream.write_all(req.as_bytes()).await.expect("write");
    }

    pub async fn post(&mut self, body: &Value) -> Answer {
        self.send(body).await;
        tokio::time::timeout(STEP, self.read_answer())
            .await
            .expect("an answer within the bound")
    }

    /// Opens a 2025-11-25 session (initialize, notifications/initialized) and sends its
    /// headers from then on.
    pub async fn open_session(&mut self) {
        let init = self
            .post(
                &serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "raw", "version": "1"}}}),
            )
            .await;
        assert_eq!(init.head.status, 200, "initialize: {}", init.body);
        let session = (init.head.header("mcp-session-id"))
            .expect("a session id")
            .to_string();
        self.headers = vec![
            ("Mcp-Session-Id".into(), session),
            ("MCP-Protocol-Version".into(), "2025-11-25".into()),
        ];
        let note = self
            .post(&serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        assert_eq!(
            note.head.status, 202,
            "notifications/initialized: {}",
            note.body
        );
    }

    /// Reads more bytes into `buf`; the peer closing the connection fails the test.
    async fn fill(&mut self) {
        let mut chunk = [0u8; 8192];
        let n = self.stream.read(&mut chunk).await.expect("read");
        assert!(n > 0, "the server closed the keep-alive connection");
        self.buf.extend_from_slice(&chunk[..n]);
    }

    async fn line(&mut self) -> String {
        loop {
            if let Some(i) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let line = String::from_utf8(self.buf[..i].to_vec()).expect("utf-8");
                self.buf.drain(..i + 2);
                return line;
            }
            self.fill().await;
        }
    }

    async fn take(&mut self, n: usize) -> Vec<u8> {
        while self.buf.len() < n {
            self.fill().await;
        }
        self.buf.drain(..n).collect()
    }

    pub async fn read_head(&mut self) -> Head {
        let status_line = self.line().await;
        let status: u16 = status_line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("status line {status_line:?}"));
        let mut headers = Vec::new();
        loop {
            let line = self.line().await;
            if line.is_empty() {
                break;
            }
            let (k, v) = line.split_once(':').expect("header line");
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
        Head { status, headers }
    }

    /// The next chunk of a chunked body, or `None` at its end.
    pub async fn read_chunk(&mut self) -> Option<String> {
        let size_line = self.line().await;
        let size_hex = size_line.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_hex, 16).expect("chunk size");
        if size == 0 {
            assert_eq!(self.line().await, "", "no trailers expected");
            return None;
        }
        let chunk = String::from_utf8(self.take(size).await).expect("utf-8 chunk");
        assert_eq!(self.take(2).await, b"\r\n");
        Some(chunk)
    }

    pub async fn read_answer(&mut self) -> Answer {
        let head = self.read_head().await;
        let mut body = String::new();
        if head.chunked() {
            while let Some(chunk) = self.read_chunk().await {
                body.push_str(&chunk);
            }
        } else {
            let len: usize = head
                .header("content-length")
                .map_or(0, |v| v.parse().unwrap());
            body = String::from_utf8(self.take(len).await).expect("utf-8 body");
        }
        Answer { head, body }
    }
}

/// The JSON-RPC messages of a plain JSON body or an SSE stream (events with data).
pub fn messages(body: &str) -> Vec<Value> {
    if body.trim_start().starts_with('{') {
        return vec![serde_json::from_str(body).expect("JSON body")];
    }
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter(|d| !d.trim().is_empty())
        .map(|d| serde_json::from_str(d.trim()).expect("JSON event"))
        .collect()
}
