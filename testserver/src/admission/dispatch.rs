//! Calling the webhooks of a request, as kube-apiserver's mutating and
//! validating dispatchers do. Mutating webhooks run one after the other,
//! each on the object the previous ones left (converted to the version its
//! rule matched), their JSON patches applied; when one changed the
//! object, the `reinvocationPolicy: IfNeeded` webhooks called before it
//! run once more, after the first round. Validating webhooks run
//! concurrently on the final object; the first refusal (in configuration
//! order) wins. A webhook that cannot be called, times out or answers
//! nonsense is skipped with `failurePolicy: Ignore` and fails the request
//! with `Fail` (500 `failed calling webhook "<name>": …`); a refusal is
//! answered with the webhook's Status; a dry run refuses webhooks with
//! side effects (400).

use super::client::{self, Services};
use super::config::{self, Hook};
use super::convert;
use super::matching::{should_call, Attributes, Invocation, Operation};
use super::review;
use crate::rest::Core;
use crate::status::StatusError;
use serde_json::Value;
use std::collections::{HashMap, HashSet};

/// How a call went wrong.
enum HookError {
    /// Could not call, or the answer was unusable: the failure policy
    /// decides.
    Calling(String),
    /// A refusal or an error failing the request whatever the policy.
    Fatal(StatusError),
}

/// What one webhook call gave.
struct Called {
    patched: Option<Value>,
    warnings: Vec<String>,
}

async fn call(
    services: &Services,
    attrs: &Attributes,
    inv: &Invocation,
    object: Option<&Value>,
    old: Option<&Value>,
    mutating: bool,
) -> Result<Called, HookError> {
    let hook = &inv.hook;
    let calling =
        |why: String| HookError::Calling(format!("failed calling webhook {:?}: {why}", hook.name));
    if attrs.dry_run && !matches!(hook.side_effects.as_str(), "None" | "NoneOnDryRun") {
        return Err(HookError::Fatal(StatusError::bad_request(format!(
            "admission webhook {:?} does not support dry run",
            hook.name
        ))));
    }
    let Some(version) = hook
        .review_versions
        .iter()
        .find(|v| *v == "v1" || *v == "v1beta1")
    else {
        return Err(calling("could not create admission objects: webhook does not accept known AdmissionReview versions (v1, v1beta1)".into()));
    };
    let uid = uuid::Uuid::new_v4().to_string();
    let request = review::request(&uid, version, attrs, inv, object, old);
    let body = serde_json::to_vec(&request)
        .map_err(|e| HookError::Fatal(StatusError::internal(&e.to_string())))?;
    let answer = client::post(services, &hook.client, hook.timeout, body)
        .await
        .map_err(|e| calling(format!("failed to call webhook: {e}")))?;
    let answer = review::verify(&answer, &uid, version, mutating).map_err(|(invalid, e)| {
        if invalid {
            calling(format!("received invalid webhook response: {e}"))
        } else {
            calling(format!("failed to call webhook: {e}"))
        }
    })?;
    if !answer.allowed {
        return Err(HookError::Fatal(review::denial(&hook.name, &answer.result)));
    }
    let patched = match (answer.patch, object) {
        (None, _) => None,
        (Some(p), _) if p == b"[]" => None,
        (Some(_), None) => {
            return Err(HookError::Fatal(StatusError::internal(&format!(
                "admission webhook {:?} attempted to modify the object, which is not supported for this operation",
                hook.name
            ))))
        }
        (Some(p), Some(object)) => Some(apply_patch(&hook.name, object, &p)?),
    };
    Ok(Called {
        patched,
        warnings: answer.warnings,
    })
}

fn apply_patch(webhook: &str, object: &Value, patch: &[u8]) -> Result<Value, HookError> {
    let patch: json_patch::Patch = serde_json::from_slice(patch).map_err(|e| {
        HookError::Calling(format!(
            "failed calling webhook {webhook:?}: received undecodable patch in webhook response: {e}"
        ))
    })?;
    let mut patched = object.clone();
    json_patch::patch(&mut patched, &patch.0)
        .map_err(|e| HookError::Fatal(StatusError::internal(&e.to_string())))?;
    Ok(patched)
}

/// The failure policy's verdict on a failed call: `Ok` to go on.
fn judge(hook: &Hook, e: HookError) -> Result<(), StatusError> {
    match e {
        HookError::Calling(message) if hook.ignore_failures => {
            tracing::warn!(webhook = %hook.name, %message, "failed calling webhook, failing open");
            Ok(())
        }
        HookError::Calling(message) => {
            tracing::warn!(webhook = %hook.name, %message, "failed calling webhook, failing closed");
            Err(StatusError::internal(&message))
        }
        HookError::Fatal(e) => Err(e),
    }
}

/// An object and the version it is at, converted on demand.
struct Versioned<'a> {
    core: &'a Core,
    services: &'a Services,
    attrs: &'a Attributes,
    at: HashMap<String, Value>,
}

