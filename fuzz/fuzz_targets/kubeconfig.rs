//! Kubeconfig parsing and resolution: any YAML text must parse to a
//! kubeconfig or a `ConfigError`, and resolving a parsed kubeconfig into a
//! `Config` (for the current context and for every named one) must return,
//! never panic; `Debug` and error messages must render.
#![no_main]

use kcontrol_client::{Config, Kubeconfig, KubeconfigOptions};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(kubeconfig) = Kubeconfig::from_yaml(text) else {
        return;
    };
    let _ = format!("{kubeconfig:?}");
    match Config::from_custom_kubeconfig(&kubeconfig, &KubeconfigOptions::default()) {
        Ok(config) => {
            let _ = format!("{config:?}");
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
    for context in &kubeconfig.contexts {
        let options = KubeconfigOptions {
            context: Some(context.name.clone()),
            ..KubeconfigOptions::default()
        };
        let _ = Config::from_custom_kubeconfig(&kubeconfig, &options).map(|c| format!("{c:?}"));
    }
});
