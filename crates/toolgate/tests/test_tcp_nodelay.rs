//! Every TCP socket toolgate accepts or dials has `TCP_NODELAY` set, and a keep-alive
//! client that sets nothing on its side gets 50 answers on one connection.
//!
//! Without `TCP_NODELAY` the small writes of a streamed response wait for the client's
//! delayed ACK (Nagle), about 40 ms a call; timing is not asserted here (that is what
//! `scripts/bench-load.sh` shows), the socket option is. Everything runs in this process
//! (the fixture's HTTP server, the gateway with that fixture as its HTTP upstream, the
//! gateway's HTTP front), so each socket is found by its addresses in `/proc/net/tcp` and
//! read with `getsockopt`.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::os::fd::BorrowedFd;
use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

const CATALOG: &str = r#"[
  {"server":"fx","tool":{"name":"echo","description":"Echo.","inputSchema":{"type":"object","properties":{"message":{"type":"string"}}}}},
  {"server":"fx","tool":{"name":"slow","description":"Answers after a long while.","inputSchema":{"type":"object"}}}
]"#;

/// Generous bound for any one step on a loaded machine; never reached when things work.
const STEP: Duration = Duration::from_secs(60);

/// HTTP/1.1 by hand over one keep-alive connection, with no socket options of its own.
struct RawClient {
    stream: TcpStream,
    host: String,
    buf: Vec<u8>,
    headers: Vec<(String, String)>,
}

struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl RawClient {
    async fn connect(addr: SocketAddr) -> Self {
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

    async fn send(&mut self, body: &Value) {
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

    async fn post(&mut self, body: &Value) -> Answer {
        self.send(body).await;
        tokio::time::timeout(STEP, self.read_answer())
            .await
            .expect("an answer within the bound")
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

    async fn read_answer(&mut self) -> Answer {
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
        let header = |name: &str| {
            headers
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        };
        let mut body = Vec::new();
        if header("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
            loop {
                let size_line = self.line().await;
                let size_hex = size_line.split(';').next().unwrap_or("").trim();
                let size = usize::from_str_radix(size_hex, 16).expect("chunk size");
                if size == 0 {
                    assert_eq!(self.line().await, "", "no trailers expected");
                    break;
                }
                body.extend(self.take(size).await);
                assert_eq!(self.take(2).await, b"\r\n");
            }
        } else {
            let len: usize = header("content-length").map_or(0, |v| v.parse().unwrap());
            body = self.take(len).await;
        }
        Answer {
            status,
            headers,
            body: String::from_utf8(body).expect("utf-8 body"),
        }
    }
}

/// The JSON-RPC messages of a plain JSON body or an SSE stream.
fn messages(body: &str) -> Vec<Value> {
    if body.trim_start().starts_with('{') {
        return vec![serde_json::from_str(body).expect("JSON body")];
    }
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter(|d| !d.trim().is_empty())
        .map(|d| serde_json::from_str(d.trim()).expect("JSON event"))
        .collect()
}

/// A TCP connection of this network namespace, from `/proc/net/tcp`.
struct Conn {
    local: SocketAddrV4,
    remote: SocketAddrV4,
    established: bool,
    inode: u64,
}

fn parse_addr(hex: &str) -> SocketAddrV4 {
    let (ip, port) = hex.split_once(':').expect("ADDR:PORT");
    let ip = u32::from_str_radix(ip, 16).expect("hex address");
    // The kernel prints the address as the raw network-order word in host byte order.
    let ip = Ipv4Addr::from(ip.to_ne_bytes());
    SocketAddrV4::new(ip, u16::from_str_radix(port, 16).expect("hex port"))
}

fn connections() -> Vec<Conn> {
    let text = std::fs::read_to_string("/proc/self/net/tcp").expect("/proc/self/net/tcp");
    text.lines()
        .skip(1)
        .map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            Conn {
                local: parse_addr(f[1]),
                remote: parse_addr(f[2]),
                established: f[3] == "01",
                inode: f[9].parse().expect("inode"),
            }
        })
        .collect()
}

/// `TCP_NODELAY` of this process's socket with that inode (None: not one of ours).
fn nodelay_of(inode: u64) -> Option<bool> {
    let want = format!("socket:[{inode}]");
    for entry in std::fs::read_dir("/proc/self/fd").expect("/proc/self/fd") {
        let entry = entry.expect("fd entry");
        let Ok(link) = std::fs::read_link(entry.path()) else {
            continue; // closed since the listing
        };
        if link != Path::new(&want) {
            continue;
        }
        let fd: i32 = entry.file_name().to_str().unwrap().parse().unwrap();
        // SAFETY: the fd belongs to a connection this test keeps open (a request on it is
        // still unanswered, or the test holds its other end), so it stays valid for this
        // one getsockopt; it is borrowed, never closed here.
        let fd = unsafe { BorrowedFd::borrow_raw(fd) };
        let on = nix::sys::socket::getsockopt(&fd, nix::sys::socket::sockopt::TcpNoDelay)
            .expect("getsockopt TCP_NODELAY");
        return Some(on);
    }
    None
}

fn v4(addr: SocketAddr) -> SocketAddrV4 {
    match addr {
        SocketAddr::V4(a) => a,
        other => panic!("{other} is not IPv4"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_socket_toolgate_accepts_or_dials_has_tcp_nodelay() {
    let stop = CancellationToken::new();

    // The fixture's HTTP server, in this process.
    let catalog = toolgate_fixture::Catalog::parse(CATALOG).unwrap();
    let knobs =
        toolgate_fixture::knobs::KnobsFile::parse(r#"{"slow": {"_delay_ms": 120000}}"#).unwrap();
    let server =
        toolgate_fixture::FixtureServer::new("fx", catalog.select(None).unwrap(), knobs, None);
    let fx_listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let fx_addr = v4(fx_listener.local_addr().unwrap());
    tokio::spawn(toolgate_fixture::http::serve_listener(
        server,
        fx_listener,
        false,
        stop.child_token(),
    ));

    // The gateway with that fixture as its HTTP upstream, and its HTTP front.
    let toml = format!(
        "[gateway]\nmode = \"direct\"\nstartup_wait_ms = 30000\n[upstreams.fx]\nurl = \"http://{fx_addr}/mcp\"\n"
    );
    let config =
        toolgate::config::Config::from_toml_str(&toml, Path::new("toolgate.toml")).unwrap();
    let gw = toolgate::gateway::Gateway::start(config);
    let front = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let front_addr = front.local_addr().unwrap();
    tokio::spawn(toolgate::front::serve_http(
        front,
        gw.clone(),
        stop.child_token(),
    ));

    let mut client = RawClient::connect(front_addr).await;
    assert!(
        !client.stream.nodelay().unwrap(),
        "the client sets nothing on its side"
    );
    let init = client
        .post(
            &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}}}),
        )
        .await;
    assert_eq!(init.status, 200, "initialize: {}", init.body);
    let session = init
        .headers
        .iter()
        .find(|(k, _)| k == "mcp-session-id")
        .map(|(_, v)| v.clone())
        .expect("a session id");
    client.headers = vec![
        ("Mcp-Session-Id".into(), session),
        ("MCP-Protocol-Version".into(), "2025-11-25".into()),
    ];
    let note = client
        .post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    assert_eq!(note.status, 202, "notifications/initialized: {}", note.body);

    for i in 1..=50 {
        let message = format!("call {i}");
        let answer = client
            .post(&json!({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                "params": {"name": "fx_echo", "arguments": {"message": message}}}))
            .await;
        assert_eq!(answer.status, 200, "call {i}: {}", answer.body);
        let last = messages(&answer.body).pop().expect("a message");
        assert_eq!(last["id"], i, "call {i}: {last}");
        let text = last["result"]["content"][0]["text"].as_str().unwrap_or("");
        assert!(text.contains(&message), "call {i} answered {last}");
        assert_ne!(last["result"]["isError"], true, "call {i}: {last}");
    }

    // The front's end of this very connection.
    let me = v4(client.stream.local_addr().unwrap());
    let accepted = connections()
        .into_iter()
        .find(|c| c.established && c.local == v4(front_addr) && c.remote == me)
        .expect("the front's end of the client connection");
    assert_eq!(
        nodelay_of(accepted.inode),
        Some(true),
        "the front's accepted socket has no TCP_NODELAY"
    );

    // A call that stays in flight keeps the gateway's connection to the upstream open.
    client
        .send(&json!({"jsonrpc": "2.0", "id": 99, "method": "tools/call",
            "params": {"name": "fx_slow", "arguments": {}}}))
        .await;
    let deadline = tokio::time::Instant::now() + STEP;
    let (dialed, served) = loop {
        let conns = connections();
        let dialed: Vec<u64> = conns
            .iter()
            .filter(|c| c.established && c.remote == fx_addr)
            .map(|c| c.inode)
            .collect();
        let served: Vec<u64> = conns
            .iter()
            .filter(|c| c.established && c.local == fx_addr)
            .map(|c| c.inode)
            .collect();
        if !dialed.is_empty() && !served.is_empty() {
            break (dialed, served);
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no open connection to the upstream within {STEP:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let of = |inodes: Vec<u64>| {
        inodes
            .into_iter()
            .filter_map(nodelay_of)
            .collect::<Vec<bool>>()
    };
    let dialed = of(dialed);
    let served = of(served);
    assert!(
        !dialed.is_empty() && !served.is_empty(),
        "the upstream connection is this process's"
    );
    assert!(
        dialed.iter().all(|on| *on),
        "a socket the gateway dialed to its HTTP upstream has no TCP_NODELAY"
    );
    assert!(
        served.iter().all(|on| *on),
        "a socket the fixture's HTTP server accepted has no TCP_NODELAY"
    );
    stop.cancel();
    gw.shutdown().await;
}
