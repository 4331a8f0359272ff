//! Code mode's orchestration: running a program the model wrote (`execute_code`) and
//! running a skill (from execute, the direct surface, or a program's `skills.run`).
//!
//! - [`run`]: a program's run in a sandbox worker, its tool calls through the gate
//!   (`gate::program`), its `fs` and `state` calls, and what the model sees of it.
//! - [`skill`]: which skills a caller is offered, a skill's input checked, its run (from
//!   execute, or nested in a program), and its TypeScript for route.
//!
//! It sits above `gate` and `engine` (it takes both) and below `guided` and `front`, whose
//! handlers are thin calls of it. The services a run uses (workers, PII vault, state,
//! workspace, history) are `crate::code`'s.

pub(crate) mod run;
pub(crate) mod skill;
