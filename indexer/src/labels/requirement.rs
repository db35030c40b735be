//! One label [`Requirement`] (`key op values`), its [`Operator`], how it
//! matches a label set and how it prints.

use crate::object::StringMap;
use std::fmt;

use super::validation::{validate_key, validate_value};

/// The relation a [`Requirement`] states between a label and its values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Operator {
    /// `key=value`: the label exists and has this value.
    Equals,
    /// `key==value`: the same as [`Operator::Equals`], kept apart for printing.
    DoubleEquals,
    /// `key!=value`: the label is absent or has another value.
    NotEquals,
    /// `key in (a,b)`: the label exists and has one of the values.
    In,
    /// `key notin (a,b)`: the label is absent or has none of the values.
    NotIn,
    /// `key`: the label exists.
    Exists,
    /// `!key`: the label does not exist.
    DoesNotExist,
    /// `key>n`: the label exists, is an integer and is greater than `n`.
    GreaterThan,
    /// `key<n`: the label exists, is an integer and is less than `n`.
    LessThan,
}

impl Operator {
    /// How many values the operator takes, in words (for error messages).
    fn arity(self) -> &'static str {
        match self {
            Self::In | Self::NotIn => "at least one value",
            Self::Exists | Self::DoesNotExist => "no values",
            _ => "exactly one value",
        }
    }

    fn accepts(self, count: usize) -> bool {
        match self {
            Self::In | Self::NotIn => count > 0,
            Self::Exists | Self::DoesNotExist => count == 0,
            _ => count == 1,
        }
    }

    /// The operator as written in a selector (`"="`, `"in"`, `"!"` for
    /// [`Operator::DoesNotExist`], `""` for [`Operator::Exists`]).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Equals => "=",
            Self::DoubleEquals => "==",
            Self::NotEquals => "!=",
            Self::In => "in",
            Self::NotIn => "notin",
            Self::Exists => "",
            Self::DoesNotExist => "!",
            Self::GreaterThan => ">",
            Self::LessThan => "<",
        }
    }
}

impl fmt::Display for Operator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Exists => f.write_str("exists"),
            Self::DoesNotExist => f.write_str("!"),
            other => f.write_str(other.as_str()),
        }
    }
}

/// A requirement that cannot be built: a bad key, value, value count or operator.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RequirementError {
    /// The key is not a valid label key.
    #[error("invalid label key {key:?}: {reason}")]
    InvalidKey {
        /// The key as given.
        key: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A value is not a valid label value.
    #[error("invalid label value {value:?}: {reason}")]
    InvalidValue {
        /// The value as given.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A `>` or `<` value is not a 64-bit integer.
    #[error("value {value:?} of '{operator}' must be an integer")]
    NotAnInteger {
        /// The operator.
        operator: Operator,
        /// The value as given.
        value: String,
    },
    /// The operator takes another number of values.
    #[error("operator '{operator}' takes {expected}, got {count}")]
    ValueCount {
        /// The operator.
        operator: Operator,
        /// What it takes, in words.
        expected: &'static str,
        /// How many values were given.
        count: usize,
    },
    /// A `metav1.LabelSelector` expression has an operator other than
    /// `In`, `NotIn`, `Exists` or `DoesNotExist`.
    #[error("{operator:?} is not a valid label selector operator")]
    UnknownOperator {
        /// The operator as given.
        operator: String,
    },
}

/// One condition on one label: a key, an [`Operator`] and its values.
///
/// Values are kept sorted and without duplicates, so equal requirements
/// compare equal and print the same.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Requirement {
    key: String,
    operator: Operator,
    values: Vec<String>,
}

