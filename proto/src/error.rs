//! The crate's [`Error`]: what was wrong, and where (the JSON path of the
//! field being decoded).

use std::fmt;

/// Why protobuf input could not be decoded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct Error {
    message: Box<str>,
    /// The JSON path of the field, innermost last (`metadata.labels`).
    path: Vec<&'static str>,
}

impl Error {
    /// An error with a message.
    pub(crate) fn new(message: impl Into<Box<str>>) -> Self {
        Self {
            message: message.into(),
            path: Vec::new(),
        }
    }

    /// Malformed wire bytes.
    pub(crate) fn wire(message: impl fmt::Display) -> Self {
        Self::new(format!("malformed protobuf: {message}"))
    }

    /// Adds the name of the field the error happened in.
    pub(crate) fn in_field(mut self, json: &'static str) -> Self {
        if !json.is_empty() {
            self.path.push(json);
        }
        self
    }

    /// The message, without the path.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The JSON path of the field where decoding failed (`metadata.labels`),
    /// empty at the top.
    pub fn path(&self) -> String {
        self.path
            .iter()
            .rev()
            .copied()
            .collect::<Vec<_>>()
            .join(".")
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "field {}: {}", self.path(), self.message)
        }
    }
}

impl serde::de::Error for Error {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Self::new(msg.to_string())
    }
}
