//! Label-selector parsing: any text parses to a selector or an error; a
//! parsed selector prints a canonical form that parses back to the same
//! selector, and matching it against a label set returns.
#![no_main]

use std::collections::BTreeMap;

use kcontrol_indexer::labels::Selector;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(selector) = Selector::parse(text) else {
        return;
    };
    let printed = selector.to_string();
    let again = Selector::parse(&printed)
        .unwrap_or_else(|e| panic!("{text:?} printed as {printed:?}, which does not parse: {e}"));
    assert_eq!(again, selector, "{text:?} -> {printed:?}");
    let labels: BTreeMap<String, String> = [("app", "web"), ("tier", "1"), ("env", "")]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    let _ = selector.matches(&labels);
    let _ = selector.matches(&BTreeMap::new());
});
