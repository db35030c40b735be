//! Parser, printer and matcher tests: apimachinery's cases, the forms of
//! the Kubernetes documentation, and property tests against a model.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;

fn set(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn req(key: &str, op: Operator, values: &[&str]) -> Requirement {
    Requirement::new(key, op, values.to_vec()).unwrap()
}

fn sel(reqs: Vec<Requirement>) -> Selector {
    Selector::from_requirements(reqs)
}

#[test]
fn good_strings_print_without_their_spaces() {
    for input in [
        "x=a,y=b,z=c",
        "",
        "x!=a,y=b",
        "x=",
        "x= ",
        "x=,z= ",
        "x= ,z= ",
        "!x",
        "x>1",
        "x>1,z<5",
    ] {
        let s = Selector::parse(input).unwrap_or_else(|e| panic!("{input:?}: {e}"));
        assert_eq!(s.to_string(), input.replace(' ', ""), "{input:?}");
    }
}

#[test]
fn parse_is_deterministic() {
    let a = Selector::parse("x=a,a=x").unwrap();
    let b = Selector::parse("a=x,x=a").unwrap();
    assert_eq!(a, b);
    assert_eq!(a.to_string(), "a=x,x=a");
}

#[test]
fn parses_set_based_forms_like_apimachinery() {
    use Operator::*;
    let cases: Vec<(&str, Selector)> = vec![
        ("", Selector::everything()),
        ("\rx", sel(vec![req("x", Exists, &[])])),
        (
            "this-is-a-dns.domain.com/key-with-dash",
            sel(vec![req(
                "this-is-a-dns.domain.com/key-with-dash",
                Exists,
                &[],
            )]),
        ),
        (
            "this-is-another-dns.domain.com/key-with-dash in (so,what)",
            sel(vec![req(
                "this-is-another-dns.domain.com/key-with-dash",
                In,
                &["so", "what"],
            )]),
        ),
        (
            "0.1.2.domain/99 notin (10.10.100.1, tick.tack.clock)",
            sel(vec![req(
                "0.1.2.domain/99",
                NotIn,
                &["10.10.100.1", "tick.tack.clock"],
            )]),
        ),
        ("foo  in\t (abc)", sel(vec![req("foo", In, &["abc"])])),
        ("x notin\n (abc)", sel(vec![req("x", NotIn, &["abc"])])),
        (
            "x  notin\t\t\t(abc,def)",
            sel(vec![req("x", NotIn, &["abc", "def"])]),
        ),
        ("x in (abc,def)", sel(vec![req("x", In, &["abc", "def"])])),
        ("x in (abc,)", sel(vec![req("x", In, &["abc", ""])])),
        ("x in ()", sel(vec![req("x", In, &[""])])),
        (
            "x notin (abc,,def),bar,z in (),w",
            sel(vec![
                req("bar", Exists, &[]),
                req("w", Exists, &[]),
                req("x", NotIn, &["abc", "", "def"]),
                req("z", In, &[""]),
            ]),
        ),
        ("x=a", sel(vec![req("x", Equals, &["a"])])),
        ("x>1", sel(vec![req("x", GreaterThan, &["1"])])),
        ("x<7", sel(vec![req("x", LessThan, &["7"])])),
        (
            "x=a,y!=b,z in (h,i,j)",
            sel(vec![
                req("x", Equals, &["a"]),
                req("y", NotEquals, &["b"]),
                req("z", In, &["h", "i", "j"]),
            ]),
        ),
        ("x notin ( )", sel(vec![req("x", NotIn, &[""])])),
        ("x notin (, a)", sel(vec![req("x", NotIn, &["", "a"])])),
        ("a ", sel(vec![req("a", Exists, &[])])),
        (
            "a in (x,y,notin, z,in)",
            sel(vec![req("a", In, &["in", "notin", "x", "y", "z"])]),
        ),
        ("notin=in", sel(vec![req("notin", Equals, &["in"])])),
        ("in in (in)", sel(vec![req("in", In, &["in"])])),
        ("! x", sel(vec![req("x", DoesNotExist, &[])])),
        ("x==", sel(vec![req("x", DoubleEquals, &[""])])),
        // The Kubernetes documentation's examples.
        (
            "environment = production,tier != frontend",
            sel(vec![
                req("environment", Equals, &["production"]),
                req("tier", NotEquals, &["frontend"]),
            ]),
        ),
        (
            "environment in (production, qa)",
            sel(vec![req("environment", In, &["production", "qa"])]),
        ),
        (
            "tier notin (frontend, backend)",
            sel(vec![req("tier", NotIn, &["frontend", "backend"])]),
        ),
        ("partition", sel(vec![req("partition", Exists, &[])])),
        ("!partition", sel(vec![req("partition", DoesNotExist, &[])])),
        (
            "partition,environment notin (qa)",
            sel(vec![
                req("partition", Exists, &[]),
                req("environment", NotIn, &["qa"]),
            ]),
        ),
        (
            "partition in (customerA, customerB),environment!=qa",
            sel(vec![
                req("partition", In, &["customerA", "customerB"]),
                req("environment", NotEquals, &["qa"]),
            ]),
        ),
    ];
    for (input, want) in cases {
        let got = Selector::parse(input).unwrap_or_else(|e| panic!("{input:?}: {e}"));
        assert_eq!(got, want, "{input:?}");
    }
}

/// Every malformed form from apimachinery's tests and the Kubernetes docs,
/// with the byte where the error is reported and a word of what was expected.
#[test]
fn rejects_malformed_selectors_naming_the_position() {
    let long_value = format!("x={}", "v".repeat(64));
    let cases: Vec<(&str, usize, &str)> = vec![
        ("x=a||y=b", 2, "invalid label value \"a||y\""),
        ("x==a==b", 4, "expected ',' or end of string"),
        ("!x=a", 2, "expected ',' or end of string"),
        ("x<a", 2, "must be an integer"),
        ("x>", 2, "must be an integer"),
        ("x,,y", 2, "after ','"),
        (",x,y", 0, "expected '!', a label key or end of string"),
        ("x nott in (y)", 2, "expected one of 'in'"),
        ("a in (xyz),", 11, "found end of string"),
        ("a in (xyz)b notin ()", 10, "expected ',' or end of string"),
        ("a in (xyz abc)", 10, "expected ',' or ')'"),
        ("a notin(", 8, "expected a value, ',' or ')'"),
        ("a (", 2, "expected one of"),
        ("(", 0, "expected '!', a label key"),
        ("x in", 4, "expected '('"),
        ("x in (", 6, "found end of string"),
        ("x in (a", 7, "found end of string, expected ',' or ')'"),
        ("x in (a,", 8, "expected a value or ','"),
        ("x in (a,,)", 9, "found ')'"),
        ("x in a", 5, "expected '('"),
        ("x notin", 7, "expected '('"),
        ("x=a,", 4, "after ','"),
        ("x=a,,", 4, "after ','"),
        ("x=(a)", 2, "expected a value"),
        ("=a", 0, "expected '!', a label key"),
        ("!", 1, "expected a label key"),
        ("!!x", 1, "expected a label key"),
        ("!=x", 0, "expected '!', a label key"),
        ("x y", 2, "expected one of"),
        ("x=a y=b", 4, "expected ',' or end of string"),
        ("x=a;y=b", 2, "invalid label value"),
        ("x in (a)(b)", 8, "expected ',' or end of string"),
        ("x in ((a))", 6, "expected a value, ',' or ')'"),
        (")", 0, "expected '!', a label key"),
        ("x=a)", 3, "expected ',' or end of string"),
        ("-x", 0, "invalid label key \"-x\""),
        ("a/b/c=d", 0, "at most one '/'"),
        ("Example.com/x", 0, "prefix part"),
        ("x=-a", 2, "invalid label value"),
        ("x in (a, -b)", 9, "invalid label value \"-b\""),
        (long_value.as_str(), 2, "no more than 63"),
        ("x>1.5", 2, "must be an integer"),
        ("x>-1", 2, "invalid label value"),
        ("x>99999999999999999999", 2, "must be an integer"),
        ("x=\u{e9}", 2, "invalid label value"),
        ("k\u{0}=v", 0, "invalid label key"),
    ];
    for (input, position, message) in cases {
        let err = Selector::parse(input).expect_err(input);
        assert_eq!(err.position, position, "{input:?}: {err}");
        assert_eq!(err.selector, input);
        let text = err.to_string();
        assert!(
            text.contains(message),
            "{input:?}: {text:?} lacks {message:?}"
        );
        assert!(text.contains(&format!("at byte {position}")), "{text}");
    }
}

#[test]
fn error_kinds_are_typed() {
    let err = Selector::parse("x in (").unwrap_err();
    assert_eq!(
        err.kind,
        SelectorErrorKind::Unexpected {
            found: "end of string".into(),
            expected: "a value, ',' or ')'"
        }
    );
    let err = Selector::parse("ok, bad_-").unwrap_err();
    assert_eq!(err.position, 4);
    assert!(matches!(
        err.kind,
        SelectorErrorKind::Invalid(RequirementError::InvalidKey { ref key, .. }) if key == "bad_-"
    ));
}

#[test]
fn matches_like_apimachinery() {
    let matches =
        |s: &str, labels: &[(&str, &str)]| Selector::parse(s).unwrap().matches(&set(labels));
    assert!(matches("", &[("x", "y")]));
    assert!(matches("x=y", &[("x", "y")]));
    assert!(matches("x=y,z=w", &[("x", "y"), ("z", "w")]));
    assert!(matches("x!=y,z!=w", &[("x", "z"), ("z", "a")]));
    assert!(matches("notin=in", &[("notin", "in")]));
    assert!(matches("x", &[("x", "z")]));
    assert!(matches("!x", &[("y", "z")]));
    assert!(matches("x>1", &[("x", "2")]));
    assert!(matches("x<1", &[("x", "0")]));
    assert!(!matches("x=z", &[]));
    assert!(!matches("x=y", &[("x", "z")]));
    assert!(!matches("x=y,z=w", &[("x", "w"), ("z", "w")]));
    assert!(!matches("x!=y,z!=w", &[("x", "z"), ("z", "w")]));
    assert!(!matches("x", &[("y", "z")]));
    assert!(!matches("!x", &[("x", "z")]));
    assert!(!matches("x>1", &[("x", "0")]));
    assert!(!matches("x<1", &[("x", "2")]));
    let labels = &[("foo", "bar"), ("baz", "blah")];
    assert!(matches("foo=bar,baz=blah", labels));
    assert!(!matches("foo=bar,foobar=bar,baz=blah", labels));
    assert!(!matches("x,y in (a)", &[("x", "1")]));
    assert!(matches("x in (,a)", &[("x", "")]));
}

#[test]
fn from_labels_and_label_selector() {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    let labels = set(&[("app", "nginx"), ("controller", "foo")]);
    let s = Selector::from_labels(&labels).unwrap();
    assert_eq!(s.to_string(), "app=nginx,controller=foo");
    assert!(s.matches(&labels));
    assert!(Selector::from_labels(&BTreeMap::new()).unwrap().is_empty());
    assert!(Selector::from_labels(&set(&[("app", "-x")])).is_err());

    let ls = LabelSelector {
        match_labels: Some(labels.clone()),
        match_expressions: Some(vec![LabelSelectorRequirement {
            key: "tier".into(),
            operator: "NotIn".into(),
            values: Some(vec!["db".into()]),
        }]),
    };
    let s = Selector::from_label_selector(&ls).unwrap();
    assert_eq!(s.to_string(), "app=nginx,controller=foo,tier notin (db)");
    assert!(Selector::from_label_selector(&LabelSelector::default())
        .unwrap()
        .is_empty());
    let bad = LabelSelector {
        match_expressions: Some(vec![LabelSelectorRequirement {
            key: "tier".into(),
            operator: "Gt".into(),
            values: Some(vec!["1".into()]),
        }]),
        ..LabelSelector::default()
    };
    assert_eq!(
        Selector::from_label_selector(&bad),
        Err(RequirementError::UnknownOperator {
            operator: "Gt".into()
        })
    );
}

#[test]
fn and_keeps_the_canonical_order() {
    let s = Selector::parse("b=1")
        .unwrap()
        .and(req("c", Operator::DoesNotExist, &[]))
        .and(req("a", Operator::Exists, &[]));
    assert_eq!(s, Selector::parse("!c, a, b=1").unwrap());
    assert_eq!(s.to_string(), "a,b=1,!c");
    assert_eq!(s.requires_exact_match("b"), Some("1"));
    assert_eq!(s.requires_exact_match("a"), None);
    assert!(!s.is_empty());
    assert!(Selector::everything().is_empty());
    assert!("x in (a".parse::<Selector>().is_err());
}

// ---- property tests ----

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z]{1,3}",
        Just("in".to_owned()),
        Just("notin".to_owned()),
        "[A-Za-z0-9]([-A-Za-z0-9_.]{0,6}[A-Za-z0-9])?",
        "[a-z0-9]([-a-z0-9]{0,4}[a-z0-9])?(\\.[a-z0-9]{1,3}){0,2}/[A-Za-z0-9][a-z_.-]{0,3}[a-z0-9]",
    ]
}

fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        "[a-c]{1,2}",
        Just("in".to_owned()),
        "[A-Za-z0-9]([-A-Za-z0-9_.]{0,6}[A-Za-z0-9])?",
    ]
}

fn integer() -> impl Strategy<Value = String> {
    prop_oneof![
        (0i64..20).prop_map(|n| n.to_string()),
        any::<u32>().prop_map(|n| n.to_string())
    ]
}

fn operator() -> impl Strategy<Value = Operator> {
    use Operator::*;
    prop::sample::select(vec![
        Equals,
        DoubleEquals,
        NotEquals,
        In,
        NotIn,
        Exists,
        DoesNotExist,
        GreaterThan,
        LessThan,
    ])
}

/// A requirement as plain data: (key, operator, values).
type ModelReq = (String, Operator, Vec<String>);

fn model_requirement() -> impl Strategy<Value = ModelReq> {
    (key(), operator()).prop_flat_map(|(k, op)| {
        let values = match op {
            Operator::In | Operator::NotIn => prop::collection::vec(value(), 1..4).boxed(),
            Operator::Exists | Operator::DoesNotExist => Just(Vec::new()).boxed(),
            Operator::GreaterThan | Operator::LessThan => integer().prop_map(|v| vec![v]).boxed(),
            _ => value().prop_map(|v| vec![v]).boxed(),
        };
        values.prop_map(move |vals| (k.clone(), op, vals))
    })
}

