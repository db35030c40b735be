//! `MutatingWebhookConfiguration` and `ValidatingWebhookConfiguration`
//! (admissionregistration.k8s.io/v1) as resources: their registration,
//! kube-apiserver's defaults (failurePolicy `Fail`, matchPolicy
//! `Equivalent`, empty selectors, timeout 10 s, reinvocationPolicy
//! `Never`, scope `*`, service port 443) and validation (qualified unique
//! names, `sideEffects` `None`/`NoneOnDryRun`, timeouts 1-30 s, review
//! versions, one of `url` (https, no query or fragment) and `service`,
//! rules, selectors); and the webhooks in force, read from the store in
//! kube's order (configurations by name, webhooks as listed).

use crate::meta;
use crate::resource::ResourceInfo;
use crate::rest::Core;
use crate::status::{FieldError, GroupResource};
use base64::Engine;
use kcontrol_indexer::k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, RuleWithOperations, ValidatingWebhookConfiguration,
    WebhookClientConfig,
};
use kcontrol_indexer::k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kcontrol_indexer::labels::Selector;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

/// The API group of webhook configurations.
pub(crate) const GROUP: &str = "admissionregistration.k8s.io";
const MUTATING: &str = "mutatingwebhookconfigurations";
const VALIDATING: &str = "validatingwebhookconfigurations";

/// A configuration resource of k8s-openapi type `K` (its OpenAPI schema
/// served, and its list and map semantics used by apply and strategic
/// merge patches), with kube-apiserver's category, generation and column.
fn info<K>() -> ResourceInfo
where
    K: kcontrol_indexer::k8s_openapi::ListableResource
        + kcontrol_indexer::k8s_openapi::schemars::JsonSchema,
    K::Scope: kcontrol_indexer::Scope,
{
    let mut info = ResourceInfo::of::<K>();
    info.categories = vec!["api-extensions".into()];
    info.tracks_generation = true;
    info.printer_columns = vec![crate::resource::PrinterColumn {
        name: "Webhooks".into(),
        type_: "integer".into(),
        json_path: "!webhookcount".into(),
        description: "Number of webhooks".into(),
        priority: 0,
    }];
    info
}

/// The two resources, registered at start.
pub(crate) fn resources() -> Vec<ResourceInfo> {
    vec![
        info::<MutatingWebhookConfiguration>(),
        info::<ValidatingWebhookConfiguration>(),
    ]
}

/// kube-apiserver's defaults for every webhook of a configuration.
pub(crate) fn default_configuration(info: &ResourceInfo, obj: &mut Value) {
    let mutating = info.resource == MUTATING;
    let Some(hooks) = obj.get_mut("webhooks").and_then(Value::as_array_mut) else {
        return;
    };
    for hook in hooks.iter_mut().filter_map(Value::as_object_mut) {
        hook.entry("failurePolicy").or_insert(json!("Fail"));
        hook.entry("matchPolicy").or_insert(json!("Equivalent"));
        hook.entry("namespaceSelector").or_insert(json!({}));
        hook.entry("objectSelector").or_insert(json!({}));
        hook.entry("timeoutSeconds").or_insert(json!(10));
        if mutating {
            hook.entry("reinvocationPolicy").or_insert(json!("Never"));
        }
        if let Some(rules) = hook.get_mut("rules").and_then(Value::as_array_mut) {
            for rule in rules.iter_mut().filter_map(Value::as_object_mut) {
                rule.entry("scope").or_insert(json!("*"));
            }
        }
        if let Some(service) = hook
            .get_mut("clientConfig")
            .and_then(|c| c.get_mut("service"))
            .and_then(Value::as_object_mut)
        {
            service.entry("port").or_insert(json!(443));
        }
    }
}

fn one_of(field: String, value: &Value, allowed: &[&str], errs: &mut Vec<FieldError>) {
    match value.as_str() {
        Some(v) if allowed.contains(&v) => {}
        _ => errs.push(FieldError::not_supported(
            field,
            value.clone(),
            &allowed.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>(),
        )),
    }
}

