//! Typed, borrowed views of a `#[tool]` function, built with every check applied.

use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::{FnArg, Ident, ItemFn, LitStr, Pat, ReturnType, Type};

use crate::attr::{ArgAttr, ToolAttr, arg_attr};
use crate::ctxt::Ctxt;
use crate::names::{doc_text, rename, valid_arg_name, valid_tool_name};

/// Types injected from the context without `#[ctx]`, by their last path segment.
const EXTRACTORS: [&str; 8] = [
    "ToolContext",
    "Workspace",
    "DataDir",
    "Limits",
    "Settings",
    "Caller",
    "Cancel",
    "State",
];

/// The checked view of a tool function.
pub(crate) struct ToolFn<'a> {
    pub(crate) original: &'a ItemFn,
    pub(crate) name: String,
    pub(crate) description_ru: String,
    pub(crate) description_en: String,
    pub(crate) params: Vec<Param<'a>>,
    pub(crate) output: Output<'a>,
}

/// One parameter of a tool function.
pub(crate) struct Param<'a> {
    pub(crate) ty: &'a Type,
    pub(crate) kind: ParamKind,
}

/// Whether a parameter comes from the model or from the context.
#[allow(clippy::large_enum_variant)] // a handful per tool, at compile time only
pub(crate) enum ParamKind {
    /// An argument in the schema.
    Arg(Box<ArgSpec>),
    /// A context extractor.
    Ctx,
}

/// How an argument appears in the schema.
pub(crate) struct ArgSpec {
    pub(crate) json_name: String,
    pub(crate) aliases: Vec<String>,
    pub(crate) default: Option<syn::Expr>,
    pub(crate) description_ru: String,
    pub(crate) description_en: String,
    pub(crate) schemars: bool,
    /// `minimum` and `maximum`, with their values as written (for spans).
    pub(crate) minimum: Option<(i64, syn::Expr)>,
    pub(crate) maximum: Option<(i64, syn::Expr)>,
}

/// What the function returns in its `Ok`.
pub(crate) enum Output<'a> {
    /// `String` or `&str`: text.
    Text,
    /// `ToolOutput`: passed through.
    Raw,
    /// Any other type: serialized, with an output schema.
    Structured(&'a Type),
}

impl<'a> ToolFn<'a> {
    /// Builds the view, recording every mistake in `cx`.
    pub(crate) fn from_syn(cx: &mut Ctxt, attr: &ToolAttr, item: &'a ItemFn) -> Option<Self> {
        let sig = &item.sig;
        let name = match &attr.name {
            Some(lit) => {
                let v = lit.value();
                if !valid_tool_name(&v) {
                    cx.error_spanned_by(
                        lit,
                        format!("invalid tool name {v:?}: it must match ^[a-zA-Z0-9_-]{{1,64}}$ (letters, digits, `_` and `-`, at most 64)"),
                    );
                }
                v
            }
            None => {
                if !attr.mentions("name") {
                    cx.error_at(
                        Span::call_site(),
                        "missing `name`: write #[tool(name = \"my_tool\", description_ru = \"...\")]",
                    );
                }
                String::new()
            }
        };
        let description_ru = match &attr.description_ru {
            Some(lit) if lit.value().trim().is_empty() => {
                cx.error_spanned_by(
                    lit,
                    "`description_ru` is empty: tell the model what the tool does",
                );
                String::new()
            }
            Some(lit) => lit.value(),
            None => {
                if !attr.mentions("description_ru") {
                    cx.error_at(
                        Span::call_site(),
                        "missing `description_ru`: every tool needs a Russian description, e.g. description_ru = \"Читает файл\"",
                    );
                }
                String::new()
            }
        };
        let description_en = match &attr.description_en {
            Some(lit) if lit.value().trim().is_empty() => {
                cx.error_spanned_by(
                    lit,
                    "`description_en` is empty: remove it or write the English description",
                );
                String::new()
            }
            Some(lit) => lit.value(),
            None => String::new(),
        };
        if let (Some(ro), Some(_)) = (attr.read_only, attr.destructive) {
            cx.error_at(
                ro,
                "a tool cannot be both `read_only` and `destructive`: keep `read_only` if it changes nothing, `destructive` if it may delete or overwrite data",
            );
        }

        if sig.asyncness.is_none() {
            cx.error_spanned_by(
                sig.fn_token,
                "#[tool] needs an `async fn`: add `async` before `fn`",
            );
        }
        if let Some(c) = &sig.constness {
            cx.error_spanned_by(c, "a tool cannot be a `const fn`: remove `const`");
        }
        if let Some(u) = &sig.unsafety {
            cx.error_spanned_by(u, "a tool cannot be an `unsafe fn`: remove `unsafe` and put an `unsafe` block in the body if you need one");
        }
        if let Some(abi) = &sig.abi {
            cx.error_spanned_by(abi, "a tool cannot have an `extern` ABI: remove it");
        }
        if let Some(v) = &sig.variadic {
            cx.error_spanned_by(v, "a tool cannot be variadic");
        }
        if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
            cx.error_spanned_by(
                &sig.generics,
                "a tool cannot be generic: its schema is fixed at compile time; use concrete types",
            );
        }

