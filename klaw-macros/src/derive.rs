//! `#[derive(ToolSchema)]`: a compile-time schema for a struct or a unit-only enum,
//! following the type's serde attributes so the schema and the JSON agree.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Data, DeriveInput, Fields};

use crate::attr::{closest, crate_path, lit_str, skip_value, string_value, unknown_key_expecting};
use crate::ctxt::Ctxt;
use crate::krate;
use crate::names::{doc_text, rename};

#[derive(Default)]
struct SerdeAttrs {
    rename: Option<String>,
    /// `#[serde(alias = "...")]`: other names accepted on input (never shown).
    aliases: Vec<String>,
    rename_all: Option<String>,
    default: bool,
    skip: bool,
    flatten: bool,
    description_en: Option<String>,
    krate: Option<syn::Path>,
}

/// Where attributes are read: `#[schema(crate)]` belongs on the type,
/// `#[schema(description_en)]` on fields and variants.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    Type,
    Member,
}

/// The keys of `#[schema(...)]`, for suggestions.
const SCHEMA_KEYS: &str = "description_en, crate";

fn serde_attrs(cx: &mut Ctxt, attrs: &[syn::Attribute], level: Level) -> SerdeAttrs {
    let mut out = SerdeAttrs::default();
    for attr in attrs {
        let is_serde = attr.path().is_ident("serde");
        let is_schema = attr.path().is_ident("schema");
        if !is_serde && !is_schema {
            continue;
        }
        let r = attr.parse_nested_meta(|meta| {
            let key = meta
                .path
                .get_ident()
                .map(ToString::to_string)
                .unwrap_or_default();
            match (is_schema, key.as_str()) {
                // A malformed value or an unknown rule in `#[serde]` is reported by
                // serde's own derive, which a `#[serde]` attribute needs; saying it
                // twice would only add noise.
                (false, "rename") if meta.input.peek(syn::Token![=]) => {
                    out.rename = lit_str(&meta.value()?.parse()?).map(|s| s.value());
                }
                (false, "alias") if meta.input.peek(syn::Token![=]) => {
                    out.aliases
                        .extend(lit_str(&meta.value()?.parse()?).map(|s| s.value()));
                }
                (false, "rename_all") if meta.input.peek(syn::Token![=]) => {
                    out.rename_all = lit_str(&meta.value()?.parse()?).map(|s| s.value());
                }
                (false, "default") => {
                    out.default = true;
                    skip_value(&meta)?;
                }
                (false, "skip" | "skip_deserializing") => out.skip = true,
                (false, "flatten") => out.flatten = true,
                (true, "description_en") => {
                    if level == Level::Type {
                        cx.error_spanned_by(
                            &meta.path,
                            "#[schema(description_en)] goes on a field or a variant; a type's own description is not used (an argument is described on the tool's parameter)",
                        );
                    }
                    out.description_en = string_value(cx, &meta)?.map(|s| s.value());
                }
                (true, "crate") => {
                    if level == Level::Member {
                        cx.error_spanned_by(
                            &meta.path,
                            "#[schema(crate = \"...\")] goes on the type itself, not on a field or a variant",
                        );
                    }
                    if let Some(path) = crate_path(cx, &meta)? {
                        out.krate = Some(path);
                    }
                }
                (true, other) => {
                    // Named in the message only when the key is a plain word.
                    let got = meta.path.get_ident().is_some().then_some(other);
                    cx.error_spanned_by(
                        &meta.path,
                        unknown_key_expecting(
                            "schema",
                            got,
                            closest(other, SCHEMA_KEYS),
                            "expected `description_en` (on a field or a variant) or `crate` (on the type)",
                        ),
                    );
                    skip_value(&meta)?;
                }
                // Other serde keys do not change the schema.
                (false, _) => skip_value(&meta)?,
            }
            Ok(())
        });
        if let Err(e) = r {
            cx.syn_error(e);
        }
    }
    out
}

