//! Splits a label selector into tokens, the way apimachinery's lexer does:
//! `= == != ! ( ) , > <` are symbols (longest match), `in` and `notin` are
//! keywords, whitespace (space, tab, CR, LF) separates, and every other run
//! of bytes is an identifier (checked later as a key or value).

/// What a token is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    /// A key or value (any run of non-symbol, non-space bytes).
    Ident,
    /// `in`
    In,
    /// `notin`
    NotIn,
    /// `!`
    Not,
    /// `=`
    Equals,
    /// `==`
    DoubleEquals,
    /// `!=`
    NotEquals,
    /// `>`
    GreaterThan,
    /// `<`
    LessThan,
    /// `(`
    Open,
    /// `)`
    Close,
    /// `,`
    Comma,
    /// The end of the input.
    End,
}

/// One token: its kind, the byte where it starts, and its text.
#[derive(Clone, Copy, Debug)]
pub(super) struct Token<'a> {
    pub kind: Kind,
    pub start: usize,
    pub text: &'a str,
}

impl Token<'_> {
    /// The token as an error message names it.
    pub fn describe(&self) -> String {
        match self.kind {
            Kind::End => "end of string".to_owned(),
            _ => format!("'{}'", self.text),
        }
    }
}

fn is_whitespace(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_symbol(b: u8) -> bool {
    matches!(b, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

/// All tokens of `input`, ending with one [`Kind::End`] token. Never fails:
/// anything unexpected becomes an identifier that the parser rejects.
pub(super) fn tokens(input: &str) -> Vec<Token<'_>> {
    let bytes = input.as_bytes();
    let mut out = Vec::new();
    let mut pos = 0;
    loop {
        while bytes.get(pos).copied().is_some_and(is_whitespace) {
            pos += 1;
        }
        let Some(&first) = bytes.get(pos) else {
            out.push(Token {
                kind: Kind::End,
                start: input.len(),
                text: "",
            });
            return out;
        };
        let start = pos;
        let kind = if is_symbol(first) {
            let (kind, len) = symbol(first, bytes.get(pos + 1).copied());
            pos += len;
            kind
        } else {
            while bytes
                .get(pos)
                .copied()
                .is_some_and(|b| !is_symbol(b) && !is_whitespace(b))
            {
                pos += 1;
            }
            Kind::Ident
        };
        // Token boundaries sit next to ASCII bytes, so they are char boundaries.
        let text = input.get(start..pos).unwrap_or_default();
        let kind = match (kind, text) {
            (Kind::Ident, "in") => Kind::In,
            (Kind::Ident, "notin") => Kind::NotIn,
            (kind, _) => kind,
        };
        out.push(Token { kind, start, text });
    }
}

/// The symbol starting with `first` (longest match) and its length.
fn symbol(first: u8, second: Option<u8>) -> (Kind, usize) {
    match (first, second) {
        (b'!', Some(b'=')) => (Kind::NotEquals, 2),
        (b'=', Some(b'=')) => (Kind::DoubleEquals, 2),
        (b'!', _) => (Kind::Not, 1),
        (b'=', _) => (Kind::Equals, 1),
        (b'(', _) => (Kind::Open, 1),
        (b')', _) => (Kind::Close, 1),
        (b',', _) => (Kind::Comma, 1),
        (b'>', _) => (Kind::GreaterThan, 1),
        _ => (Kind::LessThan, 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(input: &str) -> Vec<Kind> {
        tokens(input).iter().map(|t| t.kind).collect()
    }

    #[test]
    fn single_tokens() {
        use Kind::*;
        for (input, kind) in [
            ("", End),
            (",", Comma),
            ("notin", NotIn),
            ("in", In),
            ("=", Equals),
            ("==", DoubleEquals),
            (">", GreaterThan),
            ("<", LessThan),
            ("!", Not),
            ("!=", NotEquals),
            ("(", Open),
            (")", Close),
            ("~", Ident),
            ("||", Ident),
        ] {
            let toks = tokens(input);
            assert_eq!(toks[0].kind, kind, "{input:?}");
            assert_eq!(toks[0].text, input);
        }
    }

    #[test]
    fn sequences() {
        use Kind::*;
        assert_eq!(
            kinds("key in ( value1, value2 )"),
            [Ident, In, Open, Ident, Comma, Ident, Close, End]
        );
        assert_eq!(kinds("!key"), [Not, Ident, End]);
        assert_eq!(
            kinds("x in (),y"),
            [Ident, In, Open, Close, Comma, Ident, End]
        );
        assert_eq!(
            kinds("== != (), = notin"),
            [
                DoubleEquals,
                NotEquals,
                Open,
                Close,
                Comma,
                Equals,
                NotIn,
                End
            ]
        );
        assert_eq!(kinds("key>2"), [Ident, GreaterThan, Ident, End]);
        assert_eq!(kinds("a===b"), [Ident, DoubleEquals, Equals, Ident, End]);
        assert_eq!(kinds("a!==b"), [Ident, NotEquals, Equals, Ident, End]);
        assert_eq!(kinds("\rx\t\n"), [Ident, End]);
    }

    #[test]
    fn positions_are_byte_offsets() {
        let toks = tokens("ä = b");
        assert_eq!(toks[0].text, "ä");
        assert_eq!((toks[1].start, toks[2].start, toks[3].start), (3, 5, 6));
    }
}
