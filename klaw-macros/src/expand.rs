//! Code generation for `#[tool]`.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{FnArg, Ident, ItemFn, Type};

use crate::ast::{ArgSpec, Output, Param, ParamKind, ToolFn, last_segment};
use crate::attr::tool_attr;
use crate::ctxt::Ctxt;
use crate::{krate, valid};

/// Entry point of `#[tool]`: the function as written (minus parameter attributes)
/// plus its registration, or the function plus every error found.
pub(crate) fn tool(attr: TokenStream, item: TokenStream) -> TokenStream {
    let item_fn: ItemFn = match syn::parse2(item.clone()) {
        Ok(f) => f,
        Err(_) => {
            let err = syn::Error::new_spanned(&item, "#[tool] goes on a free `async fn`, e.g. `async fn my_tool(text: String) -> Result<String, ToolError>`")
                .into_compile_error();
            return quote!(#item #err);
        }
    };
    let mut cx = Ctxt::new();
    let attr = tool_attr(&mut cx, attr);
    let stripped = strip_param_attrs(item_fn.clone());
    let view = ToolFn::from_syn(&mut cx, attr, &item_fn);
    valid::check(&mut cx, &view);
    match cx.check() {
        Ok(()) => {
            let registration = generate(&view);
            // `async` is required even when the body never awaits.
            quote! {
                #[allow(clippy::unused_async)]
                #stripped
                #registration
            }
        }
        Err(e) => {
            let e = e.into_compile_error();
            quote!(#stripped #e)
        }
    }
}

/// Removes `#[arg]`, `#[ctx]` and doc comments from parameters: rustc accepts none of
/// them there.
fn strip_param_attrs(mut f: ItemFn) -> ItemFn {
    // `const async fn` is already reported; rustc would say it again.
    if f.sig.asyncness.is_some() {
        f.sig.constness = None;
    }
    for input in &mut f.sig.inputs {
        if let FnArg::Typed(pt) = input {
            pt.attrs.retain(|a| {
                !(a.path().is_ident("arg") || a.path().is_ident("ctx") || a.path().is_ident("doc"))
            });
        }
    }
    f
}

/// The generated items, in one `const _: () = { ... };` beside the function.
fn generate(view: &ToolFn<'_>) -> TokenStream {
    let root = match krate::root(view.attr.krate.as_ref()) {
        Ok(root) => root,
        Err(missing) => return quote!(::core::compile_error!(#missing);),
    };
    let p = quote!(#root::__private);
    let params: Vec<(usize, &Param<'_>)> = view.params().enumerate().collect();
    let specs = || {
        params.iter().filter_map(|(i, param)| match &param.kind {
            ParamKind::Arg(spec) => Some((*i, param.ty, &**spec)),
            ParamKind::Ctx => None,
        })
    };
    let has_args = specs().next().is_some();
    let has_default = specs().any(|(_, _, spec)| spec.default.is_some());

    let arg_trait = has_args.then(|| arg_trait(&p));
    let default_trait = has_default.then(|| default_trait(&p));
    let output_trait = matches!(view.output, Output::Structured(_)).then(|| output_trait(&p));
    let extras = specs().map(|(i, ty, spec)| {
        let default = spec
            .default
            .as_ref()
            .map(|expr| default_fns(&p, i, ty, expr));
        let bounds = bounds_assertion(&p, ty, spec);
        quote!(#default #bounds)
    });
    let props = specs().map(|(i, ty, spec)| property(&p, i, ty, spec));
    let call = call_fn(&p, view, &params, has_args);
    let registration = registration(&p, view, props);

    quote! {
        #[doc(hidden)]
        #[allow(non_snake_case, clippy::all, clippy::pedantic, clippy::nursery)]
        const _: () = {
            #arg_trait
            #default_trait
            #output_trait
            #(#extras)*

            #call

            #registration
        };
    }
}

/// The local a parameter is read into.
fn local(i: usize) -> Ident {
    format_ident!("__klaw_p{}", i)
}

/// The fn giving the default value of parameter `i`.
fn default_fn(i: usize) -> Ident {
    format_ident!("__klaw_default_{}", i)
}

/// The fn giving the default value of parameter `i` as JSON, for the schema.
fn default_json_fn(i: usize) -> Ident {
    format_ident!("__klaw_default_json_{}", i)
}

/// `KlawArg`: reads an argument out of the JSON, and says at the parameter's type when
/// it cannot be deserialized.
fn arg_trait(p: &TokenStream) -> TokenStream {
    quote! {
        #[diagnostic::on_unimplemented(
            message = "`{Self}` cannot be a tool argument: it does not implement serde::Deserialize",
            label = "the model's JSON cannot be read into this type",
            note = "add #[derive(serde::Deserialize)] to the type (next to #[derive(ToolSchema)], which gives it a schema)"
        )]
        trait KlawArg: ::core::marker::Sized {
            fn __klaw_read(
                value: #p::Value,
            ) -> ::core::result::Result<Self, #p::serde_json::Error>;
            fn __klaw_read_option(
                value: #p::Value,
            ) -> ::core::result::Result<::core::option::Option<Self>, #p::serde_json::Error>;
        }
        impl<T: #p::serde::de::DeserializeOwned> KlawArg for T {
            fn __klaw_read(
                value: #p::Value,
            ) -> ::core::result::Result<Self, #p::serde_json::Error> {
                #p::serde_json::from_value(value)
            }
            fn __klaw_read_option(
                value: #p::Value,
            ) -> ::core::result::Result<::core::option::Option<Self>, #p::serde_json::Error> {
                #p::serde_json::from_value(value)
            }
        }
    }
}

/// `KlawDefaultValue`: writes a default into the schema, and says at the parameter's
/// type when it cannot be serialized.
fn default_trait(p: &TokenStream) -> TokenStream {
    quote! {
        #[diagnostic::on_unimplemented(
            message = "`{Self}` cannot have a `default`: its value cannot be written into the schema",
            label = "this type does not implement serde::Serialize",
            note = "the default value is shown to the model in the schema, so the type of a parameter with #[arg(default = ...)] must implement serde::Serialize: add #[derive(serde::Serialize)] to it, or drop `default` and take an Option"
        )]
        trait KlawDefaultValue {
            fn __klaw_to_json(self) -> #p::Value;
        }
        impl<T: #p::serde::Serialize> KlawDefaultValue for T {
            fn __klaw_to_json(self) -> #p::Value {
                #p::serde_json::to_value(self).unwrap_or(#p::Value::Null)
            }
        }
    }
}

