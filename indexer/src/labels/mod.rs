//! Label selectors: parse the Kubernetes syntax, match label sets, print
//! the canonical form.
//!
//! The grammar and its corner cases are apimachinery's (`k8s.io/apimachinery/pkg/labels`):
//! `a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x)`, `a`, `!a`, `a>1`, `a<1`,
//! joined by commas (a logical AND; there is no OR), with spaces, tabs and
//! newlines allowed between tokens. Keys and values are validated as the API
//! server validates labels. An empty selector matches everything.
//!
//! ```
//! use std::collections::BTreeMap;
//! use kcontrol_indexer::labels::Selector;
//!
//! let selector = Selector::parse("environment in (production, qa), tier != frontend, !canary")?;
//! assert_eq!(selector.to_string(), "!canary,environment in (production,qa),tier!=frontend");
//!
//! let labels = BTreeMap::from([("environment".to_owned(), "qa".to_owned())]);
//! assert!(selector.matches(&labels));
//!
//! let err = Selector::parse("x=a||y=b").unwrap_err();
//! assert_eq!(err.position, 2);
//! # Ok::<(), kcontrol_indexer::labels::SelectorError>(())
//! ```

mod lexer;
mod parser;
mod requirement;
mod validation;

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::object::StringMap;

pub use parser::{SelectorError, SelectorErrorKind};
pub use requirement::{Operator, Requirement, RequirementError};
pub use validation::{validate_key, validate_value};

/// A label selector: the AND of its [`Requirement`]s.
///
/// Requirements are kept sorted (by key, then operator, then values), so a
/// selector prints one canonical form and `Selector::parse(&s.to_string())`
/// gives back `s`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Selector {
    requirements: Vec<Requirement>,
}

impl Selector {
    /// Parses the Kubernetes label selector syntax.
    pub fn parse(input: &str) -> Result<Self, SelectorError> {
        parser::parse(input).map(Self::from_requirements)
    }

    /// The selector that matches every label set (the empty selector).
    pub fn everything() -> Self {
        Self::default()
    }

    /// A selector from requirements (in any order).
    pub fn from_requirements(requirements: impl IntoIterator<Item = Requirement>) -> Self {
        let mut requirements: Vec<Requirement> = requirements.into_iter().collect();
        requirements.sort();
        Self { requirements }
    }

    /// The selector matching exactly these labels (`key=value` for each),
    /// like apimachinery's `ValidatedSelectorFromSet`; an empty set gives
    /// [`Selector::everything`].
    pub fn from_labels(labels: &BTreeMap<String, String>) -> Result<Self, RequirementError> {
        labels
            .iter()
            .map(|(k, v)| Requirement::new(k.as_str(), Operator::Equals, [v.as_str()]))
            .collect::<Result<Vec<_>, _>>()
            .map(Self::from_requirements)
    }

    /// The selector of a `metav1.LabelSelector` (`matchLabels` and
    /// `matchExpressions`), like apimachinery's `LabelSelectorAsSelector`.
    /// An empty `LabelSelector` matches everything; a missing one (which
    /// selects nothing) is the caller's case to handle.
    pub fn from_label_selector(selector: &LabelSelector) -> Result<Self, RequirementError> {
        let mut requirements = Vec::new();
        for (key, value) in selector.match_labels.iter().flatten() {
            requirements.push(Requirement::new(
                key.as_str(),
                Operator::Equals,
                [value.as_str()],
            )?);
        }
        for expr in selector.match_expressions.iter().flatten() {
            let operator = match expr.operator.as_str() {
                "In" => Operator::In,
                "NotIn" => Operator::NotIn,
                "Exists" => Operator::Exists,
                "DoesNotExist" => Operator::DoesNotExist,
                other => {
                    return Err(RequirementError::UnknownOperator {
                        operator: other.to_owned(),
                    })
                }
            };
            let values = expr.values.iter().flatten().map(String::as_str);
            requirements.push(Requirement::new(expr.key.as_str(), operator, values)?);
        }
        Ok(Self::from_requirements(requirements))
    }

    /// This selector with one more requirement.
    #[must_use]
    pub fn and(mut self, requirement: Requirement) -> Self {
        let at = self.requirements.partition_point(|r| *r <= requirement);
        self.requirements.insert(at, requirement);
        self
    }

    /// Whether the selector has no requirements (and so matches everything).
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// The requirements, sorted.
    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }

    /// Whether a label set satisfies every requirement.
    pub fn matches<L: StringMap + ?Sized>(&self, labels: &L) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }

    /// The value the selector requires `key` to have, when it pins exactly
    /// one (`key=v`, `key==v` or `key in (v)`): useful to look objects up
    /// in an index instead of scanning.
    pub fn requires_exact_match(&self, key: &str) -> Option<&str> {
        self.requirements
            .iter()
            .filter(|r| r.key() == key)
            .find_map(|r| match (r.operator(), r.values()) {
                (Operator::Equals | Operator::DoubleEquals | Operator::In, [only]) => {
                    Some(only.as_str())
                }
                _ => None,
            })
    }
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, requirement) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{requirement}")?;
        }
        Ok(())
    }
}

impl FromStr for Selector {
    type Err = SelectorError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

#[cfg(test)]
mod tests;