/// kube-apiserver's validation of a configuration.
pub(crate) fn validate_configuration(info: &ResourceInfo, obj: &Value) -> Vec<FieldError> {
    let mutating = info.resource == MUTATING;
    let mut errs = Vec::new();
    let hooks = obj["webhooks"].as_array().cloned().unwrap_or_default();
    let mut names = std::collections::HashSet::new();
    for (i, hook) in hooks.iter().enumerate() {
        let at = |f: &str| format!("webhooks[{i}].{f}");
        validate_webhook_name(
            hook["name"].as_str().unwrap_or(""),
            &at("name"),
            &mut names,
            &mut errs,
        );
        validate_rules(&hook["rules"], &at("rules"), &mut errs);
        validate_policies(hook, &at, mutating, &mut errs);
        validate_review_versions(
            &hook["admissionReviewVersions"],
            &at("admissionReviewVersions"),
            &mut errs,
        );
        errs.extend(validate_client_config(
            &hook["clientConfig"],
            &at("clientConfig"),
        ));
        for sel in ["namespaceSelector", "objectSelector"] {
            if parse_selector(&hook[sel]).is_err() {
                errs.push(FieldError::invalid(
                    at(sel),
                    hook[sel].clone(),
                    "not a valid label selector",
                ));
            }
        }
    }
    errs
}

/// A webhook's name: required, a DNS subdomain of at least three segments,
/// unique in the configuration (`names` holds those seen so far).
fn validate_webhook_name(
    name: &str,
    field: &str,
    names: &mut std::collections::HashSet<String>,
    errs: &mut Vec<FieldError>,
) {
    if name.is_empty() {
        errs.push(FieldError::required(field, ""));
    } else if name.split('.').count() < 3 || !meta::is_dns1123_subdomain(name) {
        errs.push(FieldError::invalid(
            field,
            json!(name),
            "should be a domain with at least three segments separated by dots",
        ));
    } else if !names.insert(name.to_owned()) {
        errs.push(FieldError {
            kind: crate::status::FieldErrorKind::Duplicate,
            field: field.to_owned(),
            value: Some(json!(name)),
            detail: String::new(),
        });
    }
}

/// A webhook's failure, match, side-effect and (mutating) reinvocation
/// policies and its timeout; `at` names a field of the webhook.
fn validate_policies(
    hook: &Value,
    at: &dyn Fn(&str) -> String,
    mutating: bool,
    errs: &mut Vec<FieldError>,
) {
    one_of(
        at("failurePolicy"),
        &hook["failurePolicy"],
        &["Fail", "Ignore"],
        errs,
    );
    one_of(
        at("matchPolicy"),
        &hook["matchPolicy"],
        &["Equivalent", "Exact"],
        errs,
    );
    if hook["sideEffects"].is_null() {
        errs.push(FieldError::required(
            at("sideEffects"),
            "must specify one of None, NoneOnDryRun",
        ));
    } else {
        one_of(
            at("sideEffects"),
            &hook["sideEffects"],
            &["None", "NoneOnDryRun"],
            errs,
        );
    }
    if mutating {
        one_of(
            at("reinvocationPolicy"),
            &hook["reinvocationPolicy"],
            &["IfNeeded", "Never"],
            errs,
        );
    }
    let timeout = &hook["timeoutSeconds"];
    if timeout.as_i64().is_none_or(|t| !(1..=30).contains(&t)) {
        errs.push(FieldError::invalid(
            at("timeoutSeconds"),
            timeout.clone(),
            "the timeout value must be between 1 and 30 seconds",
        ));
    }
}

fn validate_review_versions(versions: &Value, field: &str, errs: &mut Vec<FieldError>) {
    let list: Vec<&str> = versions
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if list.is_empty() {
        errs.push(FieldError::required(
            field,
            "must specify one of v1, v1beta1",
        ));
    } else if !list.iter().any(|v| *v == "v1" || *v == "v1beta1") {
        errs.push(FieldError::invalid(
            field,
            versions.clone(),
            "must include at least one of v1, v1beta1",
        ));
    }
}

fn validate_rules(rules: &Value, field: &str, errs: &mut Vec<FieldError>) {
    for (j, rule) in rules.as_array().into_iter().flatten().enumerate() {
        let at = |f: &str| format!("{field}[{j}].{f}");
        for list in ["operations", "apiGroups", "apiVersions", "resources"] {
            let items: Vec<&str> = rule[list]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            if items.is_empty() {
                errs.push(FieldError::required(at(list), ""));
            } else if items.len() > 1 && items.contains(&"*") {
                errs.push(FieldError::invalid(
                    at(list),
                    rule[list].clone(),
                    "if '*' is present, must not specify other values",
                ));
            }
            if list == "operations" {
                for op in &items {
                    if !["*", "CREATE", "UPDATE", "DELETE", "CONNECT"].contains(op) {
                        errs.push(FieldError::not_supported(
                            at(list),
                            json!(op),
                            &["*", "CONNECT", "CREATE", "DELETE", "UPDATE"].map(String::from),
                        ));
                    }
                }
            }
        }
        one_of(
            at("scope"),
            &rule["scope"],
            &["*", "Cluster", "Namespaced"],
            errs,
        );
    }
}

