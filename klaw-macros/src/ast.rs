//! Typed, borrowed views of a `#[tool]` function, built from syn.
//!
//! Building a view records only what cannot be read (a malformed `#[arg]` or `#[ctx]`);
//! whether what was read makes a valid tool is `valid.rs`'s question.

use syn::{FnArg, Ident, ItemFn, LitStr, Pat, ReturnType, Type};

use crate::attr::{ArgAttr, ToolAttr, arg_attr};
use crate::ctxt::Ctxt;
use crate::names::{doc_text, rename};

/// Types injected from the context without `#[ctx]`, by their last path segment, unless
/// the parameter has an `#[arg]`.
pub(crate) const EXTRACTORS: [&str; 10] = [
    "ToolContext",
    "Workspace",
    "DataDir",
    "Limits",
    "Settings",
    "Caller",
    "Cancel",
    "Progress",
    "Log",
    "State",
];

/// A tool function as written.
pub(crate) struct ToolFn<'a> {
    pub(crate) original: &'a ItemFn,
    pub(crate) attr: ToolAttr,
    pub(crate) inputs: Vec<Input<'a>>,
    pub(crate) output: Output<'a>,
}

/// One input of the function, in order.
#[allow(clippy::large_enum_variant)] // a handful per tool, at compile time only
pub(crate) enum Input<'a> {
    /// `self` in any form (not allowed).
    Receiver(&'a syn::Receiver),
    /// A destructuring pattern (not allowed: the name becomes the argument's).
    Pattern(&'a Pat),
    /// A parameter with a plain name.
    Param(Param<'a>),
}

/// One named parameter of a tool function.
pub(crate) struct Param<'a> {
    pub(crate) ident: &'a Ident,
    pub(crate) ty: &'a Type,
    /// What its `#[arg]` attributes say.
    pub(crate) arg: ArgAttr,
    /// Its `#[ctx]`, if it has one.
    pub(crate) ctx: Option<&'a syn::Attribute>,
    pub(crate) kind: ParamKind,
}

/// Whether a parameter comes from the model or from the context.
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
    /// No return type (not allowed).
    Missing,
    /// A return type that is not `Result<T, ToolError>` (not allowed).
    Unsupported(&'a Type),
}

impl<'a> ToolFn<'a> {
    /// Builds the view, recording in `cx` what cannot be read.
    pub(crate) fn from_syn(cx: &mut Ctxt, attr: ToolAttr, item: &'a ItemFn) -> Self {
        let inputs = item
            .sig
            .inputs
            .iter()
            .map(|input| match input {
                FnArg::Receiver(r) => Input::Receiver(r),
                FnArg::Typed(pt) => match &*pt.pat {
                    Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => {
                        Input::Param(Param::from_syn(cx, &attr, &pi.ident, &pt.ty, &pt.attrs))
                    }
                    other => Input::Pattern(other),
                },
            })
            .collect();
        ToolFn {
            original: item,
            output: Output::from_syn(&item.sig.output),
            attr,
            inputs,
        }
    }

    /// The named parameters, in order.
    pub(crate) fn params(&self) -> impl Iterator<Item = &Param<'a>> {
        self.inputs.iter().filter_map(|i| match i {
            Input::Param(p) => Some(p),
            Input::Receiver(_) | Input::Pattern(_) => None,
        })
    }

    /// The tool's name (empty when missing).
    pub(crate) fn name(&self) -> String {
        self.attr
            .name
            .as_ref()
            .map(LitStr::value)
            .unwrap_or_default()
    }

    /// The Russian description (empty when missing).
    pub(crate) fn description_ru(&self) -> String {
        let ru = self.attr.description_ru.as_ref();
        ru.map(LitStr::value).unwrap_or_default()
    }

    /// The English description, or empty.
    pub(crate) fn description_en(&self) -> String {
        let en = self.attr.description_en.as_ref();
        en.map(LitStr::value).unwrap_or_default()
    }

    /// The title for people, Russian and English (each empty when not given).
    pub(crate) fn title(&self) -> (String, String) {
        let value = |l: Option<&LitStr>| l.map(LitStr::value).unwrap_or_default();
        (
            value(self.attr.title_ru.as_ref()),
            value(self.attr.title_en.as_ref()),
        )
    }
}

impl<'a> Param<'a> {
    fn from_syn(
        cx: &mut Ctxt,
        attr: &ToolAttr,
        ident: &'a Ident,
        ty: &'a Type,
        attrs: &'a [syn::Attribute],
    ) -> Self {
        let mut arg = ArgAttr::default();
        let mut ctx = None;
        for a in attrs {
            if a.path().is_ident("arg") {
                arg_attr(cx, a, &mut arg);
            } else if a.path().is_ident("ctx") {
                if !matches!(a.meta, syn::Meta::Path(_)) {
                    cx.error_spanned_by(a, "`#[ctx]` takes no arguments: write `#[ctx]`");
                }
                ctx = Some(a);
            }
        }
        // `#[ctx]` makes an extractor and `#[arg]` an argument (both at once is reported
        // by valid.rs); without either, the built-in extractors are known by name.
        let is_ctx = match (ctx, &arg.first) {
            (Some(_), _) => true,
            (None, Some(_)) => false,
            (None, None) => last_segment(ty).is_some_and(|s| EXTRACTORS.contains(&s.as_str())),
        };
        let kind = if is_ctx {
            ParamKind::Ctx
        } else {
            ParamKind::Arg(Box::new(ArgSpec::new(attr, ident, &arg, attrs)))
        };
        Param {
            ident,
            ty,
            arg,
            ctx,
            kind,
        }
    }
}

impl ArgSpec {
    fn new(attr: &ToolAttr, ident: &Ident, arg: &ArgAttr, attrs: &[syn::Attribute]) -> Self {
        let raw = ident.to_string();
        let raw = raw.strip_prefix("r#").unwrap_or(&raw).to_owned();
        let mut aliases: Vec<String> = Vec::new();
        let json_name = match (&arg.rename, &attr.rename_all) {
            (Some(lit), _) => lit.value(),
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
            let v = a.value();
            if v != json_name && !aliases.contains(&v) {
                aliases.push(v);
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
        ArgSpec {
            json_name,
            aliases,
            default: arg.default.clone(),
            description_ru,
            description_en,
            schemars: arg.schemars,
            minimum: arg.minimum.clone(),
            maximum: arg.maximum.clone(),
        }
    }
}

impl<'a> Output<'a> {
    fn from_syn(ret: &'a ReturnType) -> Self {
        let ty = match ret {
            ReturnType::Default => return Output::Missing,
            ReturnType::Type(_, ty) => &**ty,
        };
        let Type::Path(tp) = ty else {
            return Output::Unsupported(ty);
        };
        let Some(last) = tp.path.segments.last() else {
            return Output::Unsupported(ty);
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
        let [ok, err] = args[..] else {
            return Output::Unsupported(ty);
        };
        if last.ident != "Result" || last_segment(err).as_deref() != Some("ToolError") {
            return Output::Unsupported(ty);
        }
        match ok {
            Type::Reference(r) if matches!(&*r.elem, Type::Path(p) if p.path.is_ident("str")) => {
                Output::Text
            }
            _ => match last_segment(ok).as_deref() {
                Some("String") => Output::Text,
                Some("ToolOutput") => Output::Raw,
                _ => Output::Structured(ok),
            },
        }
    }
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
