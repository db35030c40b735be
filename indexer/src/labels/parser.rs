//! The label selector grammar (apimachinery's, token for token) and
//! [`SelectorError`], which names the byte where the input went wrong.
//!
//! ```text
//! selector    ::= "" | requirement ("," requirement)*
//! requirement ::= "!" KEY | KEY [ set-op "(" values ")" | exact-op VALUE? ]
//! set-op      ::= "in" | "notin"
//! exact-op    ::= "=" | "==" | "!=" | ">" | "<"
//! values      ::= VALUE? ("," VALUE?)*
//! ```

use super::lexer::{tokens, Kind, Token};
use super::requirement::{check_value, Operator, Requirement, RequirementError};
use super::validation::validate_key;

/// A label selector that does not parse: where, and what was wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid label selector {selector:?} at byte {position}: {kind}")]
pub struct SelectorError {
    /// The selector as given.
    pub selector: String,
    /// Byte offset of the offending token (the input's length for its end).
    pub position: usize,
    /// What went wrong there.
    pub kind: SelectorErrorKind,
}

/// What is wrong at a [`SelectorError`]'s position.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SelectorErrorKind {
    /// A token that the grammar does not allow here.
    #[error("found {found}, expected {expected}")]
    Unexpected {
        /// The token found, quoted, or `end of string`.
        found: String,
        /// What the grammar allows here.
        expected: &'static str,
    },
    /// A key or value that is not a valid label key or value.
    #[error(transparent)]
    Invalid(#[from] RequirementError),
}

/// In a value position `in` and `notin` are plain identifiers (`a in (in)`).
#[derive(Clone, Copy)]
enum Context {
    KeyAndOperator,
    Values,
}

struct Parser<'a> {
    input: &'a str,
    tokens: Vec<Token<'a>>,
    next: usize,
}

/// Parses `input` into requirements, in input order.
pub(super) fn parse(input: &str) -> Result<Vec<Requirement>, SelectorError> {
    let mut parser = Parser {
        input,
        tokens: tokens(input),
        next: 0,
    };
    parser.selector()
}

