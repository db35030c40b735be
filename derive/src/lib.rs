//! Attribute macros that define a custom resource from Rust types in a
//! crate that depends on `kcontrol` alone; use them as `kcontrol::resource`
//! and `kcontrol::schema` (or through `kcontrol::prelude`).
//!
//! They write no code themselves: they put in front of the item the
//! derives kube-rs users write by hand — kube-derive's `CustomResource`,
//! serde's `Serialize`/`Deserialize`, schemars' `JsonSchema`, `Clone`,
//! `Debug` — with the crate paths pointed at kcontrol's re-exports
//! (`#[kube(crates(...))]`, `#[serde(crate = ...)]`,
//! `#[schemars(crate = ...)]`), so the type, its `kube_core::Resource`
//! implementation (which makes it a kcontrol `Object` and
//! `TypedResource`) and its CRD (`T::crd()`, a structural OpenAPI v3
//! schema from schemars) are exactly kube-derive's.
//!
//! The expansion names `::kcontrol`: the crate using them must depend on
//! `kcontrol` under that name.

use proc_macro::{Delimiter, Group, Ident, Punct, Spacing, Span, TokenStream, TokenTree};

/// The derives and crate paths of a type that is (part of) a schema.
const SCHEMA_ATTRIBUTES: &str = "
    #[derive(
        ::kcontrol::serde::Serialize,
        ::kcontrol::serde::Deserialize,
        ::kcontrol::schemars::JsonSchema,
        ::core::clone::Clone,
        ::core::fmt::Debug
    )]
    #[serde(crate = \"::kcontrol::serde\")]
    #[schemars(crate = \"::kcontrol::schemars\")]
";

/// What kube-derive's generated code refers to, as kcontrol re-exports it.
const KUBE_CRATES: &str = "
    #[kube(crates(
        kube_core = \"::kcontrol::kube_core\",
        k8s_openapi = \"::kcontrol::k8s_openapi\",
        schemars = \"::kcontrol::schemars\",
        serde = \"::kcontrol::serde\",
        serde_json = \"::kcontrol::serde_json\"
    ))]
";

/// Makes the custom resource type of a spec struct, as kube-derive's
/// `#[derive(CustomResource)]` with `#[kube(...)]` does: the arguments are
/// kube-derive's (`group`, `version`, `kind`, `namespaced`, `status`,
/// `shortname`, `printcolumn`, `scale`, `category`, `plural`, ...).
///
/// The spec struct also gets `Serialize`, `Deserialize`, `JsonSchema`,
/// `Clone` and `Debug` (derive more in an attribute of your own, after
/// this one); the types it holds need [`macro@schema`] (or those derives).
/// CEL validation rules (`validation = ...`) need the `kube` crate and are
/// not offered here.
///
/// ```ignore
/// use kcontrol::prelude::*;
///
/// #[resource(group = "demo.kcontrol.dev", version = "v1", kind = "WebApp", namespaced, status = "WebAppStatus")]
/// pub struct WebAppSpec {
///     pub image: String,
///     pub replicas: i32,
/// }
///
/// #[schema]
/// pub struct WebAppStatus {
///     pub ready: bool,
/// }
///
/// let crd = WebApp::crd(); // the CustomResourceDefinition, schema included
/// ```
#[proc_macro_attribute]
pub fn resource(args: TokenStream, item: TokenStream) -> TokenStream {
    if args.is_empty() {
        return compile_error(
            "#[resource(...)] needs kube-derive's arguments: at least group, version and kind",
        );
    }
    let mut out: TokenStream = "#[derive(::kcontrol::__private::CustomResource)]"
        .parse()
        .unwrap_or_default();
    out.extend(outer_attribute("kube", args));
    out.extend(KUBE_CRATES.parse::<TokenStream>().unwrap_or_default());
    out.extend(SCHEMA_ATTRIBUTES.parse::<TokenStream>().unwrap_or_default());
    out.extend(item);
    out
}

/// Makes a type usable in a custom resource (its status, or anything its
/// spec or status hold): derives `Serialize`, `Deserialize`, `JsonSchema`,
/// `Clone` and `Debug` through kcontrol's re-exports. Takes no arguments;
/// serde and schemars attributes (`#[serde(rename_all = "camelCase")]`)
/// go after it.
#[proc_macro_attribute]
pub fn schema(args: TokenStream, item: TokenStream) -> TokenStream {
    if !args.is_empty() {
        return compile_error("#[schema] takes no arguments");
    }
    let mut out = SCHEMA_ATTRIBUTES.parse::<TokenStream>().unwrap_or_default();
    out.extend(item);
    out
}

/// `#[name(args)]`, keeping the spans of `args` (kube-derive's errors
/// about them point at what the user wrote).
fn outer_attribute(name: &str, args: TokenStream) -> TokenStream {
    let inner: TokenStream = [
        TokenTree::Ident(Ident::new(name, Span::call_site())),
        TokenTree::Group(Group::new(Delimiter::Parenthesis, args)),
    ]
    .into_iter()
    .collect();
    [
        TokenTree::Punct(Punct::new('#', Spacing::Alone)),
        TokenTree::Group(Group::new(Delimiter::Bracket, inner)),
    ]
    .into_iter()
    .collect()
}

/// `compile_error!("message");`
fn compile_error(message: &str) -> TokenStream {
    format!("::core::compile_error!({message:?});")
        .parse()
        .unwrap_or_default()
}