        let mut params = Vec::new();
        // Every JSON name taken so far, with the parameter that took it.
        let mut seen: Vec<(String, &Ident)> = Vec::new();
        for input in &sig.inputs {
            let pt = match input {
                FnArg::Receiver(r) => {
                    cx.error_spanned_by(
                        r,
                        "a tool is a free function: `self` is not allowed; move the body into an `async fn` that takes what it needs (use State<T> for shared services)",
                    );
                    continue;
                }
                FnArg::Typed(pt) => pt,
            };
            let ident = match &*pt.pat {
                Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => &pi.ident,
                other => {
                    cx.error_spanned_by(
                        other,
                        "a tool parameter must be a plain name (it becomes the argument name): bind it to a name and destructure it in the body",
                    );
                    continue;
                }
            };
            if let Some(p) = param(cx, attr, ident, &pt.ty, &pt.attrs) {
                if let ParamKind::Arg(spec) = &p.kind {
                    for n in std::iter::once(&spec.json_name).chain(&spec.aliases) {
                        if let Some((_, first)) = seen.iter().find(|(s, _)| s == n) {
                            cx.error_spanned_by(
                                ident,
                                format!("duplicate argument name `{n}`: parameter `{first}` already takes it (names are compared after rename, rename_all and alias); give one of them another #[arg(rename = \"...\")]"),
                            );
                        } else {
                            seen.push((n.clone(), ident));
                        }
                    }
                }
                params.push(p);
            }
        }

        let output = output(cx, &sig.output, sig);
        Some(ToolFn {
            original: item,
            name,
            description_ru,
            description_en,
            params,
            output: output?,
        })
    }
}

fn param<'a>(
    cx: &mut Ctxt,
    attr: &ToolAttr,
    ident: &'a Ident,
    ty: &'a Type,
    attrs: &[syn::Attribute],
) -> Option<Param<'a>> {
    let mut arg = ArgAttr::default();
    let mut ctx_marker = None;
    for a in attrs {
        if a.path().is_ident("arg") {
            arg_attr(cx, a, &mut arg);
        } else if a.path().is_ident("ctx") {
            if !matches!(a.meta, syn::Meta::Path(_)) {
                cx.error_spanned_by(a, "`#[ctx]` takes no arguments: write `#[ctx]`");
            }
            ctx_marker = Some(a.span());
        }
    }
    match ty {
        Type::Reference(r) => {
            cx.error_spanned_by(
                r,
                "tool parameters are owned values: use `String` instead of `&str`, `Vec<T>` instead of `&[T]`",
            );
            return None;
        }
        Type::ImplTrait(t) => {
            cx.error_spanned_by(
                t,
                "`impl Trait` cannot be a tool parameter: use a concrete type",
            );
            return None;
        }
        _ => {}
    }
    let is_ctx =
        ctx_marker.is_some() || last_segment(ty).is_some_and(|s| EXTRACTORS.contains(&s.as_str()));
    if is_ctx {
        if let Some(first) = &arg.first {
            cx.error_spanned_by(
                first,
                "#[arg] does not apply to a context extractor: it is injected from the context, not sent by the model; remove #[arg]",
            );
        }
        return Some(Param {
            ty,
            kind: ParamKind::Ctx,
        });
    }
    let raw = ident.to_string();
    let raw = raw.strip_prefix("r#").unwrap_or(&raw).to_owned();
    let mut aliases: Vec<String> = Vec::new();
    let json_name = match (&arg.rename, &attr.rename_all) {
        (Some(lit), _) => check_name(cx, lit),
        (None, Some((rule, _))) => {
            let renamed = rename(rule, &raw).unwrap_or_else(|| raw.clone());
            if renamed != raw {
                aliases.push(raw.clone());
            }
            renamed
        }
        (None, None) => raw.clone(),
    };
    for a in &arg.aliases {
        let v = check_name(cx, a);
        if v == json_name {
            cx.error_spanned_by(
                a,
                format!("alias `{v}` is the argument's own name; remove the alias"),
            );
        } else if !aliases.contains(&v) {
            aliases.push(v);
        }
    }
    if let Some(d) = &arg.default
        && last_segment(ty).as_deref() == Some("Option")
    {
        cx.error_spanned_by(
            d,
            "`default` cannot be used on an `Option` parameter: use the plain type (the default applies when the argument is left out)",
        );
    }
    if let (Some((min, _)), Some((max, expr))) = (&arg.minimum, &arg.maximum)
        && min > max
    {
        cx.error_spanned_by(
            expr,
            format!("`maximum` ({max}) is below `minimum` ({min}): no value would be accepted"),
        );
    }
    if arg.schemars {
        for (key, bound) in [("minimum", &arg.minimum), ("maximum", &arg.maximum)] {
            if let Some((_, expr)) = bound {
                cx.error_spanned_by(
                    expr,
                    format!("`{key}` does not apply to an #[arg(schemars)] argument: declare the bounds on the schemars type (#[schemars(range(min = ..., max = ...))])"),
                );
            }
        }
    }
    let description_ru = arg
        .description_ru
        .as_ref()
        .map(LitStr::value)
        .or_else(|| doc_text(attrs))
        .unwrap_or_default();
    let description_en = arg
        .description_en
        .as_ref()
        .map(LitStr::value)
        .unwrap_or_default();
    Some(Param {
        ty,
        kind: ParamKind::Arg(Box::new(ArgSpec {
            json_name,
            aliases,
            default: arg.default,
            description_ru,
            description_en,
            schemars: arg.schemars,
            minimum: arg.minimum,
            maximum: arg.maximum,
        })),
    })
}