/// `KlawToolResult`: the output schema and conversion of a structured result, and what
/// is said at the return type when it has neither.
fn output_trait(p: &TokenStream) -> TokenStream {
    quote! {
        #[diagnostic::on_unimplemented(
            message = "`{Self}` cannot be what a tool returns",
            label = "not String, ToolOutput, or a type that implements both ToolSchema and Serialize",
            note = "a tool returns Result<T, ToolError> where T is String (text), ToolOutput, or a type with #[derive(ToolSchema, serde::Serialize)] (structured output, described by an output schema)"
        )]
        trait KlawToolResult: ::core::marker::Sized {
            const __KLAW_SCHEMA: &'static #p::Schema;
            fn __klaw_convert(
                r: ::core::result::Result<Self, #p::ToolError>,
            ) -> ::core::result::Result<#p::ToolOutput, #p::ToolError>;
        }
        impl<T: #p::ToolSchema + #p::serde::Serialize> KlawToolResult for T {
            const __KLAW_SCHEMA: &'static #p::Schema = &<T as #p::ToolSchema>::SCHEMA;
            fn __klaw_convert(
                r: ::core::result::Result<Self, #p::ToolError>,
            ) -> ::core::result::Result<#p::ToolOutput, #p::ToolError> {
                #p::structured_output(r)
            }
        }
    }
}

/// The default value of argument `i`, and the same as JSON for the schema.
fn default_fns(p: &TokenStream, i: usize, ty: &Type, expr: &syn::Expr) -> TokenStream {
    let value_fn = default_fn(i);
    let json_fn = default_json_fn(i);
    let to_json = quote_spanned! {ty.span()=>
        <#ty as KlawDefaultValue>::__klaw_to_json
    };
    quote! {
        fn #value_fn() -> #ty {
            let value: #ty = #expr;
            value
        }
        fn #json_fn() -> #p::Value {
            #to_json(#value_fn())
        }
    }
}

