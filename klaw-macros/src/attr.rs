//! Parsing of `#[tool(...)]` and of `#[arg(...)]` on parameters, and the value helpers
//! every attribute of the crate (`#[derive(ToolSchema)]`'s `#[schema]` and `#[serde]`
//! too) is read with.

use proc_macro2::{Span, TokenStream};
use syn::parse::Parser;
use syn::{Expr, ExprLit, Lit, LitStr};

use crate::ctxt::Ctxt;

/// What `#[tool(...)]` says.
#[derive(Default)]
pub(crate) struct ToolAttr {
    pub(crate) name: Option<LitStr>,
    pub(crate) description_ru: Option<LitStr>,
    pub(crate) description_en: Option<LitStr>,
    pub(crate) title_ru: Option<LitStr>,
    pub(crate) title_en: Option<LitStr>,
    pub(crate) read_only: Option<Span>,
    pub(crate) destructive: Option<Span>,
    pub(crate) idempotent: bool,
    pub(crate) open_world: bool,
    pub(crate) timeout_ms: Option<u64>,
    pub(crate) rename_all: Option<(String, Span)>,
    pub(crate) krate: Option<syn::Path>,
    /// Keys that were written, even with a bad value, and the keys that unknown keys
    /// look like: a required key in either list is not reported as missing.
    pub(crate) mentioned: Vec<String>,
    /// The attribute could not be read to its end: keys after the syntax error are unknown.
    pub(crate) incomplete: bool,
}

impl ToolAttr {
    /// True when `key` was written (or misspelled), so "missing" would be a follow-on error.
    pub(crate) fn mentions(&self, key: &str) -> bool {
        self.incomplete || self.mentioned.iter().any(|k| k == key)
    }
}

const TOOL_KEYS: &str = "name, description_ru, description_en, title_ru, title_en, read_only, destructive, idempotent, open_world, timeout, rename_all, crate";

/// Parses the attribute, recording every mistake in `cx`.
pub(crate) fn tool_attr(cx: &mut Ctxt, tokens: TokenStream) -> ToolAttr {
    let mut out = ToolAttr::default();
    let parser = syn::meta::parser(|meta| {
        let Some(ident) = meta.path.get_ident().map(ToString::to_string) else {
            cx.error_spanned_by(&meta.path, unknown_key("tool", None, None, TOOL_KEYS));
            return skip_value(&meta);
        };
        out.mentioned.push(ident.clone());
        let seen = |cx: &mut Ctxt, already: bool| {
            if already {
                cx.error_spanned_by(&meta.path, format!("`{ident}` is given twice"));
            }
        };
        match ident.as_str() {
            "name" => {
                seen(cx, out.name.is_some());
                out.name = string_value(cx, &meta)?;
            }
            "description_ru" => {
                seen(cx, out.description_ru.is_some());
                out.description_ru = string_value(cx, &meta)?;
            }
            "description_en" => {
                seen(cx, out.description_en.is_some());
                out.description_en = string_value(cx, &meta)?;
            }
            "title_ru" => {
                seen(cx, out.title_ru.is_some());
                out.title_ru = string_value(cx, &meta)?;
            }
            "title_en" => {
                seen(cx, out.title_en.is_some());
                out.title_en = string_value(cx, &meta)?;
            }
            "read_only" | "destructive" | "idempotent" | "open_world" => {
                let on = flag_value(cx, &meta, &ident)?;
                let span = meta.path.get_ident().map(|i| i.span());
                match ident.as_str() {
                    "read_only" => out.read_only = if on { span } else { None },
                    "destructive" => out.destructive = if on { span } else { None },
                    "idempotent" => out.idempotent = on,
                    _ => out.open_world = on,
                }
            }
            "timeout" => {
                seen(cx, out.timeout_ms.is_some());
                if let Some(lit) = string_value(cx, &meta)? {
                    match parse_duration_ms(&lit.value()) {
                        Ok(ms) => out.timeout_ms = Some(ms),
                        Err(why) => cx.error_spanned_by(
                            &lit,
                            format!("invalid timeout {:?}: {why}", lit.value()),
                        ),
                    }
                }
            }
            "rename_all" => {
                seen(cx, out.rename_all.is_some());
                if let Some(lit) = string_value(cx, &meta)? {
                    if crate::names::rename(&lit.value(), "x").is_none() {
                        cx.error_spanned_by(
                            &lit,
                            format!(
                                "unknown rename_all rule {:?}; expected one of: {}",
                                lit.value(),
                                crate::names::RULES
                            ),
                        );
                    } else {
                        out.rename_all = Some((lit.value(), lit.span()));
                    }
                }
            }
            "crate" => {
                seen(cx, out.krate.is_some());
                if let Some(path) = crate_path(cx, &meta)? {
                    out.krate = Some(path);
                }
            }
            other => {
                let guess = closest(other, TOOL_KEYS);
                if let Some(g) = guess {
                    out.mentioned.push(g.to_owned());
                }
                cx.error_spanned_by(
                    &meta.path,
                    unknown_key("tool", Some(other), guess, TOOL_KEYS),
                );
                return skip_value(&meta);
            }
        }
        Ok(())
    });
    if let Err(e) = parser.parse2(tokens) {
        cx.syn_error(e);
        out.incomplete = true;
    }
    out
}