impl Versioned<'_> {
    async fn get(
        &mut self,
        value: Option<&Value>,
        version: &str,
        from: &str,
    ) -> Result<Option<Value>, StatusError> {
        let Some(value) = value else { return Ok(None) };
        if version == from {
            return Ok(Some(value.clone()));
        }
        if let Some(v) = self.at.get(version) {
            return Ok(Some(v.clone()));
        }
        let converted = convert::convert(
            self.core,
            self.services,
            &self.attrs.info,
            vec![value.clone()],
            version,
        )
        .await?
        .pop()
        .unwrap_or(Value::Null);
        self.at.insert(version.to_owned(), converted.clone());
        Ok(Some(converted))
    }
}

/// Converts `object` from `from` to `to` (a no-op when equal).
async fn to_version(
    core: &Core,
    services: &Services,
    attrs: &Attributes,
    object: Value,
    to: &str,
) -> Result<Value, StatusError> {
    if object["apiVersion"]
        .as_str()
        .is_some_and(|v| v.ends_with(&format!("/{to}")) || v == to)
    {
        return Ok(object);
    }
    Ok(
        convert::convert(core, services, &attrs.info, vec![object], to)
            .await?
            .pop()
            .unwrap_or(Value::Null),
    )
}

/// Runs the mutating webhooks; the object (at the request's version) and
/// their warnings.
pub(crate) async fn mutate(
    core: &Core,
    services: &Services,
    attrs: &Attributes,
    object: Option<Value>,
    old: Option<&Value>,
) -> Result<(Option<Value>, Vec<String>), StatusError> {
    let hooks = config::hooks(core, true);
    let mut warnings = Vec::new();
    let Some(mut current) = object else {
        // DELETE: kube calls them with neither object; nothing can change
        for hook in &hooks {
            if let Some(inv) = should_call(core, hook, attrs, None, None)? {
                match call(services, attrs, &inv, None, None, true).await {
                    Ok(c) => warnings.extend(c.warnings),
                    Err(e) => judge(hook, e)?,
                }
            }
        }
        return Ok((None, warnings));
    };
    let request_version = attrs.info.version.clone();
    let mut version = request_version.clone();
    let mut olds = Versioned {
        core,
        services,
        attrs,
        at: HashMap::new(),
    };
    let (mut invoked, mut reinvoke, mut again) = (HashSet::new(), HashSet::new(), false);
    for round in 0..2 {
        if round == 1 && !again {
            break;
        }
        for hook in &hooks {
            if round == 1 && !reinvoke.contains(&hook.uid) {
                continue;
            }
            let Some(inv) = should_call(core, hook, attrs, Some(&current), old)? else {
                continue;
            };
            current = to_version(core, services, attrs, current, &inv.info.version).await?;
            version.clone_from(&inv.info.version);
            let old_at = olds.get(old, &inv.info.version, &request_version).await?;
            match call(services, attrs, &inv, Some(&current), old_at.as_ref(), true).await {
                Ok(c) => {
                    warnings.extend(c.warnings);
                    if let Some(patched) = c.patched.filter(|p| *p != current) {
                        current = patched;
                        // those called before it see the change once more
                        reinvoke.extend(invoked.drain());
                        again = true;
                    }
                }
                Err(e) => judge(hook, e)?,
            }
            if hook.reinvoke_if_needed {
                invoked.insert(hook.uid.clone());
            }
        }
    }
    if version != request_version {
        current = to_version(core, services, attrs, current, &request_version).await?;
    }
    Ok((Some(current), warnings))
}

/// Runs the validating webhooks on the final object (at the request's
/// version); their warnings.
pub(crate) async fn validate(
    core: &Core,
    services: &Services,
    attrs: &Attributes,
    object: Option<&Value>,
    old: Option<&Value>,
) -> Result<Vec<String>, StatusError> {
    let hooks = config::hooks(core, false);
    let mut invocations = Vec::new();
    for hook in &hooks {
        if let Some(inv) = should_call(core, hook, attrs, object, old)? {
            invocations.push(inv);
        }
    }
    if invocations.is_empty() {
        return Ok(Vec::new());
    }
    let request_version = attrs.info.version.clone();
    let mut objects = Versioned {
        core,
        services,
        attrs,
        at: HashMap::new(),
    };
    let mut olds = Versioned {
        core,
        services,
        attrs,
        at: HashMap::new(),
    };
    let mut prepared = Vec::new();
    for inv in invocations {
        let o = objects
            .get(object, &inv.info.version, &request_version)
            .await?;
        let p = olds.get(old, &inv.info.version, &request_version).await?;
        prepared.push((inv, o, p));
    }
    let calls = prepared
        .iter()
        .map(|(inv, o, p)| call(services, attrs, inv, o.as_ref(), p.as_ref(), false));
    let results = futures::future::join_all(calls).await;
    let mut warnings = Vec::new();
    for ((inv, _, _), result) in prepared.iter().zip(results) {
        match result {
            Ok(c) => warnings.extend(c.warnings),
            Err(e) => judge(&inv.hook, e)?,
        }
    }
    Ok(warnings)
}

/// Whether any webhook could be called for `operation` (a cheap check
/// before preparing anything).
pub(crate) fn any_hooks(core: &Core) -> bool {
    config::any(core)
}

impl Operation {
    /// The options kind of the operation, as sent in `options`.
    pub(crate) fn options_kind(self) -> &'static str {
        match self {
            Self::Create => "CreateOptions",
            Self::Update => "UpdateOptions",
            Self::Delete => "DeleteOptions",
        }
    }
}
