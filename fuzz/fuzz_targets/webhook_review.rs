//! The webhook server's decoding of `AdmissionReview` and
//! `ConversionReview` bodies and the encoding of its answers (to a review
//! that decoded, or to an error saying why it did not), through
//! `kcontrol_controller::webhook::fuzzing::fuzz_decode`: any bytes end in
//! an answer, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    kcontrol_controller::webhook::fuzzing::fuzz_decode(data);
});