/// What `#[arg(...)]` says about a parameter.
#[derive(Default)]
pub(crate) struct ArgAttr {
    pub(crate) rename: Option<LitStr>,
    pub(crate) aliases: Vec<LitStr>,
    pub(crate) default: Option<Expr>,
    pub(crate) description_ru: Option<LitStr>,
    pub(crate) description_en: Option<LitStr>,
    pub(crate) schemars: bool,
    /// `minimum = N`: the smallest value the schema accepts, with the value as written.
    pub(crate) minimum: Option<(i64, Expr)>,
    /// `maximum = N`: the largest value the schema accepts, with the value as written.
    pub(crate) maximum: Option<(i64, Expr)>,
    /// The first `#[arg]`: its presence makes the parameter an argument; its span is
    /// for "not allowed here" errors.
    pub(crate) first: Option<syn::Attribute>,
}

const ARG_KEYS: &str =
    "rename, alias, default, description_ru, description_en, minimum, maximum, schemars";

/// Parses one `#[arg(...)]`, or a bare `#[arg]` (which only marks an argument), into `out`.
pub(crate) fn arg_attr(cx: &mut Ctxt, attr: &syn::Attribute, out: &mut ArgAttr) {
    out.first.get_or_insert_with(|| attr.clone());
    if matches!(attr.meta, syn::Meta::Path(_)) {
        return;
    }
    let result = attr.parse_nested_meta(|meta| {
        let Some(ident) = meta.path.get_ident().map(ToString::to_string) else {
            cx.error_spanned_by(&meta.path, unknown_key("arg", None, None, ARG_KEYS));
            return skip_value(&meta);
        };
        match ident.as_str() {
            "rename" => {
                if out.rename.is_some() {
                    cx.error_spanned_by(&meta.path, "`rename` is given twice");
                }
                out.rename = string_value(cx, &meta)?;
            }
            "alias" => {
                if let Some(a) = string_value(cx, &meta)? {
                    out.aliases.push(a);
                }
            }
            "default" => {
                if out.default.is_some() {
                    cx.error_spanned_by(&meta.path, "`default` is given twice");
                }
                out.default = Some(meta.value()?.parse()?);
            }
            "description_ru" => {
                if out.description_ru.is_some() {
                    cx.error_spanned_by(&meta.path, "`description_ru` is given twice");
                }
                out.description_ru = string_value(cx, &meta)?;
            }
            "description_en" => {
                if out.description_en.is_some() {
                    cx.error_spanned_by(&meta.path, "`description_en` is given twice");
                }
                out.description_en = string_value(cx, &meta)?;
            }
            "minimum" | "maximum" => {
                let slot = if ident == "minimum" {
                    &mut out.minimum
                } else {
                    &mut out.maximum
                };
                if slot.is_some() {
                    cx.error_spanned_by(&meta.path, format!("`{ident}` is given twice"));
                }
                *slot = int_value(cx, &meta)?;
            }
            "schemars" => out.schemars = flag_value(cx, &meta, "schemars")?,
            other => {
                let guess = closest(other, ARG_KEYS);
                cx.error_spanned_by(&meta.path, unknown_key("arg", Some(other), guess, ARG_KEYS));
                return skip_value(&meta);
            }
        }
        Ok(())
    });
    if let Err(e) = result {
        cx.syn_error(e);
    }
}

