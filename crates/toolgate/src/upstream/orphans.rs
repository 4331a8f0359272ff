//! What a stdio upstream leaves behind when the gateway stops: a guard per child process
//! group that kills the group if the gateway dies without doing it (SIGKILL, a crash),
//! and, for `toolgate serve`, the gateway as subreaper of its descendants, so a grandchild
//! that left its group (`setsid`) is reparented to the gateway and killed at shutdown.

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::process::Stdio;

/// The guard shell's `$0`, by which `kill_orphans` knows it.
const GUARD_NAME: &str = "toolgate-group-guard";

/// A small shell that waits on a pipe only the gateway holds open, then kills the process
/// group. It ignores the signals a terminal or a service manager sends the gateway's group,
/// so it outlives the gateway long enough to do its one job; `None` when no shell runs.
pub(crate) struct GroupGuard {
    /// Dropped (closed) when the gateway lets the group go, or when the gateway dies.
    _pipe: tokio::process::ChildStdin,
    _child: tokio::process::Child,
}

impl GroupGuard {
    pub(crate) fn spawn(pgid: Pid) -> Option<Self> {
        let script = "trap '' INT TERM HUP; read _line; kill -KILL -\"$1\" 2>/dev/null";
        let mut child = tokio::process::Command::new("/bin/sh")
            .args(["-c", script, GUARD_NAME])
            .arg(pgid.as_raw().to_string())
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| tracing::debug!("no group guard for process group {pgid}: {e}"))
            .ok()?;
        let pipe = child.stdin.take()?;
        if let Some(pid) = child.id() {
            let mut guards = GUARDS.lock().expect("guards");
            // Guards of earlier connections that are gone (an upstream that restarts often).
            guards.retain(|p| std::path::Path::new(&format!("/proc/{p}")).exists());
            guards.push(pid);
        }
        Some(Self {
            _pipe: pipe,
            _child: child,
        })
    }
}

/// Makes this process the subreaper of its descendants (Linux): a process whose parent
/// exits is reparented here, not to init, so `kill_orphans` finds it.
pub fn adopt_orphans() {
    #[cfg(target_os = "linux")]
    if let Err(e) = nix::sys::prctl::set_child_subreaper(true) {
        tracing::debug!("PR_SET_CHILD_SUBREAPER: {e}");
    }
}

/// The group guards started, by pid: a guard on its way out (its pipe closed at shutdown)
/// no longer shows its name in /proc, so it is known by its pid.
static GUARDS: std::sync::Mutex<Vec<u32>> = std::sync::Mutex::new(Vec::new());

/// Process groups of upstreams the gateway has killed: their members were told to go
/// already (a loaded machine may not have run their exit yet when `kill_orphans` looks).
static STOPPED_GROUPS: std::sync::Mutex<Vec<i32>> = std::sync::Mutex::new(Vec::new());

/// Notes that the process group `pgid` was sent SIGKILL.
pub(super) fn group_stopped(pgid: Pid) {
    let mut groups = STOPPED_GROUPS.lock().expect("groups");
    if !groups.contains(&pgid.as_raw()) {
        groups.push(pgid.as_raw());
    }
}

/// Kills and reaps every child process still left (reparented orphans included); called
/// once the upstreams and workers have been stopped. Returns how many were left behind:
/// not the ones that had already exited (zombies not yet reaped), nor members of an
/// upstream's process group that was killed (still on their way out), nor the group
/// guards, whose group is gone by then and which were about to exit on their own.
pub fn kill_orphans() -> usize {
    let me = std::process::id();
    let mut killed = 0;
    // A killed orphan's own children are reparented here in turn: a few rounds.
    for _ in 0..5 {
        let children = children_of(me);
        if children.is_empty() {
            break;
        }
        let stopped = STOPPED_GROUPS.lock().expect("groups").clone();
        for Child { pid, state, group } in children {
            let expected = state == 'Z' || stopped.contains(&group) || is_guard(pid);
            let pid = Pid::from_raw(pid as i32);
            if kill(pid, Signal::SIGKILL).is_ok() && !expected {
                killed += 1;
            }
            let _ = nix::sys::wait::waitpid(pid, None);
        }
    }
    if killed > 0 {
        tracing::info!("shutdown: killed {killed} processes the upstreams left behind");
    }
    killed
}

/// Whether `pid` is a group guard (`GroupGuard`'s shell): one this process started, or
/// one that says so in /proc (a guard of an earlier gateway in this process's tree).
fn is_guard(pid: u32) -> bool {
    GUARDS.lock().expect("guards").contains(&pid)
        || std::fs::read(format!("/proc/{pid}/cmdline"))
            .is_ok_and(|c| c.split(|b| *b == 0).any(|arg| arg == GUARD_NAME.as_bytes()))
}

/// A child process as /proc shows it.
struct Child {
    pid: u32,
    /// `Z`: exited, not yet reaped.
    state: char,
    /// Its process group.
    group: i32,
}

/// The processes whose parent is `parent`, from /proc.
fn children_of(parent: u32) -> Vec<Child> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in dir.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // The command name (field 2) may hold spaces and parentheses: read after the last ')'.
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let mut fields = rest.split_whitespace();
        let state = fields.next().and_then(|s| s.chars().next());
        let ppid = fields.next().and_then(|p| p.parse::<u32>().ok());
        if ppid != Some(parent) {
            continue;
        }
        let group = fields.next().and_then(|g| g.parse::<i32>().ok());
        if let (Some(state), Some(group)) = (state, group) {
            out.push(Child { pid, state, group });
        }
    }
    out
}
