//! One module per subcommand.
pub mod lint;
pub mod tokens;
