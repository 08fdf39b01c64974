//! Code generation for `#[tool]`.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{FnArg, ItemFn};

use crate::ast::{Output, ParamKind, ToolFn};
use crate::attr::{ToolAttr, tool_attr};
use crate::ctxt::Ctxt;
use crate::krate;

/// Entry point of `#[tool]`: the function as written (minus parameter attributes)
/// plus its registration, or the function plus every error found.
pub(crate) fn tool(attr: TokenStream, item: TokenStream) -> TokenStream {
    let mut cx = Ctxt::default();
    let attr = tool_attr(&mut cx, attr);
    let item_fn: ItemFn = match syn::parse2(item.clone()) {
        Ok(f) => f,
        Err(_) => {
            let err = syn::Error::new_spanned(&item, "#[tool] goes on an `async fn`")
                .into_compile_error();
            return quote!(#item #err);
        }
    };
    let stripped = strip_param_attrs(item_fn.clone());
    let view = ToolFn::from_syn(&mut cx, &attr, &item_fn);
    match (cx.check(), view) {
        (Ok(()), Some(view)) => {
            let registration = generate(&attr, &view);
            quote!(#stripped #registration)
        }
        (Err(e), _) => {
            let e = e.into_compile_error();
            quote!(#stripped #e)
        }
        (Ok(()), None) => quote!(#stripped),
    }
}

/// Removes `#[arg]`, `#[ctx]` and doc comments from parameters: rustc accepts none of
/// them there.
fn strip_param_attrs(mut f: ItemFn) -> ItemFn {
    for input in &mut f.sig.inputs {
        if let FnArg::Typed(pt) = input {
            pt.attrs.retain(|a| {
                !(a.path().is_ident("arg") || a.path().is_ident("ctx") || a.path().is_ident("doc"))
            });
        }
    }
    f
}

fn generate(attr: &ToolAttr, view: &ToolFn<'_>) -> TokenStream {
    let root = krate::root(attr.krate.as_ref());
    let p = quote!(#root::__private);
    let serde_crate = krate::serde_path(&root);
    let fn_ident = &view.original.sig.ident;

    let mut fields = Vec::new();
    let mut field_idents = Vec::new();
    let mut props = Vec::new();
    let mut extras = Vec::new();
    let mut lets = Vec::new();
    let mut call_args = Vec::new();

    for (i, param) in view.params.iter().enumerate() {
        let ident = param.ident;
        let ty = param.ty;
        let local = format_ident!("__klaw_p{}", i);
        match &param.kind {
            ParamKind::Ctx => {
                lets.push(quote_spanned! {ty.span()=>
                    let #local = <#ty as #p::FromToolContext>::from_ctx(&__klaw_ctx)?;
                });
                call_args.push(quote!(#local));
            }
            ParamKind::Arg(spec) => {
                let json_name = &spec.json_name;
                let field_ty = if spec.default.is_some() {
                    quote!(::core::option::Option<#ty>)
                } else {
                    quote!(#ty)
                };
                fields.push(quote! {
                    #[serde(rename = #json_name)]
                    #ident: #field_ty
                });
                field_idents.push(ident);
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
                    quote!(true)
                } else {
                    quote_spanned! {ty.span()=> !<#ty as #p::ToolSchema>::OPTIONAL }
                };
                let default = match &spec.default {
                    Some(expr) => {
                        let fname = format_ident!("__klaw_default_{}", i);
                        extras.push(quote! {
                            fn #fname() -> #p::Value {
                                let value: #ty = #expr;
                                #p::serde_json::to_value(value).unwrap_or(#p::Value::Null)
                            }
                        });
                        quote!(::core::option::Option::Some(#fname as fn() -> #p::Value))
                    }
                    None => quote!(::core::option::Option::None),
                };
                let aliases = &spec.aliases;
                let ru = &spec.description_ru;
                let en = &spec.description_en;
                props.push(quote! {
                    #p::Property {
                        name: #json_name,
                        aliases: &[#(#aliases),*],
                        schema: #schema,
                        required: #required,
                        description: #p::Description::new(#ru, #en),
                        default: #default,
                    }
                });
                match &spec.default {
                    Some(expr) => call_args.push(quote!(#ident.unwrap_or_else(|| #expr))),
                    None => call_args.push(quote!(#ident)),
                }
            }
        }
    }

    let (output_schema, convert) = match &view.output {
        Output::Text => (
            quote!(::core::option::Option::None),
            quote!(#p::text_output),
        ),
        Output::Raw => (quote!(::core::option::Option::None), quote!(#p::output)),
        Output::Structured(ty) => (
            quote_spanned! {ty.span()=> ::core::option::Option::Some(&<#ty as #p::ToolSchema>::SCHEMA) },
            quote!(#p::structured_output),
        ),
    };
    let name = &view.name;
    let ru = &view.description_ru;
    let en = &view.description_en;
    let read_only = attr.read_only.is_some();
    let destructive = attr.destructive.is_some();
    let idempotent = attr.idempotent;
    let open_world = attr.open_world;
    let timeout = match attr.timeout_ms {
        Some(ms) => quote!(::core::option::Option::Some(#ms)),
        None => quote!(::core::option::Option::None),
    };

    quote! {
        #[doc(hidden)]
        #[allow(non_snake_case, clippy::all, clippy::pedantic, clippy::nursery)]
        const _: () = {
            #[derive(#p::serde::Deserialize)]
            #[serde(crate = #serde_crate)]
            struct __KlawArgs {
                #(#fields,)*
            }

            #(#extras)*

            fn __klaw_call(
                __klaw_ctx: #p::ToolContext,
                __klaw_args: #p::Value,
            ) -> #p::BoxFuture<'static, ::core::result::Result<#p::ToolOutput, #p::ToolError>> {
                ::std::boxed::Box::pin(async move {
                    let __KlawArgs { #(#field_idents,)* } = #p::parse_args::<__KlawArgs>(__klaw_args)?;
                    #(#lets)*
                    let __klaw_result = #fn_ident(#(#call_args),*).await;
                    #convert(__klaw_result)
                })
            }

            #p::inventory::submit! {
                #p::ToolRegistration {
                    name: #name,
                    description: #p::Description::new(#ru, #en),
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
        };
    }
}