impl Requirement {
    /// A checked requirement: the key and values must be valid label keys and
    /// values, `in`/`notin` take at least one value, `exists`/`!` none, the
    /// others exactly one, and `>`/`<` an integer.
    ///
    /// ```
    /// use kcontrol_indexer::labels::{Operator, Requirement};
    ///
    /// let r = Requirement::new("tier", Operator::In, ["web", "api"]).unwrap();
    /// assert_eq!(r.to_string(), "tier in (api,web)");
    /// assert!(Requirement::new("tier", Operator::Equals, ["a", "b"]).is_err());
    /// ```
    pub fn new<I, S>(
        key: impl Into<String>,
        operator: Operator,
        values: I,
    ) -> Result<Self, RequirementError>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let key = key.into();
        validate_key(&key)?;
        let values: Vec<String> = values.into_iter().map(Into::into).collect();
        if !operator.accepts(values.len()) {
            return Err(RequirementError::ValueCount {
                operator,
                expected: operator.arity(),
                count: values.len(),
            });
        }
        for value in &values {
            check_value(operator, value)?;
        }
        Ok(Self::new_unchecked(key, operator, values))
    }

    /// A requirement whose parts were already checked.
    pub(super) fn new_unchecked(key: String, operator: Operator, mut values: Vec<String>) -> Self {
        values.sort_unstable();
        values.dedup();
        Self {
            key,
            operator,
            values,
        }
    }

    /// The label key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The operator.
    pub fn operator(&self) -> Operator {
        self.operator
    }

    /// The values, sorted, without duplicates.
    pub fn values(&self) -> &[String] {
        &self.values
    }

    /// Whether a label set satisfies this requirement.
    pub fn matches<L: StringMap + ?Sized>(&self, labels: &L) -> bool {
        let value = labels.value_of(&self.key);
        match self.operator {
            Operator::Equals | Operator::DoubleEquals | Operator::In => {
                value.is_some_and(|v| self.has_value(v))
            }
            Operator::NotEquals | Operator::NotIn => !value.is_some_and(|v| self.has_value(v)),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
            Operator::GreaterThan | Operator::LessThan => value.is_some_and(|v| self.compare(v)),
        }
    }

    fn has_value(&self, value: &str) -> bool {
        self.values.iter().any(|v| v == value)
    }

    /// `>`/`<` against a label value; a value that is not an integer never matches.
    fn compare(&self, label_value: &str) -> bool {
        let (Ok(have), Some(Ok(bound))) = (
            label_value.parse::<i64>(),
            self.values.first().map(|v| v.parse::<i64>()),
        ) else {
            return false;
        };
        match self.operator {
            Operator::GreaterThan => have > bound,
            _ => have < bound,
        }
    }
}

