//! Why a configuration could not be loaded: typed by kind, in the words the user reads
//! (each message names the file and the key, and says what to do).
//!
//! A leaf of its own, not part of `config`: the sections that modules below `config` keep
//! (`policy`'s `[policy]` and `[auth.oauth]`) are validated there, with this error.

/// Why a configuration file (`toolgate.toml`, an `mcpServers` JSON file) could not be
/// loaded. The message is the whole answer for the user; the variant says what kind of
/// mistake it is, and a file that could not be read keeps what reading said as its source.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A file could not be read: the configuration itself, or one it names (route's
    /// labelled examples).
    #[error("{message}")]
    Read {
        /// What could not be read, and where it was named.
        message: String,
        /// What reading said.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// Not TOML or JSON, or a value of the wrong type.
    #[error("{0}")]
    Parse(String),
    /// A key the gateway does not know (a typo, or a key of another version).
    #[error("{0}")]
    UnknownKey(String),
    /// A value out of its range, a name not allowed, or settings that do not go together.
    #[error("{0}")]
    Invalid(String),
    /// A `${NAME}` in a value that could not be replaced (most often: the variable is not set).
    #[error(transparent)]
    Variable(#[from] toolgate_core::env::EnvError),
}

impl ConfigError {
    /// A file that could not be read; `message` says which and where it was named.
    pub(crate) fn read(
        message: String,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self::Read {
            message,
            source: source.into(),
        }
    }

    /// What the TOML or JSON reader said: an unknown key, or a file that does not parse.
    pub(crate) fn from_reader(message: String) -> Self {
        if message.contains("unknown field") {
            Self::UnknownKey(message)
        } else {
            Self::Parse(message)
        }
    }
}

/// The result of loading or checking a piece of configuration.
pub(crate) type Result<T, E = ConfigError> = std::result::Result<T, E>;

/// Returns a [`ConfigError::Invalid`] with the formatted message (as `anyhow::bail!` did).
macro_rules! invalid {
    ($($arg:tt)*) => {
        return Err($crate::config_error::ConfigError::Invalid(format!($($arg)*)))
    };
}
pub(crate) use invalid;