/// Generates `impl ToolSchema for T`; on error, the errors beside a stand-in impl.
pub(crate) fn expand(input: &DeriveInput) -> TokenStream {
    let mut cx = Ctxt::new();
    let container = serde_attrs(&mut cx, &input.attrs, Level::Type);
    if !input.generics.params.is_empty() {
        cx.error_spanned_by(
            &input.generics,
            "ToolSchema cannot be derived for a generic type: the schema is fixed at compile time",
        );
    }
    let root = match krate::root(container.krate.as_ref()) {
        Ok(root) => root,
        Err(missing) => return quote!(::core::compile_error!(#missing);),
    };
    let p = quote!(#root::__private);
    let rule = container.rename_all.as_deref();
    let schema = match &input.data {
        Data::Struct(s) => match &s.fields {
            Fields::Named(named) => struct_schema(&mut cx, &p, &container, rule, named),
            _ => {
                cx.error_spanned_by(
                    &input.ident,
                    "ToolSchema needs a struct with named fields (its schema is a JSON object): name the fields, or take the inner type as the argument directly",
                );
                quote!(#p::Schema::Any)
            }
        },
        Data::Enum(e) => enum_schema(&mut cx, &p, rule, e),
        Data::Union(u) => {
            cx.error_spanned_by(
                u.union_token,
                "ToolSchema cannot be derived for a union: use a struct or an enum",
            );
            quote!(#p::Schema::Any)
        }
    };
    match cx.check() {
        Ok(()) => impl_tool_schema(input, &p, &schema),
        Err(e) => fallback(input, &p, e),
    }
}

/// The errors, plus `impl ToolSchema for T` with the any-value schema, so that a mistake
/// in the type is reported once, here, and not again at every tool that takes it.
fn fallback(input: &DeriveInput, p: &TokenStream, error: syn::Error) -> TokenStream {
    let error = error.into_compile_error();
    let stand_in = impl_tool_schema(input, p, &quote!(#p::Schema::Any));
    quote!(#error #stand_in)
}

fn impl_tool_schema(input: &DeriveInput, p: &TokenStream, schema: &TokenStream) -> TokenStream {
    let ident = &input.ident;
    // Generics are refused, but the stand-in impl still names them so it compiles.
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    quote! {
        #[automatically_derived]
        impl #impl_generics #p::ToolSchema for #ident #ty_generics #where_clause {
            const SCHEMA: #p::Schema = #schema;
        }
    }
}

/// An object with one property per field that serde reads.
fn struct_schema(
    cx: &mut Ctxt,
    p: &TokenStream,
    container: &SerdeAttrs,
    rule: Option<&str>,
    named: &syn::FieldsNamed,
) -> TokenStream {
    let mut props = Vec::new();
    for f in &named.named {
        let a = serde_attrs(cx, &f.attrs, Level::Member);
        if a.flatten {
            cx.error_spanned_by(
                f,
                "#[serde(flatten)] is not supported by ToolSchema: declare the fields in this struct instead",
            );
        }
        if a.skip {
            continue;
        }
        let Some(fid) = &f.ident else { continue };
        let raw = fid.to_string();
        let raw = raw.strip_prefix("r#").unwrap_or(&raw).to_owned();
        let name = a
            .rename
            .clone()
            .or_else(|| rule.and_then(|r| rename(r, &raw)))
            .unwrap_or(raw);
        let ty = &f.ty;
        let ru = doc_text(&f.attrs).unwrap_or_default();
        let en = a.description_en.unwrap_or_default();
        let has_default = a.default || container.default;
        let required = if has_default {
            quote!(false)
        } else {
            quote_spanned!(ty.span()=> !<#ty as #p::ToolSchema>::OPTIONAL)
        };
        let schema = quote_spanned!(ty.span()=> &<#ty as #p::ToolSchema>::SCHEMA);
        let aliases = &a.aliases;
        props.push(quote! {
            #p::Property {
                name: #name,
                aliases: &[#(#aliases),*],
                schema: #schema,
                required: #required,
                description: #p::Description::new(#ru, #en),
                default: ::core::option::Option::None,
                minimum: ::core::option::Option::None,
                maximum: ::core::option::Option::None,
            }
        });
    }
    quote!(#p::Schema::Object(&#p::ObjectSchema { properties: &[#(#props),*] }))
}

/// A string enum with one value per variant that serde reads.
fn enum_schema(
    cx: &mut Ctxt,
    p: &TokenStream,
    rule: Option<&str>,
    e: &syn::DataEnum,
) -> TokenStream {
    let mut variants = Vec::new();
    for v in &e.variants {
        if !matches!(v.fields, Fields::Unit) {
            cx.error_spanned_by(
                v,
                "ToolSchema can only be derived for enums whose variants have no fields (they become a string enum): move the data into a struct, or derive schemars::JsonSchema and mark the parameter #[arg(schemars)]",
            );
            continue;
        }
        let a = serde_attrs(cx, &v.attrs, Level::Member);
        if a.skip {
            continue;
        }
        let raw = v.ident.to_string();
        let value = a
            .rename
            .clone()
            .or_else(|| rule.and_then(|r| rename(r, &raw)))
            .unwrap_or(raw);
        let ru = doc_text(&v.attrs).unwrap_or_default();
        let en = a.description_en.unwrap_or_default();
        variants.push(quote! {
            #p::EnumVariant { value: #value, description: #p::Description::new(#ru, #en) }
        });
    }
    quote!(#p::Schema::Enum(&[#(#variants),*]))
}