/// Skips a key's value (`= expr` or `(...)`), if any, after its error was recorded.
pub(crate) fn skip_value(meta: &syn::meta::ParseNestedMeta<'_>) -> syn::Result<()> {
    if meta.input.peek(syn::Token![=]) {
        let _: Expr = meta.value()?.parse()?;
    } else if meta.input.peek(syn::token::Paren) {
        let _content;
        syn::parenthesized!(_content in meta.input);
        let _: TokenStream = _content.parse()?;
    }
    Ok(())
}

/// A string literal value: `key = "..."`; `None`, with the error recorded, otherwise.
pub(crate) fn string_value(
    cx: &mut Ctxt,
    meta: &syn::meta::ParseNestedMeta<'_>,
) -> syn::Result<Option<LitStr>> {
    let key = meta
        .path
        .get_ident()
        .map(ToString::to_string)
        .unwrap_or_default();
    if !meta.input.peek(syn::Token![=]) {
        cx.error_spanned_by(
            &meta.path,
            format!("`{key}` needs a value: `{key} = \"...\"`"),
        );
        return skip_value(meta).map(|()| None);
    }
    let expr: Expr = meta.value()?.parse()?;
    let lit = lit_str(&expr);
    if lit.is_none() {
        cx.error_spanned_by(&expr, format!("`{key}` must be a string literal"));
    }
    Ok(lit)
}

/// The string literal `expr` is, if it is one.
pub(crate) fn lit_str(expr: &Expr) -> Option<LitStr> {
    match expr {
        Expr::Lit(ExprLit {
            lit: Lit::Str(s), ..
        }) => Some(s.clone()),
        _ => None,
    }
}

/// An integer literal, possibly negative: `minimum = 1`, `minimum = -5`.
pub(crate) fn int_value(
    cx: &mut Ctxt,
    meta: &syn::meta::ParseNestedMeta<'_>,
) -> syn::Result<Option<(i64, Expr)>> {
    let key = meta
        .path
        .get_ident()
        .map(ToString::to_string)
        .unwrap_or_default();
    if !meta.input.peek(syn::Token![=]) {
        cx.error_spanned_by(&meta.path, format!("`{key}` needs a value: `{key} = 1`"));
        return skip_value(meta).map(|()| None);
    }
    let expr: Expr = meta.value()?.parse()?;
    let (negative, lit) = match &expr {
        Expr::Lit(ExprLit {
            lit: Lit::Int(i), ..
        }) => (false, i),
        Expr::Unary(syn::ExprUnary {
            op: syn::UnOp::Neg(_),
            expr: inner,
            ..
        }) => match &**inner {
            Expr::Lit(ExprLit {
                lit: Lit::Int(i), ..
            }) => (true, i),
            _ => {
                cx.error_spanned_by(&expr, format!("`{key}` must be an integer literal"));
                return Ok(None);
            }
        },
        _ => {
            cx.error_spanned_by(&expr, format!("`{key}` must be an integer literal"));
            return Ok(None);
        }
    };
    let value = lit
        .base10_parse::<i128>()
        .ok()
        .map(|v| if negative { -v } else { v })
        .and_then(|v| i64::try_from(v).ok());
    match value {
        Some(v) => Ok(Some((v, expr))),
        None => {
            cx.error_spanned_by(&expr, format!("`{key}` must fit in an i64"));
            Ok(None)
        }
    }
}