/// Bounds on a type that cannot take them fail to compile, at the bound.
fn bounds_assertion(p: &TokenStream, ty: &Type, spec: &ArgSpec) -> Option<TokenStream> {
    let (_, expr) = spec.minimum.as_ref().or(spec.maximum.as_ref())?;
    let minimum = bound(spec.minimum.as_ref());
    let maximum = bound(spec.maximum.as_ref());
    Some(quote_spanned! {expr.span()=>
        const _: () = if let ::core::option::Option::Some(why) =
            #p::bounds_error(&<#ty as #p::ToolSchema>::SCHEMA, #minimum, #maximum)
        {
            ::core::panic!("{}", why)
        };
    })
}

/// The schema's `Property` for argument `i`.
fn property(p: &TokenStream, i: usize, ty: &Type, spec: &ArgSpec) -> TokenStream {
    let json_name = &spec.json_name;
    let schema = if spec.schemars {
        quote_spanned! {ty.span()=>
            &#p::Schema::External(#p::schemars_inline::<#ty>)
        }
    } else {
        quote_spanned! {ty.span()=> &<#ty as #p::ToolSchema>::SCHEMA }
    };
    let required = if spec.default.is_some() {
        quote!(false)
    } else if spec.schemars {
        let optional = last_segment(ty).as_deref() == Some("Option");
        quote!(!#optional)
    } else {
        quote_spanned! {ty.span()=> !<#ty as #p::ToolSchema>::OPTIONAL }
    };
    let default = if spec.default.is_some() {
        let json_fn = default_json_fn(i);
        quote!(::core::option::Option::Some(#json_fn as fn() -> #p::Value))
    } else {
        quote!(::core::option::Option::None)
    };
    let minimum = bound(spec.minimum.as_ref());
    let maximum = bound(spec.maximum.as_ref());
    let aliases = &spec.aliases;
    let ru = &spec.description_ru;
    let en = &spec.description_en;
    quote! {
        #p::Property {
            name: #json_name,
            aliases: &[#(#aliases),*],
            schema: #schema,
            required: #required,
            description: #p::Description::new(#ru, #en),
            default: #default,
            minimum: #minimum,
            maximum: #maximum,
        }
    }
}

/// `__klaw_call`: takes the arguments object apart, reads every parameter, calls the
/// function and converts its result.
fn call_fn(
    p: &TokenStream,
    view: &ToolFn<'_>,
    params: &[(usize, &Param<'_>)],
    has_args: bool,
) -> TokenStream {
    let fn_ident = &view.original.sig.ident;
    let take_object = has_args.then(|| take_object(p, params));
    let reads = params.iter().map(|(i, param)| read_param(p, *i, param));
    let call_args = params.iter().map(|(i, param)| call_arg(*i, param));
    let convert = convert(p, &view.output);
    quote! {
        fn __klaw_call(
            __klaw_ctx: #p::ToolContext,
            __klaw_args: #p::Value,
        ) -> #p::BoxFuture<'static, ::core::result::Result<#p::ToolOutput, #p::ToolError>> {
            ::std::boxed::Box::pin(async move {
                #take_object
                #(#reads)*
                let __klaw_result = #fn_ident(#(#call_args),*).await;
                #convert(__klaw_result)
            })
        }
    }
}

/// Turns the arguments into their JSON object, or fails the call, and hands each
/// argument to its parameter's slot in one pass over the object (a key that names no
/// parameter is dropped; one left out leaves its slot `null`). One string comparison a
/// key, not a hashed lookup a parameter.
fn take_object(p: &TokenStream, params: &[(usize, &Param<'_>)]) -> TokenStream {
    let args: Vec<_> = params
        .iter()
        .filter_map(|(i, param)| match &param.kind {
            ParamKind::Arg(spec) => Some((slot(*i), &spec.json_name)),
            ParamKind::Ctx => None,
        })
        .collect();
    let slots = args.iter().map(|(slot, _)| slot);
    let arms = args
        .iter()
        .map(|(slot, json_name)| quote!(#json_name => #slot = __klaw_value,));
    quote! {
        let __klaw_args = match __klaw_args {
            #p::Value::Object(map) => map,
            _ => {
                return ::core::result::Result::Err(#p::ToolError::invalid_arguments(
                    "",
                    "the arguments must be a JSON object",
                ));
            }
        };
        #(let mut #slots = #p::Value::Null;)*
        for (__klaw_key, __klaw_value) in __klaw_args {
            match __klaw_key.as_str() {
                #(#arms)*
                _ => {}
            }
        }
    }
}

/// Where parameter `i`'s argument is put when the object is taken apart.
fn slot(i: usize) -> Ident {
    format_ident!("__klaw_v{}", i)
}

/// Reads parameter `i`: an extractor from the context, an argument out of the (already
/// validated) object, each on its own so a type that cannot be deserialized is reported
/// once, at it.
fn read_param(p: &TokenStream, i: usize, param: &Param<'_>) -> TokenStream {
    let ty = param.ty;
    let local = local(i);
    match &param.kind {
        ParamKind::Ctx => quote_spanned! {ty.span()=>
            let #local = <#ty as #p::FromToolContext>::from_ctx(&__klaw_ctx)?;
        },
        ParamKind::Arg(spec) => {
            let json_name = &spec.json_name;
            let pointer = format!("/{json_name}");
            let from_value = if spec.default.is_some() {
                quote_spanned!(ty.span()=> <#ty as KlawArg>::__klaw_read_option)
            } else {
                quote_spanned!(ty.span()=> <#ty as KlawArg>::__klaw_read)
            };
            let slot = slot(i);
            quote! {
                let #local = #from_value(#slot)
                .map_err(|e| #p::ToolError::invalid_arguments(#pointer, ::std::string::ToString::to_string(&e)))?;
            }
        }
    }
}

/// What parameter `i` is called with: the local, or its default when it was left out.
fn call_arg(i: usize, param: &Param<'_>) -> TokenStream {
    let local = local(i);
    match &param.kind {
        ParamKind::Arg(spec) if spec.default.is_some() => {
            let value_fn = default_fn(i);
            quote!(#local.unwrap_or_else(#value_fn))
        }
        ParamKind::Arg(_) | ParamKind::Ctx => quote!(#local),
    }
}

/// The fn turning the function's result into a `ToolOutput`.
fn convert(p: &TokenStream, output: &Output<'_>) -> TokenStream {
    match output {
        Output::Raw => quote!(#p::output),
        Output::Structured(ty) => {
            quote_spanned! {ty.span()=> <#ty as KlawToolResult>::__klaw_convert }
        }
        // Missing and Unsupported never get here: valid.rs reports them.
        Output::Text | Output::Missing | Output::Unsupported(_) => quote!(#p::text_output),
    }
}

/// The `ToolRegistration` submitted to `inventory`.
fn registration(
    p: &TokenStream,
    view: &ToolFn<'_>,
    props: impl Iterator<Item = TokenStream>,
) -> TokenStream {
    let attr = &view.attr;
    let name = view.name();
    let ru = view.description_ru();
    let en = view.description_en();
    let (title_ru, title_en) = view.title();
    let output_schema = match &view.output {
        Output::Structured(ty) => quote_spanned! {ty.span()=>
            ::core::option::Option::Some(<#ty as KlawToolResult>::__KLAW_SCHEMA)
        },
        _ => quote!(::core::option::Option::None),
    };
    let read_only = attr.read_only.is_some();
    let destructive = attr.destructive.is_some();
    let idempotent = attr.idempotent;
    let open_world = attr.open_world;
    let timeout = match attr.timeout_ms {
        Some(ms) => quote!(::core::option::Option::Some(#ms)),
        None => quote!(::core::option::Option::None),
    };
    quote! {
        #p::inventory::submit! {
            #p::ToolRegistration {
                name: #name,
                description: #p::Description::new(#ru, #en),
                title: #p::Description::new(#title_ru, #title_en),
                params: &#p::ObjectSchema { properties: &[#(#props),*] },
                output: #output_schema,
                annotations: #p::Annotations {
                    read_only: #read_only,
                    destructive: #destructive,
                    idempotent: #idempotent,
                    open_world: #open_world,
                },
                timeout_ms: #timeout,
                file: ::core::file!(),
                line: ::core::line!(),
                call: __klaw_call,
            }
        }
    }
}

/// `Some(n)` or `None` as tokens.
fn bound(b: Option<&(i64, syn::Expr)>) -> TokenStream {
    match b {
        Some((n, _)) => quote!(::core::option::Option::Some(#n)),
        None => quote!(::core::option::Option::None),
    }
}
