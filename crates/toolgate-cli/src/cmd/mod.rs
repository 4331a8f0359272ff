//! One module per subcommand.
pub mod eval;
