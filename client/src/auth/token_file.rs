//! A bearer token read from a file and re-read when the file changes
//! (modification time or size) or a minute has passed, as client-go does for
//! projected service-account tokens. When a re-read fails, the last good
//! token is kept.
//!
//! The file is small and local, so it is read with blocking calls (one
//! `stat` per request, a read when it changed); no thread hop is worth it.

use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use http::HeaderValue;
use parking_lot::Mutex;

use super::{bearer_header, AuthError};

/// Re-read the file at least this often, even if it looks unchanged.
const REFRESH_PERIOD: Duration = Duration::from_secs(60);

/// The file's identity when it was last read.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Stamp {
    modified: Option<SystemTime>,
    len: u64,
}

struct Cached {
    header: HeaderValue,
    read_at: Instant,
    stamp: Option<Stamp>,
}

pub(crate) struct TokenFile {
    path: PathBuf,
    cached: Mutex<Option<Cached>>,
}

impl TokenFile {
    pub(crate) fn new(path: PathBuf) -> Self {
        Self {
            path,
            cached: Mutex::new(None),
        }
    }

    fn stamp(&self) -> Option<Stamp> {
        let meta = std::fs::metadata(&self.path).ok()?;
        Some(Stamp {
            modified: meta.modified().ok(),
            len: meta.len(),
        })
    }

    fn read(&self) -> Result<HeaderValue, AuthError> {
        let text = std::fs::read_to_string(&self.path).map_err(|source| AuthError::TokenFile {
            path: self.path.clone(),
            source,
        })?;
        if text.trim().is_empty() {
            return Err(AuthError::EmptyTokenFile(self.path.clone()));
        }
        bearer_header(&text)
    }

    /// The current `Authorization` header.
    pub(crate) fn header(&self) -> Result<HeaderValue, AuthError> {
        let stamp = self.stamp();
        let mut cached = self.cached.lock();
        if let Some(c) = cached.as_ref() {
            let fresh = c.read_at.elapsed() < REFRESH_PERIOD && stamp.is_some() && c.stamp == stamp;
            if fresh {
                return Ok(c.header.clone());
            }
        }
        match self.read() {
            Ok(header) => {
                *cached = Some(Cached {
                    header: header.clone(),
                    read_at: Instant::now(),
                    stamp,
                });
                Ok(header)
            }
            Err(err) => match cached.as_mut() {
                Some(c) => {
                    tracing::warn!(path = %self.path.display(), error = %err, "re-reading the token file failed; using the last token read");
                    c.read_at = Instant::now();
                    Ok(c.header.clone())
                }
                None => Err(err),
            },
        }
    }

    /// After a 401: re-reads the file and says whether the token differs
    /// from the one the failed request used.
    pub(crate) fn changed_since(&self, used: Option<&HeaderValue>) -> bool {
        let Ok(header) = self.read() else {
            return false;
        };
        let changed = used != Some(&header);
        *self.cached.lock() = Some(Cached {
            header,
            read_at: Instant::now(),
            stamp: self.stamp(),
        });
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rereads_when_the_file_changes_and_keeps_the_last_good_token() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, "one\n").unwrap();
        let file = TokenFile::new(path.clone());
        assert_eq!(file.header().unwrap(), "Bearer one");
        // A different size is a change even when the clock did not tick.
        std::fs::write(&path, "second").unwrap();
        assert_eq!(file.header().unwrap(), "Bearer second");
        std::fs::remove_file(&path).unwrap();
        assert_eq!(file.header().unwrap(), "Bearer second");
        assert!(!file.changed_since(None));
    }

    #[test]
    fn missing_or_empty_files_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let file = TokenFile::new(dir.path().join("absent"));
        assert!(matches!(file.header(), Err(AuthError::TokenFile { .. })));
        let empty = dir.path().join("empty");
        std::fs::write(&empty, " \n").unwrap();
        assert!(matches!(
            TokenFile::new(empty).header(),
            Err(AuthError::EmptyTokenFile(_))
        ));
    }
}