/// Checks one value of a requirement with this operator.
pub(super) fn check_value(operator: Operator, value: &str) -> Result<(), RequirementError> {
    validate_value(value)?;
    if matches!(operator, Operator::GreaterThan | Operator::LessThan)
        && value.parse::<i64>().is_err()
    {
        return Err(RequirementError::NotAnInteger {
            operator,
            value: value.to_owned(),
        });
    }
    Ok(())
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.operator {
            Operator::Exists => return f.write_str(&self.key),
            Operator::DoesNotExist => return write!(f, "!{}", self.key),
            Operator::In | Operator::NotIn => {
                write!(f, "{} {} (", self.key, self.operator.as_str())?;
            }
            op => write!(f, "{}{}", self.key, op.as_str())?,
        }
        for (i, value) in self.values.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            f.write_str(value)?;
        }
        if matches!(self.operator, Operator::In | Operator::NotIn) {
            f.write_str(")")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn constructor_checks_like_apimachinery() {
        let none: [&str; 0] = [];
        assert!(Requirement::new("x", Operator::In, none).is_err());
        assert!(Requirement::new("x", Operator::NotIn, none).is_err());
        assert!(Requirement::new("x", Operator::In, ["foo"]).is_ok());
        assert!(Requirement::new("x", Operator::NotIn, ["foo"]).is_ok());
        assert!(Requirement::new("x", Operator::Exists, none).is_ok());
        assert!(Requirement::new("x", Operator::DoesNotExist, none).is_ok());
        assert!(Requirement::new("x", Operator::Exists, ["a"]).is_err());
        assert!(Requirement::new("1foo", Operator::In, ["bar"]).is_ok());
        assert!(Requirement::new("1234", Operator::In, ["bar"]).is_ok());
        assert!(Requirement::new("y", Operator::GreaterThan, ["1"]).is_ok());
        assert!(Requirement::new("z", Operator::LessThan, ["6"]).is_ok());
        assert_eq!(
            Requirement::new("foo", Operator::GreaterThan, ["bar"]),
            Err(RequirementError::NotAnInteger {
                operator: Operator::GreaterThan,
                value: "bar".into()
            })
        );
        assert!(Requirement::new("barz", Operator::LessThan, ["blah"]).is_err());
        assert!(Requirement::new("a".repeat(254), Operator::Exists, none).is_err());
        assert!(Requirement::new("x", Operator::Equals, ["a", "b"]).is_err());
        assert!(Requirement::new("x", Operator::Equals, ["-a"]).is_err());
    }

    #[test]
    fn matching_follows_apimachinery() {
        let req = |k: &str, op, vals: &[&str]| Requirement::new(k, op, vals.to_vec()).unwrap();
        let xy = labels(&[("x", "foo"), ("y", "baz")]);
        assert!(req("x", Operator::In, &["foo"]).matches(&xy));
        assert!(req("y", Operator::NotIn, &["alpha"]).matches(&xy));
        assert!(!req("y", Operator::In, &["alpha"]).matches(&xy));
        let y_empty = labels(&[("y", "")]);
        assert!(req("x", Operator::NotIn, &[""]).matches(&y_empty));
        assert!(req("y", Operator::Exists, &[]).matches(&y_empty));
        assert!(req("x", Operator::DoesNotExist, &[]).matches(&y_empty));
        assert!(!req("y", Operator::DoesNotExist, &[]).matches(&y_empty));
        assert!(!req("x", Operator::In, &[""]).matches(&labels(&[("y", "baz")])));
        assert!(req("x", Operator::NotEquals, &["a"]).matches(&labels(&[])));
        assert!(req("z", Operator::GreaterThan, &["1"]).matches(&labels(&[("z", "2")])));
        assert!(!req("z", Operator::GreaterThan, &["1"]).matches(&labels(&[("z", "v2")])));
        assert!(!req("z", Operator::GreaterThan, &["1"]).matches(&labels(&[])));
        assert!(req("z", Operator::LessThan, &["1"]).matches(&labels(&[("z", "0")])));
        assert!(!req("z", Operator::LessThan, &["1"]).matches(&labels(&[("z", "1")])));
    }

    #[test]
    fn prints_canonically() {
        let req = |k: &str, op, vals: &[&str]| Requirement::new(k, op, vals.to_vec()).unwrap();
        assert_eq!(
            req("x", Operator::In, &["def", "abc", "abc"]).to_string(),
            "x in (abc,def)"
        );
        assert_eq!(req("z", Operator::NotIn, &[""]).to_string(), "z notin ()");
        assert_eq!(
            req("z", Operator::NotIn, &["", "a"]).to_string(),
            "z notin (,a)"
        );
        assert_eq!(
            req("y", Operator::DoubleEquals, &["jkl"]).to_string(),
            "y==jkl"
        );
        assert_eq!(req("y", Operator::NotEquals, &[""]).to_string(), "y!=");
        assert_eq!(req("z", Operator::DoesNotExist, &[]).to_string(), "!z");
        assert_eq!(req("z", Operator::Exists, &[]).to_string(), "z");
        assert_eq!(req("x", Operator::GreaterThan, &["2"]).to_string(), "x>2");
        assert_eq!(req("y", Operator::LessThan, &["8"]).to_string(), "y<8");
    }
}