fn build(model: &[ModelReq]) -> Selector {
    Selector::from_requirements(
        model
            .iter()
            .map(|(k, op, vals)| Requirement::new(k.as_str(), *op, vals.clone()).unwrap()),
    )
}

/// Direct evaluation of the documented semantics, independent of `matches`.
fn model_matches(model: &[ModelReq], labels: &BTreeMap<String, String>) -> bool {
    model.iter().all(|(k, op, vals)| {
        let have = labels.get(k);
        let listed = have.is_some_and(|h| vals.contains(h));
        let int = |s: &str| s.parse::<i64>().ok();
        match op {
            Operator::Equals | Operator::DoubleEquals | Operator::In => listed,
            Operator::NotEquals | Operator::NotIn => !listed,
            Operator::Exists => have.is_some(),
            Operator::DoesNotExist => have.is_none(),
            Operator::GreaterThan => match (have.and_then(|h| int(h)), int(&vals[0])) {
                (Some(h), Some(b)) => h > b,
                _ => false,
            },
            Operator::LessThan => match (have.and_then(|h| int(h)), int(&vals[0])) {
                (Some(h), Some(b)) => h < b,
                _ => false,
            },
        }
    })
}

/// Re-renders a selector token by token with random whitespace between tokens.
fn spaced(s: &Selector, gaps: &[&str]) -> String {
    let mut gap = gaps.iter().cycle();
    let mut out = String::new();
    let mut push = |tok: &str, need_space: bool| {
        let g = gap.next().copied().unwrap_or(" ");
        out.push_str(if need_space && g.is_empty() { " " } else { g });
        out.push_str(tok);
    };
    for (i, r) in s.requirements().iter().enumerate() {
        if i > 0 {
            push(",", false);
        }
        match r.operator() {
            Operator::Exists => push(r.key(), false),
            Operator::DoesNotExist => {
                push("!", false);
                push(r.key(), false);
            }
            Operator::In | Operator::NotIn => {
                push(r.key(), false);
                push(r.operator().as_str(), true);
                push("(", true);
                for (j, v) in r.values().iter().enumerate() {
                    if j > 0 {
                        push(",", false);
                    }
                    push(v, false);
                }
                push(")", false);
            }
            op => {
                push(r.key(), false);
                push(op.as_str(), false);
                push(&r.values()[0], false);
            }
        }
    }
    out.push_str(gap.next().copied().unwrap_or(""));
    out
}

