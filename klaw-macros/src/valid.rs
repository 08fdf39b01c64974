//! Checks a finished [`ToolFn`]: every rule a tool must follow, each mistake recorded
//! at its own span. Runs after parsing, before expansion.

use proc_macro2::Span;
use syn::{Ident, LitStr, Type};

use crate::ast::{ArgSpec, Input, Output, Param, ParamKind, ToolFn};
use crate::attr::ToolAttr;
use crate::ctxt::Ctxt;
use crate::names::{valid_arg_name, valid_tool_name};

/// Records in `cx` every way `tool` breaks the rules.
pub(crate) fn check(cx: &mut Ctxt, tool: &ToolFn<'_>) {
    check_attr(cx, &tool.attr);
    check_signature(cx, &tool.original.sig);
    check_inputs(cx, &tool.inputs);
    check_output(cx, &tool.output, &tool.original.sig);
}

fn check_attr(cx: &mut Ctxt, attr: &ToolAttr) {
    match &attr.name {
        Some(lit) => {
            let v = lit.value();
            if !valid_tool_name(&v) {
                cx.error_spanned_by(
                    lit,
                    format!("invalid tool name {v:?}: it must match ^[a-zA-Z0-9_-]{{1,64}}$ (letters, digits, `_` and `-`, at most 64)"),
                );
            }
        }
        None if !attr.mentions("name") => cx.error_at(
            Span::call_site(),
            "missing `name`: write #[tool(name = \"my_tool\", description_ru = \"...\")]",
        ),
        None => {}
    }
    match &attr.description_ru {
        Some(lit) if lit.value().trim().is_empty() => cx.error_spanned_by(
            lit,
            "`description_ru` is empty: tell the model what the tool does",
        ),
        Some(_) => {}
        None if !attr.mentions("description_ru") => cx.error_at(
            Span::call_site(),
            "missing `description_ru`: every tool needs a Russian description, e.g. description_ru = \"Читает файл\"",
        ),
        None => {}
    }
    if let Some(lit) = &attr.description_en
        && lit.value().trim().is_empty()
    {
        cx.error_spanned_by(
            lit,
            "`description_en` is empty: remove it or write the English description",
        );
    }
    for (key, lit) in [("title_ru", &attr.title_ru), ("title_en", &attr.title_en)] {
        if let Some(lit) = lit
            && lit.value().trim().is_empty()
        {
            cx.error_spanned_by(
                lit,
                format!("`{key}` is empty: remove it or write a short title for people"),
            );
        }
    }
    if let (Some(en), None) = (&attr.title_en, &attr.title_ru)
        && !attr.mentions("title_ru")
    {
        cx.error_spanned_by(
            en,
            "`title_en` without `title_ru`: Russian is the default language, write title_ru too",
        );
    }
    if let (Some(ro), Some(_)) = (attr.read_only, attr.destructive) {
        cx.error_at(
            ro,
            "a tool cannot be both `read_only` and `destructive`: keep `read_only` if it changes nothing, `destructive` if it may delete or overwrite data",
        );
    }
}

fn check_signature(cx: &mut Ctxt, sig: &syn::Signature) {
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
}

fn check_inputs(cx: &mut Ctxt, inputs: &[Input<'_>]) {
    // Every JSON name taken so far, with the parameter that took it.
    let mut seen: Vec<(&str, &Ident)> = Vec::new();
    for input in inputs {
        let param = match input {
            Input::Receiver(r) => {
                cx.error_spanned_by(
                    r,
                    "a tool is a free function: `self` is not allowed; move the body into an `async fn` that takes what it needs (use State<T> for shared services)",
                );
                continue;
            }
            Input::Pattern(pat) => {
                cx.error_spanned_by(
                    pat,
                    "a tool parameter must be a plain name (it becomes the argument name): bind it to a name and destructure it in the body",
                );
                continue;
            }
            Input::Param(param) => param,
        };
        if !check_param_type(cx, param.ty) {
            continue;
        }
        match &param.kind {
            ParamKind::Ctx => {
                if let (Some(_), Some(first)) = (param.ctx, &param.arg.first) {
                    cx.error_spanned_by(
                        first,
                        "a parameter cannot be both `#[ctx]` and `#[arg]`: `#[ctx]` injects it from the context, `#[arg]` makes it an argument sent by the model; keep one",
                    );
                }
            }
            ParamKind::Arg(spec) => {
                check_arg(cx, param, spec);
                for n in std::iter::once(&spec.json_name).chain(&spec.aliases) {
                    if let Some((_, first)) = seen.iter().find(|(s, _)| s == n) {
                        cx.error_spanned_by(
                            param.ident,
                            format!("duplicate argument name `{n}`: parameter `{first}` already takes it (names are compared after rename, rename_all and alias); give one of them another #[arg(rename = \"...\")]"),
                        );
                    } else {
                        seen.push((n, param.ident));
                    }
                }
            }
        }
    }
}

/// False, with the error recorded, for a type no parameter can have.
fn check_param_type(cx: &mut Ctxt, ty: &Type) -> bool {
    match ty {
        Type::Reference(r) => {
            cx.error_spanned_by(
                r,
                "tool parameters are owned values: use `String` instead of `&str`, `Vec<T>` instead of `&[T]`",
            );
            false
        }
        Type::ImplTrait(t) => {
            cx.error_spanned_by(
                t,
                "`impl Trait` cannot be a tool parameter: use a concrete type",
            );
            false
        }
        _ => true,
    }
}

fn check_arg(cx: &mut Ctxt, param: &Param<'_>, spec: &ArgSpec) {
    let arg = &param.arg;
    if let Some(lit) = &arg.rename {
        check_arg_name(cx, lit);
    }
    for a in &arg.aliases {
        check_arg_name(cx, a);
        let v = a.value();
        if v == spec.json_name {
            cx.error_spanned_by(
                a,
                format!("alias `{v}` is the argument's own name; remove the alias"),
            );
        }
    }
    if let Some(d) = &arg.default
        && crate::ast::last_segment(param.ty).as_deref() == Some("Option")
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
}

fn check_arg_name(cx: &mut Ctxt, lit: &LitStr) {
    let v = lit.value();
    if !valid_arg_name(&v) {
        cx.error_spanned_by(
            lit,
            format!("invalid argument name {v:?}: it must match ^[a-zA-Z0-9_.-]{{1,64}}$ (letters, digits, `_`, `.` and `-`, at most 64)"),
        );
    }
}

fn check_output(cx: &mut Ctxt, output: &Output<'_>, sig: &syn::Signature) {
    match output {
        Output::Missing => cx.error_at(
            sig.paren_token.span.join(),
            "a tool must return `Result<T, ToolError>`: add a return type, e.g. `-> Result<String, ToolError>`",
        ),
        Output::Unsupported(ty) => cx.error_spanned_by(
            ty,
            "a tool must return `Result<T, ToolError>`, e.g. `-> Result<String, ToolError>`; T is String (text), ToolOutput, or a type that derives ToolSchema and Serialize (structured output)",
        ),
        Output::Text | Output::Raw | Output::Structured(_) => {}
    }
}
