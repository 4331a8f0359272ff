//! `[gateway.limits]` over real sockets: an idle socket and a slow-headers socket are
//! closed, a stalled body is answered 408, connections over the cap get a 503 that says
//! why, one client's sockets over its own cap a 429 while another client is served, a
//! connection with no authenticated request is closed sooner, and SIGTERM ends the gateway while clients hold sockets half-written.

mod common;

use common::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

fn addr(gw: &HttpGateway) -> String {
    gw.base().trim_start_matches("http://").to_string()
}

/// Reads until the peer closes (or 60 s pass, which fails the test): what it sent.
fn read_to_close(s: &mut TcpStream) -> String {
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return String::from_utf8_lossy(&out).into_owned(),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                return String::from_utf8_lossy(&out).into_owned()
            }
            Err(e) => panic!("the gateway did not close the connection: {e}"),
        }
    }
}

#[test]
fn a_socket_that_sends_nothing_is_closed_after_the_idle_timeout() {
    let (_dir, gw) = limited_gateway("idle_timeout_secs = 1\nheader_timeout_secs = 600\n");
    let mut s = TcpStream::connect(addr(&gw)).unwrap();
    assert_eq!(read_to_close(&mut s), "");
}

#[test]
fn headers_that_trickle_in_are_cut_after_the_header_timeout() {
    let (_dir, gw) = limited_gateway("header_timeout_secs = 1\nidle_timeout_secs = 600\n");
    let mut s = TcpStream::connect(addr(&gw)).unwrap();
    s.write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .unwrap();
    assert_eq!(read_to_close(&mut s), "");
}

#[test]
fn a_keep_alive_connection_serves_requests_then_idles_out() {
    let (_dir, gw) = limited_gateway("idle_timeout_secs = 1\nheader_timeout_secs = 600\n");
    let mut s = TcpStream::connect(addr(&gw)).unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .unwrap();
    let got = read_to_close(&mut s);
    assert!(got.starts_with("HTTP/1.1 200"), "{got}");
    assert!(got.contains("an MCP gateway"), "{got}");
}

