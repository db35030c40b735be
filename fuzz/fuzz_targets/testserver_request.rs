//! The testserver's request parsing: method, path and query (routing,
//! selectors, parameters), content negotiation, body decoding and patches,
//! through `kcontrol_testserver::fuzzing::parse_request`. Input layout:
//! method, target, content type and body separated by NUL bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut parts = data.splitn(4, |&b| b == 0);
    let method = parts.next().unwrap_or_default();
    let target = String::from_utf8_lossy(parts.next().unwrap_or_default());
    let content_type = String::from_utf8_lossy(parts.next().unwrap_or_default());
    let body = parts.next().unwrap_or_default();
    kcontrol_testserver::fuzzing::parse_request(method, &target, &content_type, body);
});