fn check_name(cx: &mut Ctxt, lit: &LitStr) -> String {
    let v = lit.value();
    if !valid_arg_name(&v) {
        cx.error_spanned_by(
            lit,
            format!("invalid argument name {v:?}: it must match ^[a-zA-Z0-9_.-]{{1,64}}$ (letters, digits, `_`, `.` and `-`, at most 64)"),
        );
    }
    v
}

fn output<'a>(cx: &mut Ctxt, ret: &'a ReturnType, sig: &syn::Signature) -> Option<Output<'a>> {
    const MSG: &str = "a tool must return `Result<T, ToolError>`, e.g. `-> Result<String, ToolError>`; T is String (text), ToolOutput, or a type that derives ToolSchema and Serialize (structured output)";
    let ty = match ret {
        ReturnType::Default => {
            cx.error_at(
                sig.paren_token.span.join(),
                "a tool must return `Result<T, ToolError>`: add a return type, e.g. `-> Result<String, ToolError>`",
            );
            return None;
        }
        ReturnType::Type(_, ty) => ty,
    };
    let Type::Path(tp) = &**ty else {
        cx.error_spanned_by(ty, MSG);
        return None;
    };
    let Some(last) = tp.path.segments.last() else {
        cx.error_spanned_by(ty, MSG);
        return None;
    };
    let args: Vec<&Type> = match &last.arguments {
        syn::PathArguments::AngleBracketed(a) => a
            .args
            .iter()
            .filter_map(|g| match g {
                syn::GenericArgument::Type(t) => Some(t),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    if last.ident != "Result"
        || args.len() != 2
        || last_segment(args[1]).as_deref() != Some("ToolError")
    {
        cx.error_spanned_by(ty, MSG);
        return None;
    }
    let ok = args[0];
    Some(match ok {
        Type::Reference(r) if matches!(&*r.elem, Type::Path(p) if p.path.is_ident("str")) => {
            Output::Text
        }
        _ => match last_segment(ok).as_deref() {
            Some("String") => Output::Text,
            Some("ToolOutput") => Output::Raw,
            _ => Output::Structured(ok),
        },
    })
}

/// The last path segment of a type, e.g. `State` for `klaw::State<Db>`.
pub(crate) fn last_segment(ty: &Type) -> Option<String> {
    match ty {
        Type::Path(tp) if tp.qself.is_none() => {
            tp.path.segments.last().map(|s| s.ident.to_string())
        }
        Type::Group(g) => last_segment(&g.elem),
        Type::Paren(p) => last_segment(&p.elem),
        _ => None,
    }
}
