//! Appending a body chunk to the unread rest of the previous ones, shared by
//! the body decoders (watch frames, streamed lists).

use bytes::{Bytes, BytesMut};

/// Appends `chunk` to `current`, the unread bytes of earlier chunks: no copy
/// when everything before was read (the usual case), one copy otherwise.
pub(crate) fn append(current: &mut Bytes, chunk: Bytes) {
    if current.is_empty() {
        *current = chunk;
    } else {
        let mut joined = BytesMut::with_capacity(current.len() + chunk.len());
        joined.extend_from_slice(current);
        joined.extend_from_slice(&chunk);
        *current = joined.freeze();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appends_without_a_copy_when_nothing_is_left() {
        let mut current = Bytes::new();
        let chunk = Bytes::from_static(b"abc");
        append(&mut current, chunk.clone());
        assert_eq!(current.as_ptr(), chunk.as_ptr());
        append(&mut current, Bytes::from_static(b"de"));
        assert_eq!(&current[..], b"abcde");
    }
}
