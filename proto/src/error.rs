//! The crate's [`Error`]: what was wrong, and where (the JSON path of the
//! field being decoded).

use std::fmt;

/// Why protobuf input could not be decoded.
///
/// One pointer wide (the details are boxed): every `Result` of the
/// decoder carries it, and a small `Err` keeps the `Ok` path's returns in
/// registers.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct Error(Box<Details>);

#[derive(Clone, Debug, PartialEq, Eq)]
struct Details {
    message: Box<str>,
    /// The JSON path of the field, innermost last (`metadata.labels`).
    path: Vec<&'static str>,
}

impl Error {
    /// An error with a message.
    #[cold]
    pub(crate) fn new(message: impl Into<Box<str>>) -> Self {
        Self(Box::new(Details {
            message: message.into(),
            path: Vec::new(),
        }))
    }

    /// Malformed wire bytes.
    #[cold]
    pub(crate) fn wire(message: impl fmt::Display) -> Self {
        Self::new(format!("malformed protobuf: {message}"))
    }

    /// Adds the name of the field the error happened in.
    #[cold]
    pub(crate) fn in_field(mut self, json: &'static str) -> Self {
        if !json.is_empty() {
            self.0.path.push(json);
        }
        self
    }

    /// The message, without the path.
    pub fn message(&self) -> &str {
        &self.0.message
    }

    /// The JSON path of the field where decoding failed (`metadata.labels`),
    /// empty at the top.
    pub fn path(&self) -> String {
        self.0
            .path
            .iter()
            .rev()
            .copied()
            .collect::<Vec<_>>()
            .join(".")
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.path.is_empty() {
            f.write_str(&self.0.message)
        } else {
            write!(f, "field {}: {}", self.path(), self.0.message)
        }
    }
}

impl serde::de::Error for Error {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Self::new(msg.to_string())
    }
}
