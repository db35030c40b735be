//! The streaming list scanner: the input is cut into chunks at points the
//! input chooses. It must never panic, every item and field value it yields
//! must be within the size limit, and a body serde_json accepts as an object
//! whose `items` is an array (and at most 4 KiB long) must scan without error
//! and yield exactly those items, unless it has two `items` fields, which the
//! scanner refuses by design.
#![no_main]

use bytes::Bytes;
use kcontrol_client::list_stream::{ListPart, ListScanner};
use libfuzzer_sys::fuzz_target;

const LIMIT: usize = 4096;

fuzz_target!(|data: &[u8]| {
    let Some((&control, rest)) = data.split_first() else {
        return;
    };
    let step = 1 + usize::from(control) % 64;
    let mut scanner = ListScanner::new(LIMIT);
    let mut items = Vec::new();
    let mut failed = false;
    // A second `items` array is refused by design (its items cannot be
    // streamed after the first's); serde_json keeps the last one instead.
    let mut duplicate_items = false;
    'outer: for chunk in rest.chunks(step) {
        scanner.push(Bytes::copy_from_slice(chunk));
        loop {
            match scanner.next_part() {
                Ok(Some(ListPart::Item(bytes))) => {
                    assert!(bytes.len() <= LIMIT);
                    items.push(bytes);
                }
                Ok(Some(ListPart::Field(_, bytes))) => assert!(bytes.len() <= LIMIT),
                Ok(None) => break,
                Err(e) => {
                    duplicate_items = e.message.contains("duplicate field \"items\"");
                    failed = true;
                    break 'outer;
                }
            }
        }
    }
    if !failed {
        failed = scanner.finish().is_err();
    }
    // Differential check against serde_json on bodies it accepts.
    let Ok(serde_json::Value::Object(map)) = serde_json::from_slice::<serde_json::Value>(rest)
    else {
        return;
    };
    let Some(serde_json::Value::Array(expected)) = map.get("items") else {
        return;
    };
    if rest.len() > LIMIT || duplicate_items {
        return; // a value may legitimately exceed the limit
    }
    assert!(!failed, "serde_json accepts the body, the scanner does not");
    let scanned: Vec<serde_json::Value> = items
        .iter()
        .map(|b| serde_json::from_slice(b).expect("a scanned item is valid JSON"))
        .collect();
    assert_eq!(&scanned, expected);
});