fn validate_client_config(config: &Value, field: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    match (config.get("url"), config.get("service")) {
        (Some(url), None) => {
            let url = url.as_str().unwrap_or("");
            let reason = match url.parse::<http::Uri>() {
                Err(e) => Some(format!("not a URL: {e}")),
                Ok(u) if u.scheme_str() != Some("https") => {
                    Some("'https' is the only allowed URL scheme".to_owned())
                }
                Ok(u) if u.host().is_none_or(str::is_empty) => {
                    Some("host must be specified".to_owned())
                }
                Ok(u) if u.query().is_some() => Some("query parameters are not allowed".to_owned()),
                Ok(u) if u.authority().is_some_and(|a| a.as_str().contains('@')) => {
                    Some("user information is not permitted in the URL".to_owned())
                }
                Ok(_) if url.contains('#') => {
                    Some("fragments are not permitted in the URL".to_owned())
                }
                Ok(_) => None,
            };
            if let Some(r) = reason {
                errs.push(FieldError::invalid(format!("{field}.url"), json!(url), r));
            }
        }
        (None, Some(service)) => {
            for f in ["name", "namespace"] {
                if service[f].as_str().is_none_or(str::is_empty) {
                    errs.push(FieldError::required(
                        format!("{field}.service.{f}"),
                        "service {f} is required",
                    ));
                }
            }
            if let Some(path) = service.get("path").and_then(Value::as_str) {
                if !path.starts_with('/') {
                    errs.push(FieldError::invalid(
                        format!("{field}.service.path"),
                        json!(path),
                        "must start with a '/'",
                    ));
                }
            }
            let port = &service["port"];
            if port.as_i64().is_none_or(|p| !(1..=65535).contains(&p)) {
                errs.push(FieldError::invalid(
                    format!("{field}.service.port"),
                    port.clone(),
                    "port is not valid: must be between 1 and 65535, inclusive",
                ));
            }
        }
        _ => errs.push(FieldError::required(
            field,
            "exactly one of url or service is required",
        )),
    }
    if let Some(bundle) = config.get("caBundle").filter(|b| !b.is_null()) {
        let ok = bundle
            .as_str()
            .is_some_and(|b| base64::engine::general_purpose::STANDARD.decode(b).is_ok());
        if !ok {
            errs.push(FieldError::invalid(
                format!("{field}.caBundle"),
                bundle.clone(),
                "illegal base64 data",
            ));
        }
    }
    errs
}

/// A parsed label selector (an absent or empty one selects everything).
fn parse_selector(v: &Value) -> Result<Selector, String> {
    if v.is_null() {
        return Ok(Selector::everything());
    }
    let s: LabelSelector = serde_json::from_value(v.clone()).map_err(|e| e.to_string())?;
    Selector::from_label_selector(&s).map_err(|e| e.to_string())
}

/// One webhook in force.
#[derive(Debug)]
pub(crate) struct Hook {
    /// Configuration name and index: the identity reinvocation tracks.
    pub uid: String,
    pub name: String,
    pub rules: Vec<RuleWithOperations>,
    pub ignore_failures: bool,
    pub equivalent: bool,
    pub namespace_selector: Selector,
    pub object_selector: Selector,
    pub side_effects: String,
    pub timeout: Duration,
    pub review_versions: Vec<String>,
    pub reinvoke_if_needed: bool,
    pub client: WebhookClientConfig,
}