/// A flag: `key`, `key = true` or `key = false`.
pub(crate) fn flag_value(
    cx: &mut Ctxt,
    meta: &syn::meta::ParseNestedMeta<'_>,
    key: &str,
) -> syn::Result<bool> {
    if !meta.input.peek(syn::Token![=]) {
        return Ok(true);
    }
    let expr: Expr = meta.value()?.parse()?;
    match expr {
        Expr::Lit(ExprLit {
            lit: Lit::Bool(b), ..
        }) => Ok(b.value),
        other => {
            cx.error_spanned_by(
                &other,
                format!("`{key}` is a flag: write `{key}` (or `{key} = true` / `{key} = false`)"),
            );
            Ok(false)
        }
    }
}

/// Parses `"30s"`, `"500ms"`, `"2m"`, `"1h"` into milliseconds.
pub(crate) fn parse_duration_ms(s: &str) -> Result<u64, &'static str> {
    const HINT: &str = "expected a whole number followed by ms, s, m or h, e.g. \"30s\"";
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).ok_or(HINT)?;
    let (num, unit) = s.split_at(split);
    let n: u64 = num.parse().map_err(|_| HINT)?;
    let factor = match unit.trim() {
        "ms" => 1,
        "s" => 1_000,
        "m" | "min" => 60_000,
        "h" => 3_600_000,
        _ => return Err(HINT),
    };
    let ms = n.checked_mul(factor).ok_or("the timeout is too large")?;
    if ms == 0 {
        return Err("the timeout must be greater than zero");
    }
    Ok(ms)
}

/// "unknown `tool` key `x`: did you mean `y`?", or the list of keys when nothing is
/// close; `got` is `None` for a key that is not a plain name.
pub(crate) fn unknown_key(
    attr: &str,
    got: Option<&str>,
    guess: Option<&str>,
    keys: &str,
) -> String {
    unknown_key_expecting(attr, got, guess, &format!("expected one of: {keys}"))
}

/// [`unknown_key`] with its own words for what is expected.
pub(crate) fn unknown_key_expecting(
    attr: &str,
    got: Option<&str>,
    guess: Option<&str>,
    expected: &str,
) -> String {
    match (got, guess) {
        (Some(got), Some(g)) => format!("unknown `{attr}` key `{got}`: did you mean `{g}`?"),
        (Some(got), None) => format!("unknown `{attr}` key `{got}`; {expected}"),
        (None, _) => format!("unknown `{attr}` key; {expected}"),
    }
}

/// The one of the comma-separated `keys` that is close to `got`, if any.
pub(crate) fn closest<'k>(got: &str, keys: &'k str) -> Option<&'k str> {
    keys.split(", ")
        .filter(|k| edit_distance(got, k) <= 2 || (got.len() > 3 && k.contains(got)))
        .min_by_key(|k| edit_distance(got, k))
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur.push((prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

/// The value of `crate = "..."` (in `#[tool]` and `#[schema]`) as a path; a string that
/// is not one is reported.
pub(crate) fn crate_path(
    cx: &mut Ctxt,
    meta: &syn::meta::ParseNestedMeta<'_>,
) -> syn::Result<Option<syn::Path>> {
    let Some(lit) = string_value(cx, meta)? else {
        return Ok(None);
    };
    Ok(match lit.parse::<syn::Path>() {
        Ok(p) => Some(p),
        Err(_) => {
            cx.error_spanned_by(
                &lit,
                "`crate` must be a path to klaw or klaw-core, such as \"::klaw\"",
            );
            None
        }
    })
}
