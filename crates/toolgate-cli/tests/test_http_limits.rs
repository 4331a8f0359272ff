//! `[gateway.limits]` over real sockets: an idle socket and a slow-headers socket are
//! closed, a stalled body is answered 408, connections over the cap get a 503 that says
//! why, and SIGTERM ends the gateway while clients hold sockets half-written.

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
