//! List and watch filters: label selectors (parsed by
//! `kcontrol_indexer::labels`) and field selectors (apimachinery's
//! `fields` syntax: `a=b`, `a==b`, `a!=b`, comma-joined, `\` escapes).

use crate::resource::ResourceInfo;
use crate::status::StatusError;
use crate::store::StoredObject;
use kcontrol_indexer::labels::Selector;
use serde_json::Value;

/// One field requirement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FieldRequirement {
    pub field: String,
    pub value: String,
    pub equal: bool,
}

/// A parsed field selector (AND of requirements).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct FieldSelector {
    pub requirements: Vec<FieldRequirement>,
}

fn split_unescaped(s: &str, sep: char) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut escaped = false;
    for c in s.chars() {
        if escaped {
            cur.push('\\');
            cur.push(c);
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == sep {
            out.push(std::mem::take(&mut cur));
        } else {
            cur.push(c);
        }
    }
    if escaped {
        cur.push('\\');
    }
    out.push(cur);
    out
}

fn unescape(s: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some(n @ ('\\' | ',' | '=')) => out.push(n),
                Some(n) => return Err(format!("invalid escape sequence: \\{n}")),
                None => return Err("unterminated escape sequence".into()),
            }
        } else {
            out.push(c);
        }
    }
    Ok(out)
}

/// Byte index of the first unescaped occurrence of `pat`.
fn find_unescaped(s: &str, pat: &str) -> Option<usize> {
    let bytes = s.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes.get(i) == Some(&b'\\') {
            i += 2;
            continue;
        }
        if s.get(i..).is_some_and(|rest| rest.starts_with(pat)) {
            return Some(i);
        }
        i += 1;
    }
    None
}

impl FieldSelector {
    /// Parses a field selector; errors read like kube-apiserver's.
    pub(crate) fn parse(input: &str) -> Result<Self, String> {
        let mut requirements = Vec::new();
        for term in split_unescaped(input, ',') {
            if term.is_empty() {
                continue;
            }
            let found = ["!=", "==", "="]
                .iter()
                .filter_map(|op| find_unescaped(&term, op).map(|i| (i, *op)))
                .min_by_key(|(i, _)| *i);
            let Some((i, op)) = found else {
                return Err(format!(
                    "invalid selector: '{input}'; can't understand '{term}'"
                ));
            };
            let field = unescape(term.get(..i).unwrap_or(""))?;
            let value = unescape(term.get(i + op.len()..).unwrap_or(""))?;
            requirements.push(FieldRequirement {
                field,
                value,
                equal: op != "!=",
            });
        }
        Ok(Self { requirements })
    }

    /// The value a field has on an object, as kube's field sets give it.
    pub(crate) fn field_value(obj: &Value, field: &str) -> String {
        let mut cur = obj;
        for part in field.split('.') {
            match cur.get(part) {
                Some(v) => cur = v,
                None => return String::new(),
            }
        }
        match cur {
            Value::String(s) => s.clone(),
            Value::Null => String::new(),
            Value::Bool(_) | Value::Number(_) => cur.to_string(),
            other => other.to_string(),
        }
    }

    /// Whether an object satisfies every requirement.
    pub(crate) fn matches(&self, obj: &Value) -> bool {
        self.requirements
            .iter()
            .all(|r| (Self::field_value(obj, &r.field) == r.value) == r.equal)
    }
}

/// Label and field selectors of a list or watch.
#[derive(Clone, Debug, Default)]
pub(crate) struct Filter {
    pub labels: Option<Selector>,
    pub fields: Option<FieldSelector>,
}

impl Filter {
    /// Parses the `labelSelector` and `fieldSelector` parameters for a resource.
    pub(crate) fn parse(
        info: &ResourceInfo,
        labels: Option<&str>,
        fields: Option<&str>,
    ) -> Result<Self, StatusError> {
        let labels = match labels.filter(|s| !s.trim().is_empty()) {
            Some(s) => Some(Selector::parse(s).map_err(|e| {
                StatusError::bad_request(format!("unable to parse requirement: {e}"))
            })?),
            None => None,
        };
        let fields = match fields.filter(|s| !s.trim().is_empty()) {
            Some(s) => {
                let sel = FieldSelector::parse(s).map_err(StatusError::bad_request)?;
                for r in &sel.requirements {
                    if !info.field_allowed(&r.field) {
                        return Err(StatusError::bad_request(format!(
                            "field label not supported: {}",
                            r.field
                        )));
                    }
                }
                Some(sel)
            }
            None => None,
        };
        Ok(Self { labels, fields })
    }

    /// No selector given.
    pub(crate) fn is_empty(&self) -> bool {
        self.labels.as_ref().is_none_or(Selector::is_empty)
            && self
                .fields
                .as_ref()
                .is_none_or(|f| f.requirements.is_empty())
    }

    /// Whether a stored object passes both selectors.
    pub(crate) fn matches(&self, obj: &StoredObject) -> bool {
        self.labels.as_ref().is_none_or(|s| s.matches(obj.labels()))
            && self.fields.as_ref().is_none_or(|f| f.matches(obj.value()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_field_selectors_like_apimachinery() {
        let s = FieldSelector::parse("metadata.name=a\\,b,metadata.namespace!=x,type==y")
            .unwrap_or_default();
        assert_eq!(s.requirements.len(), 3);
        assert_eq!(
            s.requirements.first().map(|r| r.value.as_str()),
            Some("a,b")
        );
        assert_eq!(s.requirements.get(1).map(|r| r.equal), Some(false));
        assert_eq!(
            s.requirements
                .get(2)
                .map(|r| (r.field.as_str(), r.value.as_str(), r.equal)),
            Some(("type", "y", true))
        );
        assert!(FieldSelector::parse("nonsense").is_err());
        assert_eq!(
            FieldSelector::parse("").map(|s| s.requirements.len()),
            Ok(0)
        );
    }

    #[test]
    fn matches_nested_fields() {
        let obj = json!({"metadata": {"name": "a"}, "involvedObject": {"kind": "Foo", "uid": "u"}, "count": 3});
        let s = FieldSelector::parse("involvedObject.kind=Foo,metadata.name=a,count=3")
            .unwrap_or_default();
        assert!(s.matches(&obj));
        let s = FieldSelector::parse("involvedObject.kind!=Foo").unwrap_or_default();
        assert!(!s.matches(&obj));
        let s = FieldSelector::parse("missing=").unwrap_or_default();
        assert!(s.matches(&obj));
    }
}
