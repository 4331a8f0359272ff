//! The sandbox worker: makes a fresh QuickJS runtime, says it is ready, reads one [`Run`],
//! limits itself, runs the program, and answers with [`Done`]. One program per process, so
//! nothing a program leaves behind (globals, heap, a wedged interpreter) can reach another.
//! The runtime is made before the run arrives so that a gateway can keep started workers
//! waiting (its pool): no program text has touched it until then.
//!
//! Defences, in the order they act: QuickJS's heap and stack limits and its interrupt
//! handler (the deadline); the OS limits set here before any program text is compiled
//! (address space, CPU time, no files, no core dumps); and the gateway, which kills the
//! process at the deadline plus a grace period whatever state it is in.

mod bridge;
mod convert;
mod program;
mod timers;

use crate::protocol::{Done, Limits, Run, ToGateway};
use std::cell::RefCell;
use std::io::BufWriter;
use std::io::{BufRead, Write};

use std::process::ExitCode;
use std::rc::Rc;

/// Entry point of the worker process (`toolgate sandbox-worker`): stdin and stdout are the
/// gateway's pipes.
pub fn main() -> ExitCode {
    // Owned (not a lock), so the answers thread can take it over after the first line.
    let stdin = std::io::BufReader::new(std::io::stdin());
    let stdout = std::io::stdout();
    match serve(stdin, Box::new(stdout), true) {
        Ok(()) => {
            // Exit without tearing the runtime down: nothing is left to free that the
            // kernel will not, and a program's leftovers cannot delay or abort the exit.
            std::process::exit(0)
        }
        Err(e) => {
            eprintln!("sandbox worker: {e}");
            ExitCode::from(2)
        }
    }
}

/// Serves one run over `input`/`output`. `os_limits` applies `apply_os_limits` first
/// (a worker process does; in-process tests do not, so they do not limit the test runner).
pub fn serve(
    mut input: impl BufRead + Send + 'static,
    mut output: Box<dyn Write>,
    os_limits: bool,
) -> std::io::Result<()> {
    let fresh = program::Fresh::new()?;
    {
        let mut w = BufWriter::new(&mut output);
        serde_json::to_writer(&mut w, &ToGateway::Ready).map_err(std::io::Error::other)?;
        w.write_all(b"\n")?;
        w.flush()?;
    }
    let mut line = String::new();
    input.read_line(&mut line)?;
    let run: Run = serde_json::from_str(&line)
        .map_err(|e| std::io::Error::other(format!("the first line is not a run: {e}")))?;
    // Before any program text is compiled.
    // Answers arrive on a thread of their own, so the run can wait for an answer or its
    // next timer, whichever comes first (spawned before the limits: no program has run).
    let (tx, answers) = std::sync::mpsc::channel::<String>();
    std::thread::Builder::new()
        .name("answers".into())
        .stack_size(256 << 10)
        .spawn(move || loop {
            let mut line = String::new();
            match input.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) if tx.send(line).is_err() => return,
                Ok(_) => {}
            }
        })?;
    if os_limits {
        apply_os_limits(&run.limits)?;
    }
    let out = Rc::new(RefCell::new(bridge::Output::new(
        output,
        run.limits.max_log_bytes,
    )));
    let done: Done = program::run(fresh, run, &answers, &out);
    let result = out.borrow_mut().send(&ToGateway::Done(done));
    result
}

/// Address space, CPU seconds, no file writes, no core files, few descriptors.
pub(crate) fn apply_os_limits(limits: &Limits) -> std::io::Result<()> {
    use nix::sys::resource::{setrlimit, Resource};
    let set = |r: Resource, soft: u64, hard: u64| {
        setrlimit(r, soft, hard).map_err(|e| std::io::Error::other(format!("setrlimit {r:?}: {e}")))
    };
    set(
        Resource::RLIMIT_AS,
        limits.address_space_bytes,
        limits.address_space_bytes,
    )?;
    // SIGXCPU at the soft limit ends the process; the hard limit is SIGKILL a second later.
    set(Resource::RLIMIT_CPU, limits.cpu_secs, limits.cpu_secs + 1)?;
    set(Resource::RLIMIT_FSIZE, 0, 0)?;
    set(Resource::RLIMIT_CORE, 0, 0)?;
    set(Resource::RLIMIT_NOFILE, 16, 16)?;
    Ok(())
}