proptest! {
    #[test]
    fn printing_then_parsing_is_the_identity(model in prop::collection::vec(model_requirement(), 0..5)) {
        let s = build(&model);
        let printed = s.to_string();
        let parsed = Selector::parse(&printed);
        prop_assert_eq!(parsed.as_ref(), Ok(&s), "printed {:?}", printed);
        prop_assert_eq!(parsed.map(|p| p.to_string()), Ok(printed));
    }

    #[test]
    fn whitespace_between_tokens_is_ignored(
        model in prop::collection::vec(model_requirement(), 0..5),
        gaps in prop::collection::vec(prop::sample::select(vec!["", " ", "  ", "\t", "\n", "\r\n", " \t "]), 1..8),
    ) {
        let s = build(&model);
        let input = spaced(&s, &gaps);
        prop_assert_eq!(Selector::parse(&input), Ok(s), "input {:?}", input);
    }

    #[test]
    fn matches_agrees_with_the_model(
        model in prop::collection::vec(model_requirement(), 0..4),
        labels in prop::collection::btree_map(
            prop_oneof![key(), Just("a".to_owned()), Just("in".to_owned())],
            prop_oneof![value(), integer()],
            0..6,
        ),
    ) {
        let s = build(&model);
        prop_assert_eq!(s.matches(&labels), model_matches(&model, &labels));
        // Requirements built from the labels themselves must match them.
        let exact = Selector::from_labels(&labels).unwrap();
        prop_assert!(exact.matches(&labels));
    }

    #[test]
    fn arbitrary_input_never_panics_and_parsed_input_round_trips(
        input in prop_oneof![
            ".{0,40}",
            "[a-c =!(),<>in0-9 ]{0,30}",
            "[xy]{1,2}( (in|notin) \\(([ab,]{0,5})\\)|[=!<>]{1,2}[ab1]?)(,[xy]{1,2}( (in|notin) \\([ab,]{0,5}\\)|[=!<>]{1,2}[ab1]?)){0,3}",
        ]
    ) {
        match Selector::parse(&input) {
            Ok(s) => {
                let printed = s.to_string();
                prop_assert_eq!(Selector::parse(&printed), Ok(s));
            }
            Err(e) => {
                prop_assert!(e.position <= input.len());
                prop_assert!(input.is_char_boundary(e.position));
            }
        }
    }
}