#[test]
fn a_body_that_stalls_is_answered_408_naming_the_limit() {
    let (_dir, gw) = limited_gateway("body_timeout_secs = 1\n");
    let mut s = TcpStream::connect(addr(&gw)).unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: {ACCEPT}\r\nContent-Length: 200\r\nConnection: close\r\n\r\n{{\"jsonrpc\":"
    );
    s.write_all(head.as_bytes()).unwrap();
    let got = read_to_close(&mut s);
    assert!(got.starts_with("HTTP/1.1 408"), "{got}");
    assert!(
        got.contains("gateway.limits.body_timeout_secs = 1"),
        "{got}"
    );
}

#[test]
fn connections_over_the_cap_are_told_503_and_a_freed_slot_is_used_again() {
    let (_dir, gw) = limited_gateway(
        "max_connections = 2\nidle_timeout_secs = 600\nheader_timeout_secs = 600\n",
    );
    let a = addr(&gw);
    let held: Vec<TcpStream> = (0..2).map(|_| TcpStream::connect(&a).unwrap()).collect();
    // The two held sockets are accepted before the third (one listener, one accept loop).
    std::thread::sleep(Duration::from_millis(200));
    let mut third = TcpStream::connect(&a).unwrap();
    third
        .write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .unwrap();
    let got = read_to_close(&mut third);
    assert!(got.starts_with("HTTP/1.1 503"), "{got}");
    assert!(got.contains("gateway.limits.max_connections = 2"), "{got}");
    drop(held);
    // Once the gateway has seen them close, a new connection is served.
    let mut served = String::new();
    for _ in 0..200 {
        let mut s = TcpStream::connect(&a).unwrap();
        s.write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            .unwrap();
        served = read_to_close(&mut s);
        if served.starts_with("HTTP/1.1 200") {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("no connection was served after the held ones closed: {served}");
}

#[test]
fn sigterm_ends_the_gateway_while_clients_hold_sockets_half_written() {
    let (dir, mut gw) = limited_gateway(
        "header_timeout_secs = 600\nidle_timeout_secs = 600\nbody_timeout_secs = 600\n",
    );
    let a = addr(&gw);
    let mut slow_head = TcpStream::connect(&a).unwrap();
    slow_head.write_all(b"POST /mcp HTTP/1.1\r\n").unwrap();
    let mut slow_body = TcpStream::connect(&a).unwrap();
    slow_body
        .write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
        .unwrap();
    let _idle = TcpStream::connect(&a).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    // `stop` waits up to 10 s, then SIGKILLs: a gateway that hangs shows as that signal.
    let status = gw.stop();
    assert!(
        status.success(),
        "the gateway did not exit by itself: {status:?}"
    );
    assert!(
        wait_no_processes_blocking(&dir),
        "upstream children were left"
    );
}

fn wait_no_processes_blocking(dir: &TestDir) -> bool {
    for _ in 0..200 {
        if dir.processes().is_empty() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

/// One HTTP/1.1 answer read off a keep-alive socket: its head and body (by
/// content-length, or chunked to the last chunk).
fn read_response(s: &mut TcpStream) -> String {
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        let text = String::from_utf8_lossy(&out).into_owned();
        if let Some(end) = text.find("\r\n\r\n") {
            let head = text[..end].to_ascii_lowercase();
            let body = &text[end + 4..];
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok());
            let done = match length {
                Some(n) => body.len() >= n,
                None => body.ends_with("0\r\n\r\n"),
            };
            if done {
                return text;
            }
        }
        match s.read(&mut buf) {
            Ok(0) => panic!("the connection closed mid-answer: {text}"),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) => panic!("no whole answer: {e}: {text}"),
        }
    }
}

/// A socket to `addr` from another loopback address (127.0.0.2): another client.
async fn from_another_address(addr: &str) -> TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.2:0".parse().unwrap()).unwrap();
    let stream = socket.connect(addr.parse().unwrap()).await.unwrap();
    let stream = stream.into_std().unwrap();
    stream.set_nonblocking(false).unwrap();
    stream
}

#[tokio::test]
async fn many_idle_sockets_from_one_address_do_not_starve_another_client() {
    let (_dir, gw) = limited_gateway(
        "max_connections = 8\nmax_connections_per_client = 4\nidle_timeout_secs = 600\nheader_timeout_secs = 600\nunauthenticated_idle_secs = 600\n",
    );
    let a = addr(&gw);
    // One client opens as many sockets as the whole gateway takes, and sends nothing.
    let held: Vec<TcpStream> = (0..4).map(|_| TcpStream::connect(&a).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(200));
    for _ in 0..4 {
        let mut over = TcpStream::connect(&a).unwrap();
        over.write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            .unwrap();
        let got = read_to_close(&mut over);
        assert!(got.starts_with("HTTP/1.1 429"), "{got}");
        assert!(
            got.contains("gateway.limits.max_connections_per_client = 4"),
            "{got}"
        );
    }
    // Another client is served all the same.
    let mut other = from_another_address(&a).await;
    other
        .write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .unwrap();
    let got = read_to_close(&mut other);
    assert!(got.starts_with("HTTP/1.1 200"), "{got}");
    drop(held);
}

#[test]
fn a_connection_with_no_authenticated_request_is_closed_sooner_than_one_with() {
    let (_dir, gw) = limited_gateway(
        "idle_timeout_secs = 600\nheader_timeout_secs = 600\nunauthenticated_idle_secs = 1\n",
    );
    let a = addr(&gw);
    // Passes the key check (no keys here: the open identity), so it may idle for 600 s.
    let mut authed = TcpStream::connect(&a).unwrap();
    let metrics = b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    authed.write_all(metrics).unwrap();
    let got = read_response(&mut authed);
    assert!(got.starts_with("HTTP/1.1 200"), "{got}");
    // Only unauthenticated requests, one every 300 ms: it never idles 600 s, yet it is
    // closed once 1 s has passed since it opened.
    let mut keyless = TcpStream::connect(&a).unwrap();
    keyless
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut closed = false;
    for _ in 0..200 {
        let sent = keyless.write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
        if sent.is_err() {
            closed = true;
            break;
        }
        let mut buf = [0u8; 8192];
        match keyless.read(&mut buf) {
            Ok(0) | Err(_) => {
                closed = true;
                break;
            }
            Ok(_) => {}
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    assert!(closed, "the unauthenticated connection was never closed");
    // The authenticated one, open longer than that, still serves.
    authed.write_all(metrics).unwrap();
    let got = read_response(&mut authed);
    assert!(got.starts_with("HTTP/1.1 200"), "{got}");
}