impl<'a> Parser<'a> {
    fn peek(&self, context: Context) -> Token<'a> {
        let end = Token {
            kind: Kind::End,
            start: self.input.len(),
            text: "",
        };
        let token = self.tokens.get(self.next).copied().unwrap_or(end);
        match (context, token.kind) {
            (Context::Values, Kind::In | Kind::NotIn) => Token {
                kind: Kind::Ident,
                ..token
            },
            _ => token,
        }
    }

    fn advance(&mut self, context: Context) -> Token<'a> {
        let token = self.peek(context);
        if token.kind != Kind::End {
            self.next += 1;
        }
        token
    }

    fn error(&self, position: usize, kind: SelectorErrorKind) -> SelectorError {
        SelectorError {
            selector: self.input.to_owned(),
            position,
            kind,
        }
    }

    fn unexpected(&self, token: Token<'_>, expected: &'static str) -> SelectorError {
        let found = token.describe();
        self.error(
            token.start,
            SelectorErrorKind::Unexpected { found, expected },
        )
    }

    fn invalid(&self, position: usize, err: RequirementError) -> SelectorError {
        self.error(position, SelectorErrorKind::Invalid(err))
    }

    fn selector(&mut self) -> Result<Vec<Requirement>, SelectorError> {
        let mut requirements = Vec::new();
        loop {
            let token = self.peek(Context::Values);
            match token.kind {
                Kind::Ident | Kind::Not => {
                    requirements.push(self.requirement()?);
                    let after = self.advance(Context::Values);
                    match after.kind {
                        Kind::End => return Ok(requirements),
                        Kind::Comma => {
                            let next = self.peek(Context::Values);
                            if !matches!(next.kind, Kind::Ident | Kind::Not) {
                                return Err(self.unexpected(next, "a label key or '!' after ','"));
                            }
                        }
                        _ => return Err(self.unexpected(after, "',' or end of string")),
                    }
                }
                Kind::End => return Ok(requirements),
                _ => return Err(self.unexpected(token, "'!', a label key or end of string")),
            }
        }
    }

    fn requirement(&mut self) -> Result<Requirement, SelectorError> {
        let first = self.advance(Context::Values);
        let negated = first.kind == Kind::Not;
        let key = if negated {
            self.advance(Context::Values)
        } else {
            first
        };
        if key.kind != Kind::Ident {
            return Err(self.unexpected(key, "a label key"));
        }
        validate_key(key.text).map_err(|e| self.invalid(key.start, e))?;
        let key_text = key.text.to_owned();
        if negated {
            return Ok(Requirement::new_unchecked(
                key_text,
                Operator::DoesNotExist,
                Vec::new(),
            ));
        }
        if matches!(self.peek(Context::Values).kind, Kind::End | Kind::Comma) {
            return Ok(Requirement::new_unchecked(
                key_text,
                Operator::Exists,
                Vec::new(),
            ));
        }
        let operator = self.operator()?;
        let values = match operator {
            Operator::In | Operator::NotIn => self.value_set()?,
            _ => vec![self.exact_value()?],
        };
        let mut checked = Vec::with_capacity(values.len());
        for (value, position) in values {
            check_value(operator, value).map_err(|e| self.invalid(position, e))?;
            checked.push(value.to_owned());
        }
        Ok(Requirement::new_unchecked(key_text, operator, checked))
    }

    fn operator(&mut self) -> Result<Operator, SelectorError> {
        let token = self.advance(Context::KeyAndOperator);
        Ok(match token.kind {
            Kind::In => Operator::In,
            Kind::NotIn => Operator::NotIn,
            Kind::Equals => Operator::Equals,
            Kind::DoubleEquals => Operator::DoubleEquals,
            Kind::NotEquals => Operator::NotEquals,
            Kind::GreaterThan => Operator::GreaterThan,
            Kind::LessThan => Operator::LessThan,
            _ => {
                return Err(self.unexpected(
                    token,
                    "one of 'in', 'notin', '=', '==', '!=', '>', '<', ',' or end of string",
                ))
            }
        })
    }

    /// The one value after `=`, `==`, `!=`, `>` or `<`; empty when none follows.
    fn exact_value(&mut self) -> Result<(&'a str, usize), SelectorError> {
        let next = self.peek(Context::Values);
        if matches!(next.kind, Kind::End | Kind::Comma) {
            return Ok(("", next.start));
        }
        let token = self.advance(Context::Values);
        if token.kind == Kind::Ident {
            Ok((token.text, token.start))
        } else {
            Err(self.unexpected(token, "a value, ',' or end of string"))
        }
    }

    /// `( values )`; `()` is the set holding the empty value.
    fn value_set(&mut self) -> Result<Vec<(&'a str, usize)>, SelectorError> {
        let open = self.advance(Context::Values);
        if open.kind != Kind::Open {
            return Err(self.unexpected(open, "'('"));
        }
        let next = self.peek(Context::Values);
        let values = match next.kind {
            Kind::Close => vec![("", next.start)],
            Kind::Ident | Kind::Comma => self.value_list()?,
            _ => return Err(self.unexpected(next, "a value, ',' or ')'")),
        };
        let close = self.advance(Context::Values);
        if close.kind != Kind::Close {
            return Err(self.unexpected(close, "')'"));
        }
        Ok(values)
    }

    /// Comma-separated, possibly empty values, up to (not including) `)`.
    /// Empty entries (`(,a)`, `(a,)`, `(a,,b)`) stand for the empty value.
    fn value_list(&mut self) -> Result<Vec<(&'a str, usize)>, SelectorError> {
        let mut values = Vec::new();
        loop {
            let token = self.advance(Context::Values);
            match token.kind {
                Kind::Ident => {
                    values.push((token.text, token.start));
                    let next = self.peek(Context::Values);
                    match next.kind {
                        Kind::Comma => {}
                        Kind::Close => return Ok(values),
                        _ => return Err(self.unexpected(next, "',' or ')'")),
                    }
                }
                Kind::Comma => {
                    if values.is_empty() {
                        values.push(("", token.start));
                    }
                    let next = self.peek(Context::Values);
                    match next.kind {
                        Kind::Close => {
                            values.push(("", next.start));
                            return Ok(values);
                        }
                        Kind::Comma => {
                            self.advance(Context::Values);
                            values.push(("", next.start));
                        }
                        _ => {}
                    }
                }
                _ => return Err(self.unexpected(token, "a value or ','")),
            }
        }
    }
}
