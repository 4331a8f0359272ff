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

use serde_json::json;
use tokio_util::sync::CancellationToken;

mod support;
use support::raw_http::{messages, RawClient, STEP};

const CATALOG: &str = r#"[
  {"server":"fx","tool":{"name":"echo","description":"Echo.","inputSchema":{"type":"object","properties":{"message":{"type":"string"}}}}},
  {"server":"fx","tool":{"name":"slow","description":"Answers after a long while.","inputSchema":{"type":"object"}}}
]"#;

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
#[expect(
    unsafe_code,
    reason = "the socket is found by its inode in /proc/self/fd, so only its raw fd is known"
)]
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

    // The fixture's HTTP server and the gateway with it as its HTTP upstream, in this
    // process.
    let inproc = support::inproc::start(CATALOG, r#"{"slow": {"_delay_ms": 120000}}"#, &stop).await;
    let (gw, front_addr, fx_addr) = (inproc.gw, inproc.front, v4(inproc.upstream));

    let mut client = RawClient::connect(front_addr).await;
    assert!(
        !client.stream.nodelay().unwrap(),
        "the client sets nothing on its side"
    );
    client.open_session().await;

    for i in 1..=50 {
        let message = format!("call {i}");
        let answer = client
            .post(&json!({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                "params": {"name": "fx_echo", "arguments": {"message": message}}}))
            .await;
        assert_eq!(answer.head.status, 200, "call {i}: {}", answer.body);
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
    // A socket is listed as established a moment before its owner sets the option (a
    // dialer sets it once `connect` returns, a server once it accepts), and the gateway
    // may dial another connection meanwhile: each round reads every connection again, and
    // only a socket that never gets the option within the bound fails.
    let of = |inodes: Vec<u64>| {
        inodes
            .into_iter()
            .filter_map(nodelay_of)
            .collect::<Vec<bool>>()
    };
    let deadline = tokio::time::Instant::now() + STEP;
    loop {
        let conns = connections();
        let ours = |f: &dyn Fn(&Conn) -> bool| {
            of((conns.iter())
                .filter(|c| c.established && f(c))
                .map(|c| c.inode)
                .collect())
        };
        let dialed = ours(&|c| c.remote == fx_addr);
        let served = ours(&|c| c.local == fx_addr);
        let all_on = |v: &[bool]| !v.is_empty() && v.iter().all(|on| *on);
        if all_on(&dialed) && all_on(&served) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "within {STEP:?}: the sockets the gateway dialed to its HTTP upstream {dialed:?} \
             and the ones the fixture's HTTP server accepted {served:?} (TCP_NODELAY of each, \
             this process's only) are not all on"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.cancel();
    gw.shutdown().await;
}
