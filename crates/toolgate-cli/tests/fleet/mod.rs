//! The services a fleet test runs: `redis-server` and `haproxy` (Debian packages) on
//! free loopback ports, each killed when dropped. Without them the test is skipped
//! locally and fails on CI (`CI` set), where `.ci/run` installs them.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Whether `name` is on PATH (or in /usr/sbin, where Debian puts haproxy).
pub(crate) fn find(name: &str) -> Option<PathBuf> {
    let path = std::env::var("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/usr/bin")])
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Both programs, or `None` after printing the skip (a panic on CI).
pub(crate) fn programs_or_skip() -> Option<(PathBuf, PathBuf)> {
    match (find("redis-server"), find("haproxy")) {
        (Some(r), Some(h)) => Some((r, h)),
        (r, h) => {
            let missing = [("redis-server", r.is_none()), ("haproxy", h.is_none())]
                .iter()
                .filter(|(_, m)| *m)
                .map(|(n, _)| *n)
                .collect::<Vec<_>>()
                .join(" and ");
            crate::common::skip(&format!(
                "{missing} not installed (apt-get install redis-server haproxy; .ci/run does)"
            ));
            None
        }
    }
}

/// A free loopback port (bound, then released for the service to take).
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Waits (up to 30 s) until `port` accepts connections.
fn wait_listening(port: u16, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("{what} did not listen on 127.0.0.1:{port} within 30 s");
}

/// A child killed (and reaped) on drop.
pub(crate) struct Service {
    child: Option<Child>,
}

impl Service {
    pub(crate) fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        self.stop();
    }
}

/// `redis-server` on `port`, its append-only file in `dir` (so a restart keeps what was
/// written, as a production Redis configured for it does).
pub(crate) fn redis(program: &Path, port: u16, dir: &Path) -> Service {
    redis_with(program, port, dir, &[])
}

/// A fresh `redis-server` for one test (its files under `dir`'s `redis`), and the `[store]`
/// section that points a gateway at it; `None` (the test skipped) when Redis or HAProxy
/// is not installed.
#[allow(dead_code, reason = "each test binary uses a part of these helpers")]
pub(crate) fn redis_store(dir: &crate::common::TestDir) -> Option<(Service, String)> {
    let (redis_bin, _) = programs_or_skip()?;
    let redis_dir = dir.path("redis");
    std::fs::create_dir_all(&redis_dir).unwrap();
    let port = free_port();
    let service = redis(&redis_bin, port, &redis_dir);
    let store = format!("[store]\nbackend = \"redis\"\nurl = \"redis://127.0.0.1:{port}\"\n");
    Some((service, store))
}

/// `redis` with more server options (`--maxmemory 1mb`, say).
pub(crate) fn redis_with(program: &Path, port: u16, dir: &Path, extra: &[&str]) -> Service {
    let child = Command::new(program)
        .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
        .args([
            "--save",
            "",
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
        ])
        .arg("--dir")
        .arg(dir)
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start redis-server");
    let service = Service { child: Some(child) };
    wait_listening(port, "redis-server");
    // Accepting is not serving yet (it loads the append-only file first): PING it.
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if ping(port) {
            return service;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("redis-server on {port} did not answer PING within 30 s");
}

/// Sends one command (inline form) and returns the first line of the answer.
// Used by test_store_faults only (this module is compiled into each test that uses it).
#[allow(dead_code, reason = "each test binary uses a part of these helpers")]
pub(crate) fn command(port: u16, line: &str) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    s.write_all(format!("{line}\r\n").as_bytes()).unwrap();
    let mut buf = [0u8; 256];
    let n = s.read(&mut buf).unwrap_or(0);
    String::from_utf8_lossy(&buf[..n])
        .lines()
        .next()
        .unwrap_or("")
        .to_string()
}

fn ping(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let mut buf = [0u8; 64];
    s.write_all(b"PING\r\n").is_ok()
        && s.read(&mut buf)
            .is_ok_and(|n| buf[..n].starts_with(b"+PONG"))
}

/// `haproxy` on `port`: round robin over `backends`, no stickiness, HTTP mode.
pub(crate) fn haproxy(program: &Path, port: u16, backends: &[u16], dir: &Path) -> Service {
    let mut cfg = format!(
        "global\n  maxconn 256\ndefaults\n  mode http\n  timeout connect 5s\n  timeout client 120s\n  timeout server 120s\nfrontend gateway\n  bind 127.0.0.1:{port}\n  default_backend replicas\nbackend replicas\n  balance roundrobin\n"
    );
    for (i, b) in backends.iter().enumerate() {
        cfg.push_str(&format!("  server r{i} 127.0.0.1:{b}\n"));
    }
    let file = dir.join("haproxy.cfg");
    std::fs::write(&file, cfg).unwrap();
    let child = Command::new(program)
        .arg("-db")
        .arg("-f")
        .arg(&file)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start haproxy");
    let service = Service { child: Some(child) };
    wait_listening(port, "haproxy");
    service
}
