//! `Status` decoding: any error body with any HTTP code becomes an
//! `ApiError` (never a panic), whose predicates, retry delay and message
//! can all be read; a body that decodes as a `Status` re-encodes.
#![no_main]

use std::time::Duration;

use kcontrol_client::{ApiError, Error, Status};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 3 {
        return;
    }
    let code = u16::from_le_bytes([data[0], data[1]]) % 1000;
    let retry = (data[2] & 1 == 1).then(|| Duration::from_secs(u64::from(data[2])));
    let body = &data[3..];
    let api = ApiError::from_response(code, retry, body);
    let _ = api.to_string();
    let _ = api.retry_after();
    let _ = api.code();
    let error = Error::from(api);
    let _ = (
        error.is_not_found(),
        error.is_conflict(),
        error.is_gone(),
        error.is_expired(),
        error.is_too_large_resource_version(),
        error.is_too_many_requests(),
        error.retry_after(),
        error.to_string(),
        format!("{error:?}"),
    );
    if let Ok(status) = serde_json::from_slice::<Status>(body) {
        let _ = (
            status.code(),
            status.reason(),
            status.message(),
            status.retry_after(),
        );
        serde_json::to_vec(&status).expect("a decoded Status re-encodes");
    }
});