/// The fields both kinds of webhook share, as read from the stored JSON.
fn hook(config: &str, index: usize, v: &Value) -> Option<Hook> {
    let name = v["name"].as_str()?.to_owned();
    let client: WebhookClientConfig = serde_json::from_value(v["clientConfig"].clone()).ok()?;
    let rules: Vec<RuleWithOperations> =
        serde_json::from_value(v.get("rules").cloned().unwrap_or(json!([]))).ok()?;
    Some(Hook {
        uid: format!("{config}/{index}"),
        name,
        rules,
        ignore_failures: v["failurePolicy"] == "Ignore",
        equivalent: v["matchPolicy"] != "Exact",
        namespace_selector: parse_selector(&v["namespaceSelector"]).ok()?,
        object_selector: parse_selector(&v["objectSelector"]).ok()?,
        side_effects: v["sideEffects"].as_str().unwrap_or("").to_owned(),
        timeout: Duration::from_secs(v["timeoutSeconds"].as_u64().unwrap_or(10).clamp(1, 30)),
        review_versions: v["admissionReviewVersions"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default(),
        reinvoke_if_needed: v["reinvocationPolicy"] == "IfNeeded",
        client,
    })
}

/// The mutating (`true`) or validating webhooks in force, configurations
/// by name, each configuration's webhooks in order.
pub(crate) fn hooks(core: &Core, mutating: bool) -> Vec<Arc<Hook>> {
    let resource = if mutating { MUTATING } else { VALIDATING };
    let Some(rs) = core.store.resource(&GroupResource::new(GROUP, resource)) else {
        return Vec::new();
    };
    let (mut configs, _, _) = rs.snapshot(&core.store, "");
    configs.sort_by(|a, b| a.name().cmp(b.name()));
    let mut out = Vec::new();
    for config in configs {
        let valid = if mutating {
            serde_json::from_value::<MutatingWebhookConfiguration>(config.value().clone()).is_ok()
        } else {
            serde_json::from_value::<ValidatingWebhookConfiguration>(config.value().clone()).is_ok()
        };
        if !valid {
            tracing::warn!(
                configuration = config.name(),
                "a stored webhook configuration does not decode; skipped"
            );
            continue;
        }
        let list = config.value()["webhooks"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for (i, v) in list.iter().enumerate() {
            match hook(config.name(), i, v) {
                Some(h) => out.push(Arc::new(h)),
                None => tracing::warn!(
                    configuration = config.name(),
                    index = i,
                    "a webhook does not decode; skipped"
                ),
            }
        }
    }
    out
}

/// Whether any webhook configuration exists (cheap: the fast path of
/// every write when none does).
pub(crate) fn any(core: &Core) -> bool {
    [MUTATING, VALIDATING].iter().any(|r| {
        core.store
            .resource(&GroupResource::new(GROUP, r))
            .is_some_and(|rs| rs.len() > 0)
    })
}

/// `kubectl get`'s WEBHOOKS column.
pub(crate) fn webhook_count(obj: &Value) -> Value {
    json!(obj["webhooks"].as_array().map_or(0, Vec::len))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(hook: Value) -> (ResourceInfo, Value) {
        let info = info::<ValidatingWebhookConfiguration>();
        let mut obj = json!({"metadata": {"name": "c"}, "webhooks": [hook]});
        default_configuration(&info, &mut obj);
        (info, obj)
    }

    fn messages(hook: Value) -> Vec<String> {
        let (info, obj) = config(hook);
        validate_configuration(&info, &obj)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn defaults_are_kube_apiservers() {
        let (_, obj) = config(
            json!({"name": "a.b.c", "clientConfig": {"service": {"name": "s", "namespace": "n"}}, "rules": [{"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"]}]}),
        );
        let h = &obj["webhooks"][0];
        assert_eq!(h["failurePolicy"], "Fail");
        assert_eq!(h["matchPolicy"], "Equivalent");
        assert_eq!(h["timeoutSeconds"], 10);
        assert_eq!(h["rules"][0]["scope"], "*");
        assert_eq!(h["clientConfig"]["service"]["port"], 443);
    }

    #[test]
    fn invalid_configurations_name_the_field() {
        let good = json!({"name": "a.b.c", "sideEffects": "None", "admissionReviewVersions": ["v1"],
            "clientConfig": {"url": "https://127.0.0.1:1/x"}});
        assert!(messages(good.clone()).is_empty());
        let mut bad = good.clone();
        bad["name"] = json!("short.name");
        bad["timeoutSeconds"] = json!(31);
        bad["sideEffects"] = json!("Some");
        bad["clientConfig"] = json!({"url": "http://127.0.0.1/x?a=b"});
        let m = messages(bad);
        assert!(
            m.iter()
                .any(|e| e.starts_with("webhooks[0].name: Invalid value")),
            "{m:?}"
        );
        assert!(
            m.iter()
                .any(|e| e.contains("the timeout value must be between 1 and 30 seconds")),
            "{m:?}"
        );
        assert!(
            m.iter()
                .any(|e| e.starts_with("webhooks[0].sideEffects: Unsupported value")),
            "{m:?}"
        );
        assert!(
            m.iter()
                .any(|e| e.contains("'https' is the only allowed URL scheme")),
            "{m:?}"
        );
        let mut neither = good;
        neither["clientConfig"] = json!({});
        assert!(messages(neither)
            .iter()
            .any(|e| e.contains("exactly one of url or service is required")));
    }
}
